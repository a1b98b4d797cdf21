"""The judge server under watch: the ``judge_url`` fixture, a post-mortem when the server dies, and
one restart-and-rerun when it dies under a test.

In two CI runs the tiny judge server died about 90% of the way through a 40-minute run, and the
twenty server tests after it failed with "connection refused"; nothing said why. Now:

- ``judge_url`` checks that the server answers before each test that asks for it. A dead server
  fails the first such test with a post-mortem (the server log's last lines, free memory, the
  largest processes, OOM kills from the kernel log) and names the last test that found it alive.
- When ``scripts/run_tests.sh`` says how to restart the server (``$RUBRICSTREE_JUDGE_RESTART``, its
  own command line as a JSON list), a test that failed while the server died under it is run once more after
  the server is restarted, at most twice per session. The first attempt is never hidden: its
  failure, the post-mortem and the rerun's outcome are printed in a "judge server restarts"
  section of pytest's summary and written to ``$RUBRICSTREE_JUDGE_RESTARTS`` (run_tests.sh prints
  that file at the end, pass or fail). A test that kills the server each time fails on its
  rerun as before, so a request that crashes the server still shows up as a failure. Unset
  ``$RUBRICSTREE_JUDGE_RESTART`` (``scripts/run_tests.sh`` always sets it) and a dead server fails
  every later server test instead.
- Only tests that name ``judge_url`` among their arguments are rerun: the docs tests, which ask for
  it by ``request.getfixturevalue`` inside one module-wide scratch folder, are not (a rerun would
  run their blocks twice in the same folder); the next test that names it restarts the server.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

MAX_RESTARTS = 2
START_S = 300  # the most one restart may take to answer (the tiny model's server starts in about 60 s)
# run_tests.sh's environment, as it was before any test module changed this process's (a restart
# must not inherit, say, a test's MASTER_PORT)
_ENV_AT_START = dict(os.environ)
_LAST_ALIVE: list[str] = []  # the last test that found the judge server answering
_FOUND_DEAD: list[str] = []  # the first test that found it dead since the last (re)start
_RESTARTS: list[str] = []  # one text per restart, for the summary


def post_mortem() -> str:
    """What a dead judge server left behind: the server log's last lines, the machine's free memory
    and largest processes, and any OOM kill the kernel logged (when it lets us read its log)."""
    parts = []
    log = os.environ.get("RUBRICSTREE_JUDGE_LOG")
    if log and Path(log).exists():
        parts.append(f"--- last lines of {log}\n" + "\n".join(Path(log).read_text(errors="replace").splitlines()[-40:]))
    try:
        mem = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
        parts.append(f"--- memory: MemAvailable {mem['MemAvailable'].strip()} of {mem['MemTotal'].strip()}")
        ps = subprocess.run(["ps", "-eo", "pid,rss,etimes,args", "--sort=-rss"], capture_output=True, text=True,
                            timeout=10).stdout.splitlines()[:8]
        parts.append("\n".join(line[:160] for line in ps))
    except (OSError, KeyError, ValueError, subprocess.SubprocessError) as exc:
        parts.append(f"(memory not read: {exc})")
    try:
        kern = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=10).stdout.splitlines()
        oom = [line for line in kern if re.search(r"out of memory|oom-kill|killed process", line, re.I)]
        parts.append("--- kernel: " + ("\n".join(oom[-6:]) if oom else "no OOM kill in dmesg (or dmesg unreadable)"))
    except (OSError, subprocess.SubprocessError):
        parts.append("--- kernel: dmesg unavailable")
    return "\n".join(parts)


def server_problem(url: str, seconds: float) -> str | None:
    """None when every URL of ``url`` (one, or a comma-separated pool) answers ``/models`` with 200
    within ``seconds``; else what is wrong, for a message."""
    import httpx

    from reward.serving import bounded_request, split_urls

    key = os.environ.get("RUBRICSTREE_JUDGE_API_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    for base in split_urls(url):
        try:
            with httpx.Client(headers=headers) as client:
                status, _ = bounded_request(client, "GET", base + "/models", seconds=seconds)
        except (httpx.HTTPError, TimeoutError, ValueError) as exc:
            return f"{base} does not answer ({type(exc).__name__}: {exc})"
        if status != 200:
            return f"{base} answers /models with status {status}"
    return None


@pytest.fixture
def judge_url(request) -> str:
    """The judge server ``make test`` started (``$RUBRICSTREE_JUDGE_URL``), checked before each test
    that asks for it: a server that died fails the test with its post-mortem and the last test that
    found it alive, not with a bare "connection refused" in whatever the test did next."""
    url = os.environ.get("RUBRICSTREE_JUDGE_URL")
    if not url:
        pytest.skip("no judge server: set RUBRICSTREE_JUDGE_URL (make test starts one)")
    problem = server_problem(url, 3.0 if _FOUND_DEAD else 10.0)  # once found dead, the others need not wait
    if problem:
        if _FOUND_DEAD:
            pytest.fail(f"the judge server: {problem}; found dead first by {_FOUND_DEAD[0]}, whose failure holds "
                        "the post-mortem", pytrace=False)
        _FOUND_DEAD.append(request.node.nodeid)
        last = _LAST_ALIVE[-1] if _LAST_ALIVE else "none (dead from the start)"
        pytest.fail(f"the judge server: {problem}; the last test that found it alive: {last}\n{post_mortem()}",
                    pytrace=False)
    _LAST_ALIVE[:] = [request.node.nodeid]
    return url


def _restart(cmd: list[str]) -> str:
    """Stop what is left of the server (its process group, its port), keep its log, start it again
    with run_tests.sh's own command line, in run_tests.sh's environment; returns what happened.
    A start is given START_S (serve_judge.sh's own wait, then a margin): a server that cannot start
    in five minutes on a machine that just lost one will not help the rest of the run."""
    env = {**_ENV_AT_START, "JUDGE_WAIT_S": str(START_S)}
    log = os.environ.get("RUBRICSTREE_JUDGE_LOG")
    subprocess.run([*cmd, "--stop"], capture_output=True, text=True, timeout=120, check=False, env=env)
    kept = ""
    if log and Path(log).exists():
        kept_path = Path(f"{log}.died-{len(_RESTARTS) + 1}")
        Path(log).replace(kept_path)
        kept = f"; its log is kept in {kept_path}"
    t0 = time.monotonic()
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=START_S + 60, check=False, env=env)
    except subprocess.TimeoutExpired:
        subprocess.run([*cmd, "--stop"], capture_output=True, timeout=120, check=False, env=env)
        return f"the restart did not finish in {START_S + 60} s and was stopped{kept}"
    took = f"{time.monotonic() - t0:.0f} s"
    if res.returncode != 0:
        return f"the restart failed (exit {res.returncode}, {took}){kept}: {res.stderr[-1500:]}"
    return f"restarted in {took}{kept}"


def _write_note(text: str) -> None:
    note = os.environ.get("RUBRICSTREE_JUDGE_RESTARTS")
    if note:
        with open(note, "a", encoding="utf-8") as fh:
            fh.write(text + "\n\n")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """Run a test that asks for the judge server; when it failed and the server is dead after it,
    restart the server and run the test once more (see the module's docstring)."""
    raw = os.environ.get("RUBRICSTREE_JUDGE_RESTART")
    url = os.environ.get("RUBRICSTREE_JUDGE_URL")
    if not raw or not url or "judge_url" not in getattr(item, "fixturenames", ()):
        return None
    from _pytest.runner import runtestprotocol

    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    reports = runtestprotocol(item, nextitem=nextitem, log=False)
    failed = [r for r in reports if r.failed]
    problem = server_problem(url, 10.0) if failed and len(_RESTARTS) < MAX_RESTARTS else None
    if problem:
        # where it died: under this test (it found the server alive at set-up), or before it
        if _FOUND_DEAD and _FOUND_DEAD[-1] == item.nodeid:
            last = _LAST_ALIVE[-1] if _LAST_ALIVE else "none"
            where = f"found dead at the set-up of {item.nodeid}; the last test that found it alive: {last}"
        else:
            where = f"died under {item.nodeid}"
        head = f"{item.nodeid}: the judge server {where} ({problem})"
        first = "\n".join(f"[{r.when}] {str(r.longrepr)[:1200]}" for r in failed)
        autopsy = ""
        try:
            autopsy = post_mortem()
            _write_note(f"{head}\nThe post-mortem:\n{autopsy}")  # written before the restart: kept if it fails
            what = _restart(json.loads(raw))
        except Exception as exc:  # noqa: BLE001 (any failure here must not end the run; it is said instead)
            what = f"the restart raised {type(exc).__name__}: {exc}"
        _FOUND_DEAD.clear()
        if what.startswith("restarted"):
            item._report_sections.clear()  # the rerun's captured output only, not both attempts'
            reports = runtestprotocol(item, nextitem=nextitem, log=False)  # a fresh request and tmp_path
            outcome = "the rerun failed again" if any(r.failed for r in reports) else "the rerun passed"
        else:
            outcome = "no rerun: the first attempt's failure stands"
        _RESTARTS.append(f"{head}; {what}; {outcome}.\nThe first attempt's failure:\n{first}\n"
                         f"The post-mortem:\n{autopsy}")
        _write_note(f"{head}; {what}; {outcome}.\nThe first attempt's failure:\n{first}")
    for report in reports:
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def pytest_terminal_summary(terminalreporter, config):
    if _RESTARTS:
        terminalreporter.write_sep("=", f"judge server restarts: {len(_RESTARTS)}", yellow=True, bold=True)
        for text in _RESTARTS:
            terminalreporter.write_line(text)
        return
    note = os.environ.get("RUBRICSTREE_JUDGE_RESTARTS")
    if config.pluginmanager.hasplugin("dsession") and note and Path(note).is_file() and Path(note).stat().st_size:
        # under pytest-xdist the restarts happen in a worker, whose summary nobody sees: its notes, read back here
        terminalreporter.write_sep("=", f"judge server restarts (the workers' notes, {note})", yellow=True, bold=True)
        terminalreporter.write_line(Path(note).read_text(encoding="utf-8", errors="replace"))
