"""A judge of known errors: it reads the truth from labelled cases and errs as told.

What a reward survives depends on how its judge errs, and a real judge's errors are what
calibration measures. To test that chain end to end (calibrate a judge, then score with what the
calibration says) the judge's errors must be known: this judge reads each item's label from the
stress cases and misreads it as told (false fail, false pass, re-read correlation, systematic
leaves, applicability errors), deterministically per item (a hash of the item and ``salt``, not a
random stream: the same item is read the same way in every run and in any order; two salts are two
independent judges). Used by the calibration tests and ``benchmarks/posterior_frontier.py``; it is no
stand-in for a real model's verdicts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

from reward.judge.base import Judge
from reward.judge.templates import Template
from reward.judge.types import JudgeItem, Verdict


class _WordTokenizer:
    """Just enough of a tokenizer for the prompt renderer: one id per whitespace-separated word."""

    chat_template = None
    pad_token_id = eos_token_id = 0

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {"<pad>": 0, "yes": 1, "no": 2}

    def _ids(self, text: str) -> list[int]:
        return [self.vocab.setdefault(w, len(self.vocab)) for w in text.split()]

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return self._ids(text)

    def __call__(self, text: str, add_special_tokens: bool = False, split_special_tokens: bool = False):
        return {"input_ids": self._ids(text)}

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        inv = {v: k for k, v in self.vocab.items()}
        return " ".join(inv.get(i, "?") for i in ids)


class FunctionJudge(Judge):
    """A judge whose p(met) is ``decide(template, item)`` (raise to fail an item): every step
    around it (cache, staging, failure accounting) is the real code."""

    def __init__(self, decide: Callable[[Template, JudgeItem], float], *, model_id: str = "function", **kw) -> None:
        from reward.judge.render import PromptRenderer

        self.decide = decide
        super().__init__(PromptRenderer(_WordTokenizer()), model_id=model_id, **kw)

    async def _grade_one(self, template: Template, item: JudgeItem, ids: list[int]) -> Verdict:
        self.stats.requests += 1
        try:
            p = float(self.decide(template, item))
        except Exception as exc:  # noqa: BLE001 - a decide function's way to fail an item
            return Verdict.failed(f"simulated failure: {exc}", mode=template.mode)
        return Verdict(met=p >= 0.5, p_yes=p, mode=template.mode)


def _u(*parts: str) -> float:
    h = hashlib.sha256("\0".join(parts).encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def systematic_leaves(tree, share: float, salt: str) -> set[str]:
    """The leaves a judge of ``salt`` misreads on every reading: a ``share`` of the tree's leaves."""
    return {leaf.id for leaf in tree.leaves if _u(salt, "systematic", leaf.id) < share}


def simulated_judge(tree, cases: Sequence, routings: Sequence, *, false_fail: float = 0.10,
                    false_pass: float = 0.05, correlation: float = 0.5, systematic_share: float = 0.05,
                    app_false_absent: float = 0.10, app_false_present: float = 0.10, salt: str = "0"
                    ) -> tuple[FunctionJudge, set[str]]:
    """A judge erring as told on the labelled items of ``cases`` (the calibration's items); returns
    (judge, its systematic leaf ids). An item it has no label for is read as passed, without error."""
    from reward.calibration.items import labelled_items
    from reward.router.applicability import APPLICABILITY, APPLICABILITY_CONFIRM
    from reward.stages.confirm import readings

    verdicts, apps = labelled_items(tree, cases, routings)
    truth = {(lv.item.response, lv.item.criterion): lv for lv in verdicts}
    present = {(la.item.conversation[-1].content, la.item.criterion): la.present for la in apps}
    systematic = systematic_leaves(tree, systematic_share, salt)
    polarity = {leaf.criterion: leaf.polarity for leaf in tree.leaves}
    second, third = readings("choice")
    reread = {second.template.name: second, third.template.name: third}

    def first_fails(lv, key) -> bool:
        if lv.leaf_id in systematic:
            return not lv.fails
        rate = false_pass if lv.fails else false_fail
        return lv.fails ^ (_u(salt, "first", *key) < rate)

    def decide(template, item) -> float:
        if template.name in (APPLICABILITY.name, APPLICABILITY_CONFIRM.name):
            is_present = present.get((item.conversation[-1].content, item.criterion), True)
            rate = app_false_absent if is_present else app_false_present
            says_present = is_present ^ (_u(salt, template.name, item.conversation[-1].content, item.criterion) < rate)
            return float(says_present if template.name == APPLICABILITY.name else not says_present)
        key = (item.response, item.criterion)
        lv = truth.get(key)
        if lv is None:  # no label: the reply passes it (a negative leaf not met, a positive one met)
            return 0.0 if polarity.get(item.criterion) == "negative" else 1.0
        fails = first_fails(lv, key)
        if template.name in reread:  # a re-reading: the first answer with p = correlation, else a fresh draw
            if lv.leaf_id in systematic:
                fails = not lv.fails
            elif _u(salt, "copy", template.name, *key) >= correlation:
                rate = false_pass if lv.fails else false_fail
                fails = lv.fails ^ (_u(salt, "fresh", template.name, *key) < rate)
            met = fails if lv.polarity == "negative" else not fails
            return float(not met) if reread[template.name].inverted else float(met)
        return float(fails if lv.polarity == "negative" else not fails)

    return FunctionJudge(decide, model_id=f"simulated:{salt}"), systematic
