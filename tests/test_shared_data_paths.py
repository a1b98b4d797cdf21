"""The shared data (HealthBench-Hard sample, MedQA test rows) is found relative to the checkout
(``../shared/data``) or through ``$RUBRICSTREE_SHARED_DATA`` (``reward.paths.shared_data_dir``),
never by a machine's absolute path: no tracked file names one."""

from __future__ import annotations

import re
import subprocess

import pytest
from rt_paths import REPO_ROOT

from reward.paths import SHARED_DATA_ENV, shared_data_dir, shared_data_file

# an absolute path ending in shared/data (a folder, then "shared/data"; also through "main/.."), or the
# shared folder of one machine; a relative "../shared/data" or "$ROOT/../shared/data" is fine
ABSOLUTE = re.compile(r"(?<![\w.$})\]/-])/(?:[\w.-]+/)+shared/data|/" + "work" + r"/shared\b")


def _tracked() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError):
        pytest.skip("not a git checkout")
    return [p for p in out.stdout.decode().split("\0") if p]


def test_no_tracked_file_names_an_absolute_path_to_the_shared_data():
    hits = []
    for rel in _tracked():
        path = REPO_ROOT / rel
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue  # binary or unreadable: not a path anyone reads
        for n, line in enumerate(text.splitlines(), 1):
            if ABSOLUTE.search(line):
                hits.append(f"{rel}:{n}: {line.strip()[:120]}")
    assert not hits, "absolute paths to the shared data (use reward.paths.shared_data_dir):\n" + "\n".join(hits)


def test_the_pattern_tells_absolute_from_relative():
    shared = "/" + "work" + "/shared/data/x.jsonl"
    for bad in (shared, f'Path("{shared}")', "/home/me/main/.." + "/shared/data"):
        assert ABSOLUTE.search(bad), bad
    for ok in ("../shared/data/x.jsonl", "$ROOT/../shared/data", "REPO.parent / 'shared' / 'data'",
               "${RUBRICSTREE_SHARED_DATA:-$ROOT/../shared/data}"):
        assert not ABSOLUTE.search(ok), ok


def test_the_folder_is_found_beside_the_checkout_or_through_the_environment(tmp_path, monkeypatch):
    (tmp_path / "rows.jsonl").write_text("{}\n")
    monkeypatch.setenv(SHARED_DATA_ENV, str(tmp_path))
    assert shared_data_dir() == tmp_path and shared_data_file("rows.jsonl") == tmp_path / "rows.jsonl"
    assert shared_data_file("absent.jsonl") is None
    monkeypatch.setenv(SHARED_DATA_ENV, str(tmp_path / "nowhere"))
    assert shared_data_dir() is None  # a wrong setting is not silently replaced by another folder
    monkeypatch.delenv(SHARED_DATA_ENV)
    beside = REPO_ROOT.parent / "shared" / "data"
    assert shared_data_dir() == (beside if beside.is_dir() else None)
