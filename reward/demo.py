"""The packaged demo data: where the demo rollouts live (``reward/data/demo_rollouts.jsonl``).

Invented conversations, a good and a poor completion each, with HealthBench-style rubric items;
the ``rubricstree demo`` command, the tests and the benchmarks read them from here.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["DEMO_ROLLOUTS", "demo_rollouts_path"]

DEMO_ROLLOUTS = "demo_rollouts.jsonl"


def demo_rollouts_path() -> Path:
    """The demo rollouts file shipped inside the package."""
    return Path(str(resources.files("reward") / "data" / DEMO_ROLLOUTS))
