"""A hung judge ends a run within the run's deadline, with a named error and exit status (issue 26,
N6): ``--deadline`` bounds the whole run (not one grading call), ``--item-timeout`` one request,
and the circuit breaker stops the run once every endpoint has left many requests in a row
unanswered. What was scored before stays in ``--out``.

The stub judge is a listening socket on 127.0.0.1 that never answers (connections queue in its
backlog, requests are never read): the worst case, where every request waits its full timeout.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rubricstree import app
from rubricstree.judge_options import EXIT_JUDGE_DEADLINE, EXIT_JUDGE_UNAVAILABLE

PORTS = range(18250, 18260)  # this port range


@pytest.fixture
def hung_url():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    for port in PORTS:
        try:
            sock.bind(("127.0.0.1", port))
            break
        except OSError:
            continue
    else:
        pytest.skip("no free port in 18250-18259")
    sock.listen(1024)  # accepts (in the kernel) and never answers
    yield f"http://127.0.0.1:{port}"
    sock.close()


def _rollouts(tmp_path: Path, prompts: int = 50, per_prompt: int = 4) -> Path:
    rows = tmp_path / "rollouts.jsonl"
    with rows.open("w", encoding="utf-8") as f:
        for p in range(prompts):
            for r in range(per_prompt):
                f.write(json.dumps({"id": f"p{p}-r{r}", "prompt": [{"role": "user", "content": f"question {p}"}],
                                    "completion": f"answer {r}"}) + "\n")
    return rows


def _score(tmp_path, hung_url, tiny_model_dir, *extra: str):
    rows = _rollouts(tmp_path)
    args = ["score", "--rollouts", str(rows), "--out", str(tmp_path / "o"), "--router", "static",
            "--no-cache", "--json", "--judge-url", hung_url, "--served-model", "tiny", "--judge-api", "completions",
            "--judge-tokenizer", str(tiny_model_dir), "--item-timeout", "1", "--max-retries", "4", *extra]
    t0 = time.monotonic()
    result = CliRunner().invoke(app, args)
    return result, time.monotonic() - t0


@pytest.mark.slow
def test_hung_judge_trips_the_circuit_breaker_within_the_run_deadline(tmp_path, hung_url, tiny_model_dir):
    """The run deadline (60 s from the first judge request) is not reached: the breaker opens after
    16 unanswered requests in a row, about two 1 s request timeouts, whatever the number of prompts."""
    result, seconds = _score(tmp_path, hung_url, tiny_model_dir, "--deadline", "60", "--circuit-breaker", "16")
    assert result.exit_code == EXIT_JUDGE_UNAVAILABLE == 5, result.output
    assert "judge stopped answering" in result.output and "0 of 200 rollouts scored" in result.output
    assert seconds < 300, seconds  # start-up (tokenizer, one 10 s model listing) + at most the deadline


@pytest.mark.slow
def test_hung_judge_without_breaker_stops_at_the_run_deadline(tmp_path, hung_url, tiny_model_dir):
    result, seconds = _score(tmp_path, hung_url, tiny_model_dir, "--deadline", "4", "--circuit-breaker", "0")
    assert result.exit_code == EXIT_JUDGE_DEADLINE == 4, result.output
    assert "deadline of 4s passed" in result.output
    assert seconds < 250, seconds  # start-up, then 4 s for the whole run (not 4 s per grading call)
