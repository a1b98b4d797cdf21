"""Posterior verdicts and a second judge in the reward itself (issue 45, parts 1-2): a judge of known
errors (``reward.calibration.simulated``) is calibrated, its record stored by its identity, and the
reward built from ``RewardSettings(posterior=...)`` scores with what the calibration measured: a leaf
the judge misreads on every item no longer decides the score, the breakdown shows the raw reading
beside the posterior, and a second judge reads only its leaves."""

from __future__ import annotations

import asyncio

import pytest

from reward.calibration.record import record_path, save_calibration
from reward.calibration.run import calibrate
from reward.calibration.simulated import simulated_judge
from reward.errors import InputError
from reward.judge.cache import VerdictCache
from reward.router import StaticRouter
from reward.scoring.posterior import JudgeRates, Posterior
from reward.settings import RewardSettings
from reward.stages.rubric_reward import RubricReward
from reward.stress import load_cases
from reward.tree import load_tree


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tree = load_tree()
    cases = load_cases(tree=tree)
    router = StaticRouter(tree)
    routings = [router.route_sync(c.prompt) for c in cases]
    judge, systematic = simulated_judge(tree, cases, routings, false_fail=0.05, false_pass=0.05, correlation=0.0,
                                        systematic_share=0.15, salt="posterior-test")
    record = asyncio.run(calibrate(judge, tree, cases, routings, router="static", progress=False, predict=False))
    return tree, cases, routings, judge, systematic, record


def _rows(case):
    prompt = [m.model_dump() for m in case.prompt]
    return [{"id": "clean", "prompt": prompt, "context": case.context, "completion": case.clean},
            {"id": "perturbed", "prompt": prompt, "context": case.context, "completion": case.perturbed}]


def _case_failing_a_systematic_leaf(cases, systematic, record):
    measured = {s.leaf_id for s in record.systematic}
    for c in cases:
        if c.perturbation != "harm_vs_safe" and set(c.failed) & systematic & measured:
            return c
    pytest.skip("no case fails a leaf the simulated judge misreads systematically")


def test_the_posterior_undoes_a_systematic_misreading(setup):
    tree, cases, routings, judge, systematic, record = setup
    case = _case_failing_a_systematic_leaf(cases, systematic, record)
    router = StaticRouter(tree)
    plain = RubricReward(tree, router, judge, scoring_variant="severity", applicability=False, cache_routing=False)
    post = RubricReward(tree, router, judge, scoring_variant="severity", applicability=False, cache_routing=False,
                        posterior=Posterior([JudgeRates.from_record(record)]))
    clean0, pert0 = asyncio.run(plain.score(_rows(case)))
    clean1, pert1 = asyncio.run(post.score(_rows(case)))
    blind = sorted(set(case.failed) & systematic)[0]
    raw = next(lr for lr in pert1.leaves if lr.leaf_id == blind)
    # the judge reads the failed leaf as passed (its blind spot); the posterior prices the failure anyway
    others = [lr.p_fail for lr in pert1.leaves if lr.leaf_id not in case.failed and lr.met is not None
              and lr.p_fail is not None and lr.leaf_id not in systematic]
    assert raw.p_fail is not None and raw.p_fail > 10 * max(sorted(others)[len(others) // 2], 1e-3)
    assert raw.met == next(lr for lr in pert0.leaves if lr.leaf_id == blind).met  # the raw reading, kept
    assert (clean1.score - pert1.score) > (clean0.score - pert0.score)


def test_posterior_on_needs_a_calibration_and_finds_it_by_identity(setup, tmp_path):
    tree, cases, routings, judge, systematic, record = setup
    judge.cache = VerdictCache(tmp_path / "verdicts.sqlite")
    with pytest.raises(InputError, match="no calibration on record"):
        RewardSettings(router="static", posterior="on").build(judge, tree=tree)
    save_calibration(record, record_path(judge.model_id, tmp_path))
    reward = RewardSettings(router="static", posterior="on").build(judge, tree=tree)
    assert reward.posterior is not None
    assert RewardSettings(router="static", posterior="off").build(judge, tree=tree).posterior is None
    # auto: only a calibration the gate passes (this simulated judge's predicted detection is not on record)
    assert RewardSettings(router="static").build(judge, tree=tree).posterior is None
    judge.cache = None


def test_a_second_judge_reads_only_its_leaves(setup):
    tree, cases, routings, judge, systematic, record = setup
    other, _ = simulated_judge(tree, cases, routings, false_fail=0.05, false_pass=0.05, correlation=0.0,
                               systematic_share=0.15, salt="posterior-test-B")
    other_record = asyncio.run(calibrate(other, tree, cases, routings, router="static", progress=False,
                                         predict=False))
    critical = frozenset(leaf.id for leaf in tree.leaves if tree.severity[leaf.id] == "critical")
    reward = RubricReward(tree, StaticRouter(tree), judge, applicability=False, cache_routing=False,
                          posterior=Posterior([JudgeRates.from_record(record), JudgeRates.from_record(other_record)]),
                          panel_judge=other, panel_leaves=critical)
    before = other.stats.requests
    out = asyncio.run(reward.score(_rows(cases[0])))
    asked = other.stats.requests - before
    read = [lr for res in out for lr in res.leaves if lr.panel is not None]
    assert asked == reward.stats["panel_items"] > 0
    assert read and all(lr.leaf_id in critical for lr in read)
    assert all(lr.panel is None for res in out for lr in res.leaves if lr.leaf_id not in critical)
    with pytest.raises(ValueError, match="through the posterior"):
        RubricReward(tree, StaticRouter(tree), judge, panel_judge=other)
