"""Judge error as part of the oracle stress test (``rubricstree stress --judge-noise E``,
``--reread-correlation R``, ``--systematic-leaves F``, ``--judge-errors calibration.json``).

A perfect judge is the oracle's premise; a real one errs. Here each case is scored ``repeats``
times with verdicts drawn from an :class:`reward.stress.errors.ErrorModel` (``--seed``), the way
our pipeline would meet them:

- Applicability is decided once per prompt (``reward.router.applicability``), so a wrong
  decision is shared by the clean and the perturbed reply. A routed conditional leaf the step
  asks about (not one a user's instruction switched on) is dropped when present with the model's
  ``app_false_absent`` rate, kept when absent with ``app_false_present``. A critical leaf read as
  absent is asked again with a second wording (as the reward does): it leaves only when that
  reading says absent too (the second reading repeats the first with the re-read correlation).
  A leaf wrongly kept is judged on a reply that cannot do what its absent trigger asks: its true
  verdict is a pass (vacuous). A leaf wrongly dropped leaves the score, even when the reply fails
  it: the summary counts those lost failures (``dropped_failures_per_reply``).
- Verdicts are per reply: every routed leaf's first reading is wrong with the model's false-fail
  or false-pass rate for its severity and polarity (drawn for every leaf, scored only when kept),
  and always wrong on a systematic leaf.

``design="three_way"`` models the alternative instead, a third verdict ("not applicable") read on
every (reply, leaf) item: each reply's decisions are drawn on their own, a leaf whose trigger is
absent gets a real verdict (a failure) with the false-fail rate, and an applicable leaf is called
not applicable with the false-absent rate.

``confirm_failures=True`` models failure confirmation (``reward.stages.confirm``): a reading that
fails a leaf is read again, and a third time when the two disagree; the majority stands. A
re-reading repeats the first reading with probability ``reread_correlation`` (0: independent, the
optimistic case) and is otherwise a fresh draw; on a systematic leaf every reading is wrong. The
extra readings come from their own random stream, so with and without confirmation on one seed
the first readings are the same draws (a paired comparison), and the extra readings per reply
(the cost) are reported.

Reported: the clean replies' mean and standard deviation, and the detection rate and mean
penalty under noise, overall and by perturbation. :func:`noise_tolerance` sweeps the error rate
and reports the largest at which detection stays at or above a target. What it cannot tell: how
a given judge errs; measure that with ``rubricstree judge calibrate`` and pass the result as
``--judge-errors``.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reward.router.base import Routing
from reward.scoring.tree_score import score_tree
from reward.stress.cases import PERTURBATIONS, StressCase
from reward.stress.errors import ErrorModel
from reward.stress.runner import score_kwargs
from reward.tree.graph import RubricTree

# Routing reasons whose leaves the applicability step never asks about (a user's instruction, the
# oracle's labels): ``reward.router.applicability.NOT_ASKED_REASONS``, repeated here to keep this
# module free of the judge layer.
_NOT_ASKED = frozenset({"cue", "label"})


def _check(name: str, value: float) -> float:
    if not 0.0 <= value <= 0.5:
        raise ValueError(f"{name} must be in [0, 0.5], got {value!r}")
    return value


DESIGNS = ("per_prompt", "three_way")


class _Reader:
    """Draws readings of one run under an error model (first readings from ``rng``, re-readings
    from ``confirm_rng``)."""

    def __init__(self, tree: RubricTree, errors: ErrorModel, systematic: frozenset[str]) -> None:
        self.tree, self.errors, self.systematic = tree, errors, systematic

    def first(self, lid: str, fails: bool, u: float) -> bool:
        """The first reading (True: read as failed) from the uniform draw ``u``."""
        if lid in self.systematic:
            return not fails
        node = self.tree[lid]
        return fails ^ (u < self.errors.verdict_error(fails, self.tree.severity[lid], node.polarity))

    def again(self, lid: str, fails: bool, first: bool, rng: random.Random) -> bool:
        """A re-reading: the first reading's answer with the re-read correlation, else a fresh draw."""
        if lid in self.systematic:
            return not fails
        if rng.random() < self.errors.reread_correlation:
            return first
        return self.first(lid, fails, rng.random())

    def confirmed(self, lid: str, fails: bool, first: bool, rng: random.Random) -> tuple[bool, int]:
        """The verdict after confirmation of ``first`` and the extra readings it took: only
        failures are read again; a disagreement is settled by a third reading."""
        reads = self.confirm_readings(lid, fails, first, rng)
        return reads[-1] if len(reads) != 2 else reads[0], len(reads) - 1

    def confirm_readings(self, lid: str, fails: bool, first: bool, rng: random.Random) -> list[bool]:
        """Every reading confirmation takes: the first; a failure read again; a disagreement
        settled by a third (the draws :meth:`confirmed` makes, in order)."""
        if not first:
            return [first]
        second = self.again(lid, fails, first, rng)
        if second:
            return [first, second]
        return [first, second, self.again(lid, fails, first, rng)]


