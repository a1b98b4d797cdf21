"""The rollout inspector on a large file: the page's size and its load time in headless Chromium.

Writes N synthetic score records (and their rollouts) shaped like ``rubricstree score --out``:
the packaged tree, 8 rollouts per prompt, ~15 routed leaves per prompt with random p_yes, node
scores of the ``paper`` variant (weighted pass values over the active leaves), row rubric items,
a think block and ~1,500 characters of answer per completion, a few unscored rollouts and
not-applicable leaves. Then builds the page, prints its size, and opens it in Chromium: the time
until the page's script has parsed the data and drawn the first table page (the page records
``performance.now()``, measured from navigation start), and the time to filter by a leaf, sort by
score and open one rollout. ``load_ms_page`` splits into ``html_ms`` (the file read and the HTML
parsed, up to the script), ``json_parse_ms`` and ``first_render_ms``.

    python benchmarks/inspector_page.py                      # 10,000 rollouts
    python benchmarks/inspector_page.py --rollouts 500 --json

Synthetic data, random verdicts: the figures measure the page (size, parse, render), not a judge.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

WORDS = ("the patient should monitor blood pressure daily and contact a clinician if chest pain radiates to the "
         "arm or jaw seek emergency care now dose interaction kidney function follow up in two weeks hydration "
         "rest symptoms worsen fever above thirty nine degrees medication review allergy history").split()
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]


def _text(rng: random.Random, n_chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < n_chars:
        w = rng.choice(WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out).capitalize() + "."


def synthetic(n_rollouts: int, *, per_group: int = 8, seed: int = 0, tree: Any = None,
              answer_chars: int = 1500, leaves_per_prompt: int = 15) -> tuple[list[dict], list[dict]]:
    """``(score records, rollout rows)`` of ``n_rollouts`` synthetic rollouts (see the module doc)."""
    from reward.tree import load_tree

    tree = tree or load_tree()
    rng = random.Random(seed)
    leaf_ids = [leaf.id for leaf in tree.leaves]
    weights = tree.leaf_weights
    ancestors = {lid: tree.ancestors(lid) for lid in leaf_ids}
    scores: list[dict] = []
    rows: list[dict] = []
    for g in range((n_rollouts + per_group - 1) // per_group):
        prompt = [{"role": "user", "content": f"Case {g}: " + _text(rng, rng.randint(80, 400))}]
        active = rng.sample(leaf_ids, min(leaves_per_prompt, len(leaf_ids)))
        na = rng.sample([x for x in leaf_ids if x not in active], 3)
        bias = {lid: rng.uniform(-2.5, 2.5) for lid in active}  # some leaves fail often, some rarely
        items = [{"criterion": _text(rng, 60), "points": rng.choice([5, 3, 2, -3])} for _ in range(3)]
        for j in range(min(per_group, n_rollouts - g * per_group)):
            rid = f"p{g:05d}-r{j}"
            completion = f"<think>{_text(rng, rng.randint(200, 900))}</think>\n\n{_text(rng, answer_chars)}"
            rows.append({"id": rid, "prompt": prompt, "completion": completion})
            if rng.random() < 0.01:
                scores.append({"id": rid, "score": None, "scoring": "soft", "combine": "tree",
                               "failures": [f"leaf {active[0]}: judge request timed out after 4 retries"],
                               "routing": {"n_active": len(active)}})
                continue
            leaves, node_num, node_w = [], {}, {}
            for lid in active:
                node = tree[lid]
                p = round(1 / (1 + pow(2.718281828, -(bias[lid] + rng.gauss(0, 1.5)))), 4)
                passed = round(p if node.polarity == "positive" else 1 - p, 4)  # the score is what these give
                w = weights[lid]
                leaves.append({"leaf_id": lid, "title": node.title, "polarity": node.polarity, "met": p >= 0.5,
                               "p_yes": round(p, 4), "passed": round(passed, 4), "relevance": round(rng.random(), 3),
                               "weight": w, "reason": rng.choice(["relevant", "always_on", "cue"]), "failure": None})
                for nid in ancestors[lid] | {lid}:
                    node_num[nid] = node_num.get(nid, 0.0) + w * passed
                    node_w[nid] = node_w.get(nid, 0.0) + w
            nodes = {nid: {"score": node_num[nid] / node_w[nid], "weight": node_w[nid],
                           "n_active": 0} for nid in node_w}
            tree_score = nodes[tree.root]["score"]
            failed = [lf for lf in leaves if lf["passed"] < 0.5]
            feedback = "\n".join(f"- {lf['title']}: not satisfied" for lf in failed[:10])
            scores.append({
                "id": rid, "score": tree_score, "tree_score": tree_score, "points_score": None, "scoring": "soft",
                "combine": "tree", "scoring_variant": "paper", "leaves": leaves, "nodes": nodes,
                "rubric_items": [{**it, "met": rng.random() < 0.5, "p_yes": round(rng.random(), 3), "failure": None}
                                 for it in items],
                "routing": {"n_active": len(active), "cached": True}, "failures": [], "feedback": feedback,
                "format_failure": False, "not_applicable": [{"leaf_id": x, "reason": "trigger absent"} for x in na]})
    return scores, rows


def write_jsonl(path: Path, records: list[dict]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r) + "\n")


def measure(page: Path) -> dict[str, float]:
    """Open ``page`` in headless Chromium: load and interaction times in milliseconds."""
    import shutil

    from playwright.sync_api import sync_playwright

    exe = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if exe is None:
        raise SystemExit("headless Chromium is absent (apt-get install chromium)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=FLAGS, headless=True)
        try:
            tab = browser.new_page(viewport={"width": 1400, "height": 900})
            tab.set_default_timeout(120_000)
            t0 = time.perf_counter()
            tab.goto(page.resolve().as_uri())
            tab.wait_for_selector("body[data-ready='1']")
            wall = (time.perf_counter() - t0) * 1000
            ready = float(tab.get_attribute("body", "data-ready-ms") or "nan")
            html_ms = float(tab.get_attribute("body", "data-html-ms") or "nan")
            parse_ms = float(tab.get_attribute("body", "data-parse-ms") or "nan")
            t1 = time.perf_counter()
            tab.select_option("#leaf", index=1)
            tab.select_option("#leafstate", "failed")
            tab.wait_for_function("document.querySelector('#count').textContent.length > 0")
            filtered = (time.perf_counter() - t1) * 1000
            # back to every rollout: the chosen leaf may have failed in none of them (no row to sort)
            tab.select_option("#leaf", index=0)
            tab.wait_for_selector("#rows tr")
            t2 = time.perf_counter()
            tab.click("th[data-key='score']")
            tab.wait_for_selector("#rows tr")
            sort = (time.perf_counter() - t2) * 1000
            t3 = time.perf_counter()
            tab.click("#rows tr")
            tab.wait_for_selector("#subtree")
            opened = (time.perf_counter() - t3) * 1000
        finally:
            browser.close()
    return {"load_ms_page": ready, "html_ms": html_ms, "json_parse_ms": parse_ms,
            "first_render_ms": round(ready - html_ms - parse_ms), "load_ms_wall": round(wall), "filter_leaf_ms": round(filtered),
            "sort_ms": round(sort), "open_rollout_ms": round(opened)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rollouts", type=int, default=10_000)
    p.add_argument("--out", type=Path, default=None, help="keep the files here (default: a temporary folder)")
    p.add_argument("--no-browser", action="store_true", help="size only")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    from training.inspector import write_inspector

    with tempfile.TemporaryDirectory() as tmp:
        out = a.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        scores, rows = synthetic(a.rollouts)
        write_jsonl(out / "scores.jsonl", scores)
        write_jsonl(out / "rollouts.jsonl", rows)
        t1, c1 = time.perf_counter(), time.process_time()
        page = write_inspector(out / "scores.jsonl", out, rollouts=out / "rollouts.jsonl")
        t2, c2 = time.perf_counter(), time.process_time()
        res: dict[str, Any] = {"rollouts": a.rollouts, "scores_jsonl_mb": round((out / "scores.jsonl").stat().st_size / 2**20, 2),
                               "rollouts_jsonl_mb": round((out / "rollouts.jsonl").stat().st_size / 2**20, 2),
                               "page_mb": round(page.stat().st_size / 2**20, 2),
                               "synthesis_s": round(t1 - t0, 2), "build_page_s": round(t2 - t1, 2),
                               "build_page_cpu_s": round(c2 - c1, 2)}  # CPU time: less sensitive to a busy machine
        if not a.no_browser:
            res.update(measure(page))
    if a.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k:>20}: {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
