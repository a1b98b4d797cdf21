"""Policy generation against a hung server ends at the run's deadline (issue 39): ``eval`` was
still waiting at 200 s with ``--deadline`` set, since generation had no run deadline (each
request waited its 600 s timeout, and again for every retry). A stand-in server answers
``/v1/models`` and then never completes a chat request: it hangs, or trickles one byte at a time
(which httpx's per-read timeout never ends)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from reward.errors import JudgeDeadlineError
from reward.judge.budget import run_deadline
from reward.serving import RetryPolicy
from training.generation import GenerationSettings, GenRequest, HTTPGenerator


def _hung_server(mode: str):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            body = json.dumps({"data": [{"id": "policy", "root": "/models/policy"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if mode == "hang":
                time.sleep(3600)
                return
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            try:
                for _ in range(100000):  # one byte every 0.2 s: each read is quick, the answer never ends
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.2)
            except OSError:
                pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize("mode", ["hang", "trickle"])
def test_a_hung_policy_server_stops_the_run_at_its_deadline_keeping_what_was_generated(mode):
    server = _hung_server(mode)
    try:
        gen = HTTPGenerator(f"http://127.0.0.1:{server.server_address[1]}", None, GenerationSettings(max_new_tokens=8),
                            timeout_s=600.0, retry=RetryPolicy(max_retries=3, backoff_s=0.1, max_backoff_s=0.1))
        done: dict = {}
        with run_deadline(2.0), pytest.raises(JudgeDeadlineError, match="deadline of 2s passed while waiting on "
                                                                          "the policy server"):
            gen.generate([GenRequest(key=f"k{i}", messages=[{"role": "user", "content": "hi"}]) for i in range(3)],
                         lambda key, out: done.__setitem__(key, out))
        assert done == {}  # nothing was answered, and nothing was recorded as the policy's answer
    finally:
        server.shutdown()


def test_without_a_run_deadline_a_request_still_ends_at_its_own_timeout():
    server = _hung_server("trickle")
    try:
        gen = HTTPGenerator(f"http://127.0.0.1:{server.server_address[1]}", None, GenerationSettings(max_new_tokens=8),
                            timeout_s=1.0, retry=RetryPolicy(max_retries=1, backoff_s=0.0, max_backoff_s=0.0))
        done: dict = {}
        gen.generate([GenRequest(key="k", messages=[{"role": "user", "content": "hi"}])],
                     lambda key, out: done.__setitem__(key, out))
        assert not done["k"].ok and "timeout" in done["k"].error.lower()
    finally:
        server.shutdown()


@pytest.mark.server
def test_eval_against_a_hung_policy_server_exits_at_its_deadline(judge_url, tmp_path):
    """The command line, as the red team ran it: ``eval healthbench`` with a real judge and a hung
    policy server was still waiting at 200 s; with ``--deadline`` it now stops with exit 4. The
    deadline runs from the judge's start-up (a real server: tokenizer check, probes), so it is set
    from this machine's own start-up time, measured first with ``judge check`` (three times it, plus
    20 s): the hung policy server spends the rest, however fast or loaded the machine is."""
    import time

    from rt_paths import REPO_ROOT
    from typer.testing import CliRunner

    from rubricstree import app

    t0 = time.monotonic()
    check = CliRunner().invoke(app, ["judge", "check", "--judge-url", judge_url, "--json"])
    assert check.exit_code == 0, check.output
    deadline = int(3 * (time.monotonic() - t0)) + 20
    server = _hung_server("hang")
    t0 = time.monotonic()
    try:
        res = CliRunner().invoke(app, [
            "eval", "healthbench", "--model", "policy", "--generate-url", f"http://127.0.0.1:{server.server_address[1]}",
            "--judge-url", judge_url, "--data", str(REPO_ROOT / "tests/fixtures/eval_hb_own.jsonl"), "--limit", "2",
            "--out", str(tmp_path / "out"), "--no-cache", "--deadline", str(deadline), "--no-thinking"])
    finally:
        server.shutdown()
    elapsed = time.monotonic() - t0
    assert res.exit_code == 4, res.output
    assert elapsed < 2 * deadline + 60, (elapsed, deadline)  # it stopped at its deadline, not long after
    assert "waiting on the policy server" in res.output
