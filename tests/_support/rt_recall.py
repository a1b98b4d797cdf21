"""Routing recall of labelled leaves: does a router activate the leaves a case says are failed?

Data flow: labelled cases (anything with ``id``, ``prompt`` (chat turns), ``context`` and
``failed`` (leaf ids), such as the stress cases of :mod:`reward.stress`) -> one ``router.route``
per case -> per case the labelled leaves it activated and missed -> a :class:`RecallReport`:
recall over all labels, the mean number of active leaves (the price of that recall: every active
leaf is a judge call per rollout), judge calls and sequential rounds per prompt, and the leaves
missed most often.

A leaf that a case labels as failed but the router does not activate is never graded, so the
reward cannot see that failure: recall bounds what any scoring can detect.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from reward.router.base import Router, as_conversation


class CaseRecall(BaseModel):
    """One case: its labels, those the router activated, and the routing's cost."""

    model_config = ConfigDict(frozen=True)

    id: str
    labels: tuple[str, ...]
    missed: tuple[str, ...]
    n_active: int
    n_judge_calls: int
    n_rounds: int
    urgency: float | None


class RecallReport(BaseModel):
    """Recall of labelled leaves over a set of cases."""

    model_config = ConfigDict(frozen=True)

    router: str
    n_cases: int
    n_labels: int
    recall: float
    mean_active: float
    mean_judge_calls: float
    mean_rounds: float
    missed: dict[str, int]
    cases: tuple[CaseRecall, ...]


def _messages(prompt: Sequence[Any]) -> list[Any]:
    return [m.model_dump() if hasattr(m, "model_dump") else m for m in prompt]


async def label_recall(router: Router, cases: Iterable[Any]) -> RecallReport:
    """Route every case once and measure the recall of its ``failed`` leaves.

    Raises:
        ValueError: no case carries a label.
    """
    rows: list[CaseRecall] = []
    for case in cases:
        routing = await router.route(as_conversation(_messages(case.prompt)), getattr(case, "context", None),
                                     getattr(case, "tool_calls", None))
        active = set(routing.leaf_ids)
        labels = tuple(case.failed)
        rows.append(CaseRecall(id=str(case.id), labels=labels, missed=tuple(x for x in labels if x not in active),
                               n_active=len(active), n_judge_calls=routing.n_judge_calls,
                               n_rounds=routing.n_rounds, urgency=routing.urgency))
    n_labels = sum(len(r.labels) for r in rows)
    if not n_labels:
        raise ValueError("no case carries a labelled leaf: recall is undefined")
    missed = Counter(x for r in rows for x in r.missed)
    n = len(rows)
    return RecallReport(router=router.name, n_cases=n, n_labels=n_labels,
                        recall=1.0 - sum(missed.values()) / n_labels,
                        mean_active=sum(r.n_active for r in rows) / n,
                        mean_judge_calls=sum(r.n_judge_calls for r in rows) / n,
                        mean_rounds=sum(r.n_rounds for r in rows) / n,
                        missed=dict(missed.most_common()), cases=tuple(rows))
