"""A trainer's records folder after a kill and a resume opens (issue 49, part 4): the resumed run's
``RecordWriter`` appends the steps after the checkpoint again, to the same files. The inspector keeps,
per step and rank, the latest session's rows, and skips the line the kill cut, saying both."""

from __future__ import annotations

import types

from rt_inspector import A_MET, EMERGENCY, rollouts, score

from reward.integrations.records import RecordWriter
from reward.settings import RewardSettings
from reward.stages.results import RolloutScore
from reward.tree import load_tree
from training.inspector import load_run


def _write(folder, steps, results, recs):
    writer = RecordWriter(folder, RewardSettings(), name="clinical_rubric")
    for step in steps:
        writer.write(results, recs, types.SimpleNamespace(global_step=step))
    return writer


def test_a_run_resumed_from_a_checkpoint_opens_with_the_resumed_rows(tmp_path):
    results = [RolloutScore.model_validate(r) for r in score(A_MET, emergency=EMERGENCY)]
    recs = rollouts(A_MET)
    folder = tmp_path / "run" / "rubric_records"
    first = _write(folder, (4, 5, 6), results, recs)
    step6 = folder / "step-000006.jsonl"
    step6.write_bytes(step6.read_bytes()[:-57])  # killed while writing step 6's last line
    second = _write(folder, (5, 6), results, recs)  # resumed from the checkpoint at step 4
    assert second.session > first.session

    run = load_run(tmp_path / "run", tree=load_tree())
    by_step = {}
    for r in run.rollouts:
        by_step.setdefault(r.rec["step"], set()).add(r.rec["session"])
    assert by_step == {4: {first.session}, 5: {second.session}, 6: {second.session}}
    assert len(run.rollouts) == 3 * len(results)  # each step once: no undone row, no duplicate
    assert any("skipped a line that does not parse" in w and "step-000006.jsonl" in w for w in run.warnings)
    assert any("earlier session left out" in w and "step-000005.jsonl" in w for w in run.warnings)


def test_a_writer_starts_on_a_new_line_after_a_cut_one(tmp_path):
    results = [RolloutScore.model_validate(r) for r in score(A_MET, emergency=EMERGENCY)]
    recs = rollouts(A_MET)
    folder = tmp_path / "records"
    _write(folder, (1,), results, recs)
    path = folder / "step-000001.jsonl"
    path.write_bytes(path.read_bytes()[:-10])
    _write(folder, (1,), results, recs)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 * len(results)  # the fragment is a line of its own, the new rows whole after it
    assert lines[len(results) - 1].endswith(lines[len(results) - 1][-5:]) and lines[len(results)].startswith("{")
