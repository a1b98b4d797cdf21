"""The figures of docs/routing.md, measured on the current router, one part per run.

    python benchmarks/routing_tables.py PART [--out PATH]

Each part builds the default embedding router from the package's own code (real MiniLM,
multilingual-e5 and lingua; oracle labels, no judge: these measure routing, not a judge), prints
its figures and writes ``benchmarks/results/routing_<part>.json``:

- ``targets``: ``benchmarks/routing_targets.py``'s ``measure`` (crisis messages reached, urgency
  on our urgency set, the stress cases' label recall and graded leaves per rollout, the labelled
  routing set, the HealthBench-Hard medians), plus the number of stress cases it read. About 3 to
  4 minutes of CPU (5 to 6 minutes of wall time on the shared 2-core machine).
- ``labelled``: ``rubricstree route eval`` on the bundled labelled set (``reward/data/routing_labels.jsonl``):
  recall, critical recall, precision, active leaves, by language and tag, urgency, missed leaves;
  and the forced set. About 20 s of CPU (under a minute of wall time).
- ``hard``: ``rubricstree tree coverage`` on the 50 HealthBench-Hard rows (read from the shared data
  folder through ``reward.paths.shared_data_dir``; the part stops with a message when they are
  absent) and, routed again, the rows read urgent and the medians with and without the reply-side
  guards by language (as ``tests/reward/router/test_routing_targets.py`` counts them). About 1 minute of CPU (2 to 3
  minutes of wall time).
- ``cues``: the instruction cues (``reward.router.cues.detect``) on ``reward/data/instruction_phrasings.jsonl``
  against its labels: precision, recall and support per kind, and what fires on the phrasings that
  must not. A few seconds, no model.
- ``examples``: the router's settings (its ``config()``, the forced set, the critical leaves that
  carry ``examples``) and the relevance and urgency it gives the example prompts docs/routing.md
  quotes (crisis messages of ``tests/fixtures/crisis_messages.jsonl``, the chest-pain prompts and
  short emergencies of ``tests/reward/router/test_multilingual_router.py``), and the cosine a
  relevance threshold means
  (``lo + relevance * (hi - lo)``). About 15 s of CPU (under a minute of wall time).
- ``noise``: ``rubricstree stress --verdicts oracle --judge-noise 0.1 --seed S --confirm-failures
  --json`` for seeds 0, 1, 2 on the bundled stress cases: clean mean and detection with
  confirmation (each seed and their mean), oracle detection by perturbation. About 100 s of CPU
  (3 minutes of wall time).
- ``tradeoff``: the shipped router against two variants, the three reply-side acts the stress
  labels miss most forced on every rollout (``REPLY_ACTS``), and ``leaf_ratio`` 0.6: the stress
  cases' label recall (the four perturbations) and graded leaves per rollout (every bundled case)
  as ``targets`` counts them, the HealthBench-Hard median of active leaves by language, and the
  labels the shipped router misses. About 3 minutes of CPU (2 minutes of wall time: the encoders
  use both cores).
- ``summary``: issue 22's targets (``TARGETS``) against the figures the parts ``targets``,
  ``labelled``, ``hard`` and ``cues`` wrote (run them first): each target, what was measured, met
  or not. Instant, no model.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

RESULTS = ROOT / "benchmarks" / "results"
PARTS = ("targets", "labelled", "hard", "cues", "examples", "noise", "tradeoff", "summary")
# Issue 22's routing targets (docs/routing.md, "Against the targets"): name -> (bound, value). The
# tests hold the recall ones: tests/reward/router/test_routing_targets.py (0.90, 0.98) and
# tests/reward/router/test_router_recall.py (0.97, a strict xfail: not met).
TARGETS = {"forced_set": ("max", 8), "hard_median": ("max", 20), "recall_critical": ("min", 0.98),
           "recall": ("min", 0.90), "stress_recall": ("min", 0.97), "rows_without_positive_leaf": ("max", 0),
           "routing_gap": ("max", 0.086), "cue_phrasings": ("min", 100)}
# The reply-side acts the stress labels miss most, forced on every rollout in the trade-off part.
REPLY_ACTS = ("sf_prescription_change", "sf_definitive_diagnosis", "un_overclaims")


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _router(tree):
    from reward.router import make_router

    return make_router("embedding", tree)


def part_targets() -> dict:
    from benchmarks.routing_targets import HARD, measure
    from reward.stress import FAMILIES, load_cases
    from reward.tree import load_tree

    tree = load_tree()
    out = measure(_router(tree), tree, hard=HARD)
    cases = load_cases(tree=tree)
    out["stress"]["cases"] = sum(c.perturbation not in FAMILIES for c in cases)
    out["stress"]["bundled_cases"] = len(cases)
    return out


def _forced(router) -> dict:
    from reward.router.base import MAX_FORCED

    return {"forced_set": len(router.always_on), "max_forced": MAX_FORCED, "leaves": sorted(router.always_on)}


def part_labelled() -> dict:
    from reward.router.evaluate import evaluate, load_cases
    from reward.tree import load_tree

    tree = load_tree()
    router = _router(tree)
    rep = asyncio.run(evaluate(router, load_cases(None, tree)))
    rep.pop("cases", None)
    return {"report": rep, **_forced(router)}


def part_hard() -> dict:
    from reward.evolution.coverage import RouterSpec, make_router, measure
    from reward.evolution.encoder import CachedEncoder
    from reward.evolution.matchers import make_matcher
    from reward.healthbench.schema import load_healthbench
    from reward.paths import shared_data_dir
    from reward.router.base import as_conversation
    from reward.router.language import is_english, user_text
    from reward.tree import load_tree

    path = (shared_data_dir() or ROOT.parent / "shared" / "data") / "healthbench_hard_sample50.jsonl"
    if not path.is_file():
        raise SystemExit(f"{path} is absent: the hard part needs the shared HealthBench-Hard rows")
    rows = load_healthbench(path)
    tree = load_tree()
    enc = CachedEncoder()
    router = make_router(RouterSpec(name="embedding"), tree, encoder=enc)
    res = asyncio.run(measure(rows, tree, router, make_matcher("embedding", enc, threshold=0.55)))
    cov = res.summary(0)
    cov["settings"]["data"] = path.name

    routings = [router.route_sync(as_conversation(r.prompt)) for r in rows]
    english = [is_english(user_text(as_conversation(r.prompt))) for r in rows]
    sizes = [len(r.leaf_ids) for r in routings]
    selective = [sum(a.reason != "reply_guard" for a in r.active) for r in routings]

    def medians(values: list[int]) -> dict:
        en = [n for n, e in zip(values, english) if e]
        other = [n for n, e in zip(values, english) if not e]
        return {"all": statistics.median(values), "english": statistics.median(en), "other": statistics.median(other),
                "mean": statistics.fmean(values), "max": max(values)}

    return {"rows": len(rows), "english_rows": sum(english), "other_rows": len(rows) - sum(english),
            "rows_urgent": sum(r.urgency >= router.urgency_cutoff for r in routings),
            "with_reply_guards": medians(sizes), "without_reply_guards": medians(selective),
            "coverage": cov}


def part_cues() -> dict:
    from reward.router.cues import KINDS, detect

    phrasings = _jsonl(ROOT / "reward" / "data" / "instruction_phrasings.jsonl")
    fired = {p["id"]: detect(p["text"]) for p in phrasings}
    kinds, total = {}, [0, 0, 0]
    for kind in KINDS:
        tp = sum(kind in fired[p["id"]] and kind in p["cues"] for p in phrasings)
        fp = [p["id"] for p in phrasings if kind in fired[p["id"]] and kind not in p["cues"]]
        fn = [p["id"] for p in phrasings if kind not in fired[p["id"]] and kind in p["cues"]]
        kinds[kind] = {"precision": tp / (tp + len(fp)), "recall": tp / (tp + len(fn)),
                       "labelled": sum(kind in p["cues"] for p in phrasings), "false_alarms": fp, "misses": fn}
        total = [total[0] + tp, total[1] + len(fp), total[2] + len(fn)]
    tp, fp, fn = total
    return {"phrasings": len(phrasings), "with_a_cue": sum(bool(p["cues"]) for p in phrasings),
            "must_not_fire": sum(not p["cues"] for p in phrasings),
            "fired_on_must_not_fire": [p["id"] for p in phrasings if not p["cues"] and fired[p["id"]]],
            "kinds": kinds, "all": {"precision": tp / (tp + fp), "recall": tp / (tp + fn), "labels": tp + fn}}


def part_examples() -> dict:
    from reward.router.encoders import MULTILINGUAL_REF
    from reward.tree import load_tree

    tree = load_tree()
    router = _router(tree)
    router.prepare()
    cfg = router.config()

    def user(text: str) -> list[dict]:
        return [{"role": "user", "content": text}]

    def by_encoder(text: str, leaf: str) -> dict:
        r = router.readings(user(text))
        e5, minilm = (r["main"], r["other"]) if r["multilingual"] else (r["other"], r["main"])
        return {"text": text, "leaf": leaf, "read_multilingual": r["multilingual"], "short": r["short"],
                "relevance_e5": router.relevance(e5[leaf]), "relevance_minilm": router.relevance(minilm[leaf]),
                "active": leaf in router.route_sync(user(text)).leaf_ids}

    spec = importlib.util.spec_from_file_location(
        "ml_test", ROOT / "tests" / "reward" / "router" / "test_multilingual_router.py")
    ml_test = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ml_test)
    chest = {}
    for lang, text in sorted(ml_test.CHEST.items()):
        routing = router.route_sync(user(text))
        rel = {a.leaf_id: a.relevance for a in routing.active}
        chest[lang] = {"relevance": rel.get("sf_chest_pain_emergency"), "urgency": routing.urgency,
                       "urgent": routing.urgency >= router.urgency_cutoff}
    short = {text: router.route_sync(user(text)).urgency
             for text in ("Il ne se réveille pas.", "Mein Vater wacht nicht mehr auf.", "我爸爸叫不醒了。")}
    lo, hi = cfg["lo"], cfg["hi"]
    cosine = {name: lo + cfg[name] * (hi - lo) for name in
              ("threshold", "emergency_threshold", "urgency_evidence", "critical_threshold",
               "critical_threshold_multilingual", "critical_threshold_short")}
    critical = [leaf for leaf in tree.leaves if tree.severity[leaf.id] == "critical"]
    examples = {"critical_leaves": len(critical), "with_examples": sum(bool(leaf.examples) for leaf in critical),
                "examples": sum(len(leaf.examples) for leaf in critical),
                "without": sorted(leaf.id for leaf in critical if not leaf.examples)}
    return {"settings": cfg, "multilingual_ref": MULTILINGUAL_REF, **_forced(router), "critical_examples": examples,
            "cosine_of_relevance": cosine,
            "crisis": {"quiero_morir": by_encoder("Quiero morir.", "sf_suicidal_ideation_crisis"),
                       "schlaftabletten": by_encoder("Ich habe 20 Schlaftabletten genommen.",
                                                     "sf_overdose_poison_advice")},
            "chest_pain": chest, "short_emergencies_urgency": short}


def part_noise(seeds: tuple[int, ...] = (0, 1, 2)) -> dict:
    runs = []
    for seed in seeds:
        cmd = [str(ROOT / ".venv" / "bin" / "rubricstree"), "stress", "--verdicts", "oracle", "--judge-noise", "0.1",
               "--seed", str(seed), "--confirm-failures", "--json", "-q"]
        print("running", " ".join(cmd[1:]), file=sys.stderr)
        runs.append(json.loads(subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True).stdout))
    conf = [r["noise_confirmed"] for r in runs]
    first = runs[0]
    return {"command": "rubricstree stress --verdicts oracle --judge-noise 0.1 --seed S --confirm-failures --json",
            "seeds": list(seeds), "cases": first["cases"], "repeats": conf[0]["repeats"],
            "clean_mean": statistics.fmean(c["clean_mean"] for c in conf),
            "detection_rate": statistics.fmean(c["detection_rate"] for c in conf),
            "by_seed": [{"seed": s, "clean_mean": c["clean_mean"], "detection_rate": c["detection_rate"]}
                        for s, c in zip(seeds, conf)],
            "oracle": {"detection_rate": first["detection_rate"], "label_recall": first["label_recall"],
                       "by_perturbation": {k: {"detection_rate": v["detection_rate"], "n": v["n"]}
                                           for k, v in first["by_perturbation"].items()}}}


def part_tradeoff(group: int = 8) -> dict:
    from reward.healthbench.schema import load_healthbench
    from reward.paths import shared_data_dir
    from reward.router import EmbeddingRouter
    from reward.router.applicability import asked_leaves
    from reward.router.base import DEFAULT_ALWAYS_ON, as_conversation
    from reward.router.language import is_english, user_text
    from reward.stress import FAMILIES, load_cases
    from reward.stress.runner import oracle_applicable
    from reward.tree import load_tree

    tree = load_tree()
    cases = load_cases(tree=tree)
    path = (shared_data_dir() or ROOT.parent / "shared" / "data") / "healthbench_hard_sample50.jsonl"
    rows = load_healthbench(path) if path.is_file() else []
    configs = {"shipped": {}, "reply_acts_forced": {"always_on": [*DEFAULT_ALWAYS_ON, *REPLY_ACTS]},
               "leaf_ratio_0.6": {"leaf_ratio": 0.6}}
    out: dict = {"stress_cases": sum(c.perturbation not in FAMILIES for c in cases), "bundled_cases": len(cases),
                 "group": group, "reply_acts": list(REPLY_ACTS), "configs": {}}
    for name, kw in configs.items():
        print("routing", name, file=sys.stderr)
        router = EmbeddingRouter(tree, **kw)
        labels = hits = 0
        graded, missed = [], []
        for case in cases:  # as benchmarks/routing_targets.py counts them
            routing = router.route_sync(case.prompt, case.context)
            ids = set(routing.leaf_ids)
            if case.perturbation not in FAMILIES:  # label recall: the four perturbations' labels
                labels += len(case.failed)
                hits += sum(x in ids for x in case.failed)
                missed += [{"case": case.id, "leaf": x, "severity": tree.severity[x], "polarity": tree[x].polarity}
                           for x in case.failed if x not in ids]
            graded.append(len(oracle_applicable(tree, case, routing)) + len(asked_leaves(tree, routing)) / group)
        rec = {"settings": kw, "forced_set": len(router.always_on), "stress_recall": hits / labels,
               "stress_labels": labels, "stress_missed": missed, "graded_per_rollout": statistics.fmean(graded)}
        if rows:
            sizes = {True: [], False: []}
            for r in rows:
                conv = as_conversation(r.prompt)
                sizes[is_english(user_text(conv))].append(len(router.route_sync(conv).leaf_ids))
            rec["hard_median"] = {"english": statistics.median(sizes[True]), "other": statistics.median(sizes[False])}
        out["configs"][name] = rec
    return out


def part_summary() -> dict:
    def read(name: str) -> dict:
        return json.loads((RESULTS / f"routing_{name}.json").read_text(encoding="utf-8"))

    targets, labelled, hard, cues = read("targets"), read("labelled"), read("hard"), read("cues")
    rep, cov, stress = labelled["report"], hard["coverage"], targets["stress"]
    measured = {"forced_set": labelled["forced_set"], "hard_median": cov["active_leaves_per_row_median"],
                "recall_critical": rep["recall_critical"], "recall": rep["recall"], "stress_recall": stress["recall"],
                "rows_without_positive_leaf": len(cov["rows_without_positive_leaf"]),
                "routing_gap": cov["routing_gap"], "cue_phrasings": cues["phrasings"]}
    out = {name: {"bound": bound, "target": value, "measured": measured[name],
                  "met": measured[name] <= value if bound == "max" else measured[name] >= value}
           for name, (bound, value) in TARGETS.items()}
    labels = stress["labels"]
    return {"targets": out,
            "context": {"hard_mean": cov["active_leaves_per_row"],
                        "hard_median_without_reply_guards": hard["without_reply_guards"]["all"],
                        "critical_labels": rep["n_critical_labels"],
                        "critical_hits": round(rep["recall_critical"] * rep["n_critical_labels"]),
                        "stress_cases": stress["cases"], "stress_labels": labels,
                        "stress_missed": round(labels * (1 - stress["recall"])),
                        "stress_misses_allowed": math.floor(labels * (1 - TARGETS["stress_recall"][1]) + 1e-9),
                        "cue_precision": cues["all"]["precision"], "cue_recall": cues["all"]["recall"]},
            "from": [f"benchmarks/results/routing_{n}.json" for n in ("targets", "labelled", "hard", "cues")]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("part", choices=PARTS)
    ap.add_argument("--out", type=Path, help="JSON to write (default benchmarks/results/routing_<part>.json)")
    a = ap.parse_args(argv)
    out = globals()[f"part_{a.part}"]()
    path = a.out or RESULTS / f"routing_{a.part}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(out, ensure_ascii=False)[:4000])
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
