"""A judge's calibration: what ``rubricstree judge calibrate`` measured, the error model it implies,
and where records are kept so that a launcher can look its judge up by identity.

Records live in ``<cache dir>/calibrations/<hash of the judge id>.json`` (the cache directory of
the verdict cache: ``$RUBRICSTREE_CACHE_DIR`` or ``~/.cache/rubricstree``), one per judge identity,
the latest calibration winning; ``--report DIR`` writes a copy beside the report.

A record carries what it is of (``reward.calibration.binding``: the prompts' content, the scoring
recipe, the scoring code, the distinct cases, the judge's answers to the fixed probe items) and
``record_hash``, a hash of all the rest, written by :func:`save_calibration`: a record edited by
hand no longer verifies (:meth:`CalibrationRecord.verifies`) and the gate refuses it. The hash
catches an edit, not a forgery: whoever recomputes it can write any record.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reward.calibration.stats import Difference, Rate, Reliability
from reward.errors import InputError
from reward.stress.errors import ErrorModel
from reward.textio import load_json_file

FORMAT = 2  # 2: bound to its prompts, recipe, scoring code, distinct cases and probe answers; record_hash
# A cell of the error table enters the error model only with this many items; smaller cells fall
# back to the next coarser key (severity, polarity, then the pooled rate).
MIN_CELL = 10
# A leaf misread in more than half of at least this many items counts as systematically misread ...
SYSTEMATIC_MIN_ITEMS = 2
# ... and at least this many misreadings (one can happen by chance on any leaf)
SYSTEMATIC_MIN_ERRORS = 2


class SystematicLeaf(BaseModel):
    leaf_id: str
    errors: int
    n: int


class Rereads(BaseModel):
    """Second and third readings (the confirmation wordings) of a sample of items."""

    sampled: int = Field(description="items read again: every first-reading failure and a share of the rest")
    agreement_second: Rate = Field(description="second reading gives the first reading's answer")
    agreement_third: Rate
    second_error_after_error: Rate = Field(description="P(second reading wrong | first wrong)")
    second_error_after_right: Rate = Field(description="P(second reading wrong | first right)")
    correlation: Difference = Field(description=(
        "re-read correlation: P(second wrong | first wrong) - P(second wrong | first right); the"
        " probability that a re-reading repeats the first reading's answer under the stress test's model"))
    third_correlation: Difference


class LeafCoverage(BaseModel):
    """How many labelled items a leaf had, and how the judge read them."""

    severity: str | None = Field(None, description="the leaf's severity in the calibration's taxonomy")
    fail_items: int = Field(0, description="items labelled to fail the leaf")
    pass_items: int = Field(0, description="items labelled to pass it (its situation present)")
    read_fail_on_fail: int = Field(0, description="of the failing items, read as failed")
    read_fail_on_pass: int = Field(0, description="of the passing items, read as failed")

    @property
    def one_sided(self) -> str | None:
        """'never fails' (a judge that reads every item of the leaf as passed, with failing items
        to read) or 'never passes' (every item read as failed, with passing items), else None."""
        n = self.fail_items + self.pass_items
        if n == 0:
            return None
        if self.fail_items and self.read_fail_on_fail + self.read_fail_on_pass == 0:
            return "never fails"
        if self.pass_items and self.read_fail_on_fail + self.read_fail_on_pass == n:
            return "never passes"
        return None


class Prediction(BaseModel):
    """What the stress test's noise model predicts on the calibration's cases under this judge.

    ``detection_low``/``detection_high``: a 95% interval of the detection rate, from two sources
    of doubt (``reward.calibration.run.detection_interval``): the cases are a sample (Wilson's
    interval of the rate as a proportion of the distinct cases) and the draws are random (1.96
    standard errors of the mean over the seeds, added on each side)."""

    detection_rate: float
    detection_low: float = Field(0.0, description="lower end of the 95% interval of the detection rate")
    detection_high: float = Field(1.0, description="upper end of the 95% interval of the detection rate")
    seed_rates: list[float] = Field(default_factory=list, description="the detection rate of each seed")
    clean_mean: float
    independent_detection_rate: float = Field(description="the same error rate, readings independent")
    cases: int = Field(description="cases the prediction ran on (copies included)")
    seeds: list[int]
    repeats: int
    confirm_failures: bool


class ProbeAnswers(BaseModel):
    """A served judge's answers to the fixed probe items at calibration (``reward.judge.signature``)."""

    text: list[float] | None = None
    answers: list[float] | None = None
    tolerance: float = Field(description="the difference between two readings above which they are two judges")


