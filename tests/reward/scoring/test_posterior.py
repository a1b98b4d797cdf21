"""Posterior verdicts (issue 45, part 1): a reading becomes P(the reply fails the leaf | readings)
through the judge's measured errors, per leaf where it has items, pooled with shrinkage where not;
the re-read correlation decides how much a second reading adds; a second judge's reading adds its
own evidence."""

from __future__ import annotations

import pytest

from reward.scoring.posterior import SHRINK, JudgeRates, LeafRates, Posterior, likelihood, posterior_fail


def test_a_failing_reading_of_a_good_judge_is_strong_evidence_of_a_bad_judge_weak():
    good = LeafRates(ff=0.02, fp=0.02)
    bad = LeafRates(ff=0.30, fp=0.30)
    assert posterior_fail(0.1, [(good, [True], 0.0)]) > 0.8
    assert posterior_fail(0.1, [(bad, [True], 0.0)]) < 0.3
    assert posterior_fail(0.1, [(good, [False], 0.0)]) < 0.01


def test_a_second_reading_adds_less_the_more_the_judge_repeats_itself():
    rates = LeafRates(ff=0.1, fp=0.1)
    alone = posterior_fail(0.1, [(rates, [True], 0.0)])
    independent = posterior_fail(0.1, [(rates, [True, True], 0.0)])
    copies = posterior_fail(0.1, [(rates, [True, True], 0.9)])
    same = posterior_fail(0.1, [(rates, [True, True], 1.0)])
    assert alone < copies < independent
    assert same == pytest.approx(alone, abs=1e-12)  # an exact copy says nothing new


def test_a_leaf_misread_on_every_item_is_read_the_other_way_round():
    """The judge's systematic blind spot, undone by its own calibration: 20 failing items all read
    passed, 20 passing items all read failed."""
    rates = JudgeRates(pool_ff={"*": 0.05}, pool_fp={"*": 0.05}, leaf_counts={"blind": (20, 20, 20, 20)})
    r = rates.rates("blind", "critical", "positive")
    assert r.ff > 0.8 and r.fp > 0.8
    p = Posterior([rates])
    # read passed: at the prior of 0.1 a failure is now likelier than the prior (an ordinary leaf: 0.006)
    assert p.p_fail("blind", "critical", "positive", [[False]]) > 0.3
    assert p.p_fail("other", "critical", "positive", [[False]]) < 0.01
    assert p.p_fail("blind", "critical", "positive", [[True]]) < 0.05  # read failed: it probably passes
    assert p.p_fail("other", "critical", "positive", [[True]]) > 0.6  # another leaf: the pool's rates


def test_a_leaf_with_few_items_stays_near_its_pool():
    rates = JudgeRates(pool_ff={"*": 0.05}, pool_fp={"*": 0.05}, leaf_counts={"few": (1, 1, 1, 1)})
    r = rates.rates("few", "minor", "positive")
    assert r.ff == pytest.approx((1 + SHRINK * 0.05) / (1 + SHRINK), abs=1e-12)
    assert r.ff < 0.3


def test_a_second_judge_overrules_a_first_that_is_blind_on_the_leaf():
    blind_a = JudgeRates(pool_ff={"*": 0.05}, pool_fp={"*": 0.05}, leaf_counts={"x": (20, 20, 20, 0)})
    sharp_b = JudgeRates(pool_ff={"*": 0.05}, pool_fp={"*": 0.05})
    panel = Posterior([blind_a, sharp_b])
    # A reads "passes" (it always does on x); B reads "fails": the reply probably fails
    assert panel.p_fail("x", "critical", "positive", [[False], [True]]) > 0.5
    assert Posterior([blind_a]).p_fail("x", "critical", "positive", [[False]]) == pytest.approx(0.1, abs=0.05)


def test_met_value_follows_the_polarity():
    p = Posterior([JudgeRates(pool_ff={"*": 0.1}, pool_fp={"*": 0.1})])
    assert p.met_value("positive", 0.8) == pytest.approx(0.2, abs=1e-12)
    assert p.met_value("negative", 0.8) == pytest.approx(0.8, abs=1e-12)


def test_likelihood_of_no_readings_is_neutral():
    assert likelihood(LeafRates(0.1, 0.1), [], True, 0.5) == 1.0
