"""Every wait of a served judge's start-up has a bound the run's deadline covers (issue 39).

A server reporting its root as ``/dev/zero`` hung start-up despite ``--deadline 10``: its root was
read for a fingerprint, for ever. Now only a model folder is hashed, hashing stops at the
deadline, and every request made at start-up is bounded in total time (a server that trickles
bytes is cut off), so start-up ends within its deadline. Stand-ins: the vLLM-shaped stub, a
server that never answers, a server that trickles, a sparse 64 GiB weights file.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from rt_vllm_stub import HashTokenizer, VLLMStub
from typer.testing import CliRunner

from reward.errors import InputError, JudgeDeadlineError
from reward.judge import VerdictCache
from reward.judge.budget import run_deadline
from reward.judge.http import HTTPJudge
from reward.judge.identity import model_fingerprint
from reward.judge.startup import StartupClock
from reward.serving import bounded_request

# A bound that only proves a hang ends: real start-up work (a stub, a tokenizer) must never race it, on
# however loaded a machine (issue 49: a 10 s deadline failed a clean clone at load average 16-19).
HANG_BOUND_S = 600.0


def _sparse_model(folder: Path) -> Path:
    """A model folder whose weights file is 64 GiB of holes: reading it all takes minutes."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "qwen3"}', encoding="utf-8")
    with open(folder / "model.safetensors", "wb") as fh:
        fh.truncate(64 << 30)
    return folder


def test_a_root_at_dev_zero_is_not_read_and_caches_only_under_a_revision(tmp_path):
    with VLLMStub(root="/dev/zero") as srv:
        with pytest.raises(InputError, match="not a model folder readable here"):
            HTTPJudge(srv.url, "judge", tokenizer=HashTokenizer(), cache=VerdictCache(tmp_path / "v.sqlite"),
                      deadline_s=HANG_BOUND_S)
        judge = HTTPJudge(srv.url, "judge", tokenizer=HashTokenizer(), cache=None, deadline_s=HANG_BOUND_S)
        assert judge.served_root == "/dev/zero" and "#" not in judge.model_id


def test_hashing_stops_at_the_deadline(tmp_path):
    folder = _sparse_model(tmp_path / "big")
    with pytest.raises(JudgeDeadlineError, match="start-up did not finish within the deadline of 1s"):
        model_fingerprint(folder, clock=StartupClock(1.0))
    with run_deadline(1.0), pytest.raises(JudgeDeadlineError, match="deadline of 1s"):
        model_fingerprint(folder, clock=StartupClock(None))  # the run's deadline bounds it too


def test_a_served_root_too_big_to_hash_in_time_stops_the_command_with_exit_4(tmp_path):
    """The command line: ``score --deadline 2`` against a server whose root is a 64 GiB model
    ends with the deadline's exit status, not after hashing it all."""
    from rubricstree import app

    folder = _sparse_model(tmp_path / "big")
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"id": "r", "prompt": [{"role": "user", "content": "hi"}], "completion": "c"}) + "\n")
    with VLLMStub(root=str(folder)) as srv:
        res = CliRunner().invoke(app, ["score", "--rollouts", str(rows), "--out", str(tmp_path / "o"),
                                       "--router", "static", "--judge-url", srv.url, "--served-model", "judge",
                                       "--deadline", "2", "--cache-dir", str(tmp_path / "c")])
    assert res.exit_code == 4, res.output
    assert "deadline of 2s" in res.output


class _Silent(BaseHTTPRequestHandler):
    """Accepts every request and never answers it."""

    def log_message(self, *a):
        pass

    def do_GET(self):
        time.sleep(3600)

    do_POST = do_GET


class _Trickle(BaseHTTPRequestHandler):
    """Answers 200 and then one byte every 0.2 s, for ever."""

    def log_message(self, *a):
        pass

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "1000000")
        self.end_headers()
        try:
            while True:
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.2)
        except OSError:
            pass

    do_POST = do_GET


@pytest.fixture(params=[_Silent, _Trickle], ids=["silent", "trickle"])
def stuck_url(request):
    server = ThreadingHTTPServer(("127.0.0.1", 0), request.param)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_request_is_bounded_in_total_time(stuck_url):
    with httpx.Client() as client, pytest.raises(httpx.TimeoutException):
        bounded_request(client, "GET", f"{stuck_url}/v1/models", seconds=1.0)


def test_start_up_against_a_stuck_server_ends_within_its_deadline(stuck_url, tmp_path):
    with run_deadline(2.0):  # a command's --deadline 2
        try:  # stopped at the deadline, or nothing established in time: no cache without a revision
            judge = HTTPJudge(stuck_url, "judge", tokenizer=HashTokenizer(), cache=VerdictCache(tmp_path / "v.sqlite"))
        except JudgeDeadlineError:
            pass
        else:
            assert judge.cache is None and judge.served_root is None
    judge = HTTPJudge(stuck_url, "judge", tokenizer=HashTokenizer(), cache=None, deadline_s=2.0)
    assert judge.served_root is None  # it said nothing in time: nothing is taken from it


def test_a_silent_endpoint_costs_start_up_one_bounded_wait(tmp_path):
    with socket.socket() as s:  # listening, never accepting: connections hang in the backlog
        s.bind(("127.0.0.1", 0))
        s.listen(0)
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
        with VLLMStub(root=None) as srv:
            judge = HTTPJudge(f"{url},{srv.url}", "judge", tokenizer=HashTokenizer(), cache=None,
                              deadline_s=HANG_BOUND_S)
    assert [ep.url for ep in judge.pool.endpoints] == [f"{srv.url}/v1"]
