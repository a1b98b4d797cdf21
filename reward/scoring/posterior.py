"""Posterior verdicts: what a judge's readings say about a leaf, given how that judge errs.

A reading is evidence, not the truth. Calibration (``rubricstree judge calibrate``) measures how a
judge errs: how often it reads a passing leaf as failed (false fail, ``ff``) and a failing leaf as
passed (false pass, ``fp``), per leaf where the leaf has items, and how often a re-reading repeats
the first reading's answer (the re-read correlation ``R``). From those, a leaf's readings become a
probability that the reply fails it::

    P(fails | readings) = prior * L(readings | fails) / (prior * L(readings | fails)
                                                       + (1 - prior) * L(readings | passes))

Each judge's readings of one item follow the "copy" model of the stress test: the first reading
errs at the judge's rate; each later reading repeats the first with probability ``R`` and is
otherwise a fresh draw, so a confirmation that agrees with a judge that repeats itself adds little.
Judges of a panel are taken as independent given the truth (their joint misses are measured by a
panel calibration, ``reward.calibration.panel``; where they miss together more often than that, the
posterior is overconfident, and the calibration says by how much).

The rates of a leaf: its own measured rates shrunk toward its pool (severity and polarity, then
every item) by :data:`SHRINK` pseudo-items, so a leaf with a few items keeps close to its pool and a
leaf misread on every one of many items is read the other way round (a judge's systematic blind
spot, undone). Language moves the pool by the ratio of that language's rate to the pooled one
(shrunk alike). A leaf with no item gets its pool's rates.

The prior is the share of replies that fail a leaf where it applies (:data:`DEFAULT_PRIOR`): most
replies pass most checks, so a lone failing reading of an unreliable judge does not cost the full
price, and a passing reading costs next to nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

SHRINK = 4.0  # pseudo-items of the pool a leaf's own rates are shrunk toward
DEFAULT_PRIOR = 0.1  # P(a reply fails a leaf whose situation applies), before any reading
RATE_FLOOR = 0.005  # no rate is taken as exactly 0 or 1: one more reading can always say otherwise


def _clip(p: float) -> float:
    return min(1.0 - RATE_FLOOR, max(RATE_FLOOR, p))


def shrunk(errors: float, n: float, pool: float, k: float = SHRINK) -> float:
    """``errors`` of ``n`` items, shrunk toward ``pool`` by ``k`` pseudo-items."""
    return _clip((errors + k * pool) / (n + k))


@dataclass(frozen=True)
class LeafRates:
    """One judge's rates on one leaf: ``ff`` P(read failed | passes), ``fp`` P(read passed | fails)."""

    ff: float
    fp: float


