"""Feedback and revise: show the policy the checks its answer failed, ask for a revision, keep
the best version.

Data flow per rollout, rounds 0..K (round 0 scores the original completion)::

    best-so-far answer + its failed checks (RubricReward feedback, heaviest first)
      -> policy: revise  -> "revision" record (appended as it is generated)
      -> RubricReward    -> "round" record {id, round, completion, score, feedback}
    after the last round: "best" record {id, best_round, completion, score, scores by round}

The best version is the highest-scored round (ties: the earliest, so an answer is only replaced
by a strictly better one); an unscored round (judge failure) never wins. A rollout whose answer
failed no check stops early. A rerun after a kill generates only revisions not yet in the log and
scores only rounds not yet scored.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from reward.stages.rubric_reward import Rollout
from training.generation import GenRequest
from training.optimize.scoring import score_by_prompt

__all__ = ["REVISE_INSTRUCTION", "best_round", "load_revise_rollouts", "revise_rollouts", "revision_messages"]

REVISE_INSTRUCTION = (
    "A clinical reviewer went through your reply above and listed what it got wrong or left out:\n\n"
    "{feedback}\n\n"
    "Rewrite your reply to my previous message so that it fixes these points and keeps everything that "
    "was already right. Give only the rewritten reply, written as if it were your first answer to me.")


def load_revise_rollouts(path) -> list[Rollout]:
    """Rollouts to revise: a rollouts JSONL, or an optimisation output (its "scored"/"best" records)."""
    from reward.jsonl import iter_jsonl
    from reward.stages.rubric_reward import load_rollouts, parse_rollouts

    kinds = {obj.get("kind") for _, obj in iter_jsonl(path)}
    if kinds == {None}:
        return load_rollouts(path)
    keep = "best" if "best" in kinds else "scored"
    return parse_rollouts([o for _, o in iter_jsonl(path) if o.get("kind") == keep and o.get("completion") is not None],
                          source=str(path))


def revision_messages(rollout: Rollout, answer: str, feedback: str) -> list[dict[str, Any]]:
    """The conversation asking for a revision: the prompt, the answer, then our instruction."""
    return [*(m.model_dump() for m in rollout.prompt), {"role": "assistant", "content": answer},
            {"role": "user", "content": REVISE_INSTRUCTION.format(feedback=feedback)}]


def best_round(rounds: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The highest-scored round (earliest on ties); None when no round is scored."""
    scored = [r for r in sorted(rounds, key=lambda r: r["round"]) if r.get("score") is not None]
    return max(scored, key=lambda r: r["score"]) if scored else None


def _round_record(rid: str, k: int, text: str, s) -> dict[str, Any]:
    return {"id": rid, "round": k, "completion": text, "score": s.score, "tree_score": s.tree_score,
            "points_score": s.points_score, "feedback": s.feedback, "failures": s.failures[:5]}


def revise_rollouts(rollouts: Sequence[Rollout], reward, generator, log, *, rounds: int,
                    concurrency: int = 8) -> list[dict[str, Any]]:
    """Run (or resume) ``rounds`` revision rounds over ``rollouts``; returns the "best" records."""
    by_id = {r.id: r for r in rollouts}
    scored: dict[tuple[str, int], dict] = {(r["id"], r["round"]): r for r in log.records("round")}
    # a failed generation (error, no text) is retried on a rerun
    revised: dict[tuple[str, int], dict] = {(r["id"], r["round"]): r for r in log.records("revision")
                                            if r.get("completion") is not None}

    def history(rid: str) -> list[dict]:
        return [scored[(rid, k)] for k in range(rounds + 1) if (rid, k) in scored]

    def on_scores(texts: dict[str, str], k: int):
        def done(scores) -> None:
            for s in scores:
                scored[(s.id, k)] = log.append("round", _round_record(s.id, k, texts[s.id], s))
        return done

    for k in range(rounds + 1):
        if k:
            requests = []
            for rid, ro in by_id.items():
                if (rid, k) in revised or (rid, k) in scored:
                    continue
                best = best_round(history(rid))
                if best is None or not best["feedback"]:
                    continue  # nothing scored to revise from, or nothing left to fix
                requests.append(GenRequest(f"{rid}", revision_messages(ro, best["completion"], best["feedback"])))

            def on_gen(key: str, out, k=k) -> None:
                revised[(key, k)] = log.append("revision", {"id": key, "round": k, "completion": out.text,
                                                            "error": out.error})
            if requests:
                generator.generate(requests, on_gen, desc=f"revise round {k}")
            texts = {rid: revised[(rid, k)]["completion"] for rid in by_id
                     if (rid, k) in revised and (rid, k) not in scored and revised[(rid, k)]["completion"] is not None}
        else:
            texts = {rid: ro.completion for rid, ro in by_id.items() if (rid, 0) not in scored}
        todo = [by_id[rid].model_copy(update={"completion": t}) for rid, t in texts.items()]
        if todo:
            asyncio.run(score_by_prompt(reward, todo, on_scores(texts, k), concurrency=concurrency,
                                        desc=f"score round {k}"))

    have_best = {r["id"]: r for r in log.records("best")}
    out = []
    for rid, ro in by_id.items():
        if rid in have_best:
            out.append(have_best[rid])
            continue
        hist = history(rid)
        best = best_round(hist)
        rec = {"id": rid, "prompt": [m.model_dump() for m in ro.prompt],
               "rubrics": [r.model_dump() for r in ro.rubrics] if ro.rubrics else None,
               "best_round": None if best is None else best["round"],
               "completion": ro.completion if best is None else best["completion"],
               "score": None if best is None else best["score"],
               "scores": {str(h["round"]): h["score"] for h in hist}}
        out.append(log.append("best", rec))
    return out