@dataclass(frozen=True)
class PanelSim:
    """A second judge in the stress test: its error model, its systematic leaves, and the leaves it
    reads (once per reply, from its own stream)."""

    errors: ErrorModel
    systematic: frozenset[str]
    leaves: frozenset[str] | None  # None: every leaf


def noisy_pair(tree: RubricTree, case: StressCase, routing: Routing, variant: str, *, judge_noise: float = 0.0,
               applicability_noise: float | None = None, rng: random.Random, design: str = "per_prompt",
               confirm_rng: random.Random | None = None, errors: ErrorModel | None = None,
               systematic: frozenset[str] = frozenset()) -> tuple[float, float]:
    """One draw: (clean, perturbed) scores under the judge's and the applicability step's errors.
    With ``confirm_rng`` every failing reading is confirmed (draws from that stream)."""
    return noisy_pair_cost(tree, case, routing, variant, judge_noise=judge_noise,
                           applicability_noise=applicability_noise, rng=rng, design=design,
                           confirm_rng=confirm_rng, errors=errors, systematic=systematic)[:2]


def noisy_pair_cost(tree: RubricTree, case: StressCase, routing: Routing, variant: str, *, judge_noise: float = 0.0,
                    applicability_noise: float | None = None, rng: random.Random, design: str = "per_prompt",
                    confirm_rng: random.Random | None = None, errors: ErrorModel | None = None,
                    systematic: frozenset[str] = frozenset(),
                    app_rng: random.Random | None = None, posterior=None, panel: PanelSim | None = None,
                    panel_rng: random.Random | None = None) -> tuple[float, float, int, int, int, int]:
    """:func:`noisy_pair`, the extra (confirmation) readings of the clean and the perturbed reply,
    and the true failures of each that a wrong "absent" dropped. ``errors`` (default: the
    independent model of ``judge_noise``/``applicability_noise``) gives the rates; ``systematic``
    the leaves misread every time (:meth:`ErrorModel.systematic`); ``app_rng`` the stream of the
    critical leaves' second applicability reading (default: ``rng``). ``posterior``
    (:class:`reward.scoring.posterior.Posterior`): each leaf scored at P(met | its readings) instead
    of its (confirmed) reading; ``panel``: a second judge reads its leaves once per reply (from
    ``panel_rng``), its reading entering the posterior (the extra readings count its items)."""
    if panel is not None and posterior is None:
        raise ValueError("a panel's readings combine through the posterior: give posterior too")
    if design not in DESIGNS:
        raise ValueError(f"design must be one of {DESIGNS}, got {design!r}")
    errors = errors or ErrorModel.independent(judge_noise, applicability_noise)
    reader = _Reader(tree, errors, systematic)
    reader_b = _Reader(tree, panel.errors, panel.systematic) if panel is not None else None
    panel_rng = panel_rng or rng
    app_rng = app_rng or rng
    kw = score_kwargs(routing, variant)
    truth = {lid: case.is_applicable(lid, tree[lid].conditional) for lid in routing.leaf_ids}
    asked = {a.leaf_id for a in routing.active if tree[a.leaf_id].conditional and a.reason not in _NOT_ASKED}

    def decide() -> dict[str, bool]:
        out = {}
        for lid, present in truth.items():
            if lid not in asked:
                out[lid] = present if design == "three_way" else True
                continue
            severity = tree.severity[lid]
            rate = errors.absent_error(severity) if present else errors.app_false_present
            wrong = rng.random() < rate
            if wrong and present and severity == "critical":  # read absent: asked again before it leaves
                again = True if app_rng.random() < errors.reread_correlation else app_rng.random() < rate
                wrong = again
            out[lid] = present != wrong
        return out

    shared = decide()  # per prompt: one decision for both replies
    out: list[float] = []
    extra: list[int] = []
    lost: list[int] = []
    for failed in (case.clean_failed, case.failed):
        decided = shared if design == "per_prompt" else decide()
        met: dict[str, bool] = {}
        n_extra = n_lost = 0
        for lid in routing.leaf_ids:
            fails = truth[lid] and lid in failed  # a leaf whose trigger is absent passes vacuously
            u = rng.random()  # drawn for every leaf, scored only when kept
            if design == "three_way" and not truth[lid]:
                if reader.first(lid, False, u):  # an absent trigger answered as a verdict: a failure
                    read, k = (True, 0) if confirm_rng is None else reader.confirmed(lid, False, True, confirm_rng)
                    n_extra += k
                    if read:
                        met[lid] = tree[lid].polarity == "negative"
                continue
            if not decided[lid]:
                n_lost += fails
                continue
            read = reader.first(lid, fails, u)
            reads = [read]
            if confirm_rng is not None:
                reads = reader.confirm_readings(lid, fails, read, confirm_rng)
                read = reads[-1] if len(reads) != 2 else reads[0]
                n_extra += len(reads) - 1
            if posterior is not None:
                second: list[bool] = []
                if reader_b is not None and (panel.leaves is None or lid in panel.leaves):
                    second = [reader_b.first(lid, fails, panel_rng.random())]
                    n_extra += 1
                q = posterior.p_fail(lid, tree.severity[lid], tree[lid].polarity, [reads, second], case.language)
                met[lid] = posterior.met_value(tree[lid].polarity, q)
                continue
            met[lid] = read if tree[lid].polarity == "negative" else not read
        out.append(score_tree(tree, met, **kw).score if met else 1.0)
        extra.append(n_extra)
        lost.append(n_lost)
    return out[0], out[1], extra[0], extra[1], lost[0], lost[1]


