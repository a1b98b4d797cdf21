"""docs/inspector.md's figures: the worked examples of its definitions, the error of the sampled
Shapley values, and what the page costs to build and open.

    python benchmarks/inspector_figures.py [--rollouts 2000,10000] [--no-browser]
                                           [--out benchmarks/results/inspector_figures.json]

Parts, all from the package's own code (``training.inspector``, ``reward``):

- ``examples``: the GRPO group of ``tests/_support/rt_inspector.py`` (one chest-pain prompt, 8
  rollouts scored by the real reward with the default ``severity`` prices; run B meets the
  emergency in 3 more rollouts), the emergency checked once by one critical leaf (``single``) and
  by five members of the fault group ``missed_emergency`` (``fault_group``): the rollouts' scores,
  contributions and flip values, the page's fault-group line, the within-group variance shares and
  the shares of the mean change between the runs (``compare_groups``).
- ``shapley_error``: synthetic soft verdicts (``benchmarks/inspector_page.py``'s records, 15 routed
  leaves each) rescored under ``severity``; for the first 4 rollouts, the values the inspector
  estimates from its sampled orders (``training.inspector.shapley``, more than ``EXACT_MAX``
  players) against the exact ones from every coalition (2^15 rescorings each): the largest error
  per rollout and the largest value.
- ``severity_page``: the page built from 200 of those rollouts under ``severity`` (every check
  differs a little from a pass, so contributions are sampled): CPU and wall seconds.
- ``page``: for each ``--rollouts`` N, ``inspector_page.py``'s synthetic records (linear ``paper``
  variant): the files' sizes, the page built (CPU and wall seconds) and, unless ``--no-browser``,
  opened in headless Chromium (``inspector_page.measure``: ready, filter by a leaf, sort, open).

Timings are of the shared 2-core machine (the load average is recorded beside them). With the
default 2,000 and 10,000 rollouts this takes under a minute there.
Writes ``benchmarks/results/inspector_figures.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing
sys.path.insert(0, str(ROOT / "tests/_support"))  # the rt_inspector group and its fake judge


def _runs(tree, tmp: Path, emergency):
    from rt_inspector import A_MET, B_MET, score, write

    from training.inspector import load_run

    a = load_run(write(tmp / "a.jsonl", score(A_MET, emergency=emergency)), name="A", tree=tree)
    b = load_run(write(tmp / "b.jsonl", score(B_MET, emergency=emergency)), name="B", tree=tree)
    return a, b


def examples(tree, tmp: Path) -> dict:
    from rt_inspector import CRITICAL, EMERGENCY, MINOR

    from reward.scoring.variants import SEVERITY_PRICE
    from training.inspector import build_data, compare_groups, leaf_variance_shares

    out: dict = {}
    for name, emergency in (("single", (CRITICAL,)), ("fault_group", EMERGENCY)):
        sub = tmp / name
        sub.mkdir(parents=True)
        a, b = _runs(tree, sub, emergency)
        by = {r.id: r for r in a.rollouts}
        shares, other, _ = leaf_variance_shares(a.rollouts)
        cmp = compare_groups(a, b)
        cmp_by = {x["leaf_id"]: x for x in cmp["leaves"]}
        part = {
            "scores": {r.id: r.score for r in a.rollouts},
            "contrib": {rid: {lid: by[rid].contrib.get(lid) for lid in (*emergency, MINOR)} for rid in ("r4", "r6")},
            "flip": {rid: {lid: by[rid].flip.get(lid) for lid in (*emergency, MINOR)} for rid in ("r4", "r6")},
            "variance_share": {lid: shares.get(lid, 0.0) for lid in (*emergency, MINOR)},
            "variance_share_together": sum(shares.get(lid, 0.0) for lid in emergency),
            "variance_other": other,
            "mean_change": cmp["delta"],
            "change_share": {lid: cmp_by[lid]["share"] for lid in (*emergency, MINOR) if lid in cmp_by},
            "change_share_together": sum(cmp_by[lid]["share"] for lid in emergency if lid in cmp_by),
            "change_other": cmp["other"],
            "now_pass": {lid: cmp_by[lid]["up"] for lid in emergency if lid in cmp_by},
        }
        if len(emergency) > 1:
            data = build_data([a], tree)
            rows = {data["S"][row[0]]: row for row in data["runs"][0]["R"]}
            (fault,) = rows["r6"][22]  # the rollout's fault-group lines (training/inspector/pack.py)
            part["fault_line"] = {"group": data["S"][fault[0]], "value": fault[2]}
        out[name] = part
    out["critical_price"] = SEVERITY_PRICE["critical"]
    return out


def _severity(scores: list[dict], tree) -> list[dict]:
    """The synthetic records rescored under ``severity``: the same verdicts, the score that variant gives."""
    from reward.stages.rescore import Rescorer
    from reward.stages.results import RolloutScore

    out = []
    for rec in scores:
        if rec.get("score") is None:
            out.append(rec)
            continue
        rec = {**rec, "scoring_variant": "severity"}
        s = RolloutScore.model_validate({**rec, "not_applicable": [], "group": None})
        rescorer = Rescorer.of_record(tree, s)
        leaves, items = rescorer.verdicts(s)
        new = rescorer.rescore(s, leaves, items)
        out.append({**rec, "score": new, "tree_score": new})
    return out


def shapley_error(records: list[dict], tree, n: int = 4) -> dict:
    from reward.stages.rescore import Rescorer
    from reward.stages.results import RolloutScore
    from training.inspector.shapley import EXACT_MAX, _exact, _sampled

    per: list[dict] = []
    for rec in [r for r in records if r.get("score") is not None][:n]:
        s = RolloutScore.model_validate({**rec, "not_applicable": [], "group": None})
        rescorer = Rescorer.of_record(tree, s)
        leaves, items = rescorer.verdicts(s)
        ref = {lid: float(tree[lid].polarity == "positive") for lid in leaves}
        players = [lid for lid, v in leaves.items() if abs(float(v) - ref[lid]) > 1e-12]
        assert len(players) > EXACT_MAX

        def value(coalition: frozenset[str], s=s, rescorer=rescorer, leaves=leaves, ref=ref, items=items) -> float:
            return rescorer.rescore(s, {lid: v if lid in coalition else ref[lid] for lid, v in leaves.items()}, items)

        t0 = time.process_time()
        exact = _exact(players, value)
        exact_cpu = time.process_time() - t0
        est = _sampled(players, value, zlib.crc32(s.id.encode("utf-8")))
        per.append({"id": s.id, "players": len(players), "coalitions": 2 ** len(players),
                    "max_error": max(abs(est[p] - exact[p]) for p in players),
                    "max_value": max(abs(exact[p]) for p in players), "exact_cpu_s": exact_cpu})
        print(f"shapley {s.id}: {len(players)} players, error {per[-1]['max_error']:.4f} on values up to "
              f"{per[-1]['max_value']:.3f}", file=sys.stderr)
    return {"rollouts": per, "max_error": [min(p["max_error"] for p in per), max(p["max_error"] for p in per)],
            "max_value": max(p["max_value"] for p in per)}


def build(scores: list[dict], rows: list[dict], out: Path) -> tuple[Path, dict]:
    from benchmarks.inspector_page import write_jsonl
    from training.inspector import write_inspector

    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / "scores.jsonl", scores)
    write_jsonl(out / "rollouts.jsonl", rows)
    load = os.getloadavg()[0]
    t0, c0 = time.perf_counter(), time.process_time()
    page = write_inspector(out / "scores.jsonl", out, rollouts=out / "rollouts.jsonl")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return page, {"build_cpu_s": cpu, "build_wall_s": wall, "load_average_before": load,
                  "load_average_after": os.getloadavg()[0],
                  "scores_jsonl_mb": (out / "scores.jsonl").stat().st_size / 1e6,
                  "rollouts_jsonl_mb": (out / "rollouts.jsonl").stat().st_size / 1e6,
                  "page_mb": page.stat().st_size / 1e6}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rollouts", default="2000,10000", help="page sizes to build (comma-separated)")
    ap.add_argument("--no-browser", action="store_true")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/inspector_figures.json")
    args = ap.parse_args()
    from benchmarks.inspector_page import measure, synthetic
    from reward.tree import load_tree

    t_start = time.perf_counter()
    tree = load_tree()
    out: dict = {"machine": f"{os.cpu_count()} cores, shared"}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        out["examples"] = examples(tree, tmp / "examples")
        scores, rows = synthetic(200, tree=tree)
        sev = _severity(scores, tree)
        out["shapley_error"] = shapley_error(sev, tree)
        _, sev_cost = build(sev, rows, tmp / "severity")
        n_scored = sum(r.get("score") is not None for r in sev)
        sev_cost.update({"rollouts": len(sev), "scored": n_scored, "cpu_s_per_rollout": sev_cost["build_cpu_s"] / len(sev),
                         "minutes_for_10000": sev_cost["build_cpu_s"] / len(sev) * 10_000 / 60})
        out["severity_page"] = sev_cost
        print(f"severity page, 200 rollouts: {sev_cost['build_cpu_s']:.1f} s CPU", file=sys.stderr)
        out["page"] = {}
        for n in [int(x) for x in args.rollouts.split(",") if x]:
            t0 = time.perf_counter()
            scores, rows = synthetic(n, tree=tree)
            synth = time.perf_counter() - t0
            page, cost = build(scores, rows, tmp / f"page{n}")
            cost["synthesis_s"] = synth
            if not args.no_browser:
                ms = measure(page)
                cost.update({k.replace("_ms", "_s"): v / 1000 for k, v in ms.items()})  # seconds
                cost["load_average_after_browser"] = os.getloadavg()[0]
            out["page"][str(n)] = cost
            print(f"page, {n} rollouts: {cost['build_cpu_s']:.1f} s CPU, {cost['build_wall_s']:.1f} s wall, "
                  f"{cost['page_mb']:.2f} MB" + (f", ready {cost['load_s_page']:.2f} s" if "load_s_page" in cost else ""),
                  file=sys.stderr)
            page.unlink()
    out["seconds"] = round(time.perf_counter() - t_start, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1, default=lambda x: None if isinstance(x, float) and math.isnan(x) else x)
                        + "\n", encoding="utf-8")
    print(json.dumps(out["examples"], indent=1))
    print(f"wrote {args.out} in {out['seconds']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
