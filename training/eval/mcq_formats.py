"""One loader for the multiple-choice sets we evaluate on: MedQA, MedBullets and MedXpertQA.

Each format is normalised into :class:`EvalMCQ` (an id, the question, options ``{letter: text}``,
the key letter and category fields for the breakdown):

- **medqa** (MedQA-USMLE): ``question``, ``options`` ``{A..}``, ``answer_idx``; category
  ``meta_info`` (step1 / step2&3).
- **medbullets**: ``question``, options as ``opa``..``ope`` or an ``options`` mapping,
  ``answer_idx`` (a letter).
- **medxpertqa**: ``id``, ``question`` (which already lists "Answer Choices"), ``options``
  ``{A..J}``, ``label``; categories ``medical_task``, ``body_system``, ``question_type``.

The format is detected per file from the first row unless given. Errors name the file, the line
and the field. Options may run past E (MedXpertQA has ten), which ``reward.mcq.MCQRow`` does not
accept; extraction (``reward.mcq.extract_choice``) takes any letters.
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from reward.errors import InputError
from reward.jsonl import iter_jsonl, validation_error

Format = Literal["medqa", "medbullets", "medxpertqa"]
FORMATS: tuple[str, ...] = ("medqa", "medbullets", "medxpertqa")
LETTERS = tuple(string.ascii_uppercase[:10])  # A..J
CATEGORY_FIELDS: dict[str, tuple[str, ...]] = {
    "medqa": ("meta_info",),
    "medbullets": (),
    "medxpertqa": ("medical_task", "body_system", "question_type"),
}
_BULLET_KEYS = {"opa": "A", "opb": "B", "opc": "C", "opd": "D", "ope": "E"}
# MedXpertQA's question text ends with the options already; we must not list them twice.
_LISTED = ("Answer Choices:",)


class EvalMCQ(BaseModel):
    """One normalised multiple-choice question."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    options: dict[str, str] = Field(min_length=2)
    answer: str
    categories: dict[str, str] = Field(default_factory=dict)
    format: Format

    @field_validator("options")
    @classmethod
    def _letters(cls, v: dict[str, str]) -> dict[str, str]:
        v = {k.strip().upper(): t for k, t in v.items()}
        bad = [k for k in v if k not in LETTERS]
        if bad:
            raise ValueError(f"option keys must be letters A..J, got {bad!r}")
        empty = [k for k, t in v.items() if not str(t).strip()]
        if empty:
            raise ValueError(f"option text is empty for {empty!r}")
        return dict(sorted(v.items()))

    @model_validator(mode="after")
    def _key_is_an_option(self) -> EvalMCQ:
        if self.answer not in self.options:
            raise ValueError(f"the key {self.answer!r} is not one of the option letters {sorted(self.options)}")
        return self


class _MedQA(BaseModel):
    model_config = ConfigDict(extra="ignore")
    question: str
    options: dict[str, str]
    answer_idx: str
    id: str | int | None = None
    meta_info: str | None = None


class _MedBullets(BaseModel):
    model_config = ConfigDict(extra="ignore")
    question: str
    answer_idx: str
    options: dict[str, str] | None = None
    opa: str | None = None
    opb: str | None = None
    opc: str | None = None
    opd: str | None = None
    ope: str | None = None
    id: str | int | None = None

    @model_validator(mode="after")
    def _some_options(self) -> _MedBullets:
        if self.options is None and not any(getattr(self, k) for k in _BULLET_KEYS):
            raise ValueError("no options: give 'opa'..'ope' or an 'options' mapping")
        return self


class _MedXpertQA(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str | int | None = None
    question: str
    options: dict[str, str]
    label: str
    medical_task: str | None = None
    body_system: str | None = None
    question_type: str | None = None


def detect_format(obj: dict[str, Any]) -> Format:
    """Guess the format of one decoded row (``label`` -> medxpertqa, ``opa`` -> medbullets)."""
    if "label" in obj and "options" in obj:
        return "medxpertqa"
    if "opa" in obj:
        return "medbullets"
    return "medqa"


def _normalise(obj: dict[str, Any], fmt: Format, lineno: int) -> EvalMCQ:
    if fmt == "medqa":
        r = _MedQA.model_validate(obj)
        return EvalMCQ(id=str(r.id) if r.id is not None else f"line-{lineno}", question=r.question,
                       options=r.options, answer=r.answer_idx.strip().upper(),
                       categories={"meta_info": r.meta_info} if r.meta_info else {}, format=fmt)
    if fmt == "medbullets":
        b = _MedBullets.model_validate(obj)
        options = b.options if b.options is not None else {
            letter: getattr(b, key) for key, letter in _BULLET_KEYS.items() if getattr(b, key) and getattr(b, key).strip()}
        return EvalMCQ(id=str(b.id) if b.id is not None else f"line-{lineno}", question=b.question,
                       options=options, answer=b.answer_idx.strip().upper(), format=fmt)
    x = _MedXpertQA.model_validate(obj)
    cats = {k: getattr(x, k) for k in CATEGORY_FIELDS["medxpertqa"] if getattr(x, k)}
    return EvalMCQ(id=str(x.id) if x.id is not None else f"line-{lineno}", question=x.question, options=x.options,
                   answer=x.label.strip().upper(), categories=cats, format=fmt)


def load_mcq_eval(path: str | Path, fmt: str | None = None) -> list[EvalMCQ]:
    """Load and normalise a multiple-choice file.

    Args:
        path: JSON Lines, one question per line.
        fmt: ``medqa``, ``medbullets`` or ``medxpertqa``; None detects it from the first row.

    Raises:
        InputError: unknown format, empty file, a missing or bad field (names file, line and
            field), a key that is not an option, or two rows with the same id.
    """
    if fmt is not None and fmt not in FORMATS:
        raise InputError(f"unknown format '{fmt}': use one of {', '.join(FORMATS)}", field="--format")
    src = str(path)
    rows: list[EvalMCQ] = []
    seen: dict[str, int] = {}
    for lineno, obj in iter_jsonl(path):
        fmt = fmt or detect_format(obj)
        try:
            row = _normalise(obj, fmt, lineno)  # type: ignore[arg-type]
        except ValidationError as exc:
            err = validation_error(exc, file=src, record=f"line {lineno}")
            raise InputError(f"{err.reason} ({fmt} format)", file=src, record=f"line {lineno}", field=err.field) from exc
        if row.id in seen:
            raise InputError(f"duplicate id '{row.id}' (first on line {seen[row.id]})", file=src,
                             record=f"line {lineno}", field="id")
        seen[row.id] = lineno
        rows.append(row)
    if not rows:
        raise InputError("no rows", file=src)
    return rows


PROMPT_VERSION = "mcq-prompt-v1"
_INSTRUCTION = ("Choose the single best option. Explain briefly if you wish, then end your reply with a "
                "line of the form 'Answer: X', where X is the letter of your choice.")


def mcq_prompt(row: EvalMCQ) -> str:
    """The user message for one question: the question, its lettered options (unless the
    question lists them already) and the answer-format instruction."""
    parts = [row.question.strip()]
    if not any(marker in row.question for marker in _LISTED):
        parts.append("\n".join(f"{k}. {v}" for k, v in row.options.items()))
    parts.append(_INSTRUCTION)
    return "\n\n".join(parts)