def noise_summary(tree: RubricTree, cases: Sequence[StressCase], routings: Sequence[Routing], variant: str, *,
                  judge_noise: float = 0.0, applicability_noise: float | None = None, seed: int = 0,
                  repeats: int = 20, margin: float = 0.02, design: str = "per_prompt",
                  confirm_failures: bool = False, errors: ErrorModel | None = None, posterior=None,
                  panel: PanelSim | None = None) -> dict[str, Any]:
    """Score every case ``repeats`` times under noise; the summary the JSON and report show.

    ``errors`` gives the judge's error model; without it, the independent model of
    ``judge_noise`` (and ``applicability_noise``, default ``judge_noise``). ``confirm_failures``:
    model failure confirmation (see the module docstring); the summary then also gives the extra
    judge readings per reply (``extra_items_per_reply``, clean and perturbed)."""
    if errors is None:
        _check("judge_noise", judge_noise)
        app = _check("applicability_noise", judge_noise if applicability_noise is None else applicability_noise)
        errors = ErrorModel.independent(judge_noise, app)
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    rng = random.Random(seed)
    confirm_rng = random.Random(f"{seed}/confirm") if confirm_failures else None
    app_rng = random.Random(f"{seed}/applicability")
    systematic = errors.systematic(tree, seed)
    panel_rng = random.Random(f"{seed}/panel")
    rows: list[tuple[str, float, float, int, int, int, int]] = []
    for case, routing in zip(cases, routings):
        for _ in range(repeats):
            drawn = noisy_pair_cost(tree, case, routing, variant, rng=rng, design=design, confirm_rng=confirm_rng,
                                    errors=errors, systematic=systematic, app_rng=app_rng, posterior=posterior,
                                    panel=panel, panel_rng=panel_rng)
            rows.append((case.perturbation, *drawn))

    def stats(sel: list[tuple[str, float, float, int, int, int, int]]) -> dict[str, Any]:
        clean = [r[1] for r in sel]
        deltas = [r[1] - r[2] for r in sel]
        out = {"clean_mean": statistics.fmean(clean), "clean_sd": statistics.pstdev(clean),
               "detection_rate": sum(d > margin for d in deltas) / len(deltas),
               "mean_penalty": statistics.fmean(deltas), "n": len(sel),
               "dropped_failures_per_reply": statistics.fmean([x for r in sel for x in r[5:]])}
        if confirm_failures or panel is not None:
            out["extra_items_per_reply"] = statistics.fmean([x for r in sel for x in r[3:5]])
            out["extra_items_per_clean_reply"] = statistics.fmean([r[3] for r in sel])
            out["extra_items_per_perturbed_reply"] = statistics.fmean([r[4] for r in sel])
        return out

    by = {p: stats([r for r in rows if r[0] == p]) for p in PERTURBATIONS if any(r[0] == p for r in rows)}
    app_noise = errors.app_false_present
    return {"judge_noise": errors.false_fail["*"], "applicability_noise": app_noise, "seed": seed,
            "posterior": posterior is not None, "panel": None if panel is None else (
                "all" if panel.leaves is None else len(panel.leaves)),
            "repeats": repeats, "scoring_variant": variant, "design": design, "confirm_failures": confirm_failures,
            "errors": errors.source, "reread_correlation": errors.reread_correlation,
            "systematic_leaves": len(systematic), **stats(rows), "by_perturbation": by}


