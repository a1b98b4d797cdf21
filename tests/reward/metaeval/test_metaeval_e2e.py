"""``meta-eval run``, ``meta-eval stability`` and ``meta-eval healthbench`` end to end on the tiny
random-weight model: in-process (slow) and against the real vLLM server under two URLs (server).
The tiny model's numbers are wiring, not evidence: the tests check shapes, counts and resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rt_paths import REPO_ROOT
from typer.testing import CliRunner

from reward.demo import demo_rollouts_path
from rubricstree import app

runner = CliRunner()

TAXONOMY = """
version: 1
name: metaeval-test
root: root
nodes:
  - id: root
    title: Quality
    children: [safety, communication]
  - id: safety
    title: Safety
    children: [call_ems, home_care]
  - id: communication
    title: Communication
    children: [empathy]
  - id: call_ems
    title: Call emergency services
    criterion: Advises calling emergency services now.
    conditional: false  # applies to every reply: the applicability step (on by default) never drops it
  - id: home_care
    title: Home care instead of emergency
    criterion: Suggests waiting at home to see whether the symptoms settle.
    conditional: false  # applies to every reply: the applicability step (on by default) never drops it
    polarity: negative
  - id: empathy
    title: Empathy
    criterion: Acknowledges the user's worry.
    conditional: false  # applies to every reply: the applicability step (on by default) never drops it
