"""Stability measures the reward as it is built from its settings, above temperature 0 too: soft
scores stay soft (the value scored is the judge's p, not a sampled yes/no) and the confirmation
readings are drawn as ``score`` would take them (a sampled failure read again, a disagreement a
third time). A fake judge stands in at one seam; the component under test is the re-sampling."""

from __future__ import annotations

import json

import pytest
from rt_fakes import FakeJudge
from rt_router import _tree

from reward.judge.templates import CONFIRM_CHOICE, SETTLE_CHOICE
from reward.metaeval.stability import StabilityRun
from reward.router.static import StaticRouter
from reward.settings import RewardSettings
from reward.stages.rubric_reward import parse_rollouts

ROLLOUTS = parse_rollouts([{"id": f"r{i}", "prompt": [{"role": "user", "content": f"question {i}"}],
                            "completion": f"answer {i}"} for i in range(4)])


def _run(tmp_path, settings: RewardSettings, decide) -> dict[float, list[dict]]:
    tree = _tree()
    run = StabilityRun(ROLLOUTS, {"fake": lambda mode, t, cache: FakeJudge(decide)},
                       lambda j: settings.build(j, tree=tree, router=StaticRouter(tree), cache_routing=False), tree,
                       out_dir=tmp_path, temperatures=[0.0, 1.0], repeats=4, baseline=False, progress=False,
                       settings=settings.record())
    run.run()
    rows = [json.loads(x) for x in (tmp_path / "stability.jsonl").read_text().splitlines()]
    return {t: [r for r in rows if r["temperature"] == t] for t in (0.0, 1.0)}


def test_soft_scores_stay_soft_above_temperature_zero(tmp_path):
    """p_yes 0.7 on every leaf: at T = 1 each repeat used to score a sampled yes/no; the soft reward
    reads 0.7 whatever is sampled, so without confirmation every repeat scores what score gives."""
    by_t = _run(tmp_path, RewardSettings(scoring="soft", applicability=False, confirm_failures=False),
                lambda template, item: 0.7)
    ref = {r["id"]: r["score"] for r in by_t[0.0]}
    assert len(by_t[1.0]) == 4 * 4
    for r in by_t[1.0]:
        assert r["score"] == pytest.approx(ref[r["id"]], abs=1e-12)


def test_confirmation_readings_are_drawn_above_temperature_zero(tmp_path):
    """Every first reading fails a positive leaf for sure (p 0), the confirmation prompt says it is
    met and so does the third: with confirmation every leaf passes, at T = 0 (score) and at T = 1
    (stability draws the readings). Dropping the readings at T = 1 failed every leaf."""
    def decide(template, item) -> float:
        if template.name == CONFIRM_CHOICE.name:  # asked from the other side: "is it missing?"
            return 0.0
        if template.name == SETTLE_CHOICE.name:
            return 1.0
        return 0.0

    tree = _tree()
    positive = [lf.id for lf in tree.leaves if lf.polarity == "positive"]
    by_t = _run(tmp_path, RewardSettings(applicability=False, scoring_variant="paper"), decide)
    for r in by_t[0.0] + by_t[1.0]:
        assert all(r["leaves"][lid] is True for lid in positive if lid in r["leaves"])
    ref = {r["id"]: r["score"] for r in by_t[0.0]}
    assert all(r["score"] == pytest.approx(ref[r["id"]], abs=1e-12) for r in by_t[1.0])
    off = _run(tmp_path / "off", RewardSettings(applicability=False, scoring_variant="paper",
                                                confirm_failures=False), decide)
    assert all(r["score"] < ref[r["id"]] for r in off[1.0])  # without confirmation the failures stand