@dataclass
class JudgeRates:
    """How one judge errs, leaf by leaf (see the module docstring).

    Attributes:
        pool_ff, pool_fp: rates by key ``"severity/polarity"``, ``"severity"``, ``"polarity"``,
            ``"*"`` (the most specific key present wins).
        leaf_counts: leaf id -> (failing items, of them read passed, passing items, of them read failed).
        language_ff, language_fp: language -> (errors, items) for the language adjustment.
        reread_correlation: P(a re-reading repeats the first reading's answer).
        source: what the rates come from.
    """

    pool_ff: Mapping[str, float]
    pool_fp: Mapping[str, float]
    leaf_counts: Mapping[str, tuple[int, int, int, int]] = field(default_factory=dict)
    language_ff: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    language_fp: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    reread_correlation: float = 0.0
    source: str = ""

    @staticmethod
    def _pool(rates: Mapping[str, float], severity: str, polarity: str) -> float:
        for key in (f"{severity}/{polarity}", severity, polarity, "*"):
            if key in rates:
                return rates[key]
        return 0.0

    def _language(self, table: Mapping[str, tuple[int, int]], language: str | None, pooled: float) -> float:
        """The factor a language moves a pooled rate by: its rate over the pooled one, shrunk."""
        if not language or language not in table or pooled <= 0:
            return 1.0
        errors, n = table[language]
        return shrunk(errors, n, pooled) / pooled

    def rates(self, leaf_id: str, severity: str, polarity: str, language: str | None = None) -> LeafRates:
        ff = _clip(self._pool(self.pool_ff, severity, polarity))
        fp = _clip(self._pool(self.pool_fp, severity, polarity))
        ff = _clip(ff * self._language(self.language_ff, language, self.pool_ff.get("*", ff)))
        fp = _clip(fp * self._language(self.language_fp, language, self.pool_fp.get("*", fp)))
        if leaf_id in self.leaf_counts:
            fails, read_pass, passes, read_fail = self.leaf_counts[leaf_id]
            fp = shrunk(read_pass, fails, fp)
            ff = shrunk(read_fail, passes, ff)
        return LeafRates(ff=ff, fp=fp)

    @classmethod
    def from_record(cls, record) -> JudgeRates:
        """The rates a calibration record measured (``reward.calibration.record.CalibrationRecord``)."""
        def table(rates) -> dict[str, float]:
            return {k: r.rate for k, r in rates.items() if not k.endswith("_all") and r.rate is not None}

        counts = {lid: (c.fail_items, c.fail_items - c.read_fail_on_fail, c.pass_items, c.read_fail_on_pass)
                  for lid, c in (record.coverage or {}).items()}
        lang_ff = {lang: (r["false_fail"].k, r["false_fail"].n) for lang, r in (record.by_language or {}).items()}
        lang_fp = {lang: (r["false_pass"].k, r["false_pass"].n) for lang, r in (record.by_language or {}).items()}
        corr = record.rereads.correlation.estimate if record.rereads and record.rereads.correlation.estimate else 0.0
        return cls(pool_ff=table(record.false_fail) or {"*": 0.0}, pool_fp=table(record.false_pass) or {"*": 0.0},
                   leaf_counts=counts, language_ff=lang_ff, language_fp=lang_fp,
                   reread_correlation=min(1.0, max(0.0, corr)), source=f"calibration of {record.judge_id}")

    @classmethod
    def from_error_model(cls, model, leaf_counts: Mapping[str, tuple[int, int, int, int]] | None = None) -> JudgeRates:
        """The rates of a known :class:`reward.stress.errors.ErrorModel` (the stress test's judge),
        with measured per-leaf counts where given."""
        return cls(pool_ff=dict(model.false_fail), pool_fp=dict(model.false_pass), leaf_counts=dict(leaf_counts or {}),
                   reread_correlation=model.reread_correlation, source=model.source)


def likelihood(rates: LeafRates, readings: Sequence[bool], fails: bool, correlation: float) -> float:
    """P(``readings`` | the leaf ``fails`` or not): each reading True when it reads the leaf failed;
    the first errs at its rate, each later one repeats it with ``correlation`` or is a fresh draw."""
    if not readings:
        return 1.0

    def p_read_fail() -> float:
        return 1.0 - rates.fp if fails else rates.ff

    p = p_read_fail()
    out = p if readings[0] else 1.0 - p
    for r in readings[1:]:
        fresh = p if r else 1.0 - p
        out *= correlation * (r == readings[0]) + (1.0 - correlation) * fresh
    return out


def posterior_fail(prior: float, evidence: Sequence[tuple[LeafRates, Sequence[bool], float]]) -> float:
    """P(the reply fails the leaf | every judge's readings): ``evidence`` is one (rates, readings,
    re-read correlation) per judge that read it; judges independent given the truth."""
    a, b = prior, 1.0 - prior
    for rates, readings, corr in evidence:
        a *= likelihood(rates, readings, True, corr)
        b *= likelihood(rates, readings, False, corr)
    return a / (a + b) if a + b > 0 else prior


@dataclass
class Posterior:
    """The posterior of a judge (and an optional second judge of a panel) over a reward's leaves.

    Attributes:
        judges: the rates of each judge, the first one grading every leaf.
        prior: P(fails) before any reading (:data:`DEFAULT_PRIOR`).
    """

    judges: list[JudgeRates]
    prior: float = DEFAULT_PRIOR

    def p_fail(self, leaf_id: str, severity: str, polarity: str, readings: Sequence[Sequence[bool]],
               language: str | None = None) -> float:
        """P(fails) of one (reply, leaf) item from each judge's readings (``readings[j]``: judge
        j's, empty when it did not read the item)."""
        evidence = []
        for judge, rs in zip(self.judges, readings):
            if rs:
                evidence.append((judge.rates(leaf_id, severity, polarity, language), list(rs), judge.reread_correlation))
        return posterior_fail(self.prior, evidence)

    def met_value(self, polarity: str, p_fail: float) -> float:
        """The soft "criterion met" the tree score takes: P(met) from P(fails) and the polarity."""
        return p_fail if polarity == "negative" else 1.0 - p_fail
