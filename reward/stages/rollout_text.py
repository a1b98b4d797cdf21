"""Reading what a trainer hands a reward: rollout text, prompt messages, row values, option keys.

Both trainer adapters (``reward.integrations.trl`` and ``reward.integrations.verl``) receive
rollouts in trainer shapes: a completion as a string or a list of chat messages, a prompt as a
string or messages, options as a mapping (Arrow pads it with None letters) or its JSON, row
values as OmegaConf nodes or numpy arrays. These helpers turn them into plain Python once, the
same way for every adapter. Pure functions; nothing here imports a trainer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from reward.stages.mcq import DEFAULT_LETTERS

__all__ = ["completion_text", "content_text", "key_letter", "parse_options", "prompt_messages", "to_plain"]


def to_plain(value: Any) -> Any:
    """Python containers from what a trainer hands over (OmegaConf nodes, numpy arrays and scalars)."""
    if isinstance(value, (str, bytes, bool, int, float)) or value is None:
        return value
    if hasattr(value, "items"):
        return {str(k): to_plain(v) for k, v in value.items()}
    if hasattr(value, "tolist"):
        return to_plain(value.tolist())
    if isinstance(value, (list, tuple)) or hasattr(value, "__iter__"):
        return [to_plain(v) for v in value]
    return value


def content_text(content: Any) -> str:
    """A message's content as text (a string, or the text of its content blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, Mapping))
    return str(content)


def completion_text(completion: Any) -> str:
    """A completion as text: a string as is; a conversational completion (list of messages) as
    its assistant contents joined by blank lines."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        return str(completion.get("content") or "")
    parts = []
    for m in completion or []:
        if isinstance(m, Mapping):
            if m.get("role", "assistant") == "assistant" and m.get("content"):
                parts.append(content_text(m["content"]))
        else:
            parts.append(str(m))
    return "\n\n".join(parts)


def prompt_messages(prompt: Any) -> list[dict[str, str]]:
    """A prompt as chat messages: a string becomes one user turn."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return [{"role": str(m["role"]), "content": content_text(m.get("content", ""))} for m in prompt]


def parse_options(value: Any) -> dict[str, str] | None:
    """Options (letter -> text, or its JSON) as a dict without the None letters Arrow adds to
    share one schema; None when there are none.

    Raises:
        ValueError: the JSON cannot be read, or the value is not a mapping.
    """
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"options are not JSON: {exc.msg}") from exc
    value = to_plain(value)
    if value is None or not isinstance(value, dict):
        raise ValueError("options must map letters to texts")
    return {str(k).strip().upper(): str(v) for k, v in value.items() if v is not None and str(v).strip()} or None


def key_letter(answer_idx: Any, answer: Any = None, options: Mapping[str, str] | None = None) -> str | None:
    """The key letter from ``answer_idx``, or from ``answer`` (a letter or the key's text); the
    letters are the options' (``A``..``E`` without options). None when it cannot be read."""
    letters = set(options) if options else set(DEFAULT_LETTERS)
    for v in (answer_idx, answer):
        if isinstance(v, str) and v.strip().upper() in letters:
            return v.strip().upper()
    if isinstance(answer, str) and options:
        hits = [k for k, t in options.items() if t.strip().casefold() == answer.strip().casefold()]
        if len(hits) == 1:
            return hits[0]
    return None
