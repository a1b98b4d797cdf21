"""The test harness's judge-server watch (tests/_support/rt_judge_watch.py), run as its own pytest
session: a test under which the server dies is run once more after a restart, with what happened
written down; a test that fails with the server alive is not rerun; a dead server with no way to
restart it fails the next test with a post-mortem.

The "server" here is a small HTTP stub answering ``/v1/models``, started and stopped by a stub of
``serve_judge.sh``'s command line: what is under test is the harness's logic, not vLLM."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from rt_net import free_port
from rt_paths import REPO_ROOT

STUB_SERVER = '''
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(json.dumps({"data": [{"id": "tiny"}]}).encode())
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
'''

# serve_judge.sh's interface as run_tests.sh uses it: start (prints the URL once it answers), --stop
STUB_SERVE = '''
import os, signal, socket, subprocess, sys, time
args = sys.argv[1:]
pid_file, port = args[args.index("--pid-file") + 1], int(args[args.index("--port") + 1])
if "--stop" in args:
    if os.path.exists(pid_file):
        try:
            os.kill(int(open(pid_file).read()), signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.remove(pid_file)
    sys.exit(0)
if "--fail" in args:  # a restart that cannot start a server
    sys.exit(1)
proc = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__), "stub_server.py"), str(port)],
                        start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL)
open(pid_file, "w").write(str(proc.pid))
for _ in range(200):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        break
    except OSError:
        time.sleep(0.05)
print(f"http://127.0.0.1:{port}")
'''

INNER_TESTS = '''
import os, signal
from pathlib import Path

def _kill_the_server():
    os.kill(int(Path(os.environ["STUB_PID"]).read_text()), signal.SIGKILL)

def test_a_the_server_dies_under_it_once(judge_url):
    mark = Path(os.environ["MARK"])
    if not mark.exists():
        mark.write_text("killed once")
        _kill_the_server()
        assert False, "no answer: the server died under this attempt"

def test_b_fails_with_the_server_alive(judge_url):
    assert False, "an ordinary failure"

def test_c_kills_the_server_without_asking_for_it():
    _kill_the_server()

def test_d_finds_it_dead_at_set_up(judge_url):
    pass
'''


def _session(tmp_path: Path, tests: str, *, restart: str | None) -> tuple[subprocess.CompletedProcess, Path]:
    """The inner session; ``restart``: None (no restart command), "ok" or "broken" (exits 1)."""
    (tmp_path / "stub_server.py").write_text(STUB_SERVER)
    (tmp_path / "stub_serve.py").write_text(STUB_SERVE)
    (tmp_path / "conftest.py").write_text("from rt_judge_watch import judge_url, pytest_runtest_protocol, "
                                          "pytest_terminal_summary  # noqa: F401\n")
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(tests))
    port, pid = free_port(), tmp_path / "judge.pid"
    serve = [sys.executable, str(tmp_path / "stub_serve.py"), "--pid-file", str(pid), "--port", str(port)]
    url = subprocess.run(serve, capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    restarts = tmp_path / "restarts.txt"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUBRICSTREE_JUDGE")}
    env.update({"RUBRICSTREE_JUDGE_URL": url, "RUBRICSTREE_JUDGE_RESTARTS": str(restarts), "STUB_PID": str(pid),
                "MARK": str(tmp_path / "mark"), "PYTHONPATH": f"{REPO_ROOT / 'tests' / '_support'}:{REPO_ROOT}"})
    if restart:
        env["RUBRICSTREE_JUDGE_RESTART"] = json.dumps(serve + (["--fail"] if restart == "broken" else []))
    try:
        res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                              "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path / "test_inner.py")],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    finally:
        subprocess.run([*serve, "--stop"], capture_output=True, timeout=60, check=False)
    return res, restarts


def test_a_test_the_server_died_under_is_rerun_after_a_restart_and_said(tmp_path):
    res, restarts = _session(tmp_path, INNER_TESTS, restart="ok")
    out = res.stdout + res.stderr
    assert res.returncode == 1, out  # the ordinary failure stays a failure
    assert "1 failed, 3 passed" in out, out
    assert "FAILED test_inner.py::test_b_fails_with_the_server_alive" in out
    # each restart is said, with the first attempt's failure and the post-mortem, in the summary and the file
    assert "judge server restarts: 2" in out
    text = restarts.read_text()
    assert "test_inner.py::test_a_the_server_dies_under_it_once: the judge server died under" in text
    assert "no answer: the server died under this attempt" in text
    # killed by a test that did not ask for it: found dead by the next one that did, which names the last alive
    assert ("test_inner.py::test_d_finds_it_dead_at_set_up: the judge server found dead at the set-up of "
            "test_inner.py::test_d_finds_it_dead_at_set_up; the last test that found it alive: "
            "test_inner.py::test_b_fails_with_the_server_alive") in text
    assert text.count("the rerun passed") == 2 and text.count("--- memory: MemAvailable") >= 2


def test_a_restart_that_fails_leaves_the_first_failure_and_the_run_goes_on(tmp_path):
    res, restarts = _session(tmp_path, INNER_TESTS, restart="broken")
    out = res.stdout + res.stderr
    assert "INTERNALERROR" not in out
    assert "FAILED test_inner.py::test_a_the_server_dies_under_it_once" in out  # its failure stands
    # every test ran: test_c fails too (no server left to kill)
    assert "2 failed, 2 errors" in out, out
    text = restarts.read_text()
    assert text.count("the restart failed (exit 1") == 2  # test_a's and test_b's, then no more (MAX_RESTARTS)
    assert text.count("no rerun: the first attempt's failure stands") == 2


def test_without_a_restart_command_the_next_test_fails_with_the_post_mortem(tmp_path):
    res, restarts = _session(tmp_path, INNER_TESTS, restart=None)
    out = res.stdout + res.stderr
    # the killer fails; test_b and test_d cannot set up (test_c needs no server)
    assert "1 failed, 1 passed, 2 errors" in out, out
    assert "the last test that found it alive: test_inner.py::test_a_the_server_dies_under_it_once" in out
    assert "--- memory: MemAvailable" in out
    assert "whose failure holds the post-mortem" in out  # test_d says where to look
    assert not restarts.exists()
