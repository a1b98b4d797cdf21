"""`make test` runs the suite in two pytest-xdist workers (scripts/run_tests.sh: ``-n 2 --dist
loadgroup``): every test that uses a vLLM server must run in one worker, in order (the fault and
stability tests count on a server that answers one request at a time), and every other file runs
whole in one worker (tests/conftest.py: run_group and the scheduler that reads it).

Run here as an inner pytest session without a judge server, so the server tests skip at their
fixture; which worker ran (or skipped) each test is what is checked."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict

import pytest
from rt_paths import REPO_ROOT

pytest.importorskip("xdist")

SERVER_FILES = ["tests/cli/test_fault_proxy_server.py", "tests/training/eval/test_eval_server.py",
                "tests/reward/judge/test_served_dtype_server.py"]
UNIT_FILES = ["tests/reward/test_settings.py", "tests/reward/tree/test_taxonomy.py", "tests/reward/tree/test_aliases.py"]


def test_server_tests_share_one_worker_and_files_stay_whole(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RUBRICSTREE_JUDGE", "RUBRICSTREE_SMOLLM2",
                                                                    "PYTEST_", "FORCE_COLOR", "PY_COLORS"))}
    res = subprocess.run([sys.executable, "-m", "pytest", *SERVER_FILES, *UNIT_FILES, "-n", "2", "--dist", "loadgroup",
                          "-v", "--color=no", "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "inner")],
                         cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert "scheduling tests via ByTestGroup" in res.stdout, res.stdout[:3000]
    workers: dict[str, set[str]] = defaultdict(set)  # file -> workers that ran its tests
    server_workers: set[str] = set()
    for line in res.stdout.splitlines():
        m = re.match(r"^\[(gw\d+)\] (?:\[\s*[\d/]+%?\] )?\w+ (tests/[^:\s]+)::", line)
        if m:
            workers[m.group(2)].add(m.group(1))
            if m.group(2) in SERVER_FILES:
                server_workers.add(m.group(1))
    assert set(workers) == set(SERVER_FILES + UNIT_FILES), sorted(workers)
    assert len(server_workers) == 1, f"the server tests ran in {sorted(server_workers)}"
    split = {f: sorted(w) for f, w in workers.items() if len(w) > 1}
    assert not split, f"files split across workers: {split}"
    assert len(set().union(*workers.values())) == 2, "one worker did everything: the groups were not balanced"
