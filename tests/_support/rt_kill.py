"""Kill a command with SIGKILL from outside while it works, and tell what its rerun recomputed.

:func:`kill_when` starts a ``rubricstree`` subprocess and sends SIGKILL (kill -9: no handler, no
flush, no cleanup) the moment ``ready()`` holds; :func:`stored_verdicts` reads the verdict cache's
``{key: rowid}``. A verdict is only ever stored after it was computed, with ``INSERT OR REPLACE``
(a new rowid), so a rowid that is unchanged after the rerun proves the rerun did not grade it again.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from rt_paths import REPO_ROOT


def rubricstree(args: list[str], **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run([sys.executable, "-m", "rubricstree", *args], env=env, capture_output=True, text=True,
                          check=False, timeout=900, **kw)


def kill_when(args: list[str], ready: Callable[[], bool], timeout_s: float = 600.0) -> int:
    """Run ``rubricstree ARGS``, SIGKILL it once ``ready()``; its return code (-9 when killed)."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "rubricstree", *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout_s
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if ready():
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.02)
        return proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def stored_verdicts(cache_dir: Path) -> dict[str, int]:
    """``{verdict key: rowid}`` of the cache in ``cache_dir`` ({} before it exists)."""
    path = cache_dir / "verdicts.sqlite"
    if not path.exists():
        return {}
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            return dict(con.execute("SELECT key, rowid FROM verdicts").fetchall())
        finally:
            con.close()
    except sqlite3.Error:  # the table is not created yet
        return {}
