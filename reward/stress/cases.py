"""Oracle stress-test cases: schema, loader and validation against the rubric tree.

A case is one conversation (with optional context: the user's records or device data), a clean
reference reply, a reply written under one perturbation (the paper's four, or one of our families
``degenerate`` and ``harm_vs_safe``), the tree leaves that perturbed reply fails (and, for a safe
non-answer, those the clean one fails), and which conditional leaves apply to the conversation.
Both replies are graded against the clean conversation. The bundled file is
``reward/data/stress_cases.yaml`` (ours, written for this test; not HealthBench text).

Data flow: YAML list -> :class:`StressCase` (strict pydantic) -> leaf ids checked against the tree
(a former id, an alias, is read as the leaf's current id) -> the runner. Errors name the file, the
case (index and id) and the field.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from reward.errors import InputError
from reward.healthbench.schema import Message
from reward.jsonl import validation_error
from reward.textio import load_yaml
from reward.tree.graph import RubricTree

Perturbation = Literal["missing_instructions", "missing_user_data", "inappropriate_instructions",
                       "inaccurate_user_data", "degenerate", "harm_vs_safe", "targeted_fault",
                       "verbose_restatement", "over_triage", "refusal", "empty_hedge", "sycophancy",
                       "false_reassurance"]
Scenario = Literal["health_data", "action_plan", "symptoms", "explanation"]
PERTURBATIONS: tuple[str, ...] = get_args(Perturbation)
# Families of our own (issue 21): ``degenerate`` pairs a good specific reply with a bare "see a
# doctor", a refusal or a generic disclaimer; ``harm_vs_safe`` pairs a safe non-answer (the clean
# reply, which fails the helpfulness leaves in ``clean_failed``) with a compliant reply that makes
# a harmful recommendation. Harm must score below the safe non-answer. ``targeted_fault`` (the blind
# set, issue 44): a reply written to commit named faults.
# Gaming families (issue 46): what a policy trained on the reward drifts toward. ``verbose_restatement``
# restates every warning and buries the answer; ``over_triage`` sends a minor complaint to emergency
# care; ``refusal`` deflects to a clinician without help; ``empty_hedge`` hedges until nothing is
# said; ``sycophancy`` agrees with a wrong belief the user states; ``false_reassurance`` calms a red flag.
GAMING: tuple[str, ...] = ("verbose_restatement", "over_triage", "refusal", "empty_hedge", "sycophancy",
                           "false_reassurance")
FAMILIES: tuple[str, ...] = ("degenerate", "harm_vs_safe", "targeted_fault", *GAMING)
TAGS = ("code_mixed", "misspelt", "buried", "short", "records_only_medicine", "long", "multi_turn")
SCENARIOS: tuple[str, ...] = get_args(Scenario)
DEFAULT_CASES = "stress_cases.yaml"


class StressCase(BaseModel):
    """One oracle stress case.

    Attributes:
        id: unique id.
        scenario: the clinical scenario (the paper's four).
        perturbation: what was degraded when the perturbed reply was written.
        prompt: the clean conversation both replies answer.
        context: the user's records or device data, when the scenario has them.
        clean: the reference reply, written with the full, clean input.
        perturbed: the reply written under the perturbation.
        failed: leaf ids the perturbed reply fails (a positive leaf not met, a negative leaf
            triggered); every other leaf passes, for both replies.
        clean_failed: leaf ids the clean reply fails (``harm_vs_safe``: the safe non-answer is
            unhelpful); empty for the other families.
        applicable: oracle applicability labels: the conditional leaves whose situation is present
            in the conversation (the failed leaves are applicable by definition and need not be
            listed). None: not labelled, every routed leaf counts as applicable (taxonomy v2's
            premise). Leaves marked ``conditional: false`` always apply.
        note: what the perturbation changed.
        conversation, language, tags: where the case comes from a conversation with several
            replies (:class:`Conversation`): its id, the user's language, and what is special about
            it (code-mixed, misspelt, a crisis buried in a long message, a medicine only in the records).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    scenario: Scenario
    perturbation: Perturbation
    prompt: list[Message] = Field(min_length=1)
    context: str | None = None
    clean: str = Field(min_length=1)
    perturbed: str = Field(min_length=1)
    failed: tuple[str, ...] = Field(min_length=1)
    clean_failed: tuple[str, ...] = ()
    applicable: tuple[str, ...] | None = None
    note: str = ""
    conversation: str | None = Field(None, description="the conversation this reply answers (a labelled set "
                                                       "written as conversations with several replies)")
    language: str | None = Field(None, description="ISO 639-1 code of the user's messages (code-mixed: 'hi-en')")
    tags: tuple[Literal[TAGS], ...] = ()

    @field_validator("failed", "clean_failed", "applicable")
    @classmethod
    def _unique(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if v is None:
            return v
        dup = sorted({x for x in v if v.count(x) > 1})
        if dup:
            raise ValueError(f"listed twice: {dup}")
        return v

    @property
    def cell(self) -> tuple[str, str]:
        return (self.scenario, self.perturbation)

    def is_applicable(self, leaf_id: str, conditional: bool) -> bool:
        """The oracle's applicability of a leaf to this case's conversation."""
        if not conditional or self.applicable is None:
            return True
        return leaf_id in self.applicable or leaf_id in self.failed or leaf_id in self.clean_failed


class Reply(BaseModel):
    """One flawed reply of a :class:`Conversation`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    perturbation: Perturbation
    note: str = ""
    text: str = Field(min_length=1)
    failed: tuple[str, ...] = Field(min_length=1)


class SafeReply(BaseModel):
    """A safe non-answer, the reference of the conversation's ``harm_vs_safe`` replies."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str = Field(min_length=1)
    failed: tuple[str, ...] = ()


class Conversation(BaseModel):
    """A conversation with a good reply and several flawed ones (the blind set's format, issue 44):
    each flawed reply becomes one :class:`StressCase` against the good reply (a ``harm_vs_safe``
    reply against the ``safe`` one). ``applicable`` lists every conditional leaf whose situation is
    present; ``clean_failed`` what the good reply still fails after the labels were settled."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    conversation: str = Field(min_length=1)
    language: str = Field(min_length=2)
    scenario: Scenario
    tags: tuple[Literal[TAGS], ...] = ()
    context: str | None = None
    prompt: list[Message] = Field(min_length=1)
    applicable: tuple[str, ...]
    clean: str = Field(min_length=1)
    clean_failed: tuple[str, ...] = ()
    replies: tuple[Reply, ...] = Field(min_length=1)
    safe: SafeReply | None = None
    note: str = ""

    def cases(self) -> list[StressCase]:
        out = []
        for r in self.replies:
            vs_safe = r.perturbation == "harm_vs_safe" and self.safe is not None
            out.append(StressCase(
                id=r.id, scenario=self.scenario, perturbation=r.perturbation, prompt=self.prompt, context=self.context,
                clean=self.safe.text if vs_safe else self.clean, perturbed=r.text, failed=r.failed,
                clean_failed=self.safe.failed if vs_safe else self.clean_failed, applicable=self.applicable,
                note=r.note, conversation=self.conversation, language=self.language, tags=self.tags))
        return out


def default_cases_path() -> Path:
    """The bundled cases (``reward/data/stress_cases.yaml``)."""
    return Path(str(resources.files("reward") / "data" / DEFAULT_CASES))


def load_cases(path: str | Path | None = None, tree: RubricTree | None = None) -> list[StressCase]:
    """Load and validate stress cases; with ``tree``, every failed id must be a leaf of it.

    Raises:
        InputError: unreadable YAML, an invalid case, a duplicate id or an unknown leaf; the message
            names the file, the case and the field.
    """
    path = Path(path) if path is not None else default_cases_path()
    src = str(path)
    if not path.exists():
        raise InputError("file not found", file=src)
    if path.is_dir():  # a labelled set's part: every YAML file in it, in name order
        files = sorted(path.glob("*.yaml"))
        if not files:
            raise InputError("a folder without case files (*.yaml)", file=src)
        out: list[StressCase] = []
        seen_ids: dict[str, str] = {}
        for f in files:
            for case in load_cases(f, tree):
                if case.id in seen_ids:
                    raise InputError(f"duplicate id '{case.id}' (also in {seen_ids[case.id]})", file=str(f),
                                     field="id")
                seen_ids[case.id] = f.name
                out.append(case)
        return out
    try:
        raw = load_yaml(path)
    except yaml.YAMLError as exc:
        raise InputError(f"invalid YAML: {exc}", file=src) from exc
    if isinstance(raw, dict):
        raw = raw.get("cases")
    if not isinstance(raw, list) or not raw:
        raise InputError("expected a non-empty list of cases (or a mapping with 'cases')", file=src)
    out = []
    seen: dict[str, int] = {}
    for i, rec in enumerate(raw):
        key = "conversation" if isinstance(rec, dict) and "replies" in rec else "id"
        label = f"#{i}" + (f" ({key} {rec.get(key)})" if isinstance(rec, dict) and key in rec else "")
        if not isinstance(rec, dict):
            raise InputError(f"a case must be a mapping, got {type(rec).__name__}", file=src, record=label)
        try:
            cases = (Conversation.model_validate(rec).cases() if key == "conversation"
                     else [StressCase.model_validate(rec)])
        except ValidationError as exc:
            raise validation_error(exc, file=src, record=label) from exc
        for case in cases:
            out.extend(_checked(case, tree, seen, i, src, label))
    return out


def _checked(case: StressCase, tree: RubricTree | None, seen: dict[str, int], i: int, src: str,
             label: str) -> list[StressCase]:
    """``case`` checked (a unique id; with ``tree``, its leaf ids resolved), as a one-item list."""
    if case.id in seen:
        raise InputError(f"duplicate id '{case.id}' (first at #{seen[case.id]})", file=src, record=label, field="id")
    seen[case.id] = i
    if tree is not None:
        for fname in ("failed", "clean_failed", "applicable"):
            bad = [x for x in getattr(case, fname) or () if tree.resolve(x) is None]
            if bad:
                raise InputError(f"not leaves of the tree '{tree.name}' ({tree.source}): {bad}", file=src,
                                 record=label, field=fname)
        case = case.model_copy(update={f: tuple(tree.resolve(x) for x in getattr(case, f))
                                       for f in ("failed", "clean_failed", "applicable")
                                       if getattr(case, f) is not None})
    return [case]
