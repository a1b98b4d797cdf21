"""scripts/serve_judge.sh stops the whole server when it gives up (issue 26, N7).

vLLM's API process starts an engine process; after the wait ran out the script sent one SIGTERM
to the API process, the server survived it and kept the port and ~1.5 GB, and a retry then failed
with "port taken". The stand-in "vLLM" here ignores SIGTERM and starts a child that ignores it too,
and never becomes ready: after the script gives up, neither may be left, nor the pid file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rt_net import free_port
from rt_paths import REPO_ROOT

pytestmark = pytest.mark.slow

STUBBORN_VLLM = """#!{py}
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
open({pids!r}, "w").write(f"{{os.getpid()}} {{child.pid}}")
time.sleep(600)  # never answers /v1/models
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"  # a zombie holds no port and no memory


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_giving_up_stops_the_whole_server_and_removes_the_pid_file(tmp_path):
    pids_file = tmp_path / "pids"
    fake = tmp_path / "fake_python"
    fake.write_text(STUBBORN_VLLM.format(py=sys.executable, pids=str(pids_file)))
    fake.chmod(0o755)
    pid_file = tmp_path / "judge.pid"
    env = {**os.environ, "VLLM_PYTHON": str(fake), "JUDGE_WAIT_S": "3", "JUDGE_STOP_S": "2",
           "PATH": "/usr/bin:/bin"}
    try:
        res = subprocess.run(["bash", str(REPO_ROOT / "scripts/serve_judge.sh"), "--model", "/models/tiny",
                              "--port", str(free_port()), "--pid-file", str(pid_file), "--log",
                              str(tmp_path / "log")], check=False, env=env, capture_output=True, text=True,
                             timeout=60)
        assert res.returncode != 0 and "not ready after 3s" in res.stderr, (res.stdout, res.stderr)
        server, child = map(int, pids_file.read_text().split())
        deadline = time.monotonic() + 5
        while (_alive(server) or _alive(child)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(server) and not _alive(child), "the server or its child survived"
        assert not pid_file.exists()
    finally:
        if pids_file.exists():
            for pid in map(int, pids_file.read_text().split()):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


SILENT_VLLM = """#!{py}
import socket, sys, time
port = int(sys.argv[sys.argv.index("--port") + 1])
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port))
srv.listen(16)
held = []
while True:  # accepts every connection and never answers a byte
    conn, _ = srv.accept()
    held.append(conn)
"""


def test_a_server_that_listens_but_never_answers_is_given_up_within_the_wait(tmp_path):
    """Issue 39: the readiness check had no timeout, so a server that accepts the connection and
    never answers held the script past JUDGE_WAIT_S (604 s at the red team's settings)."""
    fake = tmp_path / "fake_python"
    fake.write_text(SILENT_VLLM.format(py=sys.executable))
    fake.chmod(0o755)
    env = {**os.environ, "VLLM_PYTHON": str(fake), "JUDGE_WAIT_S": "3", "JUDGE_STOP_S": "2",
           "PATH": "/usr/bin:/bin"}
    res = subprocess.run(["bash", str(REPO_ROOT / "scripts/serve_judge.sh"), "--model", "/models/tiny",
                          "--port", str(free_port()), "--pid-file", str(tmp_path / "judge.pid"), "--log",
                          str(tmp_path / "log")], check=False, env=env, capture_output=True, text=True,
                         timeout=60)  # a guard against a hang, not a timing: the script must give up by itself
    assert res.returncode != 0 and "not ready after 3s" in res.stderr, (res.stdout, res.stderr)
    assert not (tmp_path / "judge.pid").exists()
