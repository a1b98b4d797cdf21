"""The inspector page explains the score it shows (headless Chromium), on records the real reward
wrote for a group of 8 whose advantages one critical leaf decides (rt_inspector): the Leaves tab
ranks the critical leaf first; a rollout at 0.475 shows its critical failure's share of the cost
and what flipping it would change, and says what a contribution is; the group view lists each
advantage with the critical leaf driving it; compare finds the +0.181 change, the critical leaf
first with 3 rollouts flipped. Under a fault group (the emergency checked by five members priced
once) each member carries a fifth of the price on the page, the shares add up with other at 0,
compare shows both runs' settings with a warning naming the key that differs and a negative
member that stopped failing as "now passes"; a records folder cut mid-line opens with a warning."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from rt_chromium import open_page, require_chromium
from rt_inspector import A_MET, B_MET, CRITICAL, EMERGENCY, score, write

from reward.settings import RewardSettings
from reward.tree import load_tree
from training.inspector import write_inspector

pytestmark = pytest.mark.slow  # a browser subprocess


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    require_chromium()
    tmp = tmp_path_factory.mktemp("explains")
    a, b = write(tmp / "a.jsonl", score(A_MET)), write(tmp / "b.jsonl", score(B_MET))
    fa = write(tmp / "fa.jsonl", score(A_MET, emergency=EMERGENCY))
    fb = write(tmp / "fb.jsonl", score(B_MET, emergency=EMERGENCY, confirm_failures=False))
    base = RewardSettings().record()
    (tmp / "fa.settings.json").write_text(json.dumps({"reward": base}))
    (tmp / "fb.settings.json").write_text(json.dumps({"reward": {**base, "confirm_failures": False}}))
    records = tmp / "run" / "rubric_records"
    records.mkdir(parents=True)
    (records / "settings.json").write_text(json.dumps({"name": "clinical_rubric", "reward": base}))
    (records / "step-000001.jsonl").write_text(fa.read_text()[:-25])  # the run was killed mid-line
    return {"one": write_inspector(a, tmp / "one"),
            "cmp": write_inspector(a, tmp / "cmp", compare=b, names=("before", "after")),
            "faults": write_inspector(fa, tmp / "faults", compare=fb, names=("before", "after")),
            "cut": write_inspector(tmp / "run", tmp / "cut")}


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
        # its share of the two failures' cost (-0.4875, rounded either way) and the flip's -0.475
        assert "contribution -0.48" in line and "if flipped -0.475" in line
        assert "Shapley value" in page.text_content("#contrib-note")
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
        assert first[0] == title and first[4] == "+3 / −0" and abs(float(first[2].rstrip("%")) - 100.0) < 1.0
        prompt = page.locator("#comparerows tr").first.locator("td").all_text_contents()
        assert prompt[3] == "+0.181" and prompt[4].startswith(title)
        page.screenshot(path=str(_shots(tmp_path) / "explains-compare.png"))
        assert page.errors == []


def test_a_fault_groups_price_is_shared_on_the_page(pages, tmp_path: Path) -> None:
    tree = load_tree()
    titles = {tree[lid].title for lid in EMERGENCY}
    with open_page(pages["faults"]) as page:
        page.wait_for_selector("body[data-ready='1']")
        page.click("#tabs button[data-tab='leaves']")
        rows = [r.locator("td").all_text_contents() for r in page.locator("#leafrows tr").all()]
        shares = {r[1]: float(r[10].rstrip("%")) for r in rows}
        assert all(18.0 < shares[lid] < 21.0 for lid in EMERGENCY) and sum(shares.values()) == pytest.approx(100, abs=0.3)
        assert "other 0.0%" in page.text_content("#listpane .pager")
        page.screenshot(path=str(_shots(tmp_path) / "faults-leaves.png"))

        page.click("#tabs button[data-tab='rollouts']")
        page.fill("#search", "r6")
        page.wait_for_function("document.querySelector('#count').textContent.startsWith('1 ')")
        page.click("#rows tr")
        page.wait_for_selector("#subtree")
        for lid in EMERGENCY:
            line = page.text_content(f"#subtree li.leaf[data-leaf='{lid}'] .nums")
            assert "contribution -0.100" in line and "if flipped 0.000" in line and "over 5 failed members" in line
        (fault,) = page.locator("#faults li").all_text_contents()
        assert fault.startswith(tree.faults["missed_emergency"].title + " -0.500") and "5 failed members" in fault
        assert all(t in fault for t in titles)
        page.screenshot(path=str(_shots(tmp_path) / "faults-rollout.png"))
        assert page.errors == []


def test_compare_shows_both_settings_and_what_now_passes(pages, tmp_path: Path) -> None:
    negative = load_tree()["sf_red_flags_missed"].title
    with open_page(pages["faults"]) as page:
        page.wait_for_selector("body[data-ready='1']")
        page.click("#tabs button[data-tab='compare']")
        assert "confirm_failures" in page.text_content("#settings-warning")
        assert page.locator("#settingstable tr.differs td").first.text_content() == "confirm_failures"
        rows = {r.locator("td").first.text_content(): r.locator("td").all_text_contents()
                for r in page.locator("#changerows tr").all()}
        assert rows[negative][4] == "+3 / −0" and abs(float(rows[negative][2].rstrip("%")) - 20.0) < 1.0
        page.screenshot(path=str(_shots(tmp_path) / "faults-compare.png"))

        page.click("#tabs button[data-tab='rollouts']")
        page.fill("#search", "r4")
        page.wait_for_function("document.querySelector('#count').textContent.startsWith('1 ')")
        page.click("#rows tr")
        page.wait_for_selector("#changed")
        changed = page.locator("#changed li").all_text_contents()
        assert any(x.startswith(negative) and "now passes" in x for x in changed)
        assert not any("now fails" in x for x in changed)
        assert page.errors == []


def test_a_records_folder_cut_mid_line_opens_with_a_warning(pages) -> None:
    with open_page(pages["cut"]) as page:
        page.wait_for_selector("body[data-ready='1']")
        assert "skipped a cut last line" in page.text_content("#warnings")
        assert page.text_content("#count").startswith("7 ")
        assert page.errors == []
