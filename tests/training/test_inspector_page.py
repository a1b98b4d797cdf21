"""The inspector page in headless Chromium: it loads from disk with no error and no request, and
its DOM is right after filtering, sorting and opening a rollout; --compare shows the changed
leaves. Expected counts are computed here from the records, not read from the page's own code.
Screenshots are written to the test's tmp folder (set RUBRICSTREE_SHOTS=DIR to keep them)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from rt_chromium import open_page, require_chromium

from benchmarks.inspector_page import synthetic, write_jsonl
from training.inspector import write_inspector

pytestmark = pytest.mark.slow  # a browser subprocess
THINK = "<think>secret reasoning that stays folded</think>\n\nSee a doctor today if the pain spreads."


def shots_dir(tmp_path: Path) -> Path:
    d = Path(os.environ.get("RUBRICSTREE_SHOTS") or tmp_path / "shots")
    d.mkdir(parents=True, exist_ok=True)
    return d


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict:
    require_chromium()
    tmp = tmp_path_factory.mktemp("inspector")
    scores, rows = synthetic(48, per_group=8, seed=3, answer_chars=300)
    rows[5]["completion"] = THINK
    write_jsonl(tmp / "scores.jsonl", scores)
    write_jsonl(tmp / "rollouts.jsonl", rows)
    # a second run of the same rollouts: another judge that flips every verdict of the first prompt
    other = json.loads(json.dumps(scores))
    for r in other[:8]:
        for lf in r.get("leaves") or []:
            lf["met"] = not lf["met"]
            lf["passed"] = 1 - lf["passed"]
        if r["score"] is not None:
            r["score"] = r["tree_score"] = 1 - r["score"]
    write_jsonl(tmp / "other.jsonl", other)
    page = write_inspector(tmp / "scores.jsonl", tmp / "page", rollouts=tmp / "rollouts.jsonl")
    cmp_page = write_inspector(tmp / "scores.jsonl", tmp / "cmp", rollouts=tmp / "rollouts.jsonl",
                               compare=tmp / "other.jsonl", names=("judge-a", "judge-b"))
    return {"scores": scores, "rows": rows, "page": page, "cmp": cmp_page}


def count(page) -> int:
    return int(page.text_content("#count").split()[0])


def test_filter_sort_and_open(files, tmp_path: Path) -> None:
    scores = files["scores"]
    shots = shots_dir(tmp_path)
    with open_page(files["page"]) as page:
        page.wait_for_selector("body[data-ready='1']")
        assert count(page) == len(scores) == page.locator("#rows tr").count()

        # sort by score, ascending: the table's first score is the file's lowest
        page.click("th[data-key='score']")  # already sorted descending: one click flips it
        low = min(r["score"] for r in scores if r["score"] is not None)
        assert page.text_content("#rows tr:first-child td.score") == f"{low:.3f}"

        # leaf filter: the rollouts in which a leaf failed the check, counted from the records
        lid = next(lf["leaf_id"] for r in scores for lf in r.get("leaves") or [])
        failed = {r["id"] for r in scores for lf in r.get("leaves") or []
                  if lf["leaf_id"] == lid and lf["passed"] < 0.5}
        value = page.evaluate(  # the leaf select's values are node indices of the page's data
"id => { const D = JSON.parse(document.getElementById('rt-data').textContent);"
                              " return String(D.N.findIndex(n => D.S[n[0]] === id)); }", lid)
        page.select_option("#leaf", value)
        page.select_option("#leafstate", "failed")
        shown = set(page.locator("#rows tr td.id").all_text_contents())
        assert shown == failed and count(page) == len(failed)

        # score range and text search combine with it
        page.fill("#smin", "0.5")
        page.wait_for_function(f"document.querySelector('#count').textContent.startsWith('{sum(1 for r in scores if r['id'] in failed and r['score'] >= 0.5)} ')")
        page.select_option("#leaf", "")
        page.fill("#smin", "")
        page.fill("#search", "secret reasoning")
        page.wait_for_function("document.querySelector('#count').textContent.startsWith('1 ')")
        assert page.text_content("#rows tr td.id") == files["rows"][5]["id"]

        # open it: the sub-tree, the verdicts, the think block folded
        page.click("#rows tr")
        page.wait_for_selector("#subtree")
        rec = next(r for r in scores if r["id"] == files["rows"][5]["id"])
        assert page.text_content("#rollout-id") == rec["id"]
        # a leaf with two parents shows under both (the tree is a DAG): compare the distinct leaves
        leaves = page.eval_on_selector_all("#subtree li.leaf", "ls => ls.map(l => l.dataset.leaf)")
        assert set(leaves) == {lf["leaf_id"] for lf in rec["leaves"]}
        badges = page.locator("#subtree li.leaf .badge").all_text_contents()
        assert len(badges) == len(leaves) and all(b in ("pass", "fail") or b.startswith("uncertain") for b in badges)
        assert page.locator("#na li").count() == len(rec.get("not_applicable") or [])
        assert page.locator("#items tbody tr").count() == len(rec.get("rubric_items") or [])
        assert page.text_content("#completion") == "See a doctor today if the pain spreads."
        assert not page.eval_on_selector("details.think", "d => d.open")
        assert not page.is_visible("details.think pre")
        n_failed = sum(lf["passed"] < 0.5 for lf in rec["leaves"])
        assert page.text_content("#failed-summary").startswith(f"Failed {n_failed} of {len(rec['leaves'])} routed")
        page.check("#only-failing")  # the sub-tree without its passing leaves
        shown = set(page.eval_on_selector_all("#subtree li.leaf", "ls => ls.filter(l => l.offsetParent).map(l => l.dataset.leaf)"))
        assert shown == {lf["leaf_id"] for lf in rec["leaves"] if lf["passed"] < 0.5 or abs(lf["p_yes"] - 0.5) <= 0.15}
        page.screenshot(path=str(shots / "inspector-rollout.png"))

        # the leaves tab: one row per leaf seen, counts from the records
        page.click("#tabs button[data-tab='leaves']")
        routed = {lf["leaf_id"] for r in scores for lf in r.get("leaves") or []}
        na = {x["leaf_id"] for r in scores for x in r.get("not_applicable") or []}
        assert page.locator("#leaftable tbody tr").count() == len(routed | na)
        page.click("#leaftable th[data-col='4']")  # sort by routed, most first
        most = max(sum(lf["leaf_id"] == x for r in scores for lf in r.get("leaves") or []) for x in routed)
        assert page.text_content("#leafrows tr:first-child td:nth-child(5)") == str(most)
        page.screenshot(path=str(shots / "inspector-leaves.png"))
        assert page.errors == []


def test_compare(files, tmp_path: Path) -> None:
    scores = files["scores"]
    with open_page(files["cmp"]) as page:
        page.wait_for_selector("body[data-ready='1']")
        page.click("#tabs button[data-tab='compare']")
        rows = page.locator("#comparerows tr")
        assert rows.count() == len({r["id"].split("-")[0] for r in scores})  # every prompt is in both runs
        # the flipped prompt moved most, so it comes first, with its leaves listed as changed
        first = rows.first.locator("td").all_text_contents()
        assert first[4] != "none" and first[0].startswith("Case 0:")
        unchanged = rows.nth(rows.count() - 1).locator("td").all_text_contents()
        assert unchanged[4] == "none" and unchanged[3] in ("+0.000", "0.000", "-0.000")
        # a rollout of that prompt: every routed leaf changed its verdict
        page.click("#tabs button[data-tab='rollouts']")
        page.fill("#search", scores[0]["id"])
        page.wait_for_function("document.querySelector('#count').textContent.startsWith('1 ')")
        page.click("#rows tr")
        page.wait_for_selector("#changed")
        assert page.locator("#changed li").count() == len(scores[0].get("leaves") or []) > 0
        page.screenshot(path=str(shots_dir(tmp_path) / "inspector-compare.png"))
        assert page.errors == []


def test_the_benchmark_prints_size_and_load_time(tmp_path: Path) -> None:
    import subprocess
    import sys

    from rt_paths import REPO_ROOT

    require_chromium()
    res = subprocess.run([sys.executable, "benchmarks/inspector_page.py", "--rollouts", "40", "--json",
                          "--out", str(tmp_path)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
                         check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["rollouts"] == 40 and out["page_mb"] > 0
    assert out["load_ms_page"] >= out["html_ms"] > 0 and out["open_rollout_ms"] > 0
    assert (tmp_path / "inspector.html").stat().st_size == pytest.approx(out["page_mb"] * 2**20, abs=0.006 * 2**20)


def test_leaves_of_another_taxonomy_still_show(tmp_path: Path) -> None:
    """A record whose leaves the page's taxonomy lacks: every leaf is listed, none dropped."""
    leaf = {"title": "Custom check", "polarity": "positive", "met": True, "p_yes": 0.9, "passed": 0.9, "weight": 1.0,
            "reason": "relevant", "failure": None}
    rec = {"id": "x", "group": "g", "score": 0.9, "tree_score": 0.9, "combine": "tree",
           "leaves": [{**leaf, "leaf_id": "custom_a"}, {**leaf, "leaf_id": "sf_red_flags_missed", "title": "Missed"}],
           "nodes": {"root": {"score": 0.9, "weight": 2.0}, "custom_a": {"score": 0.9, "weight": 1.0}}}
    write_jsonl(tmp_path / "s.jsonl", [rec])
    page_path = write_inspector(tmp_path / "s.jsonl", tmp_path / "o")
    with open_page(page_path) as page:
        page.wait_for_selector("body[data-ready='1']")
        page.click("#rows tr")
        leaves = page.eval_on_selector_all("#subtree li.leaf", "ls => ls.map(l => l.dataset.leaf)")
        assert sorted(leaves) == ["custom_a", "sf_red_flags_missed"]
        assert "Leaves not placed in the sub-tree" in page.text_content("#subtree")
        assert page.errors == []
