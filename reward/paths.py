"""Where rubricstree keeps its files: the user cache folder (verdicts, routings, fetched data).

The lowest layer: the judge's verdict cache, the fetched official grader template and the
downloaded HealthBench files all live under :func:`default_cache_dir`.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_DIR = "RUBRICSTREE_CACHE_DIR"


def default_cache_dir() -> Path:
    """``$RUBRICSTREE_CACHE_DIR`` or the user's cache directory (platformdirs)."""
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("rubricstree"))
