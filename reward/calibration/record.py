"""A judge's calibration: what ``rubricstree judge calibrate`` measured, the error model it implies,
and where records are kept so that a launcher can look its judge up by identity.

Records live in ``<cache dir>/calibrations/<hash of the judge id>.json`` (the cache directory of
the verdict cache: ``$RUBRICSTREE_CACHE_DIR`` or ``~/.cache/rubricstree``), one per judge identity,
the latest calibration winning; ``--report DIR`` writes a copy beside the report.
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

FORMAT = 1
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


class Prediction(BaseModel):
    """What the stress test's noise model predicts on the calibration's cases under this judge."""

    detection_rate: float
    clean_mean: float
    independent_detection_rate: float = Field(description="the same error rate, readings independent")
    cases: int
    seeds: list[int]
    repeats: int
    confirm_failures: bool


class CalibrationRecord(BaseModel):
    """The record of one calibration (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    format: int = FORMAT
    judge_id: str = Field(description="the judge's identity, as the verdict cache keys it")
    judge: dict[str, Any] = Field(default_factory=dict, description="the judge settings used")
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
    """Write ``record`` to ``path`` (atomically: a crash leaves the old file or the new one)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record.model_dump(mode="json"), indent=1, ensure_ascii=False), encoding="utf-8")
    tmp.replace(path)
    return path


def load_calibration(path: str | Path) -> CalibrationRecord:
    """Read a record; errors name the file and the field."""
    path = Path(path)
    if not path.is_file():
        raise InputError("calibration file not found", file=str(path))
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"not a calibration JSON: {exc}", file=str(path)) from exc
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
