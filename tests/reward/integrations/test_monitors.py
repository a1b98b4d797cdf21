"""The gaming monitors (issue 46, part 4): per-step figures of a policy drifting toward what the
reward cannot see, each with a threshold that prints one warning line when crossed. Unit level here;
on real TRL trainer steps in tests/training/test_trl_monitors.py, through verl's reward manager in
test_verl_monitors below."""

from __future__ import annotations

import logging

import pytest

from reward.integrations.monitors import RewardMonitor, RolloutFacts, group_length_correlation, pearson
from reward.settings import MonitorSettings


def _group(g, rewards, lengths, **kw):
    return [RolloutFacts(group=g, reward=r, length=n, **kw) for r, n in zip(rewards, lengths)]


def test_the_length_correlation_is_taken_inside_groups():
    # within each group the reward rises with length; across groups it falls (a between-group trap)
    facts = _group("a", [0.1, 0.2, 0.3], [10, 20, 30]) + _group("b", [0.0, 0.05, 0.1], [100, 200, 300])
    assert group_length_correlation(facts) == pytest.approx(1.0, abs=1e-12)
    assert pearson([f.length for f in facts], [f.reward for f in facts]) < 0
    assert group_length_correlation(_group("a", [0.5, 0.5], [1, 2])) is None  # nothing varies


def test_each_threshold_warns_once_per_crossing(caplog):
    monitor = RewardMonitor(MonitorSettings(length_correlation=0.5, refusal_share=0.5), name="test")
    long_pays = _group("a", [0.1, 0.5, 0.9], [10, 50, 90])
    with caplog.at_level(logging.WARNING, logger="rubricstree.monitor"):
        for _ in range(3):
            figures = monitor.observe(long_pays)
    warned = [r.getMessage() for r in caplog.records if "length_correlation" in r.getMessage()]
    assert figures["length_correlation"] > 0.99 and len(warned) == 1 and "crossed its threshold" in warned[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="rubricstree.monitor"):
        monitor.observe(_group("a", [0.9, 0.5, 0.1], [10, 50, 90]))  # back under
        monitor.observe(long_pays)  # crossed again: warned again
        monitor.observe(_group("a", [0.5, 0.6], [1, 2], refused=True))
    messages = [r.getMessage() for r in caplog.records]
    assert sum("length_correlation" in m for m in messages) == 1 and any("refusal_share" in m for m in messages)


def test_a_leaf_falling_from_its_first_steps_is_named(caplog):
    monitor = RewardMonitor(MonitorSettings(leaf_drop=0.3, baseline_steps=2), name="test")
    passing = [RolloutFacts(group="g", reward=1.0, length=5, leaves={"cm_filler": 1.0, "ms_ex_reasoning": 1.0})] * 4
    failing = [RolloutFacts(group="g", reward=0.8, length=5, leaves={"cm_filler": 0.0, "ms_ex_reasoning": 1.0})] * 4
    monitor.observe(passing)
    monitor.observe(passing)
    with caplog.at_level(logging.WARNING, logger="rubricstree.monitor"):
        figures = monitor.observe(failing)
    assert figures["leaf_drop"] == pytest.approx(1.0, abs=1e-12) and "(cm_filler)" in caplog.text


def test_escalation_counts_only_prompts_read_as_routine():
    monitor = RewardMonitor(name="test")
    facts = (_group("a", [0.5, 0.5], [1, 2], routine=True, escalated=True)
             + _group("b", [0.5, 0.5], [1, 2], routine=False, escalated=True))
    assert monitor.observe(facts)["escalation_share"] == 1.0


def test_verl_reward_manager_carries_the_monitors_and_warns(tiny_model_dir, caplog):
    """Through our verl reward manager (verl's DataProto, verl's manager base): every rollout's
    extra info carries its length, escalation and refusal flags and the batch's reward-length
    correlation (verl logs their batch means), and a judge that pays for length is flagged."""
    pytest.importorskip("verl")
    from rt_fakes import FakeJudge
    from rt_verl import make_batch
    from transformers import AutoTokenizer

    from reward.integrations.verl import RewardContext, VerlRewardSettings
    from reward.integrations.verl.manager import RubricsTreeRewardManager

    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    from reward.tree import load_tree

    negative = {leaf.criterion for leaf in load_tree().leaves if leaf.polarity == "negative"}
    judge = FakeJudge.consistent(lambda template, item: 0.0 if item.criterion in negative  # no fault committed
                                 else min(1.0, len(item.response) / 60))  # and a longer reply passes more
    settings = VerlRewardSettings(rubric_source="tree", router="static",
                                  router_options={"axes": ["instruction_following"]}, batch_window_s=0)
    manager = RubricsTreeRewardManager(None, tok, context=RewardContext(settings, judge=judge))
    conv = [{"role": "user", "content": "How do I take ibuprofen for a sprained ankle?"}]
    replies = ["Take it.", "Take 400 mg with food.", "Take 400 mg with food every 8 hours, for up to 3 days.",
               "Take 400 mg with food every 8 hours, for up to 3 days, and stop if your stomach hurts or it "
               "does not help."]
    rows = [{"prompt": conv, "response": r, "data_source": "clinical_rubric", "ground_truth": "[]", "uid": "g"}
            for r in replies]
    import asyncio

    with caplog.at_level(logging.WARNING, logger="rubricstree.monitor"):
        out = asyncio.run(manager.run_batch(make_batch(tok, rows)))
    extra = [o["reward_extra_info"] for o in out]
    assert [e["monitor_length"] for e in extra] == [len(r) for r in replies]
    assert all(e["monitor_length_correlation"] > 0.5 for e in extra) and all(e["monitor_refused"] == 0 for e in extra)
    assert "length_correlation" in caplog.text and "crossed its threshold" in caplog.text