"""


def _inputs(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    rows = [json.loads(x) for x in demo_rollouts_path().read_text().splitlines()[:4]]
    pairs, labels, rollouts, tax = (tmp_path / n for n in ("pairs.jsonl", "labels.jsonl", "rollouts.jsonl", "t.yaml"))
    pairs.write_text("".join(json.dumps({"id": r["id"], "prompt": r["prompt"], "response": r["completion"],
                                         "scenario": "good" if "good" in r["id"] else "poor"}) + "\n" for r in rows))
    labels.write_text("".join(json.dumps({"id": r["id"], "score": 0.9 if "good" in r["id"] else 0.2,
                                          "leaves": {"call_ems": "good" in r["id"]}}) + "\n" for r in rows))
    rollouts.write_text("".join(json.dumps({k: r[k] for k in ("id", "prompt", "completion")}) + "\n" for r in rows))
    tax.write_text(TAXONOMY)
    return pairs, labels, rollouts, tax


def _invoke(args: list[str]) -> dict:
    res = runner.invoke(app, ["meta-eval", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout.strip().splitlines()[-1])


def _run_and_stability(tmp_path: Path, judge_args: list[str], stab_args: list[str], router: str) -> None:
    pairs, labels, rollouts, tax = _inputs(tmp_path)
    out = tmp_path / "run"
    args = ["run", "--pairs", str(pairs), "--labels", str(labels), "--router", router, "--taxonomy", str(tax),
            "--holistic-baseline", "--resamples", "50", "--out", str(out), *judge_args]
    overall = _invoke(args)
    assert set(overall) == {"rubricstree", "principle"}
    for row in overall.values():
        assert row["n"] + row["unscored"] == 4
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 8
    for f in ("report.md", "report.html", "summary.json"):
        assert (out / f).exists()
    # a rerun grades nothing more when everything was scored (unscored rows are retried)
    scored = sum(json.loads(x)["score"] is not None for x in lines)
    _invoke(args)
    assert len((out / "results.jsonl").read_text().splitlines()) == 8 + (8 - scored)

    sout = tmp_path / "stab"
    res = _invoke(["stability", "--rollouts", str(rollouts), "--taxonomy", str(tax), "--router", router,
                   "--temperatures", "0,1", "--repeats", "2", "--out", str(sout), *stab_args])
    cfgs = res["configs"]
    backbones = {c["backbone"] for c in cfgs}
    assert len(backbones) == 2
    modes = {(c["method"], c["mode"]) for c in cfgs}
    assert ("rubricstree", "choice") in modes and ("principle", "likert") in modes
    assert len(cfgs) == 2 * 2 * len(modes)  # backbones x temperatures x (method, mode)
    for c in cfgs:
        if c["method"] == "rubricstree" and c["mode"] == "choice" and c["temperature"] == 0 and c["n"]:
            assert c["flip_rate"] == 0 and c["mean_std"] == 0
    assert res["pairwise"] and all(p["a"] != p["b"] for p in res["pairwise"])
    for f in ("report.md", "report.html", "stability.jsonl", "summary.json"):
        assert (sout / f).exists()


def _hb_file(tmp_path: Path) -> Path:
    f = tmp_path / "meta.jsonl"
    rows = [("Call emergency services now.", "Advises calling emergency services.", "cluster:emergency",
             [True, True, False]),
            ("Drink water and rest.", "Advises calling emergency services.", "cluster:emergency", [False, False]),
            ("Take it with food.", "Says to take the medicine with food.", "cluster:medication", [True, False, True])]
    f.write_text("".join(json.dumps({"prompt": [{"role": "user", "content": "My chest hurts, what do I do?"}],
                                     "completion": c, "rubric": r, "category": cat, "binary_labels": lab,
                                     "anonymized_physician_ids": ["a", "b", "c"][:len(lab)]}) + "\n"
                         for c, r, cat, lab in rows))
    return f


def _hb(tmp_path: Path, judge_args: list[str]) -> None:
    res = _invoke(["healthbench", "--data", str(_hb_file(tmp_path)), "--out", str(tmp_path / "hb"), *judge_args])
    assert set(res) == {"all", "cluster:emergency", "cluster:medication"}
    assert set(res["all"]["modes"]) == {"choice", "explain"} and res["all"]["n"] == 3
    assert (tmp_path / "hb" / "report.html").exists()


@pytest.mark.slow
def test_metaeval_in_process(tmp_path, tiny_model_dir):
    m = str(tiny_model_dir)
    _run_and_stability(tmp_path, ["--judge-model", m], ["--judge-model", m, "--backbone", m], router="static")
    _hb(tmp_path, ["--judge-model", m])


@pytest.mark.server
def test_metaeval_against_server_two_endpoints(tmp_path, judge_url, tiny_model_dir):
    other = judge_url.replace("127.0.0.1", "localhost")
    assert other != judge_url, "the second endpoint must be another URL for the same server"
    m = str(tiny_model_dir)
    _run_and_stability(tmp_path, ["--judge-url", f"{judge_url},{other}", "--judge-model", m],
                       ["--judge-url", judge_url, "--backbone", other, "--judge-model", m,
                        "--modes", "choice,explain"], router="llm")
    _hb(tmp_path, ["--judge-url", judge_url, "--judge-model", m])


@pytest.mark.server
def test_stability_killed_mid_run_resumes_without_regrading(tmp_path, judge_url, tiny_model_dir):
    """SIGKILL the command once some rows are written, run it again: every (configuration,
    repeat, rollout) ends up in the log exactly once."""
    import os
    import signal
    import subprocess
    import sys
    import time

    _, _, rollouts, tax = _inputs(tmp_path)
    out = tmp_path / "stab"
    cmd = [sys.executable, "-c", "from rubricstree import main; main()", "meta-eval", "stability",
           "--rollouts", str(rollouts), "--taxonomy", str(tax), "--router", "static", "--judge-url", judge_url,
           "--judge-model", str(tiny_model_dir), "--temperatures", "0,1", "--repeats", "3",
           "--modes", "explain", "--no-holistic-baseline", "--out", str(out), "--json"]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = out / "stability.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if log.exists() and len(log.read_text().splitlines()) >= 8:
            break
        time.sleep(0.05)
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = len(log.read_text().splitlines())
    assert before < 2 * 3 * 4, "the run finished before it could be killed"
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [json.loads(x) for x in log.read_text().splitlines()]
    keys = [(r["temperature"], r["repeat"], r["id"]) for r in rows if r["score"] is not None]
    assert len(keys) == len(set(keys)) == 2 * 3 * 4  # temperatures x repeats x rollouts, once each
