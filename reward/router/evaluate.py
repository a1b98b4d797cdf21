"""Routing quality on labelled prompts: which leaves a router switches on against what applies.

A labelled routing case (JSONL, one per line; the bundled set is ``reward/data/routing_labels.jsonl``,
written before any router ran on it) carries::

    {"id": "es-chest", "language": "es", "prompt": [{"role": "user", "content": "..."}],
     "context": null, "applicable": [leaf ids whose situation is present and that a clinician
     wants graded], "not_applicable": [leaf ids of the same topic whose situation is absent],
     "urgent": true, "tags": ["passing_disclosure"]}

Data flow: cases -> one ``router.route`` per case -> per case the applicable leaves it activated
(hits), those it missed, and the labelled-not-applicable leaves it activated (false alarms) ->
:class:`RouteEval`::

    recall            = hits / applicable labels                      (micro, over all cases)
    recall_critical   = the same over applicable leaves of severity critical
    precision         = hits / (hits + false alarms)   (over the leaves that carry a label: an
                        unlabelled active leaf is neither right nor wrong)
    active_per_prompt = mean and median of active leaves (each one is a judge item per rollout)
    by_language       = recall, precision, active per prompt for each language
    urgency           = precision and recall of "urgent" (the router's urgency >= its cut-off)
                        against the labels

Forced leaves (active on every prompt) count like any other active leaf.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reward.errors import InputError
from reward.router.base import Router, as_conversation
from reward.textio import read_text
from reward.tree.graph import RubricTree

DEFAULT_LABELS = Path(__file__).resolve().parents[1] / "data" / "routing_labels.jsonl"


class Turn(BaseModel):
    """One chat turn of a labelled prompt."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    role: str = Field(min_length=1)
    content: str


