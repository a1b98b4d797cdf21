"""Failure confirmation: a verdict that costs a reply is read again before it is paid.

Under the ``severity`` prices one false failure on a critical leaf halves a reply's score, and a
judge that errs on a tenth of its readings produces such failures on good replies all the time.
A failure is rarer than a pass on a good reply, so reading only the failures again buys most of
the robustness of a three-reading majority for a fraction of its cost.

Data flow, after the first grade call of a batch (``RubricReward.score``)::

    verdicts -> the items whose verdict is a failure (a positive criterion not met, a negative one
    met: ``bad_when_met``) -> second reading (``CONFIRM_*``) -> agree: the failure stands
    -> disagree: third reading (``SETTLE_*``) decides by majority -> final verdicts + extra readings

Why these readings. At temperature 0 the same prompt gives the same answer, so asking the first
template again tells nothing new: each reading has its own prompt. The second asks from the other
side in choice mode ("is the behaviour missing?", its answer mapped back), so a judge that leans
to one answer token leans the other way on it; explain mode keeps ``criteria_met``'s sense (the
JSON key every backend constrains to) and changes the wording. The third, only on a disagreement,
is a third wording that shows the response before the conversation: it shares neither the words
nor the prompt prefix of the first two. Whether these readings err independently of one another
is what only a meta-evaluation against physician labels can tell (``rubricstree meta-eval``); the
noise model of the stress test (``reward.stress.noise``) assumes they do, the optimistic case.

A reading that fails (transport, parse) settles nothing: the verdict before it stands, so a
failure of the confirmation may keep a check, never drop one. Every backend takes part through
``Judge.grade`` with a template (server, in process, chat), and readings are cached like verdicts
(under their template's version).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reward.judge.base import Judge
from reward.judge.templates import CONFIRM_CHOICE, CONFIRM_EXPLAIN, SETTLE_CHOICE, SETTLE_EXPLAIN, Template
from reward.judge.types import JudgeItem, Verdict


@dataclass(frozen=True)
class Reading:
    """One extra reading: its template and whether its "yes" means "not met" (asked from the other side)."""

    template: Template
    inverted: bool = False

    def met(self, v: Verdict) -> tuple[bool, float | None]:
        """The reading's answer in the first reading's sense: (met, p(met))."""
        if not self.inverted:
            return bool(v.met), v.p_yes
        return not v.met, None if v.p_yes is None else 1.0 - v.p_yes


def readings(mode: str) -> tuple[Reading, Reading]:
    """The second and third readings for a judge in ``mode`` (choice or explain)."""
    if mode == "choice":
        return Reading(CONFIRM_CHOICE, inverted=True), Reading(SETTLE_CHOICE)
    return Reading(CONFIRM_EXPLAIN), Reading(SETTLE_EXPLAIN)


def is_failure(v: Verdict, bad_when_met: bool) -> bool:
    """Whether ``v`` costs the reply: a negative criterion met, or a positive one not met."""
    return v.ok and bool(v.met) == bad_when_met


@dataclass
class Confirmed:
    """What confirmation did to one batch.

    Attributes:
        verdicts: the final verdict per item (the first reading's where no failure was read).
        extra: per item, the extra readings asked (0, 1 or 2).
        overturned: per item, whether confirmation turned a failure into a pass.
        failed_readings: extra readings that failed (their verdict before stands).
    """

    verdicts: list[Verdict]
    extra: list[int]
    overturned: list[bool]
    failed_readings: int = 0
    readings: list[list[bool]] | None = None  # per item, each reading's "fails" in order (posterior verdicts)


def _combine(first: Verdict, answers: list[tuple[bool, float | None]], met: bool) -> Verdict:
    """The final verdict: ``met`` by majority; p_yes the mean of the readings' p(met) (soft scoring)."""
    ps = [first.p_yes] + [p for _, p in answers]
    p = sum(ps) / len(ps) if all(x is not None for x in ps) else first.p_yes
    return first.model_copy(update={"met": met, "p_yes": p})


async def confirm_failures(judge: Judge, items: Sequence[JudgeItem], verdicts: Sequence[Verdict],
                           bad_when_met: Sequence[bool]) -> Confirmed:
    """Read every failure of ``verdicts`` again (see the module docstring); one grade call per round."""
    second, third = readings(judge.config.mode)
    out = Confirmed(verdicts=list(verdicts), extra=[0] * len(verdicts), overturned=[False] * len(verdicts),
                    readings=[[is_failure(v, bad_when_met[i])] if v.ok else [] for i, v in enumerate(verdicts)])
    todo = [i for i, v in enumerate(verdicts) if is_failure(v, bad_when_met[i])]
    if not todo:
        return out
    got2 = await judge.grade([items[i] for i in todo], second.template, on_failure="record")
    split: list[tuple[int, tuple[bool, float | None]]] = []
    for i, v2 in zip(todo, got2):
        out.extra[i] = 1
        if not v2.ok:
            out.failed_readings += 1
            continue
        a2 = second.met(v2)
        out.readings[i].append(a2[0] == bad_when_met[i])
        if a2[0] == verdicts[i].met:  # confirmed: the failure stands
            out.verdicts[i] = _combine(verdicts[i], [a2], bool(verdicts[i].met))
        else:
            split.append((i, a2))
    if not split:
        return out
    got3 = await judge.grade([items[i] for i, _ in split], third.template, on_failure="record")
    for (i, a2), v3 in zip(split, got3):
        out.extra[i] = 2
        if not v3.ok:
            out.failed_readings += 1
            continue
        a3 = third.met(v3)
        out.readings[i].append(a3[0] == bad_when_met[i])
        out.verdicts[i] = _combine(verdicts[i], [a2, a3], a3[0])  # 1 vs 1 before it: the third decides
        out.overturned[i] = a3[0] != verdicts[i].met
    return out
