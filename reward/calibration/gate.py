"""The judge gate: a rubric stage refuses to train on a judge the reward cannot survive.

Before a launch, the stage looks its judge's calibration up by identity
(:func:`reward.calibration.record.find_calibration`, or the file ``calibration`` names) and
refuses when

- who grades cannot be known (a server that does not say what it serves, weights that cannot be
  fingerprinted here, and no revision named): no calibration can be tied to such a judge;
- no calibration is on record (it says how to make one: minutes on a GPU), or the record does not
  verify (its ``record_hash``: edited after it was saved), or it is of an older format;
- the calibration is not of this run (:mod:`reward.calibration.binding`): another taxonomy (its
  fingerprint), other prompts (the content of the judge's template, the confirmation and
  applicability questions), another recipe (every field that changes a score), other scoring
  code, another judge behind the same identity (its endpoints' answers to the fixed probe items
  differ from the calibrated ones), or, for a judge known by name alone, an endpoint it never
  graded at;
- it rests on fewer than ``min_cases`` distinct labelled cases (copies count once);
- the lower end of the predicted detection rate's 95% interval is below ``min_detection``, or the
  upper end of the Wilson interval of the critical false-pass rate is above
  ``max_critical_false_pass`` (so a judge measured at the threshold does not pass);
- the judge never failed, or never passed, a critical leaf it had items of both kinds to read
  (one-sided blindness, named leaf by leaf);
- the thresholds were loosened below the shipped ones: raising them is allowed, lowering them is
  the override by another name.

``enforce: false`` is the one way past; the launchers write it into the run's records and the
model card (``training.judge_gate``). The settings live in each rubric stage's config under
``judge_gate:`` (TRL YAML, verl ``reward_kwargs``), with the same defaults everywhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from reward.calibration.record import CalibrationRecord, find_calibration, load_calibration, record_path

OVERRIDE = "judge_gate.enforce: false in the stage config"


class JudgeGateSettings(BaseModel):
    """``judge_gate:`` of a rubric stage's config. The thresholds may be raised above these
    defaults, never lowered (a lowered one refuses the launch)."""

    model_config = ConfigDict(extra="forbid")

    enforce: bool = Field(True, description=(
        "refuse a launch whose judge fails the gate (false: warn, go on, and record the override in the run "
        "and the model card)"))
    min_detection: float = Field(0.90, ge=0.0, le=1.0, description=(
        "least lower end of the 95% interval of the detection rate the calibration predicts for the reward"))
    max_critical_false_pass: float = Field(0.10, ge=0.0, le=1.0, description=(
        "largest upper end of the 95% interval of the share of failing critical items read as passed"))
    min_cases: int = Field(48, ge=1, description=(
        "fewest distinct labelled cases the calibration may rest on (copies of a case count once)"))
    calibration: str | None = Field(None, description=(
        "a calibration JSON to use instead of the record kept for the judge's identity"))


class RunFacts(BaseModel):
    """What the run will do, which its judge's calibration must describe; a field left None is not
    compared (the calibrate command previews a calibration on its own)."""

    judge_id: str
    taxonomy_fingerprint: str | None = None
    template_hash: str | None = None
    judge_mode: str | None = None
    judge_template: str | None = None
    reward_settings: dict[str, Any] | None = None
    scoring_code: str | None = None
    who: dict[str, Any] | None = Field(None, description="reward.calibration.binding.judge_binding of the run's judge")


class GateVerdict(BaseModel):
    ok: bool
    problems: list[str] = Field(default_factory=list)
    record: CalibrationRecord | None = None
    source: str = ""

    def message(self, settings: JudgeGateSettings, override: str = OVERRIDE) -> str:
        if self.ok:
            rec = self.record
            p, cfp = rec.predicted, rec.critical_false_pass
            return (f"judge gate: passed ({self.source}: predicted detection {p.detection_rate:.3f} "
                    f"[{p.detection_low:.3f}, {p.detection_high:.3f}] on {rec.distinct_cases} distinct cases, "
                    f"critical false pass {_num(cfp.rate)} (at most {_num(cfp.high)}, {cfp.k}/{cfp.n}))")
        head = "judge gate: " + "; ".join(self.problems)
        return f"{head}. To train on this judge anyway: {override} (recorded in the run and its model card)."


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def loosened(settings: JudgeGateSettings) -> list[str]:
    """The thresholds of ``settings`` looser than the shipped ones, each said with its field."""
    floor = JudgeGateSettings()
    out = []
    for key, looser in (("min_detection", lambda v, d: v < d), ("max_critical_false_pass", lambda v, d: v > d),
                        ("min_cases", lambda v, d: v < d)):
        value, shipped = getattr(settings, key), getattr(floor, key)
        if looser(value, shipped):
            out.append(f"judge_gate.{key} {value:g} is looser than the gate's {shipped:g}: the thresholds may be raised, "
                       "never lowered")
    return out


def check_judge(run: RunFacts, settings: JudgeGateSettings, *, cache_dir: str | Path | None = None,
                how_to_calibrate: str = "rubricstree judge calibrate <the same judge options>",
                record: CalibrationRecord | None = None) -> GateVerdict:
    """The gate's verdict on the run's judge (see the module docstring). ``record``: judge this
    calibration, just made and not stored, instead of looking one up (it is not verified: it never
    left memory)."""
    problems = loosened(settings)
    who = run.who or {}
    if who.get("unknown"):
        problems.append(f"who grades cannot be known, so no calibration can describe this judge: {who['unknown']}")
        return GateVerdict(ok=False, problems=problems)
    stored = record is None
    if record is not None:
        source = "this calibration (not stored)"
    elif settings.calibration:
        record, source = load_calibration(settings.calibration), settings.calibration
        if record.judge_id != run.judge_id:
            return GateVerdict(ok=False, record=record, source=source, problems=[*problems, (
                f"the calibration {source} is of another judge ({record.judge_id}), not of {run.judge_id}")])
    else:
        record, source = find_calibration(run.judge_id, cache_dir), str(record_path(run.judge_id, cache_dir))
    if record is None:
        return GateVerdict(ok=False, source=source, problems=[*problems, (
            f"no calibration of the judge {run.judge_id} on record (looked for {source}); make one with "
            f"`{how_to_calibrate}` (minutes on a GPU: it grades the labelled cases once)")])
    redo = f"calibrate again with `{how_to_calibrate}`"
    if stored and not record.verifies():
        return GateVerdict(ok=False, record=record, source=source, problems=[*problems, (
            f"the calibration {source} does not verify: its record_hash ({record.record_hash[:16] or 'none'}) is not "
            f"the hash of its content ({record.content_hash()[:16]}), so it was changed after it was saved and none "
            f"of its figures can be trusted: {redo}")])
    problems += _not_of_this_run(record, run, source, redo)
    problems += _unfit(record, settings, source, redo)
    return GateVerdict(ok=not problems, problems=problems, record=record, source=source)


def _not_of_this_run(record: CalibrationRecord, run: RunFacts, source: str, redo: str) -> list[str]:
    """What makes ``record`` the calibration of another run (see the module docstring)."""
    out = []
    fp = run.taxonomy_fingerprint
    if fp and record.taxonomy_fingerprint != fp[:len(record.taxonomy_fingerprint)]:
        out.append(f"the calibration {source} was made on another taxonomy (fingerprint "
                   f"{record.taxonomy_fingerprint}, this run's {fp[:16]}): {redo}")
    if run.template_hash is not None and record.template_hash != run.template_hash:
        said = [f"judge {key} '{had or 'ours'}', this run '{want or 'ours'}'"
                for key, had, want in (("mode", record.judge.get("mode") or "choice", run.judge_mode or "choice"),
                                       ("template", record.judge.get("template"), run.judge_template))
                if (had or None) != (want or None)]
        what = "; ".join(said) or "the template file was edited since, or our confirmation or applicability prompts changed"
        out.append(f"the calibration {source} asked the judge with other prompts (template hash "
                   f"{record.template_hash or 'none'}, this run's {run.template_hash}: {what}): {redo}")
    if run.reward_settings is not None and record.reward_settings != run.reward_settings:
        keys = sorted(set(record.reward_settings) | set(run.reward_settings))
        diff = [f"{k} {record.reward_settings.get(k, 'unset')!r} calibrated, {run.reward_settings.get(k, 'unset')!r} "
                f"in this run" for k in keys if record.reward_settings.get(k) != run.reward_settings.get(k)]
        out.append(f"the calibration {source} predicted for another recipe ({'; '.join(diff)}): {redo}")
    if run.scoring_code is not None and record.scoring_code != run.scoring_code:
        out.append(f"the calibration {source} was made with other scoring code (version {record.scoring_code or 'none'}, "
                   f"this code's {run.scoring_code}: prices or scoring changed since): {redo}")
    if run.who is not None:
        out += _another_judge(record, run.who, source, redo)
    return out


def _another_judge(record: CalibrationRecord, who: dict[str, Any], source: str, redo: str) -> list[str]:
    """The run's judge is another than the calibrated one behind the same identity string: its
    answers to the fixed probe items differ, or (known by name alone) it grades somewhere the
    calibrated judge never did."""
    from reward.judge.signature import Numbers, differ

    had, now = record.judge_probe, who.get("probe")
    if had is not None or now is not None:
        if had is None or now is None:
            return [f"the calibration {source} {'has' if had else 'has no'} answers of the judge to the fixed probe items "
                    f"and this run's judge {'gives none' if had else 'gives some'}: they cannot be told to be the same "
                    f"judge: {redo}"]
        why = differ(Numbers(had.text, had.answers), Numbers(now.get("text"), now.get("answers")),
                     max(had.tolerance, float(now.get("tolerance") or 0.0)))
        if why:
            return [f"the judge answers the fixed probe items otherwise than the judge the calibration {source} "
                    f"measured ({why}): other weights, dtype or quantization behind the same name: {redo}"]
        return []
    unseen = sorted(set(who.get("endpoints") or []) - set(record.judge_endpoints))
    if unseen:
        return [f"this judge is known by its name alone and grades at {', '.join(unseen)}, where the calibration "
                f"{source} never graded (it graded at {', '.join(record.judge_endpoints) or 'no endpoint'}): calibrate "
                f"with the run's whole pool"]
    return []


def _unfit(record: CalibrationRecord, settings: JudgeGateSettings, source: str, redo: str) -> list[str]:
    """The figures that say the reward cannot survive the judge."""
    out = []
    pred = record.predicted
    if record.distinct_cases < settings.min_cases:
        out.append(f"the calibration {source} rests on {record.distinct_cases} distinct labelled cases, fewer than "
                   f"min_cases {settings.min_cases} (copies of a case count once; a --limit-cases trial): {redo}")
    if pred is None:
        out.append(f"the calibration {source} has no predicted detection rate (made with --no-predict)")
    elif pred.detection_low < settings.min_detection:
        out.append(f"predicted detection {pred.detection_rate:.3f}, 95% interval [{pred.detection_low:.3f}, "
                   f"{pred.detection_high:.3f}]: its lower end is below min_detection {settings.min_detection:g} "
                   f"(on {record.distinct_cases} distinct cases; independent readings at the same error rate: "
                   f"{pred.independent_detection_rate:.3f}; calibration {source})")
    cfp = record.critical_false_pass
    if cfp.rate is None:
        out.append(f"the calibration {source} has no failing critical item: the critical false-pass rate is unknown")
    elif cfp.high > settings.max_critical_false_pass:
        out.append(f"critical false-pass rate {cfp.rate:.3f} ({cfp.k}/{cfp.n}), 95% interval up to {cfp.high:.3f}: "
                   f"above max_critical_false_pass {settings.max_critical_false_pass:g}")
    blind = record.one_sided_critical()
    if blind:
        named = ", ".join(f"{lid} ({why}: {_items(record, lid)})" for lid, why in sorted(blind.items()))
        out.append(f"the judge is blind on one side of {len(blind)} critical leaf(s): {named}")
    return out


def _items(record: CalibrationRecord, leaf_id: str) -> str:
    c = record.coverage[leaf_id]
    return f"{c.fail_items} failing and {c.pass_items} passing items"