class RoutingCase(BaseModel):
    """One labelled prompt (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    language: str = Field(min_length=2)
    prompt: list[Turn] = Field(min_length=1)
    context: str | None = None
    applicable: tuple[str, ...] = ()
    not_applicable: tuple[str, ...] = ()
    urgent: bool | None = None
    tags: tuple[str, ...] = ()


def load_cases(path: str | Path | None = None, tree: RubricTree | None = None) -> list[RoutingCase]:
    """Read labelled routing cases; with ``tree``, every labelled id must be a leaf of it.

    Raises:
        InputError: a line is not JSON, a case is invalid, an id repeats, a leaf is unknown or
            labelled both ways (the error names the file, the line and the field).
    """
    path = Path(path) if path is not None else DEFAULT_LABELS
    if not path.exists():
        raise InputError("labels file not found", file=str(path))
    leaves = {leaf.id for leaf in tree.leaves} if tree is not None else None
    out: list[RoutingCase] = []
    seen: set[str] = set()
    for lineno, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        rec = f"line {lineno}"
        try:
            case = RoutingCase.model_validate(json.loads(line))
        except json.JSONDecodeError as exc:
            raise InputError(f"not JSON: {exc.msg}", file=str(path), record=rec) from exc
        except ValidationError as exc:
            err = exc.errors()[0]
            raise InputError(err["msg"], file=str(path), record=rec,
                             field=".".join(str(x) for x in err["loc"])) from exc
        rec = f"{rec} (id {case.id})"
        if case.id in seen:
            raise InputError(f"duplicate id '{case.id}'", file=str(path), record=rec, field="id")
        seen.add(case.id)
        both = set(case.applicable) & set(case.not_applicable)
        if both:
            raise InputError(f"labelled applicable and not applicable: {sorted(both)}", file=str(path),
                             record=rec, field="not_applicable")
        if leaves is not None:
            for fld in ("applicable", "not_applicable"):
                unknown = [x for x in getattr(case, fld) if x not in leaves]
                if unknown:
                    raise InputError(f"not leaves of '{tree.name}': {unknown}", file=str(path), record=rec,
                                     field=fld)
        out.append(case)
    if not out:
        raise InputError("no cases", file=str(path))
    return out


URGENT_LEAF = "sf_red_flags_missed"  # applies when the conversation describes a possible emergency


def cases_from_conversations(cases: Sequence[Any], tree: RubricTree) -> list[RoutingCase]:
    """Routing cases from labelled conversations (stress cases of the blind set's format, grouped by
    ``conversation``): every conditional leaf the labels call applicable is one the router must
    reach; every other conditional leaf is labelled not applicable (the conversation's labels list
    every applicable one); urgent when the conversation describes a possible emergency (its
    ``sf_red_flags_missed`` applies)."""
    conditional = [leaf.id for leaf in tree.leaves if leaf.conditional and not leaf.id.startswith("at_")]
    out: list[RoutingCase] = []
    seen: set[str] = set()
    for c in cases:
        key = c.conversation or c.id
        if key in seen:
            continue
        seen.add(key)
        app = set(c.applicable or ()) | {x for x in (*c.failed, *c.clean_failed) if tree[x].conditional}
        out.append(RoutingCase(id=key, language=c.language or "en", prompt=[m.model_dump() for m in c.prompt],
                               context=c.context, applicable=tuple(sorted(app)),
                               not_applicable=tuple(x for x in conditional if x not in app),
                               urgent=URGENT_LEAF in app, tags=tuple(c.tags)))
    return out


class CaseResult(BaseModel):
    """One case routed: what it activated against its labels."""

    model_config = ConfigDict(frozen=True)

    id: str
    language: str
    n_active: int
    missed: tuple[str, ...]
    false_alarms: tuple[str, ...]
    n_applicable: int
    n_hits: int
    urgent: bool | None
    urgency: float | None
    predicted_urgent: bool | None
    reasons: dict[str, int] = Field(default_factory=dict, description="active leaves per routing reason")
    needless_critical: int = Field(0, description="active critical leaves labelled not applicable")


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def _prf(rows: Sequence[CaseResult]) -> dict[str, Any]:
    hits = sum(r.n_hits for r in rows)
    fa = sum(len(r.false_alarms) for r in rows)
    n_app = sum(r.n_applicable for r in rows)
    active = [r.n_active for r in rows]
    return {"n_cases": len(rows), "recall": _ratio(hits, n_app), "precision": _ratio(hits, hits + fa),
            "active_per_prompt": _ratio(sum(active), len(active)),
            "median_active": statistics.median(active) if active else None}


def summarise(rows: Sequence[CaseResult], tree: RubricTree, router: str, cases: Sequence[RoutingCase]) -> dict[str, Any]:
    """The report (see the module docstring) over routed cases."""
    sev = tree.severity
    crit_total = crit_hit = 0
    for case, r in zip(cases, rows):
        crit = [x for x in case.applicable if sev.get(x) == "critical"]
        crit_total += len(crit)
        crit_hit += sum(x not in r.missed for x in crit)
    base = _prf(rows)
    by_lang = {lang: _prf([r for r in rows if r.language == lang]) for lang in sorted({r.language for r in rows})}
    by_tag: dict[str, dict[str, Any]] = {}
    for tag in sorted({t for c in cases for t in c.tags}):
        by_tag[tag] = _prf([r for c, r in zip(cases, rows) if tag in c.tags])
    labelled = [r for r in rows if r.urgent is not None and r.predicted_urgent is not None]
    tp = sum(r.urgent and r.predicted_urgent for r in labelled)
    fp = sum((not r.urgent) and r.predicted_urgent for r in labelled)
    fn = sum(r.urgent and not r.predicted_urgent for r in labelled)
    missed = Counter(x for r in rows for x in r.missed)
    alarms = Counter(x for r in rows for x in r.false_alarms)
    reasons: Counter[str] = Counter()
    for r in rows:
        reasons.update(r.reasons)
    return {
        "router": router,
        **base,
        "recall_critical": _ratio(crit_hit, crit_total),
        "n_labels": sum(r.n_applicable for r in rows),
        "n_critical_labels": crit_total,
        "by_language": by_lang,
        "by_tag": by_tag,
        "urgency": {"precision": _ratio(tp, tp + fp), "recall": _ratio(tp, tp + fn), "n_labelled": len(labelled),
                    "n_urgent": sum(bool(r.urgent) for r in labelled),
                    "n_predicted_urgent": sum(bool(r.predicted_urgent) for r in labelled)},
        "active_by_reason": {k: v / len(rows) for k, v in sorted(reasons.items())} if rows else {},
        "needless_critical_benign": _needless(rows),
        "missed": dict(missed.most_common()),
        "false_alarms": dict(alarms.most_common()),
        "cases": [r.model_dump() for r in rows],
    }


def _needless(rows: Sequence[CaseResult]) -> dict[str, Any]:
    """Critical leaves routed on prompts labelled not urgent although labelled not applicable: judge
    items that can only cost (and, misread, fail a good reply)."""
    benign = [r.needless_critical for r in rows if r.urgent is False]
    return {"n_prompts": len(benign), "median": statistics.median(benign) if benign else None,
            "mean": _ratio(sum(benign), len(benign)), "max": max(benign, default=None)}


def urgency_cutoff(router: Router) -> float | None:
    inner = getattr(router, "inner", router)
    return getattr(inner, "urgency_cutoff", None)


async def evaluate(router: Router, cases: Iterable[RoutingCase], *, progress: bool = False) -> dict[str, Any]:
    """Route every case once and report precision, recall and cost (see the module docstring)."""
    from tqdm import tqdm

    cases = list(cases)
    cut = urgency_cutoff(router)
    rows: list[CaseResult] = []
    for case in tqdm(cases, desc="routing", unit="prompt", disable=not progress):
        routing = await router.route(as_conversation([m.model_dump() for m in case.prompt]), case.context)
        active = set(routing.leaf_ids)
        app = list(dict.fromkeys(case.applicable))
        predicted = None if routing.urgency is None or cut is None else routing.urgency >= cut
        rows.append(CaseResult(
            id=case.id, language=case.language, n_active=len(active),
            missed=tuple(x for x in app if x not in active),
            false_alarms=tuple(x for x in case.not_applicable if x in active),
            n_applicable=len(app), n_hits=sum(x in active for x in app), urgent=case.urgent,
            urgency=routing.urgency, predicted_urgent=predicted,
            reasons=dict(Counter(a.reason for a in routing.active)),
            needless_critical=sum(x in active and router.tree.severity.get(x) == "critical"
                                  for x in case.not_applicable)))
    return summarise(rows, router.tree, getattr(router, "name", "router"), cases)
