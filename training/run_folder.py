"""What a TRL run's output folder says about the run: its last checkpoint and the step it holds,
its stage-3 epoch exports, where the difficulty filter's results go, and the stage-3 epoch it
would do next. Shared by the launcher and its pre-start checks (:mod:`training.launch_checks`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from training.hf_export import is_export
from training.trl_config import TrainConfig

__all__ = ["difficulty_dir", "epoch_dir", "last_checkpoint", "latest_export", "next_epoch", "step_of"]


def difficulty_dir(cfg: TrainConfig) -> Path:
    return Path(cfg.difficulty.out_dir or Path(cfg.output_dir) / "difficulty")


def epoch_dir(cfg: TrainConfig, epoch: int) -> Path:
    return Path(cfg.output_dir) / "difficulty" / f"epoch-{epoch}"


def last_checkpoint(output_dir: str | Path) -> str | None:
    from transformers.trainer_utils import get_last_checkpoint

    return get_last_checkpoint(str(output_dir)) if Path(output_dir).is_dir() else None


def step_of(checkpoint: str | None) -> int:
    if not checkpoint:
        return 0
    state = Path(checkpoint) / "trainer_state.json"
    return int(json.loads(state.read_text())["global_step"]) if state.exists() else 0


def latest_export(output_dir: str | Path, before: int | None = None) -> str | None:
    """The newest stage-3 epoch export (``hf-epoch-N``, N < ``before``), else None."""
    found = []
    for p in Path(output_dir).glob("hf-epoch-*"):
        tail = p.name.rsplit("-", 1)[-1]
        if tail.isdigit() and (before is None or int(tail) < before) and is_export(p):
            found.append((int(tail), p))
    return str(max(found)[1]) if found else None


def next_epoch(cfg: TrainConfig) -> dict:
    """The stage-3 epoch a run would do next: ``{"epoch", "policy", "filtered"}`` (epoch None when
    all are done). ``policy`` is what its filter samples from: the newest epoch export, else
    ``cfg.model`` (the stage-2 export). scripts/train_pipeline.sh serves it for the filter."""
    epochs_file = Path(cfg.output_dir) / "epochs.json"
    done = json.loads(epochs_file.read_text()) if epochs_file.exists() else []
    n_epochs = int(math.ceil(float(cfg.grpo.get("num_train_epochs", 1))))
    if not cfg.difficulty.per_epoch or len(done) >= n_epochs:
        return {"epoch": None, "policy": None, "filtered": True}
    epoch = len(done)
    return {"epoch": epoch, "policy": latest_export(cfg.output_dir, before=epoch) or cfg.model,
            "filtered": (epoch_dir(cfg, epoch) / "epoch.json").exists()}


RUN_ID = "rubricstree_run.json"


def run_scope(output_dir: str | Path) -> str:
    """The id of the run in ``output_dir``: written on its first start (``rubricstree_run.json``), read
    back on every resume. The applicability answers of a run are cached under it, so a resume reuses
    them and a run in another (or a cleared) folder asks afresh. Every rank of a launch reads the same
    id: the first to create the file writes it, the others read it."""
    import json
    import os
    import uuid

    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / RUN_ID
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"run_id": uuid.uuid4().hex}, fh)
    for _ in range(50):  # another rank may have created it and not yet written it
        try:
            return "run-" + json.loads(path.read_text(encoding="utf-8"))["run_id"]
        except (ValueError, KeyError):
            import time

            time.sleep(0.1)
    raise OSError(f"{path}: not a run id file (delete it to start a new run's applicability answers)")
