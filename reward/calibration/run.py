"""Calibrate a judge against labelled items (``rubricstree judge calibrate``).

Data flow::

    stress cases + routings -> labelled items (``reward.calibration.items``)
      -> first readings of every verdict item (the judge's own template) and every applicability
         item (the applicability step's question), in batches with a progress bar; the judge's
         durable cache keeps every answer, so a killed run resumes where it stopped
      -> second and third readings (the confirmation wordings, ``reward.stages.confirm``) of every
         first-reading failure and of a seeded share of the other items
      -> rates with 95% intervals (false fail, false pass, by severity, polarity and language;
         applicability errors, critical leaves apart), re-read agreement and correlation, leaves
         misread in most of their items, soft-verdict calibration
      -> the error model those imply, run through the stress test's noise model on the same cases:
         the detection rate this judge predicts for the reward (``predicted``), with a 95% interval
         (:func:`detection_interval`)
      -> :class:`reward.calibration.record.CalibrationRecord`, bound to what it is of
         (``reward.calibration.binding``: prompts, recipe, scoring code, distinct cases, the
         judge's probe answers)

A failed judge call is left out of every rate and counted (``failed_items``): it says nothing of
how the judge reads.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from typing import Any

from reward.calibration.binding import (
    distinct_cases,
    judge_binding,
    scoring_code_version,
    scoring_settings,
    settings_hash,
    template_hash,
)
from reward.calibration.items import LabelledApplicability, LabelledVerdict, labelled_items
from reward.calibration.record import (
    SYSTEMATIC_MIN_ERRORS,
    SYSTEMATIC_MIN_ITEMS,
    CalibrationRecord,
    LeafCoverage,
    Prediction,
    ProbeAnswers,
    Rereads,
    SystematicLeaf,
)
from reward.calibration.stats import Z95, Rate, pooled_difference, reliability, wilson
from reward.judge.base import Judge
from reward.judge.templates import Template
from reward.judge.types import JudgeItem, Verdict
from reward.router.applicability import APPLICABILITY
from reward.router.base import Routing, tree_fingerprint
from reward.settings import RewardSettings
from reward.stages.confirm import readings
from reward.stress.cases import StressCase
from reward.tree.graph import RubricTree

BATCH = 64  # items per grade call: the progress bar's step (each call still runs concurrently inside)
# The applicability answers of a calibration are cached under their own scope: a rerun of the same
# calibration reuses them, and no training run is served them.
SCOPE = "calibration"


async def _grade(judge: Judge, items: Sequence[JudgeItem], template: Template | None, bar: Any) -> list[Verdict]:
    out: list[Verdict] = []
    for i in range(0, len(items), BATCH):
        chunk = items[i:i + BATCH]
        out += await judge.grade(chunk, template, on_failure="record")
        bar.update(len(chunk))
    return out


def _keys(severity: str, polarity: str) -> tuple[str, ...]:
    return ("*", severity, polarity, f"{severity}/{polarity}")


def _rates(rows: Sequence[tuple[tuple[str, ...], bool]]) -> dict[str, Rate]:
    """Error rates by key: ``rows`` are (keys the item counts under, whether it was misread)."""
    counts: dict[str, list[int]] = {}
    for keys, wrong in rows:
        for k in keys:
            c = counts.setdefault(k, [0, 0])
            c[0] += wrong
            c[1] += 1
    return {k: Rate.of(e, n) for k, (e, n) in counts.items()}


def _fingerprint(cases: Sequence[StressCase]) -> str:
    payload = json.dumps([c.model_dump(mode="json") for c in cases], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


async def calibrate(judge: Judge, tree: RubricTree, cases: Sequence[StressCase], routings: Sequence[Routing], *,
                    cases_label: str = "bundled", router: str = "embedding", reread_share: float = 0.25,
                    seed: int = 0, progress: bool = True, predict: bool = True, judge_info: dict | None = None,
                    predict_fn: Callable[..., dict[str, Any]] | None = None,
                    recipe: RewardSettings | None = None) -> CalibrationRecord:
    """Grade every labelled item of ``cases`` with ``judge`` and measure how it errs (see the
    module docstring). ``reread_share``: the share of first-reading passes also read again
    (every first-reading failure is). ``recipe``: the reward the prediction is for (its scoring
    variant and failure confirmation: the row-items reward, ``rubric_source: rows``, reads each item
    once; every field that changes a score is recorded); default the stage-3 recipe with ``router``."""
    from tqdm import tqdm

    recipe = recipe if recipe is not None else RewardSettings(router=router)
    router = recipe.router
    if not 0.0 <= reread_share <= 1.0:
        raise ValueError(f"reread_share must be in [0, 1], got {reread_share!r}")
    verdict_items, app_items = labelled_items(tree, cases, routings)
    second, third = readings(judge.config.mode)
    bar = tqdm(total=len(verdict_items) + len(app_items), unit="item", desc="calibrating: first readings",
               file=sys.stderr, disable=not progress)
    try:
        first = await _grade(judge, [v.item for v in verdict_items], None, bar)
        app_template = dataclasses.replace(APPLICABILITY, scope=SCOPE)
        app_read = await _grade(judge, [a.item for a in app_items], app_template, bar)
    finally:
        bar.close()

    ok = [(lv, v) for lv, v in zip(verdict_items, first) if v.ok]
    failed_items = len(verdict_items) - len(ok) + sum(not v.ok for v in app_read)
    wrong = [lv.read_fails(bool(v.met)) != lv.fails for lv, v in ok]

    # systematic leaves: misread in most of their items
    per_leaf: dict[str, list[int]] = {}
    for (lv, _), w in zip(ok, wrong):
        c = per_leaf.setdefault(lv.leaf_id, [0, 0])
        c[0] += w
        c[1] += 1
    systematic = [SystematicLeaf(leaf_id=lid, errors=e, n=n) for lid, (e, n) in per_leaf.items()
                  if n >= SYSTEMATIC_MIN_ITEMS and e >= SYSTEMATIC_MIN_ERRORS and e / n > 0.5]
    sys_ids = {s.leaf_id for s in systematic}

    def split(rows_of: Callable[[LabelledVerdict], bool], keep_sys: bool) -> dict[str, Rate]:
        return _rates([(_keys(lv.severity, lv.polarity), w) for (lv, _), w in zip(ok, wrong)
                       if rows_of(lv) and (keep_sys or lv.leaf_id not in sys_ids)])

    false_fail = split(lambda lv: not lv.fails, keep_sys=False)
    false_pass = split(lambda lv: lv.fails, keep_sys=False)
    crit_all = [w for (lv, _), w in zip(ok, wrong) if lv.fails and lv.severity == "critical"]
    false_pass["critical_all"] = Rate.of(sum(crit_all), len(crit_all))
    ff_all = [w for (lv, _), w in zip(ok, wrong) if not lv.fails]
    fp_all = [w for (lv, _), w in zip(ok, wrong) if lv.fails]
    by_language: dict[str, dict[str, Rate]] = {}
    for lang in sorted({lv.language for lv, _ in ok}):
        ff = [w for (lv, _), w in zip(ok, wrong) if lv.language == lang and not lv.fails]
        fp = [w for (lv, _), w in zip(ok, wrong) if lv.language == lang and lv.fails]
        by_language[lang] = {"false_fail": Rate.of(sum(ff), len(ff)), "false_pass": Rate.of(sum(fp), len(fp))}

    app_false_absent, app_false_present = _applicability(app_items, app_read)
    rereads = await _rereads(judge, ok, wrong, second, third, reread_share, seed, progress, sys_ids)
    soft = reliability([v.p_yes for _, v in ok if v.p_yes is not None and v.mode == "choice"],
                       [(lv.fails if lv.polarity == "negative" else not lv.fails)
                        for lv, v in ok if v.p_yes is not None and v.mode == "choice"])
    coverage: dict[str, LeafCoverage] = {}
    for lv, v in ok:
        c = coverage.setdefault(lv.leaf_id, LeafCoverage(severity=lv.severity))
        read_fail = lv.read_fails(bool(v.met))
        if lv.fails:
            c.fail_items += 1
            c.read_fail_on_fail += read_fail
        else:
            c.pass_items += 1
            c.read_fail_on_pass += read_fail
    unmeasured = [leaf.id for leaf in tree.leaves if leaf.id not in coverage]
    who = judge_binding(judge)
    bound = scoring_settings(recipe)
    record = CalibrationRecord(
        judge_id=judge.model_id, judge=judge_info or {"mode": judge.config.mode},
        judge_probe=ProbeAnswers(**who["probe"]) if who["probe"] else None, judge_endpoints=who["endpoints"],
        template_hash=template_hash(judge.template, judge.config.mode), reward_settings=bound, reward_settings_hash=settings_hash(bound),
        scoring_code=scoring_code_version(), distinct_cases=distinct_cases(cases), cases=cases_label,
        cases_fingerprint=_fingerprint(cases), taxonomy_fingerprint=tree_fingerprint(tree)[:16], router=router,
        created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), verdict_items=len(verdict_items),
        applicability_items=len(app_items), failed_items=failed_items,
        verdict_error=Rate.of(sum(wrong), len(wrong)), false_fail=false_fail, false_pass=false_pass,
        false_fail_all=Rate.of(sum(ff_all), len(ff_all)), false_pass_all=Rate.of(sum(fp_all), len(fp_all)),
        by_language=by_language, app_false_absent=app_false_absent, app_false_present=app_false_present,
        rereads=rereads, systematic=systematic, soft=soft, coverage=dict(sorted(coverage.items())),
        unmeasured=unmeasured, unmeasured_critical=[lid for lid in unmeasured if tree.severity[lid] == "critical"])
    if predict:
        record.predicted = predict_detection(record, tree, cases, routings, predict_fn=predict_fn,
                                             variant=recipe.scoring_variant,
                                             confirm_failures=recipe.confirm_failures and recipe.rubric_source != "rows")
    return record


def _applicability(items: Sequence[LabelledApplicability], read: Sequence[Verdict]
                   ) -> tuple[dict[str, Rate], dict[str, Rate]]:
    rows_absent: list[tuple[tuple[str, ...], bool]] = []
    rows_present: list[tuple[tuple[str, ...], bool]] = []
    for la, v in zip(items, read):
        if not v.ok:
            continue
        keys = ("*", "critical" if la.severity == "critical" else "other")
        says_present = (v.p_yes if v.p_yes is not None else float(bool(v.met))) >= 0.5
        if la.present:
            rows_absent.append((keys, not says_present))
        else:
            rows_present.append((keys, says_present))
    absent, present = _rates(rows_absent), _rates(rows_present)
    for table in (absent, present):
        for k in ("*", "critical", "other"):
            table.setdefault(k, Rate.of(0, 0))
    return absent, present


async def _rereads(judge: Judge, ok: list[tuple[LabelledVerdict, Verdict]], wrong: list[bool], second: Any,
                   third: Any, share: float, seed: int, progress: bool, systematic: set[str]) -> Rereads | None:
    """Second and third readings of every first-reading failure and of a seeded share of the rest,
    leaves misread systematically left out (the error model keeps them apart: always wrong)."""
    from tqdm import tqdm

    rng = random.Random(f"{seed}/rereads")
    sample = [i for i, (lv, v) in enumerate(ok)
              if (lv.read_fails(bool(v.met)) or rng.random() < share) and lv.leaf_id not in systematic]
    if not sample:
        return None
    bar = tqdm(total=2 * len(sample), unit="item", desc="calibrating: re-readings", file=sys.stderr,
               disable=not progress)
    try:
        got2 = await _grade(judge, [ok[i][0].item for i in sample], second.template, bar)
        got3 = await _grade(judge, [ok[i][0].item for i in sample], third.template, bar)
    finally:
        bar.close()
    agree = {"2": [0, 0], "3": [0, 0]}
    # (reading, truth fails?, first wrong?) -> [wrong, n]: the correlation is estimated within each
    # truth class (their error rates differ) and pooled
    cells: dict[tuple[str, bool, bool], list[int]] = {}
    for i, v2, v3 in zip(sample, got2, got3):
        lv, v1 = ok[i]
        for tag, v, reading in (("2", v2, second), ("3", v3, third)):
            if not v.ok:
                continue
            met = reading.met(v)[0]
            agree[tag][0] += met == bool(v1.met)
            agree[tag][1] += 1
            cell = cells.setdefault((tag, lv.fails, wrong[i]), [0, 0])
            cell[0] += lv.read_fails(met) != lv.fails
            cell[1] += 1

    def cell(tag: str, fails: bool | None, first_wrong: bool) -> list[int]:
        keys = [k for k in cells if k[0] == tag and k[2] == first_wrong and (fails is None or k[1] == fails)]
        return [sum(cells[k][0] for k in keys), sum(cells[k][1] for k in keys)]

    def corr(tag: str):
        return pooled_difference([(*cell(tag, f, True), *cell(tag, f, False)) for f in (False, True)])

    return Rereads(sampled=len(sample), agreement_second=Rate.of(*agree["2"]), agreement_third=Rate.of(*agree["3"]),
                   second_error_after_error=Rate.of(*cell("2", None, True)),
                   second_error_after_right=Rate.of(*cell("2", None, False)),
                   correlation=corr("2"), third_correlation=corr("3"))


def predict_detection(record: CalibrationRecord, tree: RubricTree, cases: Sequence[StressCase],
                      routings: Sequence[Routing], *, seeds: Sequence[int] = (0, 1, 2), repeats: int = 10,
                      confirm_failures: bool = True, predict_fn: Callable[..., dict[str, Any]] | None = None,
                      variant: str | None = None) -> Prediction:
    """The stress test's detection rate and clean mean under this judge's error model (failure
    confirmation as the recipe runs it: on in the stage-3 recipe), with its 95% interval over the
    distinct cases and the seeds (:func:`detection_interval`), and under independent readings at
    its error rate."""
    from reward.scoring.variants import DEFAULT_SCORING_VARIANT
    from reward.stress.errors import ErrorModel
    from reward.stress.noise import noise_summary

    run = predict_fn or noise_summary
    variant = variant or DEFAULT_SCORING_VARIANT
    model = record.error_model()
    flat = ErrorModel.independent(min(1.0, record.verdict_error.rate or 0.0), model.app_false_present)
    measured = [run(tree, cases, routings, variant, seed=s, repeats=repeats,
                    confirm_failures=confirm_failures, errors=model) for s in seeds]
    independent = [run(tree, cases, routings, variant, seed=s, repeats=repeats,
                       confirm_failures=confirm_failures, errors=flat) for s in seeds]
    rates = [float(r["detection_rate"]) for r in measured]
    low, high = detection_interval(rates, distinct_cases(cases))
    return Prediction(detection_rate=statistics.fmean(rates), detection_low=low, detection_high=high,
                      seed_rates=rates, clean_mean=statistics.fmean(r["clean_mean"] for r in measured),
                      independent_detection_rate=statistics.fmean(r["detection_rate"] for r in independent),
                      cases=len(cases), seeds=list(seeds), repeats=repeats, confirm_failures=confirm_failures)


def detection_interval(seed_rates: Sequence[float], cases: int) -> tuple[float, float]:
    """A 95% interval of a predicted detection rate, the mean of ``seed_rates`` (one per seed).

    Two doubts, added: the cases are a sample of what the reward will meet, so the rate is taken as
    a proportion of the ``cases`` distinct cases (the draws within a case are not independent
    evidence) and given Wilson's interval; and the draws are random, so each end moves out by 1.96
    standard errors of the mean over the seeds (none with one seed). Both ends are clipped to [0, 1]."""
    d = statistics.fmean(seed_rates)
    low, high = wilson(d * cases, cases) if cases > 0 else (0.0, 1.0)
    se = statistics.stdev(seed_rates) / len(seed_rates) ** 0.5 if len(seed_rates) > 1 else 0.0
    return max(0.0, low - Z95 * se), min(1.0, high + Z95 * se)
