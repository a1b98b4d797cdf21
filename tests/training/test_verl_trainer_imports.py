"""verl's trainer entry point imports in the environment `make setup` builds (the `verl` extra).

verl 0.9.1 imports cachetools, fastapi and uvicorn from its trainer without declaring them, and its
default v1 trainer imports TransferQueue, so an environment with verl but no vllm died on
`python -m verl.trainer.main_ppo` before any training; the `verl` extra now names them. A fresh interpreter, so nothing another test imported hides a gap."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_verl_trainer_entry_point_imports():
    pytest.importorskip("verl")
    res = subprocess.run([sys.executable, "-c", "import verl.trainer.main_ppo, verl.trainer.ppo.ray_trainer, verl.trainer.ppo.v1.trainer_base"],
                         capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
