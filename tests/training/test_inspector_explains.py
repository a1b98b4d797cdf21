"""The inspector page explains the score it shows (headless Chromium), on records the real reward
wrote for a group of 8 whose advantages one critical leaf decides (rt_inspector): the Leaves tab
ranks the critical leaf first; a rollout at 0.475 shows its critical failure at -0.475 and says
what a contribution is; the group view lists each advantage with the critical leaf driving it;
compare finds the +0.181 change, the critical leaf first with 3 rollouts flipped."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from rt_chromium import open_page, require_chromium
from rt_inspector import A_MET, B_MET, CRITICAL, score, write

from reward.tree import load_tree
from training.inspector import write_inspector

pytestmark = pytest.mark.slow  # a browser subprocess


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    require_chromium()
    tmp = tmp_path_factory.mktemp("explains")
    a, b = write(tmp / "a.jsonl", score(A_MET)), write(tmp / "b.jsonl", score(B_MET))
    return {"one": write_inspector(a, tmp / "one"),
            "cmp": write_inspector(a, tmp / "cmp", compare=b, names=("before", "after"))}


def _shots(tmp_path: Path) -> Path:
    d = Path(os.environ.get("RUBRICSTREE_SHOTS") or tmp_path / "shots")
    d.mkdir(parents=True, exist_ok=True)
    return d


def test_the_critical_leaf_explains_the_group(pages, tmp_path: Path) -> None:
    title = load_tree()[CRITICAL].title
    with open_page(pages["one"]) as page:
        page.wait_for_selector("body[data-ready='1']")
        page.click("#tabs button[data-tab='leaves']")  # sorted by the share of the within-group variance
        first = page.locator("#leafrows tr").first.locator("td").all_text_contents()
        assert first[1] == CRITICAL and float(first[10].rstrip("%")) > 90.0
        page.screenshot(path=str(_shots(tmp_path) / "explains-leaves.png"))

        page.click("#tabs button[data-tab='rollouts']")
        page.fill("#search", "r4")
        page.wait_for_function("document.querySelector('#count').textContent.startsWith('1 ')")
        page.click("#rows tr")
        page.wait_for_selector("#subtree")
        assert page.text_content("#rollout-score") == "0.475"
        line = page.text_content(f"#subtree li.leaf[data-leaf='{CRITICAL}'] .nums")
        assert "contribution -0.475" in line
        assert "change in the score if that verdict flipped" in page.text_content("#contrib-note")
        drivers = page.locator("#drivers li").all_text_contents()
        assert drivers[0].startswith(title)
        page.screenshot(path=str(_shots(tmp_path) / "explains-rollout.png"))

        page.click("#tabs button[data-tab='groups']")
        page.click("#grouprows tr")
        rows = page.locator("#groupdetail tbody tr")
        assert rows.count() == 8
        for i in range(8):
            cells = rows.nth(i).locator("td").all_text_contents()
            assert cells[3].startswith(title)  # every advantage is driven first by the critical leaf
        assert page.errors == []


def test_compare_finds_the_change(pages, tmp_path: Path) -> None:
    title = load_tree()[CRITICAL].title
    with open_page(pages["cmp"]) as page:
        page.wait_for_selector("body[data-ready='1']")
        page.click("#tabs button[data-tab='compare']")
        assert "mean change +0.181" in page.text_content("#compare-summary")
        first = page.locator("#changerows tr").first.locator("td").all_text_contents()
        assert first[0] == title and first[4] == "+3 / −0" and first[2].startswith(("100.0", "99."))
        prompt = page.locator("#comparerows tr").first.locator("td").all_text_contents()
        assert prompt[3] == "+0.181" and prompt[4].startswith(title)
        page.screenshot(path=str(_shots(tmp_path) / "explains-compare.png"))
        assert page.errors == []
