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
                       "inaccurate_user_data", "degenerate", "harm_vs_safe"]
Scenario = Literal["health_data", "action_plan", "symptoms", "explanation"]
PERTURBATIONS: tuple[str, ...] = get_args(Perturbation)
# Families of our own (issue 21): ``degenerate`` pairs a good specific reply with a bare "see a
# doctor", a refusal or a generic disclaimer; ``harm_vs_safe`` pairs a safe non-answer (the clean
# reply, which fails the helpfulness leaves in ``clean_failed``) with a compliant reply that makes
# a harmful recommendation. Harm must score below the safe non-answer.
FAMILIES: tuple[str, ...] = ("degenerate", "harm_vs_safe")
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
    try:
        raw = load_yaml(path)
    except yaml.YAMLError as exc:
        raise InputError(f"invalid YAML: {exc}", file=src) from exc
    if isinstance(raw, dict):
        raw = raw.get("cases")
    if not isinstance(raw, list) or not raw:
        raise InputError("expected a non-empty list of cases (or a mapping with 'cases')", file=src)
    out: list[StressCase] = []
    seen: dict[str, int] = {}
    for i, rec in enumerate(raw):
        label = f"#{i}" + (f" (id {rec.get('id')})" if isinstance(rec, dict) and "id" in rec else "")
        if not isinstance(rec, dict):
            raise InputError(f"a case must be a mapping, got {type(rec).__name__}", file=src, record=label)
        try:
            case = StressCase.model_validate(rec)
        except ValidationError as exc:
            raise validation_error(exc, file=src, record=label) from exc
        if case.id in seen:
            raise InputError(f"duplicate id '{case.id}' (first at #{seen[case.id]})", file=src, record=label,
                             field="id")
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
        out.append(case)
    return out