class CalibrationRecord(BaseModel):
    """The record of one calibration (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    format: int = FORMAT
    judge_id: str = Field(description="the judge's identity, as the verdict cache keys it")
    judge: dict[str, Any] = Field(default_factory=dict, description="the judge settings used")
    judge_probe: ProbeAnswers | None = Field(None, description=(
        "the judge's answers to the fixed probe items (a served vLLM judge); a judge that answers them otherwise"
        " is another judge, whatever its name"))
    judge_endpoints: list[str] = Field(default_factory=list, description="the endpoints that graded (no credentials)")
    template_hash: str = Field("", description=(
        "the content of every prompt the reward asks the judge with (reward.calibration.binding.template_hash)"))
    reward_settings: dict[str, Any] = Field(default_factory=dict, description=(
        "the recipe fields that change a score, as calibrated (reward.calibration.binding.scoring_settings)"))
    reward_settings_hash: str = ""
    scoring_code: str = Field("", description="the version of the scoring and prediction code (a hash of its code)")
    distinct_cases: int = Field(0, description="cases that differ in content (copies of one case count once)")
    cases: str
    cases_fingerprint: str
    taxonomy_fingerprint: str
    router: str
    created: str
    verdict_items: int
    applicability_items: int
    failed_items: int = Field(description="items whose judge call failed (left out of every rate)")
    verdict_error: Rate = Field(description="every verdict reading, wrong or not")
    false_fail: dict[str, Rate] = Field(description=(
        "P(read as failed | the leaf passes), pooled ('*') and by severity, polarity and severity/polarity,"
        " leaves misread systematically left out (they are listed under 'systematic')"))
    false_pass: dict[str, Rate] = Field(description="P(read as passed | the leaf fails), keyed alike")
    false_fail_all: Rate = Field(description="false-fail rate over every item, systematic leaves included")
    false_pass_all: Rate
    by_language: dict[str, dict[str, Rate]] = Field(default_factory=dict)
    app_false_absent: dict[str, Rate] = Field(description="present read as absent: '*', 'critical', 'other'")
    app_false_present: dict[str, Rate] = Field(description="absent read as present: '*', 'critical', 'other'")
    rereads: Rereads | None = None
    systematic: list[SystematicLeaf] = Field(default_factory=list)
    soft: Reliability | None = Field(None, description="calibration of p(met) against the labels (choice mode)")
    predicted: Prediction | None = None
    coverage: dict[str, LeafCoverage] = Field(default_factory=dict, description=(
        "per leaf with at least one labelled item: its failing and passing items and how they were read"))
    unmeasured: list[str] = Field(default_factory=list, description=(
        "leaves of the taxonomy with no labelled item here (a judge that could never fail them passes unseen)"))
    unmeasured_critical: list[str] = Field(default_factory=list)
    record_hash: str = Field("", description="a hash of every other field, written when the record is saved")

    def one_sided(self) -> dict[str, str]:
        """Leaves the judge never failed or never passed, with failing (passing) items to read."""
        return {lid: why for lid, c in self.coverage.items() if (why := c.one_sided)}

    def one_sided_critical(self) -> dict[str, str]:
        """:meth:`one_sided`, critical leaves only."""
        return {lid: why for lid, why in self.one_sided().items() if self.coverage[lid].severity == "critical"}

    def content_hash(self) -> str:
        """The hash of every field but ``record_hash`` (canonical JSON)."""
        payload = json.dumps(self.model_dump(mode="json", exclude={"record_hash"}), sort_keys=True,
                             ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(payload.encode()).hexdigest()

    def verifies(self) -> bool:
        """Whether the record is as it was saved (its ``record_hash`` matches its content)."""
        return bool(self.record_hash) and self.record_hash == self.content_hash()

    @property
    def critical_false_pass(self) -> Rate:
        """A failing critical leaf read as passed: the harm a judge lets through (systematic leaves included)."""
        return self.false_pass.get("critical_all") or self.false_pass.get("critical") or Rate.of(0, 0)

    def error_model(self) -> ErrorModel:
        """The stress test's error model of this judge: its rates by severity and polarity (cells of
        at least :data:`MIN_CELL` items), its re-read correlation, its systematic leaves and its
        applicability errors."""
        def table(rates: dict[str, Rate]) -> dict[str, float]:
            out = {k: r.rate for k, r in rates.items() if k != "*" and not k.endswith("_all")
                   and r.rate is not None and r.n >= MIN_CELL}
            pooled = rates.get("*")
            out["*"] = pooled.rate if pooled is not None and pooled.rate is not None else 0.0
            return out

        absent = {"*": self.app_false_absent["*"].rate or 0.0}
        crit = self.app_false_absent.get("critical")
        if crit is not None and crit.rate is not None and crit.n >= MIN_CELL:
            absent["critical"] = crit.rate
        r = self.rereads.correlation.estimate if self.rereads and self.rereads.correlation.estimate is not None else 0.0
        return ErrorModel(false_fail=table(self.false_fail), false_pass=table(self.false_pass),
                          reread_correlation=min(1.0, max(0.0, r)),
                          systematic_leaves=tuple(s.leaf_id for s in self.systematic),
                          app_false_absent=absent, app_false_present=self.app_false_present["*"].rate or 0.0,
                          source=f"measured: {self.judge_id} on {self.cases}")


# ---------------------------------------------------------------------- storage
def calibration_dir(cache_dir: str | Path | None = None) -> Path:
    """Where records are kept: ``cache_dir`` or the verdict cache's directory, ``calibrations/``."""
    if cache_dir is None:
        from reward.judge.cache import default_cache_dir

        cache_dir = default_cache_dir()
    return Path(cache_dir) / "calibrations"


