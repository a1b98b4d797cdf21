"""What the reward knows about its judges: posterior verdicts and a second judge (issue 45).

From the reward's settings (``posterior``, ``posterior_prior``, ``panel_judge``, ``panel_leaves``)
and the judges' calibration records (``rubricstree judge calibrate``, stored by each judge's
identity), :func:`resolve` builds what :class:`reward.stages.rubric_reward.RubricReward` scores with:

- the :class:`reward.scoring.posterior.Posterior` over the judge's (and the second judge's) measured
  rates: ``auto`` uses it when the judge has a calibration the gate passes, ``on`` requires one,
  ``off`` scores the readings as they are;
- the second judge (any backend: a server URL, or a model path in process), built from the main
  judge's settings with its own identity, cache keys, probes and start-up checks, and the leaves it
  reads: ``critical``, ``flagged`` (critical, and those the first judge's calibration flags:
  systematic, one-sided, or a shrunk error rate above :data:`FLAG_RATE`) or ``all``.

A panel's readings combine only through the posterior (never by AND/OR): a panel needs a
calibration of both judges.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from reward.errors import InputError

log = logging.getLogger(__name__)
FLAG_RATE = 0.25


@dataclass
class Calibrated:
    """The posterior, the second judge and the leaves it reads (None: no panel)."""

    posterior: Any = None
    panel_judge: Any = None
    panel_leaves: frozenset[str] | None = None
    panel_scope: str = "critical"
    records: tuple = ()


def flagged_leaves(record, tree) -> set[str]:
    """The leaves a judge's calibration flags: misread in most of their items, read one way only,
    or with a shrunk per-leaf error rate above :data:`FLAG_RATE`."""
    from reward.scoring.posterior import JudgeRates

    rates = JudgeRates.from_record(record)
    out = {s.leaf_id for s in record.systematic} | set(record.one_sided())
    for lid in record.coverage:
        if lid in tree:
            r = rates.rates(lid, tree.severity[lid], tree[lid].polarity)
            if max(r.ff, r.fp) > FLAG_RATE:
                out.add(lid)
    return out


def _record_of(judge, *, required: bool, what: str):
    from reward.calibration.gate import JudgeGateSettings, RunFacts, check_judge
    from reward.calibration.record import find_calibration

    cache_dir = judge.cache.path.parent if getattr(judge, "cache", None) is not None else None
    rec = find_calibration(judge.model_id, cache_dir)
    if rec is None and required:
        raise InputError(f"{what} ({judge.model_id}) has no calibration on record, and posterior verdicts need its "
                         "measured error rates: run `rubricstree judge calibrate` with the same judge options first, "
                         "or set posterior: off", field="posterior")
    # the record on file, verified (its record_hash), judged on its own figures
    ok = rec is not None and check_judge(RunFacts(judge_id=judge.model_id), JudgeGateSettings(), cache_dir=cache_dir).ok
    return rec, ok


def build_panel_judge(spec: str, judge) -> Any:
    """The second judge named by ``spec`` (a URL: served; else a model path: in process), sharing the
    first judge's verdict cache (its own identity keys its own verdicts) and how the first is asked
    and bounded (``JudgeSettings.for_another_judge``: mode, template, timeouts, deadline, probes),
    when the first was built from settings."""
    from reward.judge.settings import JudgeSettings

    base = getattr(judge, "built_from", None)
    settings = base.for_another_judge(spec) if isinstance(base, JudgeSettings) else JudgeSettings().for_another_judge(spec)
    return settings.build(cache=judge.cache if getattr(judge, "cache", None) is not None else False)


def resolve(settings, judge, tree) -> Calibrated:
    """What the reward of ``settings`` scores readings with (see the module docstring).

    Raises:
        InputError: ``posterior: on`` or a panel without the calibrations they need, a panel with
            ``posterior: off``.
    """
    from reward.scoring.posterior import JudgeRates, Posterior

    if settings.panel_judge and settings.posterior == "off":
        raise InputError("a panel's readings combine only through the posterior: set posterior auto or on, or drop "
                         "panel_judge", field="panel_judge")
    if settings.posterior == "off" or judge is None:
        return Calibrated()
    required = settings.posterior == "on" or bool(settings.panel_judge)
    rec, ok = _record_of(judge, required=required, what="the judge")
    if rec is None or (settings.posterior == "auto" and not ok and not settings.panel_judge):
        if rec is not None:
            log.info("posterior verdicts off: the judge's calibration does not pass the gate (posterior: on to use "
                     "it anyway)")
        return Calibrated()
    rates = [JudgeRates.from_record(rec)]
    records = (rec,)
    panel = leaves = None
    if settings.panel_judge:
        panel = build_panel_judge(settings.panel_judge, judge)
        if panel.model_id == judge.model_id:
            raise InputError("the panel's second judge is the first judge (the same identity): name another model",
                             field="panel_judge")
        rec_b, _ = _record_of(panel, required=True, what="the panel's second judge")
        rates.append(JudgeRates.from_record(rec_b))
        records = (rec, rec_b)
        critical = {leaf.id for leaf in tree.leaves if tree.severity[leaf.id] == "critical"}
        if settings.panel_leaves == "critical":
            leaves = frozenset(critical)
        elif settings.panel_leaves == "flagged":
            leaves = frozenset(critical | flagged_leaves(rec, tree))
        else:
            leaves = None  # every leaf
    return Calibrated(posterior=Posterior(rates, prior=settings.posterior_prior), panel_judge=panel,
                      panel_leaves=leaves, panel_scope=settings.panel_leaves, records=records)
