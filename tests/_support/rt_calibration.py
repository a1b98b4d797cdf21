"""A judge with known, injected errors for calibration tests: it reads the truth from the stress
cases' labels and errs as told (false fail, false pass, re-read correlation, systematic leaves,
applicability errors), deterministically per item (a hash, not a random stream: the same item is
read the same way in every run and in any order)."""

from __future__ import annotations

import functools

from reward.calibration.simulated import simulated_judge


def erring_judge(tree, cases, routings, *, false_fail=0.10, false_pass=0.05, correlation=0.5,
                 systematic_share=0.05, app_false_absent=0.10, app_false_present=0.10, salt="0"):
    """A judge erring as told (``reward.calibration.simulated``); returns (judge, the systematic leaf ids)."""
    return simulated_judge(tree, cases, routings, false_fail=false_fail, false_pass=false_pass,
                           correlation=correlation, systematic_share=systematic_share,
                           app_false_absent=app_false_absent, app_false_present=app_false_present, salt=salt)


@functools.lru_cache(maxsize=1)
def packaged_fingerprint() -> str:
    from reward.router.base import tree_fingerprint
    from reward.tree import load_tree

    return tree_fingerprint(load_tree())


def run_facts(judge_id, **changes):
    """The gate's view of a default run of ``judge_id`` (the packaged taxonomy, our choice prompts,
    the stage-3 recipe with the static router, this scoring code, a judge known by content and
    never probed): what :func:`record_with` is bound to. ``changes``: fields of RunFacts."""
    from reward.calibration.binding import scoring_code_version, scoring_settings, template_hash
    from reward.calibration.gate import RunFacts
    from reward.judge.templates import default_template
    from reward.settings import RewardSettings

    facts = {"judge_id": judge_id, "taxonomy_fingerprint": packaged_fingerprint(),
             "template_hash": template_hash(default_template("choice"), "choice"), "judge_mode": "choice",
             "judge_template": None, "reward_settings": scoring_settings(RewardSettings(router="static")),
             "scoring_code": scoring_code_version(),
             "who": {"judge_id": judge_id, "probe": None, "endpoints": [], "unknown": None}}
    return RunFacts(**{**facts, **changes})


def record_with(judge_id, *, detection, critical_false_pass, independent=None, taxonomy_fingerprint=None,
                cases=60, distinct=None, judge=None, seed_rates=None, facts=None, coverage=None):
    """A calibration record of ``judge_id`` with the given predicted detection (its interval over
    ``distinct`` cases, default ``cases``, and ``seed_rates``, default the one rate) and critical
    false-pass counts (the gate's figures), bound to ``facts`` (default :func:`run_facts`), for gate
    tests that need no calibration run; made on the packaged taxonomy unless ``taxonomy_fingerprint``
    says otherwise. ``coverage``: leaf id -> LeafCoverage fields."""
    from reward.calibration.binding import settings_hash
    from reward.calibration.record import CalibrationRecord, LeafCoverage, Prediction, ProbeAnswers
    from reward.calibration.run import detection_interval
    from reward.calibration.stats import Rate

    r = Rate.of
    k, n = critical_false_pass
    facts = facts or run_facts(judge_id)
    distinct = cases if distinct is None else distinct
    rates = seed_rates or [detection]
    low, high = detection_interval(rates, distinct)
    who = facts.who or {}
    return CalibrationRecord(
        judge_id=judge_id, cases="test", cases_fingerprint="f",
        judge=judge or {"mode": facts.judge_mode or "choice",
                        **({"template": facts.judge_template} if facts.judge_template else {})},
        judge_probe=ProbeAnswers(**who["probe"]) if who.get("probe") else None,
        judge_endpoints=list(who.get("endpoints") or []), template_hash=facts.template_hash,
        reward_settings=facts.reward_settings, reward_settings_hash=settings_hash(facts.reward_settings),
        scoring_code=facts.scoring_code, distinct_cases=distinct,
        taxonomy_fingerprint=taxonomy_fingerprint or facts.taxonomy_fingerprint[:16], router="static",
        created="now", verdict_items=100, applicability_items=0, failed_items=0, verdict_error=r(5, 100),
        false_fail={"*": r(5, 70)}, false_pass={"*": r(k, n), "critical_all": r(k, n)}, false_fail_all=r(5, 70),
        false_pass_all=r(k, n), app_false_absent={"*": r(0, 0)}, app_false_present={"*": r(0, 0)},
        coverage={lid: LeafCoverage(**c) for lid, c in (coverage or {}).items()},
        predicted=Prediction(detection_rate=sum(rates) / len(rates), detection_low=low, detection_high=high,
                             seed_rates=rates, clean_mean=0.9, independent_detection_rate=independent or detection,
                             cases=cases, seeds=list(range(len(rates))), repeats=1, confirm_failures=True))
