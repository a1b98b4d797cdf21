"""The judge's context limit, one rule for every backend.

A vLLM server refuses a request whose prompt tokens plus ``max_tokens`` exceed its
``max_model_len`` with HTTP 400 ("This model's maximum context length is ..."); the HTTP judge
records that answer as the item's failure. The in-process judge has no server to refuse for it:
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


def context_failure(prompt_tokens: int, max_new_tokens: int, max_model_len: int | None, *,
                    at_least: bool = False) -> str | None:
    """The failure reason when ``prompt_tokens + max_new_tokens`` exceed ``max_model_len`` (the
    server's rule and wording), else None. ``at_least``: the prompt count is a lower bound."""
    if not max_model_len or prompt_tokens + max_new_tokens <= max_model_len:
        return None
    least = "at least " if at_least else ""
    return (f"{CONTEXT_EXCEEDED}: This model's maximum context length is {max_model_len} tokens. However, you "
            f"requested {max_new_tokens} output tokens and your prompt contains {least}{prompt_tokens} input "
            f"tokens, for a total of {least}{prompt_tokens + max_new_tokens} tokens. Please reduce the length "
            "of the input prompt or the number of requested output tokens.")


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
