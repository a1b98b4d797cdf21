"""Shared fixtures: the tiny local model, the real vLLM judge server, the shared data folder.

Server tests are marked ``server`` and need ``RUBRICSTREE_JUDGE_URL`` (``make test``, and so
``.ci/run``, starts a vLLM server through ``scripts/run_tests.sh`` and sets it, with
``RUBRICSTREE_TINY_MODEL`` pointing at the model it serves). Without it they are skipped, so unit tests run anywhere.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path | None:
    for cand in (REPO.parent / "shared" / "data", Path("/work/shared/data")):
        if cand.is_dir():
            return cand
    return None


@pytest.fixture(scope="session")
def shared_data() -> Path:
    d = shared_data_dir()
    if d is None:
        pytest.skip("../shared/data is absent")
    return d


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """The tiny random Qwen3: the server's model when one is running, else built once here."""
    env = os.environ.get("RUBRICSTREE_TINY_MODEL")
    if env and Path(env, "config.json").exists():
        return Path(env)
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from training.tiny_model import build_tiny_qwen3

    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3"))


@pytest.fixture(scope="session")
def judge_url() -> str:
    url = os.environ.get("RUBRICSTREE_JUDGE_URL")
    if not url:
        pytest.skip("no judge server: set RUBRICSTREE_JUDGE_URL (make test starts one)")
    return url


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    """Every test gets its own verdict cache directory, so no test sees another's verdicts."""
    monkeypatch.setenv("RUBRICSTREE_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(autouse=True)
def _stage1_checkpoint(monkeypatch):
    """The stage 2 configs start from FV_STAGE1_MODEL and refuse to load without it (no silent
    fallback to the base model); tests that read them get a stand-in name unless they unset it."""
    monkeypatch.setenv("FV_STAGE1_MODEL", "Qwen/Qwen3-8B")


def pytest_collection_modifyitems(config, items):
    """Cost is a marker, not a folder: a test that uses the tiny model is ``slow``, one that
    needs the judge server is ``server`` (explicit marks in the files add to these)."""
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if "tiny_model_dir" in names:
            item.add_marker(pytest.mark.slow)
        if "judge_url" in names:
            item.add_marker(pytest.mark.server)
