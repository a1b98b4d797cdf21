"""``optimize best-of-n`` killed with SIGKILL from outside, mid-scoring, then rerun (issue 26):
nothing is generated or graded twice and the results are those of an uninterrupted run. (The
server test kills through the store's own hook at a fixed record; here the kill lands wherever
the run happens to be.) The tiny random-weight model as policy and judge: wiring only."""

from __future__ import annotations

import pytest
from rt_kill import kill_when, rubricstree, stored_verdicts
from rt_optimize import lines, prompts_file, taxonomy_file

pytestmark = pytest.mark.slow
pytest.importorskip("torch")


def test_sigkill_mid_run_then_rerun_generates_and_grades_nothing_twice(tiny_model_dir, tmp_path):
    prompts, tax = prompts_file(tmp_path, 4), taxonomy_file(tmp_path)
    m = str(tiny_model_dir)

    def args(out, cache):
        return ["optimize", "best-of-n", "--prompts", str(prompts), "--n", "1", "--temperature", "0",
                "--out", str(out.parent), "--taxonomy", str(tax), "--router", "static", "--model", m, "--judge-model", m,
                "--cache-dir", str(cache), "--max-new-tokens", "12", "--generate-concurrency", "1"]

    clean_out, killed_out = tmp_path / "clean" / "samples.jsonl", tmp_path / "killed" / "samples.jsonl"
    res = rubricstree(args(clean_out, tmp_path / "c1"))
    assert res.returncode == 0, res.stderr[-2000:]
    clean = {r["id"]: r for r in lines(clean_out) if r["kind"] == "scored"}
    assert len(clean) == 4

    cache = tmp_path / "c2"
    rc = kill_when(args(killed_out, cache),
                   lambda: any(r["kind"] == "scored" for r in lines(killed_out)))
    assert rc == -9, "the run finished before it could be killed"
    first = lines(killed_out)
    stored = stored_verdicts(cache)
    assert stored and sum(r["kind"] == "scored" for r in first) < 4

    res = rubricstree(args(killed_out, cache))
    assert res.returncode == 0, res.stderr[-2000:]
    recs = lines(killed_out)
    assert recs[:len(first)] == first  # appended, never rewritten
    for kind in ("samples", "scored"):
        ids = [r["id"] for r in recs if r["kind"] == kind]
        assert sorted(ids) == sorted(set(ids)) and len(ids) == 4, kind  # each prompt generated/scored once
    after = stored_verdicts(cache)
    assert {k: after.get(k) for k in stored} == stored  # no stored verdict was graded again
    resumed = {r["id"]: r for r in recs if r["kind"] == "scored"}
    for pid, r in clean.items():
        assert resumed[pid]["completion"] == r["completion"]
        assert resumed[pid]["score"] == pytest.approx(r["score"], abs=1e-9)
