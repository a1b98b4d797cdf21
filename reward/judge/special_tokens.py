"""Keeping special-token strings in graded text from becoming special tokens on a chat API.

The token-id backend tokenises graded text itself with special tokens split into plain text
(``render.py``). A chat API takes text: vLLM's ``/v1/chat/completions`` renders the messages
through the chat template and tokenises the result with special tokens parsed, and no request
option turns that off (its tokenisation settings offer ``add_special_tokens``, which only adds a
BOS). So ``<|im_end|>`` in a rollout became the real end-of-turn token, and the text after it a
turn of its own (checked on the test server's ``/tokenize``).

The chat backend therefore escapes such strings before sending them: a WORD JOINER (U+2060, an
invisible character that joins, not breaks, the text for a reader) goes after the first character
of each occurrence, so ``<|im_end|>`` is sent as ``<`` + U+2060 + ``|im_end|>``, which no
tokenizer matches as its special token while a reader (the judge) still sees the same text. What
is escaped: every added token of the served tokenizer where its files are readable here
(``tokenizer.json``'s ``added_tokens``, ``tokenizer_config.json``'s ``added_tokens_decoder``), and
the shapes special tokens take in common chat templates (``<|...|>``, DeepSeek's ``<｜...｜>``,
``<s>``/``</s>``, ``[INST]``, ``<<SYS>>``, ``<start_of_turn>``, ...), for servers whose tokenizer
is not readable here (hosted APIs treat content as text anyway; escaping costs them nothing).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

JOINER = "\u2060"
# Shapes of special tokens in common chat templates (Qwen/ChatML, Llama 3, Phi, GPT, DeepSeek,
# Llama 2/Mistral, Gemma, SentencePiece's <s>), for tokenizers we cannot read.
GENERIC = (r"<\|[^<>|\s]{1,64}\|>", r"<\uff5c[^<>\uff5c]{1,64}\uff5c>", r"</?s>", r"\[/?INST\]", r"\[/?SYSTEM_PROMPT\]",
           r"<</?SYS>>", r"<(?:start|end)_of_turn>", r"<(?:bos|eos|pad|unk|mask)>", r"</?think>", r"</?tool_call>")


def added_tokens(folder: str | Path | None) -> set[str]:
    """The added (special and other) tokens of the tokenizer files in ``folder`` (empty when the
    folder is not readable here); read as JSON, no tokenizer library needed."""
    out: set[str] = set()
    if not folder:
        return out
    p = Path(folder)
    try:
        data = json.loads((p / "tokenizer.json").read_text(encoding="utf-8"))
        out.update(str(t["content"]) for t in data.get("added_tokens") or [] if isinstance(t, dict) and t.get("content"))
    except (OSError, ValueError, TypeError, KeyError):
        pass
    try:
        cfg = json.loads((p / "tokenizer_config.json").read_text(encoding="utf-8"))
        decoder = cfg.get("added_tokens_decoder") or {}
        out.update(str(t["content"]) for t in decoder.values() if isinstance(t, dict) and t.get("content"))
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        pass
    return {t for t in out if len(t) > 1}  # a one-character token cannot be split by a joiner


class SpecialTokenGuard:
    """Escapes special-token strings in text (see the module docstring); ``tokens``: the served
    tokenizer's own added tokens, on top of the generic shapes."""

    def __init__(self, tokens: Iterable[str] = ()) -> None:
        own = sorted(set(tokens), key=len, reverse=True)  # the longest first: a token inside another
        self.pattern = re.compile("|".join([*(re.escape(t) for t in own), *GENERIC]))

    def __call__(self, text: str) -> str:
        return self.pattern.sub(lambda m: m.group(0)[0] + JOINER + m.group(0)[1:], text)


DEFAULT_GUARD = SpecialTokenGuard()
