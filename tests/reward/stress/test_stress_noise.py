"""Judge error in the oracle stress test (``--judge-noise``): no noise reproduces the oracle, a seed
reproduces a run, applicability errors are shared by both replies of a case, inapplicable leaves
stop absorbing verdict errors, and the command reports the figures."""

from __future__ import annotations

import json
import random

import pytest
from typer.testing import CliRunner

from reward.router import StaticRouter
from reward.stress import load_cases
from reward.stress.noise import noise_summary, noisy_pair
from reward.stress.runner import oracle_scores
from reward.tree import load_tree
from rubricstree import app

runner = CliRunner()


@pytest.fixture(scope="module")
def setup():
    tree = load_tree()
    cases = load_cases(tree=tree)
    some = [c for c in cases if c.id.endswith("-1")]  # one case per cell and family
    router = StaticRouter(tree)
    routings = [router.route_sync(c.prompt) for c in some]
    return tree, some, routings


def test_no_noise_reproduces_the_oracle(setup):
    tree, cases, routings = setup
    rng = random.Random(0)
    for c, r in zip(cases, routings):
        got = noisy_pair(tree, c, r, "severity", judge_noise=0.0, applicability_noise=0.0, rng=rng)
        assert got == pytest.approx(oracle_scores(tree, c, r, "severity"))


def test_a_seed_reproduces_a_run_and_another_seed_differs(setup):
    tree, cases, routings = setup
    a = noise_summary(tree, cases, routings, "severity", judge_noise=0.1, seed=7, repeats=3)
    b = noise_summary(tree, cases, routings, "severity", judge_noise=0.1, seed=7, repeats=3)
    c = noise_summary(tree, cases, routings, "severity", judge_noise=0.1, seed=8, repeats=3)
    assert a == b and a["clean_mean"] != c["clean_mean"]
    assert a["applicability_noise"] == 0.1 and a["n"] == 3 * len(cases)
    assert set(a["by_perturbation"]) == {c.perturbation for c in cases}
    with pytest.raises(ValueError):
        noise_summary(tree, cases, routings, "severity", judge_noise=0.7)


def test_applicability_errors_alone_never_fail_a_clean_reply(setup):
    """A wrongly kept leaf passes vacuously, a wrongly dropped one is not scored: with a perfect
    verdict judge, only the perturbed reply can lose."""
    tree, cases, routings = setup
    rng = random.Random(1)
    plain = [(c, r) for c, r in zip(cases, routings) if not c.clean_failed]
    for _ in range(5):
        for c, r in plain:
            clean, _ = noisy_pair(tree, c, r, "severity", judge_noise=0.0, applicability_noise=0.3, rng=rng)
            assert clean == 1.0


def test_leaves_that_do_not_apply_stop_absorbing_verdict_errors(setup):
    tree, cases, routings = setup
    labelled = noise_summary(tree, cases, routings, "severity", judge_noise=0.1, applicability_noise=0.0,
                             repeats=10)
    premise = [c.model_copy(update={"applicable": None}) for c in cases]  # taxonomy v2: every routed leaf
    unlabelled = noise_summary(tree, premise, routings, "severity", judge_noise=0.1, applicability_noise=0.0,
                               repeats=10)
    assert labelled["clean_mean"] > unlabelled["clean_mean"] + 0.3
    assert labelled["detection_rate"] > unlabelled["detection_rate"]


