"""Best-of-n: sample n answers per prompt, score them all with the rubric reward, keep the best.

Data flow::

    prompt rows (+ system prompt: none | ours | handbook:FILE)
      -> policy, n samples per prompt    -> "samples" record {id, samples} (appended as generated)
      -> RubricReward, a prompt at a time -> "scored" record {id, prompt, rubrics, completion (the
         best), best_index, score, scores, worst_index}
    -> preference pairs (chosen = best, rejected = worst, only where they differ in score) as an
       HF ``datasets`` dataset saved with ``save_to_disk``

Ties go to the lowest sample index; an unscored sample (judge failure) never wins. With n = 1
this is plain generation plus scoring (the baseline and handbook arms of the report). A rerun
after a kill samples only prompts without a "samples" record and scores only unscored prompts.
A "scored" record is a valid rollout (``id``, ``prompt``, ``completion``), so the file can feed
``optimize revise`` and ``optimize report``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reward.stages.rubric_reward import Rollout
from training.generation import GenRequest
from training.optimize.scoring import score_by_prompt
from training.system_prompt import apply_system_prompt

__all__ = ["pick_best", "preference_pairs", "run_best_of_n", "save_pairs"]


def pick_best(scores: Sequence[float | None]) -> tuple[int | None, int | None]:
    """``(best index, worst index)`` over the scored samples (lowest index on ties)."""
    idx = [i for i, s in enumerate(scores) if s is not None]
    if not idx:
        return None, None
    best = max(idx, key=lambda i: (scores[i], -i))
    worst = min(idx, key=lambda i: (scores[i], i))
    return best, worst


def run_best_of_n(prompts: Sequence, reward, generator, log, *, n: int, system_prompt: str = "none",
                  concurrency: int = 8) -> list[dict[str, Any]]:
    """Sample, score and pick (or resume doing so); returns the "scored" records in prompt order."""
    samples = {r["id"]: r for r in log.records("samples") if not r.get("error")}  # failed: retried
    todo = [p for p in prompts if p.id not in samples]
    if todo:
        requests = [GenRequest(p.id, apply_system_prompt(p.messages(), system_prompt), n=n) for p in todo]

        def on_gen(key: str, out) -> None:
            texts = list(out.samples) if out.ok else []
            samples[key] = log.append("samples", {"id": key, "samples": texts, "error": out.error})
        generator.generate(requests, on_gen, desc=f"sample n={n}")

    scored = {r["id"]: r for r in log.records("scored")}
    rows = {p.id: p for p in prompts}
    rollouts = [Rollout(id=f"{p.id}#{j}", prompt=p.prompt, completion=text, rubrics=p.rubrics, context=p.context)
                for p in prompts if p.id not in scored for j, text in enumerate(samples[p.id]["samples"])]

    def on_scores(results) -> None:
        pid = results[0].id.rsplit("#", 1)[0]
        texts = samples[pid]["samples"]
        vals = [s.score for s in sorted(results, key=lambda s: int(s.id.rsplit("#", 1)[1]))]
        best, worst = pick_best(vals)
        p = rows[pid]
        scored[pid] = log.append("scored", {
            "id": pid, "prompt": p.messages(), "rubrics": [r.model_dump() for r in p.rubrics] if p.rubrics else None,
            "completion": texts[best] if best is not None else None, "best_index": best, "worst_index": worst,
            "score": vals[best] if best is not None else None, "scores": vals,
            "rejected": texts[worst] if worst is not None else None})
    if rollouts:
        asyncio.run(score_by_prompt(reward, rollouts, on_scores, concurrency=concurrency, desc="score samples"))
    return [scored[p.id] for p in prompts if p.id in scored]


def preference_pairs(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chosen/rejected pairs (conversational TRL format) where the best beats the worst."""
    out = []
    for r in records:
        if r.get("best_index") is None or r["best_index"] == r["worst_index"]:
            continue
        sb, sw = r["scores"][r["best_index"]], r["scores"][r["worst_index"]]
        if sb <= sw:
            continue
        out.append({"id": r["id"], "prompt": r["prompt"],
                    "chosen": [{"role": "assistant", "content": r["completion"]}],
                    "rejected": [{"role": "assistant", "content": r["rejected"]}],
                    "score_chosen": sb, "score_rejected": sw})
    return out


def save_pairs(records: Sequence[dict[str, Any]], path: str | Path) -> int:
    """Save the preference pairs as an HF dataset (``save_to_disk``); returns how many."""
    from datasets import Dataset

    pairs = preference_pairs(records)
    Dataset.from_list(pairs).save_to_disk(str(path))
    return len(pairs)
