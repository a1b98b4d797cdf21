"""Calibrating a panel of two judges (issue 45, part 3), with simulated judges of known errors
(``reward.calibration.simulated``): each judge measured on the same items, how often both misread
the same item against what independence predicts (two salts: independent; the same salt: one judge
twice), and the panel's predicted detection against the first judge's posterior alone."""

from __future__ import annotations

import asyncio

import pytest

from reward.calibration.panel import calibrate_panel
from reward.calibration.simulated import simulated_judge
from reward.router import StaticRouter
from reward.stress import load_cases
from reward.tree import load_tree


@pytest.fixture(scope="module")
def world():
    """Every third bundled case (20): enough items for the rates, a quick run."""
    tree = load_tree()
    cases = load_cases(tree=tree)[::3]
    router = StaticRouter(tree)
    return tree, cases, [router.route_sync(c.prompt) for c in cases], {}


def _judge(world, salt):
    tree, cases, routings, _ = world
    return simulated_judge(tree, cases, routings, false_fail=0.10, false_pass=0.10, correlation=0.5,
                           systematic_share=0.10, salt=salt)[0]


def _panel(world, a, b, leaves="critical"):
    """The panel calibration; each judge calibrated once per module (its record reused)."""
    from reward.calibration.run import calibrate

    tree, cases, routings, records = world
    for j in (a, b):
        if j.model_id not in records:
            records[j.model_id] = asyncio.run(calibrate(j, tree, cases, routings, router="static", progress=False,
                                                        predict=False))
    return asyncio.run(calibrate_panel(a, b, tree, cases, routings, leaves=leaves, seeds=(0,), repeats=2,
                                       progress=False, record_a=records[a.model_id], record_b=records[b.model_id]))


def test_two_independent_judges_miss_together_about_as_independence_predicts(world):
    panel, rec_a, rec_b = _panel(world, _judge(world, "A"), _judge(world, "B"))
    assert rec_a.judge_id != rec_b.judge_id and panel.judge_a == rec_a.judge_id and panel.judge_b == rec_b.judge_id
    j = panel.joint
    assert j.n > 200 and 0.4 < j.ratio < 2.5, j
    assert panel.predicted.detection_rate > panel.predicted_without_panel.detection_rate


def test_one_judge_twice_is_seen_to_miss_together(world):
    """The same errors twice: every miss of one is a miss of the other (ratio = 1 / P(wrong))."""
    a = _judge(world, "A")
    twin = _judge(world, "A")
    twin.model_id = "simulated:twin"
    panel, _, _ = _panel(world, a, twin)
    assert panel.joint.ratio > 4.0 and panel.joint.both_wrong.k == panel.joint.a_wrong.k


def test_the_panel_reads_the_leaves_it_names(world):
    tree = world[0]
    critical = sum(tree.severity[leaf.id] == "critical" for leaf in tree.leaves)
    panel, _, _ = _panel(world, _judge(world, "A"), _judge(world, "B"), leaves="flagged")
    assert panel.leaves == "flagged" and panel.n_panel_leaves >= critical
    everything, _, _ = _panel(world, _judge(world, "A"), _judge(world, "B"), leaves="all")
    assert everything.n_panel_leaves is None


def test_the_panels_second_judge_is_asked_and_bounded_as_the_first_but_is_itself(monkeypatch):
    """The second judge inherits how the first is asked (mode, template) and bounded (timeouts,
    deadline, probes), and none of who the first is (url, served name, revision, key)."""
    from reward.judge.settings import JudgeSettings
    from reward.stages.panel import build_panel_judge

    first = JudgeSettings(url="http://a:1", served_model="a", mode="explain", timeout_s=7.0, deadline_s=99.0,
                          probe_idle_s=0.0, max_retries=1, revision="r1", api_key_env="A_KEY")
    built: list[JudgeSettings] = []
    monkeypatch.setattr(JudgeSettings, "build", lambda self, **kw: built.append(self) or "judge")

    class First:
        cache = None
        built_from = first

    build_panel_judge("http://b:2", First())
    build_panel_judge("/models/other", First())
    served, local = built
    assert (served.url, served.served_model, served.revision, served.api_key_env) == ("http://b:2", None, None, None)
    assert (served.mode, served.timeout_s, served.deadline_s, served.probe_idle_s, served.max_retries) == (
        "explain", 7.0, 99.0, 0.0, 1)
    assert local.url is None and local.model == "/models/other" and local.mode == "explain"
