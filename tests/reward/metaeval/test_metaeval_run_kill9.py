"""``meta-eval run`` killed with SIGKILL from outside mid-run, then rerun (issue 26): every pair is
graded once, no verdict stored before the kill is graded again, and the results equal an
uninterrupted run's. In-process tiny random-weight judge: wiring only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rt_kill import kill_when, rubricstree, stored_verdicts

from reward.demo import demo_rollouts_path

pytestmark = pytest.mark.slow
pytest.importorskip("torch")

TAXONOMY = """
version: 1
name: metaeval-kill-test
root: root
nodes:
  - {id: root, title: Quality, children: [call_ems, home_care, empathy]}
  - {id: call_ems, title: Call emergency services, criterion: Advises calling emergency services now.,
     conditional: false}
  - {id: home_care, title: Home care, criterion: Suggests waiting at home., polarity: negative, conditional: false}
  - {id: empathy, title: Empathy, criterion: "Acknowledges the user's worry.", conditional: false}
"""
# conditional: false: these apply to every reply, so the applicability step (on by default) never drops them


def _rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def test_sigkill_mid_run_then_rerun_grades_nothing_twice(tiny_model_dir, tmp_path):
    rows = [json.loads(x) for x in demo_rollouts_path().read_text().splitlines()]  # 16: two chunks of 8
    pairs, labels, tax = tmp_path / "pairs.jsonl", tmp_path / "labels.jsonl", tmp_path / "t.yaml"
    pairs.write_text("".join(json.dumps({"id": r["id"], "prompt": r["prompt"], "response": r["completion"]}) + "\n"
                             for r in rows))
    labels.write_text("".join(json.dumps({"id": r["id"], "score": 0.9 if "good" in r["id"] else 0.2}) + "\n"
                              for r in rows))
    tax.write_text(TAXONOMY)

    def args(out, cache):
        return ["meta-eval", "run", "--pairs", str(pairs), "--labels", str(labels), "--router", "static",
                "--taxonomy", str(tax), "--judge-model", str(tiny_model_dir), "--resamples", "20",
                "--cache-dir", str(cache), "--out", str(out), "--json"]

    res = rubricstree(args(tmp_path / "clean", tmp_path / "c1"))
    assert res.returncode == 0, res.stderr[-2000:]
    clean = {(r["method"], r["id"]): r for r in _rows(tmp_path / "clean" / "results.jsonl")}
    assert len(clean) == len(rows)

    out, cache = tmp_path / "killed", tmp_path / "c2"
    rc = kill_when(args(out, cache), lambda: bool(_rows(out / "results.jsonl")))
    assert rc == -9, "the run finished before it could be killed"
    first = _rows(out / "results.jsonl")
    stored = stored_verdicts(cache)
    assert stored and len(first) < len(rows)

    res = rubricstree(args(out, cache))
    assert res.returncode == 0, res.stderr[-2000:]
    done = _rows(out / "results.jsonl")
    assert done[:len(first)] == first  # appended, never rewritten
    keys = [(r["method"], r["id"]) for r in done]
    assert len(keys) == len(set(keys)) == len(rows)  # each pair graded (and written) once
    after = stored_verdicts(cache)
    assert {k: after.get(k) for k in stored} == stored  # no stored verdict was graded again
    for key, r in clean.items():
        got = next(x for x in done if (x["method"], x["id"]) == key)
        assert got["score"] == pytest.approx(r["score"], abs=1e-9), key
    stats = json.loads((out / "summary.json").read_text())["judge_stats"]
    assert stats["cache_hits"] + stats["cache_misses"] > 0
