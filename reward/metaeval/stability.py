"""Stability of the reward across repeats, temperatures and judge backbones.

For every configuration (backbone x method x mode x temperature) the rollouts are scored
``repeats`` times; per configuration we report the ICC3 across repeats (repeats as raters), the
verdict flip rate (share of (rollout, leaf) verdicts that are not the same in every repeat), the
mean per-rollout standard deviation of the score and the routing stability (mean pairwise Jaccard
of the active leaf sets across repeats). Backbones are compared pairwise (ICC3 of their mean
scores, Jaccard of their routings), and the principle baseline is scored beside the tree.

How temperature applies, and why nothing is served twice from the cache:

- ``choice`` mode scores the rollouts once at temperature 0 with the reward as built (T = 0 gives
  exactly ``rubricstree score``'s scores) and keeps each verdict's p_yes (the judge's probability
  of "yes" over {yes, no}; the durable verdict cache may answer it). With failure confirmation on,
  it also reads every graded item under the two confirmation prompts
  (``RubricReward.readings``). A repeat at temperature T then samples each reading from the
  tempered two-way distribution ``p^(1/T) / (p^(1/T) + (1-p)^(1/T))`` with a seeded RNG per
  (seed, backbone, T, repeat, rollout, leaf, reading), which is exactly what sampling the one
  answer token at T would do when only yes/no are allowed, and takes the readings confirmation
  would take: a sampled failure is read again, a disagreement a third time, the majority stands.
  Soft scoring stays soft: the value scored is the mean p of the readings taken (the judge's
  logprobs do not change with the sampling temperature; which readings are taken does), hard
  scoring the final yes/no. Repeats differ only through the RNG; the routing and the
  applicability step are those of temperature 0.
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
        make_reward: ``judge -> reward`` (``RewardSettings.build`` on that judge: the reward that is
            trained is the reward measured).
        tree: the rubric tree the reward scores on (resampled choice verdicts are rescored on it).
        out_dir: output folder.
        settings: what ``summary.json`` records about the reward (``RewardSettings.record``).
    """

    def __init__(self, rollouts: Sequence, backbones: dict[str, Callable], make_reward: Callable, tree, *,
                 out_dir: Path, temperatures: Sequence[float], repeats: int, modes: Sequence[str] = ("choice",),
                 baseline: bool = True, seed: int = 0, progress: bool = True,
                 settings: dict[str, Any] | None = None) -> None:
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
        self.settings = settings or {}

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
        from reward.progress import bar as progress_bar

        self.out_dir.mkdir(parents=True, exist_ok=True)
        done = self._done()
        configs = self._configs()
        todo = [(c, r) for c in configs for r in range(self.repeats)
                if any(done.get((*_key(c), r, ro.id), {}).get("score") is None for ro in self.rollouts)]
        bar = progress_bar(len(todo), unit="repeat", desc="stability", enabled=self.progress and bool(todo))
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
            if b not in choice_cache:  # graded once per backbone at T=0; repeats resample the readings
                judge = self.backbones[b]("choice", 0.0, True)
                try:
                    reward = self.make_reward(judge)
                    results = await reward.score(self.rollouts)
                    readings = {}
                    if getattr(reward, "confirm_failures", False) and any(x > 0 for x in self.temperatures):
                        readings = await reward.readings(self.rollouts, results)
                    choice_cache[b] = (reward, {s.id: s for s in results}, readings)
                finally:
                    await judge.aclose()
            reward, scored, readings = choice_cache[b]
            return [self._resample(base, scored[ro.id], t, repeat, reward, readings.get(ro.id)) for ro in rollouts]
        judge = self.backbones[b]("explain", t, False)
        try:
            scores = await self.make_reward(judge).score(rollouts)
        finally:
            await judge.aclose()
        return [{**base, "id": s.id, "score": s.score, "failure": "; ".join(s.failures) or None,
                 "leaves": {lr.leaf_id: lr.met for lr in s.leaves}, **_routing(s)} for s in scores]

    def _resample(self, base: dict, s, t: float, repeat: int, reward, readings: dict | None = None) -> dict[str, Any]:
        """One repeat of a choice-mode result (see the module docstring), scored by the reward's
        own :meth:`~reward.stages.rubric_reward.RubricReward.rescore` (the same routing, scoring
        variant and combination as ``score``). At T=0 the verdicts are the judge's own final ones,
        so the score is the one ``score`` gave."""
        row = {**base, "id": s.id, **_routing(s)}
        if s.failures and s.score is None:
            return {**row, "score": None, "failure": "; ".join(s.failures)}
        if t <= 0 or s.format_failure:
            leaves, items = reward.rescorer.verdicts(s)
            return {**row, "score": reward.rescore(s, leaves, items), "failure": None,
                    "leaves": {lr.leaf_id: bool(lr.met) for lr in s.leaves}}
        soft = s.scoring == "soft"
        confirm = readings is not None

        def draw(p: float, key: str) -> bool:
            return _uniform(self.seed, base["backbone"], t, repeat, s.id, key) < tempered(p, t)

        def one(ps: list[float | None], bad_when_met: bool, key: str) -> tuple[bool, float]:
            taken = [ps[0]]
            met = draw(ps[0], key)
            if confirm and met == bad_when_met and ps[1] is not None:  # a failure: read again
                taken.append(ps[1])
                second = draw(ps[1], key + "/2")
                if second != met and ps[2] is not None:  # a disagreement: the third reading decides
                    taken.append(ps[2])
                    met = draw(ps[2], key + "/3")
            return met, sum(taken) / len(taken)

        def first_only(met, p) -> list[float | None]:
            return [float(p) if p is not None else float(bool(met)), None, None]

        got = readings or {"leaves": {}, "items": []}
        met_of, leaves = {}, {}
        for lr in s.leaves:
            ps = got["leaves"].get(lr.leaf_id)
            ps = ps if ps and ps[0] is not None else first_only(lr.met, lr.p_yes)
            met_of[lr.leaf_id], p = one(ps, lr.polarity == "negative", lr.leaf_id)
            leaves[lr.leaf_id] = p if soft else met_of[lr.leaf_id]
        items = []
        for i, it in enumerate(s.rubric_items):
            ps = got["items"][i] if i < len(got["items"]) and got["items"][i][0] is not None else \
                first_only(it.met, it.p_yes)
            met, p = one(ps, it.points < 0, f"item{i}")
            items.append(p if soft else met)
        return {**row, "score": reward.rescore(s, leaves, items), "failure": None, "leaves": met_of}

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
                "backbones": names, "reward": self.settings, "configs": configs, "pairwise": pairwise}

    def run(self) -> dict[str, Any]:
        """Grade, summarise, write ``summary.json`` and the reports; returns the summary."""
        from reward.metaeval.report import write_stability_report

        summary = self.summarise(asyncio.run(self._run()))
        (self.out_dir / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
        write_stability_report(self.out_dir, summary)
        return summary
