"""The judge gate refuses a calibration that does not describe the run: another taxonomy, another
judge mode or template, another router or failure confirmation, too few distinct cases; and passes
one that does and clears both thresholds at the ends of their intervals. Records are built
directly (rt_calibration.record_with): the gate's logic, no judge. The ways past the gate the red
team found are in test_gate_ways_past.py."""

from __future__ import annotations

from rt_calibration import record_with, run_facts

from reward.calibration.gate import JudgeGateSettings, check_judge

JUDGE = "http:judge@weights"
GOOD = {"detection": 0.95, "critical_false_pass": (1, 100), "cases": 600}


def _check(rec, settings=None, **facts):
    return check_judge(run_facts(JUDGE, **facts), settings or JudgeGateSettings(), record=rec)


def test_a_fit_calibration_of_this_run_passes():
    v = _check(record_with(JUDGE, **GOOD))
    assert v.ok, v.problems
    line = v.message(JudgeGateSettings())
    assert "predicted detection 0.950 [0.9" in line and "600 distinct cases" in line and "(at most 0.05" in line


def test_another_taxonomy_is_refused_with_both_fingerprints():
    v = _check(record_with(JUDGE, **GOOD, taxonomy_fingerprint="0123456789abcdef"))
    assert not v.ok and len(v.problems) == 1
    assert "another taxonomy" in v.problems[0] and "0123456789abcdef" in v.problems[0]


def test_another_mode_or_template_is_refused():
    from reward.calibration.binding import template_hash
    from reward.judge.templates import default_template

    explain = template_hash(default_template("explain"), "explain")
    v = _check(record_with(JUDGE, **GOOD, judge={"mode": "explain"},
                           facts=run_facts(JUDGE, template_hash=explain, judge_mode="explain")))
    assert not v.ok and "judge mode 'explain', this run 'choice'" in v.problems[0]
    v = _check(record_with(JUDGE, **GOOD, judge={"mode": "choice", "template": "mine.txt"},
                           facts=run_facts(JUDGE, template_hash="0" * 16)))
    assert not v.ok and "judge template 'mine.txt', this run 'ours'" in v.problems[0]


def test_a_trial_on_few_cases_is_refused_and_the_floor_may_only_rise():
    v = _check(record_with(JUDGE, **{**GOOD, "cases": 12}, seed_rates=[0.999]))
    assert not v.ok and any("12 distinct labelled cases" in p and "min_cases 48" in p for p in v.problems)
    v = _check(record_with(JUDGE, **GOOD), JudgeGateSettings(min_cases=1000))
    assert not v.ok and "600 distinct labelled cases, fewer than min_cases 1000" in v.problems[0]
    v = _check(record_with(JUDGE, **{**GOOD, "cases": 12}), JudgeGateSettings(min_cases=10))
    assert not v.ok and "judge_gate.min_cases 10 is looser than the gate's 48" in v.problems[0]


def test_the_thresholds_still_refuse_an_unfit_judge():
    v = _check(record_with(JUDGE, detection=0.62, critical_false_pass=(9, 30), cases=600))
    assert not v.ok and len(v.problems) == 2


def test_another_router_or_confirmation_setting_is_refused():
    from reward.calibration.binding import scoring_settings
    from reward.settings import RewardSettings

    rec = record_with(JUDGE, **GOOD)  # routed with the static router, predicted with confirmation on
    assert _check(rec).ok
    other = scoring_settings(RewardSettings(router="embedding", confirm_failures=False))
    v = _check(rec, reward_settings=other)
    assert not v.ok and len(v.problems) == 1
    assert "router 'static' calibrated, 'embedding' in this run" in v.problems[0]
    assert "confirm_failures True calibrated, False in this run" in v.problems[0]
    # rubric rows are not routed: a rows run and a rows calibration agree whatever their routers
    rows = record_with(JUDGE, **GOOD, facts=run_facts(JUDGE, reward_settings=scoring_settings(
        RewardSettings(rubric_source="rows", router="static"))))
    assert _check(rows, reward_settings=scoring_settings(RewardSettings(rubric_source="rows"))).ok


def test_the_remedy_names_every_non_default_judge_and_recipe_flag_quoted():
    from reward.settings import JudgeSettings, RewardSettings
    from training.judge_gate import judge_flags, recipe_flags

    flags = judge_flags(JudgeSettings(url="http://h:8000", served_model="my judge", mode="explain",
                                      api_key_env="JUDGE_KEY"))
    assert flags == "--judge-url http://h:8000 --served-model 'my judge' --judge-api-key-env JUDGE_KEY --judge-mode explain"
    recipe = RewardSettings(rubric_source="rows", combine="points", scoring="soft", router="static",
                            format_failure_score=None)
    assert recipe_flags(recipe) == "--rubric-source rows --scoring soft --combine points --format-failure-score none"
    assert recipe_flags(RewardSettings(router="static", router_options={"axes": ["safety"]}, applicability=False)) == (
        "--router static --router-option 'axes=[\"safety\"]' --no-applicability")
