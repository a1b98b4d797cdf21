"""scripts/serve_judge.sh must not print a URL that answers for someone else (issue 10, defect 6):
a port already taken exits non-zero with a clear message, and a server that lists another model
than the one asked for is not reported ready. A stand-in "vLLM" (VLLM_PYTHON) and a stand-in
listener play the servers; no model is loaded."""

from __future__ import annotations

import http.server
import os
import signal
import subprocess
import sys
import threading
from functools import partial
from pathlib import Path

import pytest
from rt_net import free_port
from rt_paths import REPO_ROOT

REPO = REPO_ROOT

FAKE_VLLM = """#!{py}
import http.server, json, sys
port = int(sys.argv[sys.argv.index("--port") + 1])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({{"data": [{{"id": "{name}"}}]}}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def _run(tmp_path: Path, port: int, served: str) -> subprocess.CompletedProcess:
    fake = tmp_path / "fake_python"
    fake.write_text(FAKE_VLLM.format(py=sys.executable, name=served))
    fake.chmod(0o755)
    env = {**os.environ, "VLLM_PYTHON": str(fake), "JUDGE_WAIT_S": "20", "PATH": "/usr/bin:/bin"}
    pid_file = tmp_path / "judge.pid"
    try:
        return subprocess.run(["bash", str(REPO / "scripts/serve_judge.sh"), "--model", "/models/tiny", "--port",
                               str(port), "--pid-file", str(pid_file), "--log", str(tmp_path / "log")],
                              check=False, env=env, capture_output=True, text=True, timeout=60)
    finally:
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGTERM)
            except (ProcessLookupError, ValueError):
                pass


@pytest.fixture
def occupied_port(tmp_path):
    (tmp_path / "site" / "v1").mkdir(parents=True)
    (tmp_path / "site" / "v1" / "models").write_text('{"data": [{"id": "tiny"}]}')
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "site"))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def test_taken_port_exits_non_zero(tmp_path, occupied_port):
    res = _run(tmp_path, occupied_port, "tiny")
    assert res.returncode != 0 and "already taken" in res.stderr, (res.stdout, res.stderr)
    assert "http://" not in res.stdout


def test_server_listing_another_model_is_not_ready(tmp_path):
    res = _run(tmp_path, free_port(), "someone-else")
    assert res.returncode != 0 and "does not serve 'tiny'" in res.stderr, (res.stdout, res.stderr)


def test_the_right_model_is_reported_ready(tmp_path):
    port = free_port()
    res = _run(tmp_path, port, "tiny")
    assert res.returncode == 0 and res.stdout.strip() == f"http://127.0.0.1:{port}", res.stderr


def test_stop_leaves_a_process_that_is_not_a_vllm_server_alone(tmp_path):
    """--stop signals a whole process group: a stale pid file whose number now leads someone else's
    group (here a sleeping process of its own session) must not get that group killed."""
    other = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        pid_file = tmp_path / "judge.pid"
        pid_file.write_text(str(other.pid))
        res = subprocess.run(["bash", str(REPO / "scripts/serve_judge.sh"), "--stop", "--pid-file", str(pid_file)],
                             capture_output=True, text=True, timeout=30, check=False)
        assert res.returncode == 0 and "no vLLM process" in res.stderr, res.stderr
        assert other.poll() is None and not pid_file.exists()
    finally:
        other.kill()
        other.wait()
