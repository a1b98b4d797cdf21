"""Does the reward pay for length? (issue 46, part 3)

    python benchmarks/length_neutrality.py [--cases bundled,blind:test] [--out FILE] [--json]

At equal content a longer reply must never score higher. For every case's good reply (oracle
verdicts: the case's labels, the embedding router, the default scoring, applicability from the
labels), three variants are scored the same way:

- ``restated``: the reply, then its own sentences said again ("To sum up: ..."): the same content
  at about twice the length; it fails what its label says a padded reply fails
  (``cm_proportional_length``, ``cm_filler``: repetition that adds no information), when routed;
- ``filler``: the reply wrapped in generic disclaimers and pleasantries (``cm_filler``,
  ``cm_proportional_length``, and ``cm_main_message_first`` when the preamble comes first);
- ``answer only``: the reply's first sentence (less content: reported, not judged by the rule).

Reported: how often a padded variant scores above the reply (must be 0), the mean drop, and the
Pearson correlation of score with length over every labelled reply (good and flawed) of each set.
Oracle verdicts measure routing and scoring, not a judge: a judge that misses padding would pay for
it; calibrate it (``rubricstree judge calibrate``) to know.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILLER_BEFORE = ("Thank you so much for your question, it is a really important one and I am glad you asked. "
                 "Please remember that I am not a doctor and that everyone's situation is different. ")
FILLER_AFTER = (" I hope this helps. Please remember that this information is general and is not a substitute for "
                "professional medical advice, diagnosis or treatment. Always consult a qualified healthcare "
                "provider with any questions you may have. Everyone is different, so please take care.")


def sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?。！？])\s+", text.strip()) if s]


def variants(reply: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Variant name -> (text, the leaves it fails beyond the reply's own)."""
    sents = sentences(reply)
    restated = reply + "\n\nTo sum up: " + " ".join(sents)
    return {"restated": (restated, ("cm_proportional_length", "cm_filler")),
            "filler": (FILLER_BEFORE + reply + FILLER_AFTER, ("cm_proportional_length", "cm_filler",
                                                               "cm_main_message_first")),
            "answer only": (sents[0] if sents else reply, ())}


def pearson(xs, ys) -> float | None:
    from reward.integrations.monitors import pearson as p

    return p(xs, ys)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default="bundled,blind:test")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/length_neutrality.json"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from reward.judge.cache import VerdictCache
    from reward.router.base import CachedRouter
    from reward.scoring.tree_score import score_tree
    from reward.settings import RewardSettings
    from reward.stages.build import build_router
    from reward.stress import load_cases
    from reward.stress.runner import oracle_applicable, oracle_met, route_cases, score_kwargs
    from reward.stress.sets import resolve_cases
    from reward.tree import load_tree

    tree = load_tree()
    settings = RewardSettings()
    router = CachedRouter(build_router(settings, tree, None), VerdictCache(ROOT / ".cache" / "bench" / "routings.sqlite"))
    out: dict = {"sets": {}}
    for spec in args.cases.split(","):
        for label, path in resolve_cases(spec):
            cases = load_cases(path, tree)
            routings = asyncio.run(route_cases(router, cases))
            higher = {"restated": 0, "filler": 0}
            drops = {"restated": [], "filler": [], "answer only": []}
            lengths, scores = [], []
            seen = set()
            for case, routing in zip(cases, routings):
                scored = oracle_applicable(tree, case, routing)
                kw = score_kwargs(routing, settings.scoring_variant)

                def score(failed, scored=scored, kw=kw) -> float:
                    met = oracle_met(tree, scored, failed)
                    return score_tree(tree, met, **kw).score if met else 1.0

                base = score(case.clean_failed)
                if (case.conversation, case.clean) not in seen:  # one good reply per conversation
                    seen.add((case.conversation, case.clean))
                    lengths.append(len(case.clean))
                    scores.append(base)
                    for name, (_text, extra) in variants(case.clean).items():  # oracle: the labels decide
                        s = score(tuple(case.clean_failed) + extra)
                        drops[name].append(base - s)
                        if name in higher and s > base + 1e-12:
                            higher[name] += 1
                lengths.append(len(case.perturbed))
                scores.append(score(case.failed))
            n = len(drops["restated"])
            out["sets"][label] = {
                "good_replies": n,
                "padded_scoring_higher": higher,
                "mean_drop": {k: sum(v) / len(v) for k, v in drops.items() if v},
                "score_length_correlation": pearson(lengths, scores),
                "replies": len(lengths)}
            print(f"{label}: {n} good replies; padded above the reply: {higher}", file=sys.stderr)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    for label, r in out["sets"].items():
        md = r["mean_drop"]
        print(f"{label}: {r['good_replies']} good replies, {r['replies']} labelled replies")
        print(f"  padded above the reply: restated {r['padded_scoring_higher']['restated']}, filler "
              f"{r['padded_scoring_higher']['filler']} (must be 0)")
        print(f"  mean drop: restated {md['restated']:.3f}, filler {md['filler']:.3f}, answer only {md['answer only']:.3f}")
        corr = r["score_length_correlation"]
        print(f"  score-length correlation over the labelled replies: {'n/a' if corr is None else f'{corr:+.3f}'}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
