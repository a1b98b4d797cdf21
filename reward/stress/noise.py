"""Judge error as part of the oracle stress test (``rubricstree stress --judge-noise E``).

A perfect judge is the oracle's premise; a real one errs. Here each case is scored ``repeats``
times with errors drawn at random (``--seed``), the way our pipeline would meet them:

- Applicability is decided once per prompt (``reward.router.applicability``), so a wrong
  decision is shared by the clean and the perturbed reply: each routed conditional leaf's
  decision is flipped with probability ``applicability_noise`` (default: ``judge_noise``). A leaf
  wrongly kept is then judged on a reply that cannot do what its absent trigger asks: its true
  verdict is a pass (vacuous), and it goes through the verdict noise below like any other. A
  leaf wrongly dropped leaves the score, even when the reply fails it.
- Verdicts are per reply: every routed leaf's verdict, applicable or not, is flipped with
  probability ``judge_noise`` (for a leaf left out as not applicable the flip changes nothing:
  its verdict is never asked for).

``design="three_way"`` models the alternative instead, a third verdict ("not applicable") read on
every (reply, leaf) item: each reply's decisions are drawn on their own, a leaf whose trigger is
absent gets a real verdict with probability ``judge_noise`` (a failure: the issue's "wrongly
answers no"), and an applicable leaf is called not applicable with probability ``applicability_noise``.

``confirm_failures=True`` models failure confirmation (``reward.stages.confirm``): a reading that
fails a leaf is read again, and a third time when the two disagree; the majority stands. Each
extra reading is an independent draw with the same error ``judge_noise``. That is the optimistic
case: a real judge's errors correlate across wordings of one question (a reply that misleads one
reading tends to mislead the next), which only a meta-evaluation against physician labels can
measure. The extra readings come from their own random stream, so with and without confirmation
on one seed the first readings are the same draws (a paired comparison), and the extra readings
per reply (the cost) are reported.

Reported: the clean replies' mean and standard deviation, and the detection rate and mean
penalty under noise, overall and by perturbation. What it cannot tell: a real judge's errors
are neither independent nor equally likely on every leaf; measure those against physician
labels (``rubricstree meta-eval``).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from typing import Any

from reward.router.base import Routing
from reward.scoring.tree_score import score_tree
from reward.stress.cases import PERTURBATIONS, StressCase
from reward.stress.runner import score_kwargs
from reward.tree.graph import RubricTree


def _check(name: str, value: float) -> float:
    if not 0.0 <= value <= 0.5:
        raise ValueError(f"{name} must be in [0, 0.5], got {value!r}")
    return value


DESIGNS = ("per_prompt", "three_way")


def _confirmed(fails: bool, first: bool, judge_noise: float, rng: random.Random) -> tuple[bool, int]:
    """The verdict after confirmation of a first reading ``first`` (True: a failure) of a leaf whose
    truth is ``fails``, and the extra readings it took: only failures are read again."""
    if not first:
        return first, 0
    second = fails ^ (rng.random() < judge_noise)
    if second:
        return True, 1
    return fails ^ (rng.random() < judge_noise), 2  # 1 vs 1: the third reading decides


def noisy_pair(tree: RubricTree, case: StressCase, routing: Routing, variant: str, *, judge_noise: float,
               applicability_noise: float, rng: random.Random, design: str = "per_prompt",
               confirm_rng: random.Random | None = None) -> tuple[float, float]:
    """One draw: (clean, perturbed) scores under the judge's and the applicability step's errors.
    With ``confirm_rng`` every failing reading is confirmed (draws from that stream)."""
    return noisy_pair_cost(tree, case, routing, variant, judge_noise=judge_noise,
                           applicability_noise=applicability_noise, rng=rng, design=design,
                           confirm_rng=confirm_rng)[:2]


def noisy_pair_cost(tree: RubricTree, case: StressCase, routing: Routing, variant: str, *, judge_noise: float,
                    applicability_noise: float, rng: random.Random, design: str = "per_prompt",
                    confirm_rng: random.Random | None = None) -> tuple[float, float, int, int]:
    """:func:`noisy_pair` and the extra (confirmation) readings of the clean and the perturbed reply."""
    if design not in DESIGNS:
        raise ValueError(f"design must be one of {DESIGNS}, got {design!r}")
    kw = score_kwargs(routing, variant)
    truth = {lid: case.is_applicable(lid, tree[lid].conditional) for lid in routing.leaf_ids}

    def decide() -> dict[str, bool]:
        return {lid: ok != (tree[lid].conditional and rng.random() < applicability_noise) for lid, ok in truth.items()}

    shared = decide()  # per prompt: one decision for both replies
    out: list[float] = []
    extra: list[int] = []
    for failed in (case.clean_failed, case.failed):
        decided = shared if design == "per_prompt" else decide()
        met: dict[str, bool] = {}
        n_extra = 0
        for lid in routing.leaf_ids:
            fails = truth[lid] and lid in failed  # a leaf whose trigger is absent passes vacuously
            flip = rng.random() < judge_noise      # drawn for every leaf, scored only when kept
            if design == "three_way" and not truth[lid]:
                if flip:  # an absent trigger answered as a verdict: a failure
                    read, k = (True, 0) if confirm_rng is None else _confirmed(False, True, judge_noise, confirm_rng)
                    n_extra += k
                    if read:
                        met[lid] = tree[lid].polarity == "negative"
                continue
            if decided[lid]:
                read = fails ^ flip
                if confirm_rng is not None:
                    read, k = _confirmed(fails, read, judge_noise, confirm_rng)
                    n_extra += k
                met[lid] = read if tree[lid].polarity == "negative" else not read
        out.append(score_tree(tree, met, **kw).score if met else 1.0)
        extra.append(n_extra)
    return out[0], out[1], extra[0], extra[1]


def noise_summary(tree: RubricTree, cases: Sequence[StressCase], routings: Sequence[Routing], variant: str, *,
                  judge_noise: float, applicability_noise: float | None = None, seed: int = 0,
                  repeats: int = 20, margin: float = 0.02, design: str = "per_prompt",
                  confirm_failures: bool = False) -> dict[str, Any]:
    """Score every case ``repeats`` times under noise; the summary the JSON and report show.
    ``confirm_failures``: model failure confirmation (see the module docstring); the summary then
    also gives the extra judge readings per reply (``extra_items_per_reply``, clean and perturbed)."""
    _check("judge_noise", judge_noise)
    app_noise = _check("applicability_noise", judge_noise if applicability_noise is None else applicability_noise)
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    rng = random.Random(seed)
    confirm_rng = random.Random(f"{seed}/confirm") if confirm_failures else None
    rows: list[tuple[str, float, float, int, int]] = []
    for case, routing in zip(cases, routings):
        for _ in range(repeats):
            c, p, xc, xp = noisy_pair_cost(tree, case, routing, variant, judge_noise=judge_noise,
                                           applicability_noise=app_noise, rng=rng, design=design,
                                           confirm_rng=confirm_rng)
            rows.append((case.perturbation, c, p, xc, xp))

    def stats(sel: list[tuple[str, float, float, int, int]]) -> dict[str, Any]:
        clean = [r[1] for r in sel]
        deltas = [r[1] - r[2] for r in sel]
        out = {"clean_mean": statistics.fmean(clean), "clean_sd": statistics.pstdev(clean),
               "detection_rate": sum(d > margin for d in deltas) / len(deltas),
               "mean_penalty": statistics.fmean(deltas), "n": len(sel)}
        if confirm_failures:
            out["extra_items_per_reply"] = statistics.fmean([x for r in sel for x in r[3:]])
            out["extra_items_per_clean_reply"] = statistics.fmean([r[3] for r in sel])
            out["extra_items_per_perturbed_reply"] = statistics.fmean([r[4] for r in sel])
        return out

    by = {p: stats([r for r in rows if r[0] == p]) for p in PERTURBATIONS if any(r[0] == p for r in rows)}
    return {"judge_noise": judge_noise, "applicability_noise": app_noise, "seed": seed, "repeats": repeats,
            "scoring_variant": variant, "design": design, "confirm_failures": confirm_failures, **stats(rows),
            "by_perturbation": by}