def noise_tolerance(tree: RubricTree, cases: Sequence[StressCase], routings: Sequence[Routing], variant: str, *,
                    errors: ErrorModel | None = None, target: float = 0.90, seeds: Sequence[int] = (0,),
                    repeats: int = 5, margin: float = 0.02, confirm_failures: bool = True,
                    grid: Sequence[float] = (0.0, 0.025, 0.05, 0.075, 0.1, 0.125, 0.15, 0.2, 0.25, 0.3)
                    ) -> dict[str, Any]:
    """The largest error rate of ``grid`` at which detection (mean over ``seeds``) stays at or
    above ``target``, under ``errors``' correlation and systematic leaves with every rate set to
    the grid's value (default: independent readings); None when even the smallest fails. Also the
    detection rate at every point of the grid, in order, up to the first point below the target."""
    base = errors or ErrorModel()
    curve: list[dict[str, float]] = []
    best = None
    for e in grid:
        model = base.scaled(e)
        runs = [noise_summary(tree, cases, routings, variant, seed=s, repeats=repeats, margin=margin,
                              confirm_failures=confirm_failures, errors=model) for s in seeds]
        det = statistics.fmean(r["detection_rate"] for r in runs)
        curve.append({"error_rate": e, "detection_rate": det,
                      "clean_mean": statistics.fmean(r["clean_mean"] for r in runs)})
        if det < target:
            break
        best = e
    return {"target": target, "tolerance": best, "reread_correlation": base.reread_correlation,
            "systematic_fraction": base.systematic_fraction, "systematic_leaves": len(base.systematic_leaves),
            "confirm_failures": confirm_failures, "seeds": list(seeds), "repeats": repeats, "curve": curve}



def noise_blocks(tree: RubricTree, cases: Sequence[StressCase], routings: Sequence[Routing], variant: str, *,
                 independent: ErrorModel, other: ErrorModel | None = None, other_kind: str = "correlated",
                 seed: int = 0, repeats: int = 20, margin: float = 0.02, confirm_failures: bool = False,
                 tolerance: bool = True) -> dict[str, Any]:
    """The noise part of ``rubricstree stress``'s summary: the independent model and, side by side,
    the correlated or measured one (``other``, keyed ``noise_<other_kind>``), each without and
    (``confirm_failures``) with failure confirmation on the same draws, and each model's noise
    tolerance (:func:`noise_tolerance`, under ``noise_tolerance``)."""
    if other_kind not in ("correlated", "measured"):
        raise ValueError(f"other_kind must be 'correlated' or 'measured', got {other_kind!r}")
    out: dict[str, Any] = {}
    models = [("noise", "independent", independent)] + ([(f"noise_{other_kind}", other_kind, other)] if other else [])
    for key, _, model in models:
        for suffix, confirm in (("", False), ("_confirmed", True))[:1 + confirm_failures]:
            out[key + suffix] = noise_summary(tree, cases, routings, variant, seed=seed, repeats=repeats,
                                              margin=margin, confirm_failures=confirm, errors=model)
    if tolerance:
        out["noise_tolerance"] = {
            name: noise_tolerance(tree, cases, routings, variant, errors=model, seeds=(seed,),
                                  repeats=max(2, repeats // 4), margin=margin, confirm_failures=confirm_failures)
            for _, name, model in models}
    return out
