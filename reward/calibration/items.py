"""The labelled items a calibration grades: every reply of every stress case against its leaves,
and every labelled applicability decision.

Data flow per case::

    routing (the router the reward uses) -> the leaves the case's labels call applicable, plus its
    labelled failures -> one verdict item per (reply, leaf): truth "fails" for a leaf the reply is
    labelled to fail (``failed`` for the perturbed reply, ``clean_failed`` for the clean one),
    "passes" for the rest
    -> for a case with ``applicable`` labels: one applicability item per leaf the applicability step
    would ask about (conditional, not switched on by a cue): truth present or absent

Each (conversation, reply text, leaf) is one item, however many cases hold it: a conversation with
several flawed replies shares its good reply among its cases (the blind set's format), and counting
it once per case would weigh its items several times.

The conversation the judge reads is the reward's (the context folded in as a turn), so a verdict
graded here is the verdict the reward would be served from the cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reward.judge.types import JudgeItem
from reward.router.applicability import asked_leaves
from reward.router.base import Routing, as_conversation
from reward.router.language import language_of, user_text
from reward.router.llm import with_context
from reward.stress.cases import StressCase
from reward.stress.runner import oracle_applicable
from reward.tree.graph import RubricTree


@dataclass(frozen=True)
class LabelledVerdict:
    """One (reply, leaf) item with its label: ``fails`` is the truth (a positive leaf not met, a
    negative one met)."""

    case_id: str
    reply: str  # "clean" or "perturbed"
    leaf_id: str
    fails: bool
    severity: str
    polarity: str
    language: str
    item: JudgeItem

    def read_fails(self, met: bool) -> bool:
        """Whether a reading of ``met`` fails the leaf (polarity decides)."""
        return met if self.polarity == "negative" else not met


@dataclass(frozen=True)
class LabelledApplicability:
    """One applicability question with its label: is the leaf's situation present?"""

    case_id: str
    leaf_id: str
    present: bool
    severity: str
    language: str
    item: JudgeItem


def labelled_items(tree: RubricTree, cases: Sequence[StressCase], routings: Sequence[Routing]
                   ) -> tuple[list[LabelledVerdict], list[LabelledApplicability]]:
    """Every labelled verdict and applicability item of ``cases`` (see the module docstring)."""
    verdicts: list[LabelledVerdict] = []
    apps: list[LabelledApplicability] = []
    seen: set[tuple] = set()  # a conversation's good reply is in each of its cases: one item per (reply, leaf)
    asked: set[tuple] = set()
    for case, routing in zip(cases, routings):
        conv = with_context(as_conversation(case.prompt), case.context)
        lang = language_of(user_text(conv))
        leaves = list(dict.fromkeys([*oracle_applicable(tree, case, routing), *case.failed, *case.clean_failed]))
        for reply, text, failed in (("clean", case.clean, set(case.clean_failed)), ("perturbed", case.perturbed,
                                                                                     set(case.failed))):
            for lid in leaves:
                if (conv, text, lid) in seen:
                    continue
                seen.add((conv, text, lid))
                leaf = tree[lid]
                verdicts.append(LabelledVerdict(
                    case_id=case.id, reply=reply, leaf_id=lid, fails=lid in failed, severity=tree.severity[lid],
                    polarity=leaf.polarity, language=lang,
                    item=JudgeItem(conversation=conv, response=text, criterion=leaf.criterion)))
        if case.applicable is None:
            continue
        for lid in asked_leaves(tree, routing):
            if (conv, lid) in asked:
                continue
            asked.add((conv, lid))
            leaf = tree[lid]
            apps.append(LabelledApplicability(
                case_id=case.id, leaf_id=lid, present=case.is_applicable(lid, leaf.conditional),
                severity=tree.severity[lid], language=lang,
                item=JudgeItem(conversation=conv, response="", criterion=leaf.criterion)))
    return verdicts, apps
