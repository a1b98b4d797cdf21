"""The routing figures of issue 35 in one run: crises reached, urgency, recall and what the judge
reads per rollout, by language.

    python benchmarks/routing_targets.py [--json] [--hard ../shared/data/healthbench_hard_sample50.jsonl]

Printed (embedding router, real MiniLM, multilingual-e5 and lingua; oracle labels, no judge: these
measure routing, not a judge):

- crisis messages (tests/fixtures/crisis_messages.jsonl) that reach their critical leaf, by language;
- urgency precision and recall (tests/fixtures/urgency_messages.jsonl), by language;
- the bundled stress cases (four perturbations): label recall, critical recall, and per rollout the
  graded leaves (the routed leaves the case labels call applicable, plus the applicability
  questions of the prompt spread over a group of ``--group`` rollouts) and the criterion words the
  judge reads for them, by the prompt's language; with ``--confirm-labelled`` also one confirmation
  reading per labelled failure of the perturbed reply (a perfect judge's confirmations);
- the labelled routing set: recall, critical recall, precision (``rubricstree route eval``);
- HealthBench-Hard rows (skipped when the file is absent): routed leaves per prompt, median, by
  English and other languages.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from reward.paths import shared_data_dir  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
HARD = (shared_data_dir() or REPO.parent / "shared" / "data") / "healthbench_hard_sample50.jsonl"


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def measure(router, tree, *, group: int = 8, hard: Path | None = HARD, confirm_labelled: bool = False) -> dict:
    from reward.router.applicability import asked_leaves
    from reward.router.base import as_conversation
    from reward.router.evaluate import evaluate
    from reward.router.evaluate import load_cases as load_labels
    from reward.router.language import language_of, user_text
    from reward.stress import FAMILIES, load_cases
    from reward.stress.runner import oracle_applicable

    out: dict = {}
    per: dict = defaultdict(lambda: [0, 0])
    for c in _jsonl(FIXTURES / "crisis_messages.jsonl"):
        ids = set(router.route_sync([{"role": "user", "content": c["text"]}]).leaf_ids)
        per[c["language"]][0] += set(c["critical"]) <= ids
        per[c["language"]][1] += 1
    out["crisis"] = {"reached": sum(v[0] for v in per.values()), "n": sum(v[1] for v in per.values()),
                     "by_language": {k: f"{a}/{n}" for k, (a, n) in sorted(per.items())}}
    cells: dict = defaultdict(lambda: [0, 0, 0])  # tp, fp, fn
    for u in _jsonl(FIXTURES / "urgency_messages.jsonl"):
        said = router.route_sync(u["prompt"]).urgency >= router.urgency_cutoff
        c = cells[u["language"]]
        c[0] += said and u["urgent"]
        c[1] += said and not u["urgent"]
        c[2] += (not said) and u["urgent"]

    def pr(tp: int, fp: int, fn: int) -> dict:
        return {"precision": tp / (tp + fp) if tp + fp else None, "recall": tp / (tp + fn) if tp + fn else None}

    tot = [sum(c[i] for c in cells.values()) for i in range(3)]
    out["urgency"] = {**pr(*tot), "by_language": {k: pr(*v) for k, v in sorted(cells.items())}}
    labels = hit = crit = chit = 0
    graded: dict = defaultdict(list)
    words: dict = defaultdict(list)
    for case in load_cases(tree=tree):
        routing = router.route_sync(case.prompt, case.context)
        ids = set(routing.leaf_ids)
        if case.perturbation not in FAMILIES:
            for x in case.failed:
                labels += 1
                hit += x in ids
                if tree.severity[x] == "critical":
                    crit += 1
                    chit += x in ids
        kept = oracle_applicable(tree, case, routing)
        asked = asked_leaves(tree, routing)
        extra = sum(x in ids for x in case.failed) if confirm_labelled else 0
        lang = language_of(user_text(as_conversation(case.prompt)))
        n = len(kept) + len(asked) / group + extra / 2
        w = sum(len(tree[x].criterion.split()) for x in kept) + sum(len(tree[x].criterion.split()) for x in asked) / group
        for key in ("all", lang):
            graded[key].append(n)
            words[key].append(w)
    out["stress"] = {"recall": hit / labels, "labels": labels, "critical_recall": chit / crit, "critical": crit,
                     "graded_per_rollout": {k: round(statistics.fmean(v), 2) for k, v in sorted(graded.items())},
                     "criterion_words_per_rollout": {k: round(statistics.fmean(v), 1) for k, v in sorted(words.items())}}
    rep = asyncio.run(evaluate(router, load_labels(None, tree)))
    out["labelled"] = {k: rep.get(k) for k in ("recall", "recall_critical", "precision", "active_per_prompt")}
    if hard is not None and Path(hard).is_file():
        sizes: dict = defaultdict(list)
        for row in _jsonl(Path(hard)):
            n = len(router.route_sync(row["prompt"]).leaf_ids)
            lang = language_of(user_text(as_conversation(row["prompt"])))
            sizes["all"].append(n)
            sizes["english" if lang == "en" else "other"].append(n)
        out["hard"] = {k: {"median": statistics.median(v), "n": len(v)} for k, v in sizes.items()}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--group", type=int, default=8, help="rollouts per prompt the applicability questions spread over")
    p.add_argument("--hard", type=Path, default=HARD, help="HealthBench-Hard rows (skipped when absent)")
    p.add_argument("--confirm-labelled", action="store_true",
                   help="count one confirmation reading per labelled failure (half a reading per reply pair)")
    a = p.parse_args(argv)
    from reward.router import make_router
    from reward.tree import load_tree

    tree = load_tree()
    out = measure(make_router("embedding", tree), tree, group=a.group, hard=a.hard, confirm_labelled=a.confirm_labelled)
    if a.json:
        print(json.dumps(out))
    else:
        for key, value in out.items():
            print(f"{key}: {json.dumps(value)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
