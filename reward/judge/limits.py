"""The judge's context limit, one rule for every backend.

A vLLM server (0.32, measured) refuses with HTTP 400 a prompt that leaves no room for one answer
token in its ``max_model_len`` ("This model's maximum context length is ... However, your prompt
contains N input tokens, which exceeds this limit even without any output tokens"; at exactly
``max_model_len`` tokens, "max_tokens must be at least 1, got 0"), and shortens ``max_tokens`` to
what is left for a prompt that fits; the HTTP judge records a 400 as the item's failure. The in-process judge has no server to refuse for it:
it applies the same rule with the same words (:func:`context_failure`) to its own context
(``max_position_embeddings`` of the model, or the ``max_model_len`` it is given), before any
tensor is made, so the two backends fail the same items the same way instead of one grading a
prompt its positions cannot hold.

A prompt can be refused before it is even tokenised (:func:`min_tokens`): no token covers more
characters than the tokenizer's longest vocabulary entry, so a text of ``c`` characters has at
least ``c / longest`` tokens (we take half that, for normalisers that merge characters). A 10 MB field is refused from its length alone, instead of being
tokenised and sent through the model (where it exhausted the machine's memory).
"""

from __future__ import annotations

CONTEXT_EXCEEDED = "context_length_exceeded"


def context_failure(prompt_tokens: int, max_model_len: int | None, *, at_least: bool = False) -> str | None:
    """The failure reason when a prompt leaves no room for one answer token in the context
    (``prompt_tokens >= max_model_len``: vLLM's rule), in the server's words; else None.
    ``at_least``: the prompt count is a lower bound. A prompt that fits but leaves fewer tokens
    than the answer budget is not refused: the answer budget shrinks to what is left
    (:func:`answer_budget`), as the server does."""
    if not max_model_len or prompt_tokens < max_model_len:
        return None
    least = "at least " if at_least else ""
    why = ("which exceeds this limit even without any output tokens" if prompt_tokens > max_model_len
           else "which leaves no room for an output token")
    return (f"{CONTEXT_EXCEEDED}: This model's maximum context length is {max_model_len} tokens. However, your "
            f"prompt contains {least}{prompt_tokens} input tokens, {why}. Please reduce the length of the "
            "input prompt.")


def answer_budget(max_new_tokens: int, prompt_tokens: int, max_model_len: int | None) -> int:
    """The answer tokens a prompt of ``prompt_tokens`` may take: ``max_new_tokens``, or what the
    context has left when that is less (at least 1; :func:`context_failure` refuses the rest)."""
    if not max_model_len:
        return max_new_tokens
    return max(1, min(max_new_tokens, max_model_len - prompt_tokens))


def longest_token_chars(tokenizer) -> int:
    """The most characters one token of ``tokenizer`` can stand for (at least 1)."""
    try:
        vocab = tokenizer.get_vocab()
    except (AttributeError, NotImplementedError, TypeError):
        return 0  # unknown: no bound
    return max((len(t) for t in vocab), default=0)


def min_tokens(chars: int, longest: int) -> int:
    """A lower bound on the tokens of a text of ``chars`` characters (0 when unknown), halved
    for tokenizers whose normaliser merges characters (a letter and its combining accent)."""
    return chars // (2 * longest) if longest > 0 else 0
