"""The inspector shows a run's gaming monitors across steps (issue 46, part 4): a trainer's records
folder holds ``monitors.jsonl`` beside its ``step-N.jsonl`` (``reward.integrations.records``); the
page gets a Monitors tab with each monitor's line against its threshold and a table whose cells
above the threshold are marked. A cut last line (a killed run) is skipped with a warning."""

from __future__ import annotations

import json

import pytest
from rt_chromium import open_page, require_chromium

from benchmarks.inspector_page import synthetic, write_jsonl
from reward.settings import MonitorSettings
from training.inspector import write_inspector
from training.inspector.data import MONITOR_KEYS, load_run
from training.inspector.pack import build_data

STEPS = [  # a policy drifting toward length: the correlation climbs past its threshold at step 3
    {"step": 1, "rank": 0, "length_correlation": 0.10, "escalation_share": 0.0, "refusal_share": 0.05,
     "judge_failure_share": 0.0},
    {"step": 2, "rank": 0, "length_correlation": 0.35, "escalation_share": 0.0, "refusal_share": 0.05,
     "judge_failure_share": 0.0},
    {"step": 3, "rank": 0, "length_correlation": 0.72, "escalation_share": 0.25, "refusal_share": 0.0,
     "judge_failure_share": 0.0, "leaf_drop": 0.1},
    {"step": 4, "rank": 0, "length_correlation": 0.81, "escalation_share": 0.1, "refusal_share": 0.0,
     "judge_failure_share": 0.125, "leaf_drop": 0.4},
]


@pytest.fixture()
def records(tmp_path):
    folder = tmp_path / "rubric_records"
    folder.mkdir()
    scores, _ = synthetic(16, per_group=4, seed=5, answer_chars=80)
    for r in scores:
        r["group"] = r["id"].rsplit("-", 1)[0]
    write_jsonl(folder / "step-1.jsonl", scores)
    lines = [json.dumps(x) for x in reversed(STEPS)]  # out of order: the page sorts by step
    (folder / "monitors.jsonl").write_text("\n".join(lines) + '\n{"step": 5, "rank": 0, "length_corr',
                                           encoding="utf-8")  # cut by a kill mid-write
    return folder


def _over(limits: dict) -> int:
    return sum(1 for row in STEPS for k in MONITOR_KEYS
               if row.get(k) is not None and limits[k] is not None and row[k] > limits[k])


def test_the_monitors_are_read_in_step_order_with_their_thresholds(records):
    run = load_run(records)
    assert [m["step"] for m in run.monitors] == [1, 2, 3, 4]
    assert run.monitor_limits == {k: getattr(MonitorSettings(), k) for k in MONITOR_KEYS}
    assert any("cut last line" in w for w in run.warnings)
    packed = build_data([run])
    assert packed["MK"] == list(MONITOR_KEYS)
    assert [row[0] for row in packed["runs"][0]["M"]] == [1, 2, 3, 4]
    assert packed["runs"][0]["M"][2][2 + MONITOR_KEYS.index("length_correlation")] == 0.72


def test_a_scores_file_has_no_monitors_tab_data(records):
    run = load_run(records / "step-1.jsonl")
    assert run.monitors == [] and build_data([run])["runs"][0]["M"] == []


@pytest.mark.slow  # a browser subprocess
def test_the_page_shows_the_monitors_and_marks_the_cells_over_their_thresholds(records, tmp_path):
    require_chromium()
    page_path = write_inspector(records, tmp_path / "page")
    limits = {k: getattr(MonitorSettings(), k) for k in MONITOR_KEYS}
    with open_page(page_path) as page:
        page.wait_for_selector("body[data-ready='1']")
        assert page.is_visible("#tab-monitors")
        page.click("#tab-monitors")
        assert page.locator("#monitorrows tr").count() == len(STEPS)
        assert page.locator("#monitorrows td.over").count() == _over(limits) == 5
        assert page.locator("#monitor-charts svg.spark").count() == len(MONITOR_KEYS)
        assert "cut last line" in page.text_content("#warnings")


def test_the_thresholds_are_the_runs_own(records):
    """A run with its own thresholds (the TRL reward writes them into the records folder's
    settings.json beside the recipe): the page marks the steps above those, not the defaults."""
    from reward.integrations.records import RecordWriter
    from reward.settings import RewardSettings

    own = MonitorSettings(length_correlation=0.9, escalation_share=0.01, judge_failure_share=None).model_dump(mode="json")
    RecordWriter(records, RewardSettings(), name="clinical_rubric", monitors=own).write([], [])
    head = json.loads((records / "settings.json").read_text())
    assert head["monitors"] == own and "monitors" not in head["reward"]
    run = load_run(records)
    assert run.monitor_limits["length_correlation"] == 0.9 and run.monitor_limits["judge_failure_share"] is None
    assert _over(run.monitor_limits) == 3  # escalation 0.25 and 0.1 above 0.01, leaf_drop 0.4 (defaults: 5)
