"""The judge gate: a rubric stage refuses to train on a judge the reward cannot survive.

Before a launch, the stage looks its judge's calibration up by identity
(:func:`reward.calibration.record.find_calibration`, or the file ``calibration`` names) and
refuses when

- no calibration is on record (it says how to make one: minutes on a GPU), or
- the detection rate the calibration predicts for the reward is below ``min_detection``, or
- the judge reads more failing critical leaves as passed than ``max_critical_false_pass``, or
- the calibration does not describe this run: made on another taxonomy (its fingerprint), with
  another judge mode or template, another router, failure confirmation set otherwise than the
  run's, or on fewer labelled cases than ``min_cases`` (a ``--limit-cases`` trial run predicts
  from too few cases to trust).

``enforce: false`` lets the launch go on and says what it skipped. The
settings live in each rubric stage's config under ``judge_gate:`` (TRL YAML, verl
``reward_kwargs``), with the same defaults everywhere.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from reward.calibration.record import CalibrationRecord, find_calibration, load_calibration, record_path

OVERRIDE = "judge_gate.enforce: false in the stage config"


class JudgeGateSettings(BaseModel):
    """``judge_gate:`` of a rubric stage's config."""

    model_config = ConfigDict(extra="forbid")

    enforce: bool = Field(True, description="refuse a launch whose judge fails the gate (false: warn and go on)")
    min_detection: float = Field(0.90, ge=0.0, le=1.0, description=(
        "least detection rate the calibration must predict for the reward on its labelled cases"))
    max_critical_false_pass: float = Field(0.10, ge=0.0, le=1.0, description=(
        "largest share of failing critical leaves the judge may read as passed"))
    min_cases: int = Field(48, ge=1, description=(
        "fewest labelled cases the calibration's prediction may rest on (the bundled set has 60)"))
    calibration: str | None = Field(None, description=(
        "a calibration JSON to use instead of the record kept for the judge's identity"))


class GateVerdict(BaseModel):
    ok: bool
    problems: list[str] = Field(default_factory=list)
    record: CalibrationRecord | None = None
    source: str = ""

    def message(self, settings: JudgeGateSettings, override: str = OVERRIDE) -> str:
        if self.ok:
            rec = self.record
            return (f"judge gate: passed ({self.source}: predicted detection {rec.predicted.detection_rate:.3f}, "
                    f"critical false pass {_pct(rec.critical_false_pass.rate)})")
        head = "judge gate: " + "; ".join(self.problems)
        return f"{head}. To train on this judge anyway: {override}."


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def check_judge(judge_id: str, settings: JudgeGateSettings, *, cache_dir: str | Path | None = None,
                how_to_calibrate: str = "rubricstree judge calibrate <the same judge options>",
                record: CalibrationRecord | None = None, taxonomy_fingerprint: str | None = None,
                run_judge: dict | None = None, run_reward: dict | None = None) -> GateVerdict:
    """The gate's verdict on the judge ``judge_id`` (see the module docstring); ``record``: judge
    this calibration, just made and not stored, instead of looking one up. ``taxonomy_fingerprint``
    and ``run_judge`` (the run's judge settings: its ``mode`` and ``template``): what the calibration
    must share (None: not checked); ``run_reward`` (the run's reward settings: ``router``,
    ``confirm_failures``): what the prediction assumed (the calibration's router, and failure
    confirmation as the prediction ran it)."""
    if record is not None:
        source = "this calibration (not stored)"
    elif settings.calibration:
        record, source = load_calibration(settings.calibration), settings.calibration
        if record.judge_id != judge_id:
            return GateVerdict(ok=False, record=record, source=source, problems=[
                f"the calibration {source} is of another judge ({record.judge_id}), not of {judge_id}"])
    else:
        record, source = find_calibration(judge_id, cache_dir), str(record_path(judge_id, cache_dir))
    if record is None:
        return GateVerdict(ok=False, source=source, problems=[
            f"no calibration of the judge {judge_id} on record (looked for {source}); make one with "
            f"`{how_to_calibrate}` (minutes on a GPU: it grades the labelled stress cases once)"])
    problems = []
    redo = f"calibrate again with `{how_to_calibrate}`"
    if taxonomy_fingerprint and record.taxonomy_fingerprint != taxonomy_fingerprint[:len(record.taxonomy_fingerprint)]:
        problems.append(f"the calibration {source} was made on another taxonomy (fingerprint "
                        f"{record.taxonomy_fingerprint}, this run's {taxonomy_fingerprint[:16]}): {redo}")
    for key, default in (("mode", "choice"), ("template", None)):
        if run_judge is None:
            break
        had, want = record.judge.get(key, default), run_judge.get(key) or default
        if had != want:
            problems.append(f"the calibration {source} graded with judge {key} '{had or 'ours'}', this run uses "
                            f"'{want or 'ours'}': {redo}")
    pred = record.predicted
    if run_reward is not None:
        if run_reward.get("router") and record.router != run_reward["router"]:
            problems.append(f"the calibration {source} routed with the {record.router} router, this run with "
                            f"{run_reward['router']}: {redo} --router {run_reward['router']}")
        confirm = run_reward.get("confirm_failures")
        if pred is not None and confirm is not None and bool(confirm) != pred.confirm_failures:
            problems.append(f"the calibration {source} predicted detection with failure confirmation "
                            f"{'on' if pred.confirm_failures else 'off'}, this run has it "
                            f"{'on' if confirm else 'off'}: {redo}")
    if pred is not None and pred.cases < settings.min_cases:
        problems.append(f"the calibration {source} predicts from {pred.cases} labelled cases, fewer than "
                        f"min_cases {settings.min_cases} (a --limit-cases trial): {redo}")
    if pred is None:
        problems.append(f"the calibration {source} has no predicted detection rate (made with --no-predict)")
    elif pred.detection_rate < settings.min_detection:
        problems.append(f"predicted detection {pred.detection_rate:.3f} < min_detection {settings.min_detection:g} "
                        f"on {pred.cases} labelled cases (independent readings at the same error rate: "
                        f"{pred.independent_detection_rate:.3f}; calibration {source})")
    cfp = record.critical_false_pass
    if cfp.rate is None:
        problems.append(f"the calibration {source} has no failing critical item: the critical false-pass rate is unknown")
    elif cfp.rate > settings.max_critical_false_pass:
        problems.append(f"critical false-pass rate {cfp.rate:.3f} ({cfp.k}/{cfp.n}) > max_critical_false_pass "
                        f"{settings.max_critical_false_pass:g}")
    return GateVerdict(ok=not problems, problems=problems, record=record, source=source)
