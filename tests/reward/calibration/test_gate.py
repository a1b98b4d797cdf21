"""The judge gate refuses a calibration that does not describe the run: another taxonomy, another
judge mode or template, too few labelled cases; and passes one that does and clears both
thresholds. Records are built directly (rt_calibration.record_with): the gate's logic, no judge."""

from __future__ import annotations

from rt_calibration import record_with

from reward.calibration.gate import JudgeGateSettings, check_judge
from reward.router.base import tree_fingerprint
from reward.tree import load_tree

JUDGE = "http:judge@weights"
GOOD = {"detection": 0.95, "critical_false_pass": (1, 40)}


def _check(rec, **run):
    fp = tree_fingerprint(load_tree())
    return check_judge(JUDGE, JudgeGateSettings(), record=rec, taxonomy_fingerprint=fp,
                       run_judge={"mode": "choice", "template": None, **run})


def test_a_fit_calibration_of_this_run_passes():
    v = _check(record_with(JUDGE, **GOOD))
    assert v.ok, v.problems


def test_another_taxonomy_is_refused_with_both_fingerprints():
    v = _check(record_with(JUDGE, **GOOD, taxonomy_fingerprint="0123456789abcdef"))
    assert not v.ok and len(v.problems) == 1
    assert "another taxonomy" in v.problems[0] and "0123456789abcdef" in v.problems[0]


def test_another_mode_or_template_is_refused():
    v = _check(record_with(JUDGE, **GOOD, judge={"mode": "explain"}))
    assert not v.ok and "judge mode 'explain'" in v.problems[0] and "'choice'" in v.problems[0]
    v = _check(record_with(JUDGE, **GOOD, judge={"mode": "choice", "template": "mine.txt"}))
    assert not v.ok and "judge template 'mine.txt'" in v.problems[0] and "'ours'" in v.problems[0]
    assert _check(record_with(JUDGE, **GOOD, judge={"mode": "choice", "template": "mine.txt"}), template="mine.txt").ok


def test_a_trial_on_few_cases_is_refused_and_the_floor_is_a_setting():
    rec = record_with(JUDGE, **GOOD, cases=12)
    v = _check(rec)
    assert not v.ok and "12 labelled cases" in v.problems[0] and "min_cases 48" in v.problems[0]
    fp = tree_fingerprint(load_tree())
    assert check_judge(JUDGE, JudgeGateSettings(min_cases=10), record=rec, taxonomy_fingerprint=fp).ok


def test_the_thresholds_still_refuse_an_unfit_judge():
    v = _check(record_with(JUDGE, detection=0.62, critical_false_pass=(9, 30)))
    assert not v.ok and len(v.problems) == 2


def test_another_router_or_confirmation_setting_is_refused():
    fp = tree_fingerprint(load_tree())
    rec = record_with(JUDGE, **GOOD)  # routed with the static router, predicted with confirmation on
    ok = check_judge(JUDGE, JudgeGateSettings(), record=rec, taxonomy_fingerprint=fp,
                     run_reward={"router": "static", "confirm_failures": True})
    assert ok.ok, ok.problems
    v = check_judge(JUDGE, JudgeGateSettings(), record=rec, taxonomy_fingerprint=fp,
                    run_reward={"router": "embedding", "confirm_failures": False})
    assert not v.ok and len(v.problems) == 2
    assert "static router, this run with embedding" in v.problems[0] and "--router embedding" in v.problems[0]
    assert "confirmation on, this run has it off" in v.problems[1]
    # rubric rows are not routed: no router to compare
    assert check_judge(JUDGE, JudgeGateSettings(), record=rec, taxonomy_fingerprint=fp,
                       run_reward={"router": None, "confirm_failures": True}).ok


def test_the_remedy_names_every_non_default_judge_flag_quoted():
    from reward.settings import JudgeSettings
    from training.judge_gate import judge_flags

    flags = judge_flags(JudgeSettings(url="http://h:8000", served_model="my judge", mode="explain",
                                      api_key_env="JUDGE_KEY"))
    assert flags == "--judge-url http://h:8000 --served-model 'my judge' --judge-api-key-env JUDGE_KEY --judge-mode explain"
