"""Stability of the reward across repeats, temperatures and judge backbones.

For every configuration (backbone x method x mode x temperature) the rollouts are scored
``repeats`` times; per configuration we report the ICC3 across repeats (repeats as raters), the
verdict flip rate (share of (rollout, leaf) verdicts that are not the same in every repeat), the
mean per-rollout standard deviation of the score and the routing stability (mean pairwise Jaccard
of the active leaf sets across repeats). Backbones are compared pairwise (ICC3 of their mean
scores, Jaccard of their routings), and the principle baseline is scored beside the tree.

How temperature applies, and why nothing is served twice from the cache:

- ``choice`` mode grades each (rollout, leaf) once at temperature 0 and keeps p_yes (the
  judge's probability of "yes" over {yes, no}; the durable verdict cache may answer it). A
  repeat at temperature T then samples each verdict from the tempered two-way distribution
  ``p^(1/T) / (p^(1/T) + (1-p)^(1/T))`` with a seeded RNG per (seed, backbone, T, repeat,
  rollout, leaf), which is exactly what sampling the one answer token at T would do when only
  yes/no are allowed. T = 0 takes the argmax. Repeats differ only through the RNG.
- ``explain`` mode and the principle baseline send T to the server and run with the verdict
  cache disabled for every repeat (a cached verdict would make repeats identical). Routing
  (relevance probabilities from logprobs) is recomputed per repeat but is deterministic given
  the judge, so its Jaccard across repeats measures server nondeterminism; across backbones it
  measures how much the routing depends on the judge.

Resume: results go to ``OUT/stability.jsonl`` as each (configuration, repeat) chunk finishes; a
rerun skips every (configuration, repeat, rollout) already scored there.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from reward.metaeval import agreement as ag
from reward.metaeval.resultlog import append_rows, read_rows

OURS, BASELINE = "rubricstree", "principle"


def tempered(p: float, t: float) -> float:
    """P(yes) when sampling from {yes: p, no: 1-p} at temperature ``t`` (0: argmax)."""
    if t <= 0:
        return 1.0 if p >= 0.5 else 0.0
    if p <= 0 or p >= 1:
        return float(p >= 1)
    a, b = math.log(p) / t, math.log1p(-p) / t
    m = max(a, b)
    return math.exp(a - m) / (math.exp(a - m) + math.exp(b - m))


def _uniform(*key: Any) -> float:
    """A reproducible uniform draw in [0, 1) from a key (no global RNG state)."""
    h = hashlib.sha256(json.dumps(key, default=str).encode()).digest()
    return int.from_bytes(h[:8], "big") / 2 ** 64


def _jaccard(a: set, b: set) -> float:
    return 1.0 if not a and not b else len(a & b) / len(a | b)


def _mean_pairwise_jaccard(sets: Sequence[set]) -> float | None:
    pairs = list(itertools.combinations(sets, 2))
    return float(np.mean([_jaccard(a, b) for a, b in pairs])) if pairs else None


def _routing(s) -> dict[str, Any]:
    """The routing a result was scored under, kept with it: expanded nodes, rule-activated leaves."""
    from reward.scoring.variants import RULE_REASONS

    return {"expanded": list(s.routing.get("expanded") or ()),
            "rule_leaves": [lr.leaf_id for lr in s.leaves if lr.reason in RULE_REASONS]}


def _key(c: dict[str, Any]) -> tuple:
    return (c["backbone"], c["method"], c["mode"], float(c["temperature"]))


class StabilityRun:
    """Runs the grid and writes results as they come.

    Args:
        rollouts: validated ``Rollout`` records.
        backbones: name -> judge factory ``(mode, temperature, use_cache) -> Judge``.
        make_reward: ``judge -> RubricReward`` (builds the router on that judge).
        tree: the rubric tree the reward scores on (resampled choice verdicts are rescored on it).
        out_dir: output folder.
    """

    def __init__(self, rollouts: Sequence, backbones: dict[str, Callable], make_reward: Callable, tree, *,
                 out_dir: Path, temperatures: Sequence[float], repeats: int, modes: Sequence[str] = ("choice",),
                 baseline: bool = True, seed: int = 0, progress: bool = True) -> None:
        if repeats < 2:
            raise ValueError(f"--repeats must be at least 2 to measure stability, got {repeats}")
        if any(t < 0 for t in temperatures):
            raise ValueError(f"temperatures must be >= 0, got {list(temperatures)}")
        bad = [m for m in modes if m not in ("choice", "explain")]
        if bad:
            raise ValueError(f"modes must be choice or explain, got {bad}")
        self.rollouts, self.backbones, self.make_reward, self.tree = list(rollouts), backbones, make_reward, tree
        self.out_dir, self.temperatures, self.repeats = out_dir, list(temperatures), repeats
        self.modes, self.baseline, self.seed, self.progress = list(modes), baseline, seed, progress
        self.path = out_dir / "stability.jsonl"
        self.seconds: dict[tuple, float] = {}

    # ------------------------------------------------------------------ bookkeeping
    def _done(self) -> dict[tuple, dict[str, Any]]:
        return {(*_key(row), int(row["repeat"]), row["id"]): row for row in read_rows(self.path)}

    def _configs(self) -> list[dict[str, Any]]:
        out = []
        for b in self.backbones:
            for t in self.temperatures:
                out += [{"backbone": b, "method": OURS, "mode": m, "temperature": float(t)} for m in self.modes]
                if self.baseline:
                    out.append({"backbone": b, "method": BASELINE, "mode": "likert", "temperature": float(t)})
        return out

    # ------------------------------------------------------------------ grading
    async def _run(self) -> dict[tuple, dict[str, Any]]:
        from tqdm import tqdm

        self.out_dir.mkdir(parents=True, exist_ok=True)
        done = self._done()
        configs = self._configs()
        todo = [(c, r) for c in configs for r in range(self.repeats)
                if any(done.get((*_key(c), r, ro.id), {}).get("score") is None for ro in self.rollouts)]
        bar = tqdm(total=len(todo), unit="repeat", desc="stability", file=sys.stderr,
                   disable=not self.progress or not todo)
        choice_cache: dict[str, list] = {}
        try:
            for c, r in todo:
                t0 = time.perf_counter()
                missing = [ro for ro in self.rollouts if done.get((*_key(c), r, ro.id), {}).get("score") is None]
                rows = await self._grade(c, r, missing, choice_cache)
                append_rows(self.path, rows)
                for row in rows:
                    done[(*_key(row), r, row["id"])] = row
                self.seconds[_key(c)] = self.seconds.get(_key(c), 0.0) + time.perf_counter() - t0
                bar.update(1)
        finally:
            bar.close()
        return done

    async def _grade(self, c: dict[str, Any], repeat: int, rollouts: list, choice_cache: dict) -> list[dict]:
        base = {**c, "repeat": repeat}
        b, t = c["backbone"], c["temperature"]
        if c["method"] == BASELINE:
            from reward.metaeval.baseline import principle_scores

            judge = self.backbones[b]("explain", t, False)
            try:
                res = await principle_scores(judge, rollouts, use_cache=False)
            finally:
                await judge.aclose()
            return [{**base, "id": ro.id, "score": s, "failure": why} for ro, (s, why) in zip(rollouts, res)]
        if c["mode"] == "choice":
            if b not in choice_cache:  # graded once per backbone at T=0; repeats resample p_yes
                judge = self.backbones[b]("choice", 0.0, True)
                try:
                    reward = self.make_reward(judge)
                    choice_cache[b] = (reward, {s.id: s for s in await reward.score(self.rollouts)})
                finally:
                    await judge.aclose()
            reward, scored = choice_cache[b]
            return [self._resample(base, scored[ro.id], t, repeat, reward) for ro in rollouts]
        judge = self.backbones[b]("explain", t, False)
        try:
            scores = await self.make_reward(judge).score(rollouts)
        finally:
            await judge.aclose()
        return [{**base, "id": s.id, "score": s.score, "failure": "; ".join(s.failures) or None,
                 "leaves": {lr.leaf_id: lr.met for lr in s.leaves}, **_routing(s)} for s in scores]

    def _resample(self, base: dict, s, t: float, repeat: int, reward) -> dict[str, Any]:
        """One repeat of a choice-mode result: every verdict sampled at ``t`` from its p_yes, then
        scored by the reward's own :meth:`~reward.stages.rubric_reward.RubricReward.rescore`
        (the same routing, scoring variant and combination as ``score``); at T=0 the verdicts are
        the judge's own values, so the score is the one ``score`` gave."""
        row = {**base, "id": s.id, **_routing(s)}
        if s.failures and s.score is None:
            return {**row, "score": None, "failure": "; ".join(s.failures)}
        soft = getattr(reward, "scoring", "hard") == "soft"

        def value(v, key: str) -> bool | float:
            if t <= 0:
                return float(v.p_yes) if soft and v.p_yes is not None else bool(v.met)
            p = v.p_yes if v.p_yes is not None else float(bool(v.met))
            return _uniform(self.seed, base["backbone"], t, repeat, s.id, key) < tempered(p, t)

        met = {lr.leaf_id: value(lr, lr.leaf_id) for lr in s.leaves}
        items = [value(it, f"item{i}") for i, it in enumerate(s.rubric_items)]
        return {**row, "score": reward.rescore(s, met, items), "failure": None, "leaves": met}

    # ------------------------------------------------------------------ metrics
    def summarise(self, done: dict[tuple, dict[str, Any]]) -> dict[str, Any]:
        configs = []
        mean_scores: dict[tuple, dict[str, float]] = {}
        routes0: dict[tuple, dict[str, set]] = {}
        for c in self._configs():
            k = _key(c)
            reps = [[done.get((*k, r, ro.id)) for r in range(self.repeats)] for ro in self.rollouts]
            full = [(ro, rows) for ro, rows in zip(self.rollouts, reps)
                    if all(x is not None and x.get("score") is not None for x in rows)]
            row: dict[str, Any] = {**c, "repeats": self.repeats, "n": len(full),
                                   "unscored": len(self.rollouts) - len(full),
                                   "seconds": round(self.seconds[k], 3) if k in self.seconds else None}
            if len(full) >= 2:
                mat = np.array([[x["score"] for x in rows] for _, rows in full])
                icc = ag.icc3(mat)
                row["icc3"] = None if math.isnan(icc.icc3) else icc.icc3
                if icc.reason:
                    row["note"] = icc.reason
                row["mean_std"] = float(mat.std(axis=1).mean())
                mean_scores[k] = {ro.id: float(np.mean([x["score"] for x in rows])) for ro, rows in full}
            if c["method"] == OURS and full:
                flips = total = 0
                jac = []
                for _, rows in full:
                    sets = [set((x.get("leaves") or {}).keys()) for x in rows]
                    jac.append(_mean_pairwise_jaccard(sets))
                    for leaf in set.intersection(*sets):
                        vals = {rows_i["leaves"][leaf] for rows_i in rows}
                        total += 1
                        flips += len(vals) > 1
                row["flip_rate"] = flips / total if total else None
                row["routing_jaccard"] = float(np.mean([j for j in jac if j is not None])) if jac else None
                routes0[k] = {ro.id: set((rows[0].get("leaves") or {}).keys()) for ro, rows in full}
            configs.append(row)
        pairwise = []
        names = list(self.backbones)
        for a, b in itertools.combinations(names, 2):
            for c in self._configs():
                if c["backbone"] != a:
                    continue
                ka, kb = _key(c), (b, *_key(c)[1:])
                if ka not in mean_scores or kb not in mean_scores:
                    continue
                ids = sorted(set(mean_scores[ka]) & set(mean_scores[kb]))
                p: dict[str, Any] = {"method": c["method"], "mode": c["mode"], "temperature": c["temperature"],
                                     "a": a, "b": b, "n": len(ids)}
                if len(ids) >= 2:
                    icc = ag.icc3([[mean_scores[ka][i], mean_scores[kb][i]] for i in ids])
                    p["icc3"] = None if math.isnan(icc.icc3) else icc.icc3
                if ka in routes0 and kb in routes0:
                    p["routing_jaccard"] = float(np.mean([_jaccard(routes0[ka][i], routes0[kb][i]) for i in ids
                                                          if i in routes0[ka] and i in routes0[kb]] or [math.nan]))
                pairwise.append(p)
        return {"temperatures": self.temperatures, "repeats": self.repeats, "modes": self.modes, "seed": self.seed,
                "backbones": names, "configs": configs, "pairwise": pairwise}

    def run(self) -> dict[str, Any]:
        """Grade, summarise, write ``summary.json`` and the reports; returns the summary."""
        from reward.metaeval.report import write_stability_report

        summary = self.summarise(asyncio.run(self._run()))
        (self.out_dir / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
        write_stability_report(self.out_dir, summary)
        return summary