def record_path(judge_id: str, cache_dir: str | Path | None = None) -> Path:
    return calibration_dir(cache_dir) / f"{hashlib.sha256(judge_id.encode()).hexdigest()[:24]}.json"


def save_calibration(record: CalibrationRecord, path: str | Path) -> Path:
    """Write ``record`` to ``path`` with its ``record_hash`` (atomically: a crash leaves the old file
    or the new one)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    record.record_hash = record.content_hash()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record.model_dump(mode="json"), indent=1, ensure_ascii=False), encoding="utf-8")
    tmp.replace(path)
    return path


def load_calibration(path: str | Path) -> CalibrationRecord:
    """Read a record; errors name the file and the field. A record of another format is refused
    with the remedy (calibrate again): what it does not carry cannot be checked."""
    path = Path(path)
    if not path.is_file():
        raise InputError("calibration file not found", file=str(path))
    data = load_json_file(path)  # bounded in size and depth; errors name the file
    if isinstance(data, dict) and data.get("format", FORMAT) != FORMAT:
        raise InputError(f"a calibration record of format {data.get('format')!r}, this version reads format {FORMAT} "
                         "(which binds the record to its prompts, recipe, scoring code, distinct cases and the judge's "
                         "probe answers): calibrate the judge again with `rubricstree judge calibrate`",
                         file=str(path), field="format")
    try:
        return CalibrationRecord.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputError(f"not a calibration record: {first['msg']}", file=str(path),
                         field=".".join(str(p) for p in first["loc"])) from exc


def find_calibration(judge_id: str, cache_dir: str | Path | None = None) -> CalibrationRecord | None:
    """The record of the judge ``judge_id`` on file, or None."""
    path = record_path(judge_id, cache_dir)
    return load_calibration(path) if path.is_file() else None
