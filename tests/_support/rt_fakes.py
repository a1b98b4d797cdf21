"""An in-process fake judge for unit tests of logic (routing, scoring, adapters).

It stands in at one seam, ``Judge._grade_one``: everything else (cache, staging, failure
accounting) is the real code. Verdicts come from a function of the item, so tests can say
exactly which criteria are met. Wiring is tested against the real vLLM server elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable

# the word tokenizer the simulated judges of reward.calibration.simulated use: one class, not two
from reward.calibration.simulated import _WordTokenizer  # noqa: F401
from reward.judge.base import Judge
from reward.judge.templates import Template
from reward.judge.types import JSONResult, JudgeItem, Verdict


class FakeJudge(Judge):
    """``decide(template, item)`` returns p_yes in [0, 1], or raises to simulate a failure.

    ``generate(template, item)`` (optional) answers ``generate_json``: it returns the parsed
    object, or raises to simulate a failure."""

    def __init__(self, decide: Callable[[Template, JudgeItem], float], *,
                 generate: Callable[[Template, JudgeItem], dict] | None = None, **kw) -> None:
        from reward.judge.render import PromptRenderer

        self.decide = decide
        self.generate = generate
        self.calls: list[tuple[str, JudgeItem]] = []
        super().__init__(PromptRenderer(_WordTokenizer()), model_id="fake", **kw)

    @classmethod
    def consistent(cls, verdict: Callable[[Template, JudgeItem], float], **kw) -> FakeJudge:
        """A fake that answers every question of the reward's pipeline in its own sense from one
        verdict function (p(met) of a criterion on a response): the per-prompt applicability
        question is answered "applies" (the criteria of these tests are unconditional), and the
        confirmation's reading asked from the other side ("is the behaviour missing?") gets the
        inverse, so a confirmed verdict is the first one (a judge that does not err)."""
        from reward.router.applicability import APPLICABILITY, APPLICABILITY_CONFIRM
        from reward.stages.confirm import readings

        inverted = {r.template.name for r in readings("choice") if r.inverted}

        def decide(template: Template, item: JudgeItem) -> float:
            if template.name == APPLICABILITY.name:
                return 1.0
            if template.name == APPLICABILITY_CONFIRM.name:  # "is the situation absent?": no
                return 0.0
            p = float(verdict(template, item))
            return 1.0 - p if template.name in inverted else p

        return cls(decide, **kw)

    async def _grade_one(self, template: Template, item: JudgeItem, ids: list[int]) -> Verdict:
        self.calls.append((template.name, item))
        self.stats.requests += 1
        try:
            p = float(self.decide(template, item))
        except Exception as exc:  # the fake's way to simulate a judge failure
            return Verdict.failed(f"fake failure: {exc}", mode=template.mode)
        return Verdict(met=p >= 0.5, p_yes=p, mode=template.mode)

    async def _generate_json_one(self, template: Template, item: JudgeItem, ids: list[int], *, constraint: dict,
                                 required: tuple[str, ...], max_tokens: int, attempts: int) -> JSONResult:
        self.calls.append((template.name, item))
        self.stats.requests += 1
        if self.generate is None:
            return JSONResult.failed("this fake judge does not generate")
        try:
            obj = self.generate(template, item)
        except Exception as exc:  # the fake's way to simulate a judge failure
            return JSONResult.failed(f"fake failure: {exc}")
        if not isinstance(obj, dict) or any(k not in obj for k in required):
            return JSONResult.failed(f"unparseable JSON: {obj!r}")
        return JSONResult(value=obj)