def test_cli_reports_noise_in_json_and_report(tmp_path):
    res = runner.invoke(app, ["stress", "--router", "static", "--judge-noise", "0.1", "--seed", "3",
                              "--noise-repeats", "2", "--json", "--report", str(tmp_path / "rep")])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    nz = out["noise"]
    assert nz["judge_noise"] == 0.1 and nz["seed"] == 3 and nz["repeats"] == 2
    assert {"clean_mean", "clean_sd", "detection_rate", "mean_penalty", "by_perturbation"} <= set(nz)
    assert "Under judge noise 0.1" in (tmp_path / "rep" / "report.md").read_text()
    plain = runner.invoke(app, ["stress", "--router", "static", "--json"])
    assert "noise" not in json.loads(plain.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("args", [["--judge-noise", "0.9"], ["--judge-noise", "0.1", "--noise-repeats", "0"],
                                  ["--judge-noise", "0.1", "--verdicts", "judge", "--judge-url", "http://x/v1"]])
def test_cli_bad_noise_settings_exit_2(args):
    res = runner.invoke(app, ["stress", "--router", "static", *args])
    assert res.exit_code == 2


def test_per_prompt_applicability_beats_a_three_way_verdict_under_the_same_noise(setup):
    """The measurement behind the design: a third verdict read on every (reply, leaf) item turns
    each absent trigger into a fresh chance of a false failure; a per-prompt decision does not."""
    tree, cases, routings = setup
    per_prompt = noise_summary(tree, cases, routings, "severity", judge_noise=0.1, repeats=10)
    three_way = noise_summary(tree, cases, routings, "severity", judge_noise=0.1, repeats=10, design="three_way")
    assert per_prompt["design"] == "per_prompt" and three_way["design"] == "three_way"
    assert per_prompt["clean_mean"] > three_way["clean_mean"] + 0.2
    with pytest.raises(ValueError, match="design"):
        noise_summary(tree, cases, routings, "severity", judge_noise=0.1, repeats=1, design="vote")


def test_failure_confirmation_raises_the_clean_mean_on_the_same_draws(setup):
    """Confirmation reads only failures again (independent draws, the optimistic case): on one seed
    the first readings are the same draws, a good reply loses fewer false failures, and the cost
    is counted."""
    tree, cases, routings = setup
    plain = noise_summary(tree, cases, routings, "severity", judge_noise=0.1, seed=5, repeats=5)
    confirmed = noise_summary(tree, cases, routings, "severity", judge_noise=0.1, seed=5, repeats=5,
                              confirm_failures=True)
    assert confirmed["confirm_failures"] and not plain["confirm_failures"]
    assert confirmed["clean_mean"] > plain["clean_mean"]
    assert confirmed["clean_sd"] < plain["clean_sd"]
    assert "extra_items_per_reply" not in plain
    assert 0 < confirmed["extra_items_per_clean_reply"] < confirmed["extra_items_per_perturbed_reply"]
    # no noise: confirmation changes nothing (a true failure is confirmed) but costs one reading per failure
    exact = noise_summary(tree, cases, routings, "severity", judge_noise=0.0, repeats=1, confirm_failures=True)
    oracle = noise_summary(tree, cases, routings, "severity", judge_noise=0.0, repeats=1)
    assert exact["clean_mean"] == oracle["clean_mean"] and exact["mean_penalty"] == oracle["mean_penalty"]


def test_cli_reports_both_without_and_with_confirmation(tmp_path):
    res = runner.invoke(app, ["stress", "--router", "static", "--judge-noise", "0.1", "--seed", "3",
                              "--noise-repeats", "2", "--confirm-failures", "--json", "--report", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert not out["noise"]["confirm_failures"] and out["noise_confirmed"]["confirm_failures"]
    assert out["noise_confirmed"]["extra_items_per_reply"] > 0
    assert "with failure confirmation" in (tmp_path / "r" / "report.md").read_text()
    text = runner.invoke(app, ["stress", "--router", "static", "--judge-noise", "0.1", "--noise-repeats", "1",
                               "--confirm-failures"])
    assert text.exit_code == 0 and "confirmed" in text.output
    # confirmation is a recipe setting, on by default: without --judge-noise there is nothing to model
    assert runner.invoke(app, ["stress", "--router", "static", "--confirm-failures"]).exit_code == 0
    off = runner.invoke(app, ["stress", "--router", "static", "--judge-noise", "0.1", "--noise-repeats", "1",
                              "--no-confirm-failures", "--json"])
    assert off.exit_code == 0 and "noise_confirmed" not in json.loads(off.stdout.strip().splitlines()[-1])


def test_rereads_that_repeat_the_first_reading_buy_nothing(setup):
    """The issue's measurement: a re-reading that repeats the first reading's error (correlation 1)
    makes confirmation useless, at its full cost; correlation 0.5 keeps part of its value."""
    from reward.stress.errors import ErrorModel

    tree, cases, routings = setup
    plain = noise_summary(tree, cases, routings, "severity", seed=5, repeats=20,
                          errors=ErrorModel.independent(0.1, reread_correlation=1.0))
    copied = noise_summary(tree, cases, routings, "severity", seed=5, repeats=20, confirm_failures=True,
                           errors=ErrorModel.independent(0.1, reread_correlation=1.0))
    half = noise_summary(tree, cases, routings, "severity", seed=5, repeats=20, confirm_failures=True,
                         errors=ErrorModel.independent(0.1, reread_correlation=0.5))
    fresh = noise_summary(tree, cases, routings, "severity", seed=5, repeats=20, confirm_failures=True,
                          errors=ErrorModel.independent(0.1))
    assert copied["clean_mean"] == plain["clean_mean"] and copied["detection_rate"] == plain["detection_rate"]
    assert copied["extra_items_per_reply"] > 0  # paid for all the same
    assert plain["clean_mean"] < half["clean_mean"] < fresh["clean_mean"]


def test_systematic_leaves_are_misread_on_every_reading_of_every_case(setup):
    from reward.stress.errors import ErrorModel

    tree, cases, routings = setup
    model = ErrorModel.independent(0.0, systematic_fraction=0.1)
    drawn = model.systematic(tree, seed=3)
    assert len(drawn) == round(0.1 * len(tree.leaves)) and drawn == model.systematic(tree, seed=3)
    assert drawn != model.systematic(tree, seed=4)
    out = noise_summary(tree, cases, routings, "severity", seed=3, repeats=3, errors=model, confirm_failures=True)
    assert out["systematic_leaves"] == len(drawn)
    # every draw is the same (no other error): the spread of the clean score across repeats is zero per case
    again = noise_summary(tree, cases, routings, "severity", seed=3, repeats=1, errors=model, confirm_failures=True)
    assert out["clean_mean"] == pytest.approx(again["clean_mean"], abs=1e-12)
    assert out["clean_mean"] < 1.0  # some routed leaf is misread on the clean replies


def test_measured_rates_by_severity_and_polarity_are_used(setup):
    from reward.stress.errors import ErrorModel

    tree, cases, routings = setup
    only_critical = ErrorModel(false_fail={"*": 0.0, "critical": 0.5})
    only_minor = ErrorModel(false_fail={"*": 0.0, "minor": 0.5})
    a = noise_summary(tree, cases, routings, "severity", seed=1, repeats=5, errors=only_critical)
    b = noise_summary(tree, cases, routings, "severity", seed=1, repeats=5, errors=only_minor)
    assert a["clean_mean"] < b["clean_mean"] < 1.0  # a false critical failure costs more than a minor one
    assert ErrorModel(false_fail={"*": 0.1, "critical/negative": 0.3}).verdict_error(False, "critical", "negative") == 0.3
    with pytest.raises(ValueError, match="'\\*'"):
        ErrorModel(false_fail={"critical": 0.1})


def test_cli_correlated_noise_beside_the_independent_case(tmp_path):
    res = runner.invoke(app, ["stress", "--router", "static", "--judge-noise", "0.1", "--reread-correlation", "0.5",
                              "--systematic-leaves", "0.1", "--confirm-failures", "--noise-repeats", "2", "--json",
                              "--report", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["noise"]["reread_correlation"] == 0 and out["noise_correlated"]["reread_correlation"] == 0.5
    assert out["noise_correlated_confirmed"]["systematic_leaves"] > 0
    assert set(out["noise_tolerance"]) == {"independent", "correlated"}
    assert "Noise tolerance, correlated model" in (tmp_path / "r" / "report.md").read_text()
    assert runner.invoke(app, ["stress", "--router", "static", "--reread-correlation", "0.5"]).exit_code == 2
    both = runner.invoke(app, ["stress", "--router", "static", "--judge-noise", "0.1", "--judge-errors", "x.json"])
    assert both.exit_code == 2


def test_cli_draws_from_a_measured_judge(tmp_path):
    """``--judge-errors calibration.json``: verdicts drawn from a calibration record, beside the
    independent case at its error rate; a bad file is named."""
    from reward.calibration.record import CalibrationRecord, Rereads, save_calibration
    from reward.calibration.stats import Difference, Rate

    r = Rate.of
    rec = CalibrationRecord(
        judge_id="j", cases="c", cases_fingerprint="f", taxonomy_fingerprint="t", router="static", created="now",
        verdict_items=100, applicability_items=10, failed_items=0, verdict_error=r(12, 100),
        false_fail={"*": r(10, 80), "critical": r(5, 20)}, false_pass={"*": r(2, 20)},
        false_fail_all=r(10, 80), false_pass_all=r(2, 20), app_false_absent={"*": r(1, 10)},
        app_false_present={"*": r(1, 10)},
        rereads=Rereads(sampled=10, agreement_second=r(8, 10), agreement_third=r(8, 10),
                        second_error_after_error=r(5, 8), second_error_after_right=r(1, 10),
                        correlation=Difference(estimate=0.5, low=0.3, high=0.7),
                        third_correlation=Difference(estimate=0.5, low=0.3, high=0.7)),
        systematic=[{"leaf_id": "sf_dangerous_advice", "errors": 2, "n": 2}])
    path = save_calibration(rec, tmp_path / "cal.json")
    model = rec.error_model()
    assert model.false_fail == {"*": 0.125, "critical": 0.25} and model.reread_correlation == 0.5
    assert model.systematic_leaves == ("sf_dangerous_advice",) and model.false_pass == {"*": 0.1}
    res = runner.invoke(app, ["stress", "--router", "static", "--judge-errors", str(path), "--confirm-failures",
                              "--noise-repeats", "2", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["noise"]["judge_noise"] == pytest.approx(0.12, abs=1e-12)
    assert out["noise_measured_confirmed"]["reread_correlation"] == 0.5
    assert out["noise_measured"]["systematic_leaves"] == 1
    (tmp_path / "bad.json").write_text('{"judge_id": 3}')
    bad = runner.invoke(app, ["stress", "--router", "static", "--judge-errors", str(tmp_path / "bad.json")])
    assert bad.exit_code == 2 and "bad.json" in bad.output
