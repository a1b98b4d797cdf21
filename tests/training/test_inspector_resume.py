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


def _results():
    return [RolloutScore.model_validate(r) for r in score(A_MET, emergency=EMERGENCY)], rollouts(A_MET)


def test_steps_a_resume_undid_are_left_out_even_before_it_scores_them_again(tmp_path):
    """Session 1 scored steps 1-5; the run resumed from the checkpoint at step 2 and has scored step 3
    so far: session 1's steps 3, 4 and 5 were undone."""
    results, recs = _results()
    folder = tmp_path / "run" / "rubric_records"
    first = _write(folder, (1, 2, 3, 4, 5), results, recs)
    second = _write(folder, (3,), results, recs)
    run = load_run(tmp_path / "run", tree=load_tree())
    seen = {(r.rec["step"], r.rec["session"]) for r in run.rollouts}
    assert seen == {(1, first.session), (2, first.session), (3, second.session)}


def test_the_ranks_of_one_launch_are_all_kept_and_a_resume_on_fewer_ranks_undoes_every_rank(tmp_path, monkeypatch):
    results, recs = _results()
    folder = tmp_path / "run" / "rubric_records"
    for rank in ("0", "1", "2", "3"):  # one launch on four ranks, steps 1-4
        monkeypatch.setenv("RANK", rank)
        _write(folder, (1, 2, 3, 4), results, recs)
    run = load_run(tmp_path / "run", tree=load_tree())
    assert len(run.rollouts) == 4 * 4 * len(results) and not run.warnings
    for rank in ("0", "1"):  # resumed on two ranks from the checkpoint at step 2
        monkeypatch.setenv("RANK", rank)
        _write(folder, (3,), results, recs)
    run = load_run(tmp_path / "run", tree=load_tree())
    steps = sorted({(r.rec["step"], r.id.split("-")[1]) for r in run.rollouts})
    assert steps == [(s, f"r{k}") for s in (1, 2) for k in range(4)] + [(3, "r0"), (3, "r1")]


def test_the_monitors_of_a_resumed_run_open_after_a_cut_line_and_hold_each_step_once(tmp_path):
    results, recs = _results()
    folder = tmp_path / "out" / "rubric_records"  # a TRL output_dir: the inspector looks inside
    first = _write(folder, (), results, recs)
    for step in (1, 2, 3):
        first.write_monitors({"length_correlation": 0.1 * step}, types.SimpleNamespace(global_step=step))
    path = folder / "monitors.jsonl"
    path.write_bytes(path.read_bytes()[:-7])  # killed while writing step 3's line
    second = _write(folder, (), results, recs)
    for step in (3, 4):
        second.write_monitors({"length_correlation": 0.5}, types.SimpleNamespace(global_step=step))
    _write(folder, (1,), results, recs)  # a scores step file, for the folder to open
    from training.inspector.data import read_monitors

    warnings: list[str] = []
    rows, _ = read_monitors(tmp_path / "out", {}, warnings)
    assert [(r["step"], r["session"] == second.session) for r in rows] == [(1, False), (2, False), (3, True),
                                                                           (4, True)]
    assert any("monitors.jsonl line 3: skipped" in w for w in warnings), warnings


def test_two_writers_started_together_in_one_process_are_two_sessions():
    a = RecordWriter("unused-a", RewardSettings(), name="x")
    b = RecordWriter("unused-b", RewardSettings(), name="x")
    assert a.session != b.session
