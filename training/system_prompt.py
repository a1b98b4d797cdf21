"""The system prompt our health assistant is evaluated and trained with, in one shared place.

The idea (the Fathom-Vaidya paper, Appendix D.1) is to state up front the qualities a rubric
grader rewards: clear communication, following the user's instructions, accuracy, awareness of
context (and asking for it when it is missing) and completeness, including when to send someone
to urgent care. The wording below is ours.

Evaluation (``rubricstree eval``) and the training data builders both call
:func:`apply_system_prompt`, so a checkpoint is evaluated with the prompt it was trained with.

Mode ``handbook:FILE`` gives each conversation its own system text: the routed checklist that
``rubricstree optimize handbook`` wrote to FILE for it (found by a hash of the conversation).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

SYSTEM_PROMPT = """You are a health assistant. The person you are talking with may be a patient, a carer or a health professional; work out which from the conversation and write for them.

Be accurate. Give advice that agrees with current clinical evidence and guidelines. Say plainly when the evidence is uncertain or mixed, and never invent facts, numbers, doses or sources. Correct a false premise politely instead of building on it.

Use the context you are given. Read the whole conversation, including earlier turns, test results and anything the person says about their age, sex, pregnancy, conditions, medicines, location or resources. When a safe, useful answer depends on something you do not know, ask the one or two questions that matter most, and still give whatever guidance is safe to give now.

Put safety first. If anything suggests an emergency, say so at the start and tell the person exactly what to do now (for example, call the local emergency number), before any other detail. Say which warning signs mean they should get care sooner.

Be complete where it matters and brief elsewhere. Cover what a careful clinician would not leave out: the likely explanations, what to do next, when and where to seek care, and important risks or interactions. Leave out padding, repetition and generic disclaimers.

Communicate clearly. Lead with the answer. Use plain words for lay readers and precise terms for professionals, short paragraphs or lists when they help, and a tone that is calm and respectful.

Follow instructions. Respect the format, length, language and task the person asks for (a summary, a table, a letter, a note for the record), as long as doing so is safe."""

# Modes :func:`apply_system_prompt` accepts besides a file path.
MODES = ("ours", "none")
HANDBOOK_PREFIX = "handbook:"
_HANDBOOKS: dict[str, dict[str, str]] = {}


def conversation_key(messages: Sequence[Any]) -> str:
    """A stable key of a conversation (how a handbook file finds its section): sha256 of its
    (role, content) turns, 16 hex digits."""
    turns = [[m["role"], m["content"]] if isinstance(m, dict) else [m.role, m.content] for m in messages]
    return hashlib.sha256(json.dumps(turns, ensure_ascii=False).encode()).hexdigest()[:16]


def load_handbooks(path: str) -> dict[str, str]:
    """``{conversation_key: handbook text}`` from a handbook file (``optimize handbook --out``)."""
    from reward.errors import InputError
    from reward.jsonl import iter_jsonl

    out: dict[str, str] = {}
    for lineno, obj in iter_jsonl(path):
        if obj.get("kind", "handbook") != "handbook":
            continue
        if "conversation_key" not in obj or "handbook" not in obj:
            raise InputError("a handbook record needs 'conversation_key' and 'handbook'", file=str(path),
                             record=f"line {lineno}", field="conversation_key")
        out[obj["conversation_key"]] = obj["handbook"]
    return out


def _handbook_text(mode: str, messages: Sequence[Any]) -> str | None:
    """The handbook section for ``messages`` from the file named in ``handbook:FILE``."""
    path = mode[len(HANDBOOK_PREFIX):]
    if not Path(path).is_file():
        raise FileNotFoundError(f"system prompt: handbook file '{path}' not found "
                                "(write it with `rubricstree optimize handbook`)")
    book = _HANDBOOKS.setdefault(str(Path(path).resolve()), load_handbooks(path))
    key = conversation_key(messages)
    if key not in book:
        from reward.errors import InputError

        raise InputError(f"no handbook entry for this conversation (key {key}, first turn "
                         f"{str(messages[0].get('content', ''))[:60]!r}); build the handbook from the same prompts",
                         file=path, field="conversation_key")
    return book[key] or None


def system_prompt_text(mode: str) -> str | None:
    """The system text for ``mode``: ``"ours"`` -> :data:`SYSTEM_PROMPT`, ``"none"`` -> None,
    anything else is read as a UTF-8 text file.

    Raises:
        FileNotFoundError: ``mode`` is neither a known mode nor an existing file.
    """
    if mode == "ours":
        return SYSTEM_PROMPT
    if mode == "none":
        return None
    if mode.startswith(HANDBOOK_PREFIX):
        raise ValueError("a handbook system prompt differs per conversation: use apply_system_prompt")
    path = Path(mode)
    if not path.is_file():
        raise FileNotFoundError(f"system prompt: '{mode}' is neither 'ours', 'none' nor a file")
    return path.read_text(encoding="utf-8").strip()


def system_prompt_id(mode: str) -> dict[str, str | None]:
    """What identifies the system prompt in a run record: the mode and a hash of its text."""
    if mode.startswith(HANDBOOK_PREFIX):
        path = Path(mode[len(HANDBOOK_PREFIX):])
        if not path.is_file():
            raise FileNotFoundError(f"system prompt: handbook file '{path}' not found")
        return {"mode": f"handbook:{path.name}", "sha256": hashlib.sha256(path.read_bytes()).hexdigest()[:16]}
    text = system_prompt_text(mode)
    return {"mode": mode if mode in MODES else f"file:{Path(mode).name}",
            "sha256": hashlib.sha256(text.encode()).hexdigest()[:16] if text is not None else None}


def _as_dict(message: Any) -> dict[str, Any]:
    if isinstance(message, Mapping):
        return dict(message)
    if hasattr(message, "model_dump"):  # a pydantic message (HealthBench rows, judge items)
        return message.model_dump()
    raise TypeError(f"a message must be a mapping with 'role' and 'content', got {type(message).__name__}")


def apply_system_prompt(messages: Sequence[Any], mode: str = "ours") -> list[dict[str, Any]]:
    """Return a copy of ``messages`` (chat turns) with the system prompt of ``mode`` applied.

    A conversation that already opens with a system turn (HealthBench has some: "You help a ward
    nurse ...") keeps it: our text goes first and theirs follows in the same turn, because many
    chat templates accept only one system message and the row's own instructions are more
    specific than ours.

    Args:
        messages: chat turns as mappings or pydantic models with ``role`` and ``content``.
        mode: ``"ours"``, ``"none"`` (returned unchanged), ``"handbook:FILE"`` or a path to a text file.
    """
    out = [_as_dict(m) for m in messages]
    text = _handbook_text(mode, out) if mode.startswith(HANDBOOK_PREFIX) else system_prompt_text(mode)
    if text is None:
        return out
    if out and out[0].get("role") == "system":
        out[0] = {**out[0], "content": f"{text}\n\n{out[0].get('content', '')}"}
        return out
    return [{"role": "system", "content": text}, *out]
