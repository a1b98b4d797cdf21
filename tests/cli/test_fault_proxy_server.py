"""Through a proxy injecting 20% faults of every kind (scripts/fault_proxy.py: hangs, 500, 503,
non-JSON 200, JSON 200 without logprobs or text, connection resets, slow answers) in front of the
real vLLM judge, ``rubricstree score`` gives (almost) every rollout the score of a clean run and
the rest explicit failures, in choice and explain mode (issue 10, done-when).

Default settings except ``--timeout 10`` (the proxy's hang fault would otherwise cost the default
120 s per hung request; the handling is the same) and ``--no-cache`` (both runs must ask the
judge). The tiny random-weight model makes this a wiring test: its scores mean nothing, only
their equality does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from rt_net import free_port
from rt_paths import REPO_ROOT
from typer.testing import CliRunner

from rubricstree import app

pytestmark = pytest.mark.server
ROOT = REPO_ROOT

TAXONOMY = """\
version: 1
name: fault-test
root: root
nodes:
  - {id: root, title: Root, definition: "quality", children: [a, b, c, d]}
  - {id: a, title: Emergency, criterion: "Advises calling emergency services.", polarity: positive, conditional: false}
  - {id: b, title: Dose, criterion: "States a medication dose.", polarity: positive, conditional: false}
  - {id: c, title: Empathy, criterion: "Acknowledges the user's worry.", polarity: positive, conditional: false}
  - {id: d, title: Harm, criterion: "Suggests ignoring the symptoms.", polarity: negative, conditional: false}
"""
# conditional: false: checks for every reply, so the applicability step (on by default) never drops them
PROMPTS = ["I have crushing chest pain.", "My child has a fever of 39C.", "Can I take ibuprofen with warfarin?"]
ANSWERS = ["Call emergency services now.", "It is probably nothing; wait and see."]


@pytest.fixture
def proxy(judge_url, tmp_path):
    port, stats = free_port(), tmp_path / "proxy_stats.json"
    proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "fault_proxy.py"), "--upstream",
                             judge_url.rstrip("/").removesuffix("/v1"), "--port", str(port), "--rate", "0.2",
                             "--seed", "7", "--hang-s", "60", "--stats", str(stats)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            httpx.get(url + "/v1/models", timeout=2)
            break
        except httpx.HTTPError:
            time.sleep(0.1)
    yield url, stats
    proc.kill()
    proc.wait()


def _score(tmp_path, url: str, mode: str, tag: str, tiny_model_dir) -> dict:
    tax = tmp_path / "tax.yaml"
    tax.write_text(TAXONOMY, encoding="utf-8")
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"id": f"p{i}r{j}", "prompt": [{"role": "user", "content": p}],
                                        "completion": a}) + "\n"
                            for i, p in enumerate(PROMPTS) for j, a in enumerate(ANSWERS)), encoding="utf-8")
    out = tmp_path / tag / "scores.jsonl"
    result = CliRunner().invoke(app, ["score", "--rollouts", str(rows), "--out", str(out.parent), "--taxonomy", str(tax),
                                      "--router", "static", "--judge-url", url, "--judge-model", str(tiny_model_dir),
                                      "--judge-mode", mode, "--no-cache", "--json", "--item-timeout", "10",
                                      "--concurrency", "1", "--judge-concurrency", "1"])
    assert result.exit_code in (0, 3), result.output
    return {r["id"]: r for r in map(json.loads, out.read_text(encoding="utf-8").splitlines())}


@pytest.mark.parametrize("mode", ["choice", "explain"])
def test_score_through_twenty_percent_faults_matches_a_clean_run(mode, proxy, judge_url, tmp_path, tiny_model_dir):
    url, stats = proxy
    # vLLM is not batch-invariant: the random-weight model's near-tied tokens can flip when
    # requests are batched differently, and retries change the batching. Every run therefore sends
    # one request at a time (the server always computes a batch of one), and a rollout whose score
    # still differs between two clean runs says nothing about fault handling: it is left out.
    clean = _score(tmp_path, judge_url, mode, "clean", tiny_model_dir)
    again = _score(tmp_path, judge_url, mode, "clean1", tiny_model_dir)
    unstable = [i for i in clean if clean[i]["score"] != again[i]["score"]]
    clean = {i: r for i, r in clean.items() if i not in unstable}
    t0 = time.monotonic()
    faulty = _score(tmp_path, url, mode, "faulty", tiny_model_dir)
    counts = json.loads(stats.read_text(encoding="utf-8"))
    same = [i for i in clean if faulty[i]["score"] == pytest.approx(clean[i]["score"], abs=1e-6)
            if clean[i]["score"] is not None and faulty[i]["score"] is not None]
    same += [i for i in clean if clean[i]["score"] is None and faulty[i]["score"] is None]
    rest = [i for i in clean if i not in same]
    n_clean = sum(r["score"] is not None for r in clean.values())
    assert n_clean >= len(clean) // 2, "the clean run scored too little for the comparison to mean anything"
    assert len(unstable) <= 1, f"the clean runs disagree on {unstable}: the server is too noisy to compare"
    print(f"\n{mode}: {len(same)}/{len(clean)} same score ({n_clean} scored clean, {len(unstable)} unstable left "
          f"out), {len(rest)} differ; proxy {counts}; "
          f"{time.monotonic() - t0:.1f}s", file=sys.stderr)
    assert counts["faults"] >= 3 and sum(counts[k] > 0 for k in counts if k not in ("requests", "faults")) >= 3
    for i in rest:
        print(f"  {i}: clean {clean[i]['score']} {[lr['met'] for lr in clean[i]['leaves']]}; faulty "
              f"{faulty[i]['score']} {[lr['met'] for lr in faulty[i]['leaves']]} {faulty[i]['failures']}",
              file=sys.stderr)
    assert len(same) / len(clean) >= 0.99
    assert all(faulty[i]["score"] is None and faulty[i]["failures"] for i in rest)
    if os.environ.get("RUBRICSTREE_FAULT_REPORT"):
        Path(os.environ["RUBRICSTREE_FAULT_REPORT"]).write_text(json.dumps(
            {"mode": mode, "same": len(same), "n": len(clean), "proxy": counts}), encoding="utf-8")
