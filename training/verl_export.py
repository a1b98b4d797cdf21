"""The Hugging Face export at the end of a verl stage: what the next stage, ``eval`` and ``vllm serve`` load.

verl's trainer saves FSDP shards (``<default_local_dir>/global_step_N/actor``: one
``model_world_size_W_rank_R.pt`` per rank, ``fsdp_config.json`` and a ``huggingface/`` folder with
the config and tokenizer) and names the newest in ``latest_checkpointed_iteration.txt``. Nothing
else can load those. scripts/train_verl.sh ends each stage with :func:`export_latest`: verl's own
merger (``python -m verl.model_merger merge --backend fsdp --local_dir ACTOR --target_dir DIR``,
verl 0.9.1) writes safetensors into a temporary folder that is renamed to
``<default_local_dir>/hf`` (as the TRL path's ``<output_dir>/hf``) only once it holds a config and
weights (:func:`training.hf_export.is_export`); ``export.json`` records the step, the source and
what the judge gate said at each launch (``training.gate_record``, written by the preflight), and
the model card (``README.md``) says it too, an override first.

``python -m training.verl_export CHECKPOINT_DIR [TARGET]`` exports (the checkpoint folder is the one
``training.verl_preflight`` prints for the composed config).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from reward.errors import InputError
from training.gate_record import gate_history
from training.hf_export import is_export, move_into_place
from training.model_card import write_card

__all__ = ["export_latest", "latest_actor", "merge_command"]


def latest_actor(ckpt_dir: str | Path) -> tuple[int, Path]:
    """The newest saved step and its ``actor`` folder (from ``latest_checkpointed_iteration.txt``)."""
    ckpt = Path(ckpt_dir)
    marker = ckpt / "latest_checkpointed_iteration.txt"
    if not marker.is_file():
        raise InputError("no verl checkpoint here (trainer.save_freq must be > 0: verl saves at the last step)",
                         file=str(marker))
    step = int(marker.read_text().strip())
    actor = ckpt / f"global_step_{step}" / "actor"
    if not (actor / "fsdp_config.json").is_file():
        raise InputError(f"step {step}'s actor checkpoint has no fsdp_config.json (not an FSDP checkpoint)",
                         file=str(actor))
    return step, actor


def merge_command(actor: str | Path, target: str | Path, python: str = sys.executable) -> list[str]:
    return [python, "-m", "verl.model_merger", "merge", "--backend", "fsdp", "--local_dir", str(actor),
            "--target_dir", str(target)]


def export_latest(ckpt_dir: str | Path, target: str | Path | None = None, *, python: str | None = None,
                  run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> Path:
    """Merge the newest actor checkpoint under ``ckpt_dir`` into ``target`` (default ``ckpt_dir/hf``)."""
    python = python or os.environ.get("PYTHON") or sys.executable  # train_verl.sh's interpreter
    step, actor = latest_actor(ckpt_dir)
    out = Path(target) if target is not None else Path(ckpt_dir) / "hf"
    meta_file = out / "export.json"
    if is_export(out) and meta_file.is_file() and json.loads(meta_file.read_text()).get("step") == step:
        return out  # this step is exported already (a rerun)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    res = run(merge_command(actor, tmp, python))
    if res.returncode != 0 or not is_export(tmp):
        raise InputError(f"verl's model merger did not write a Hugging Face model (exit {res.returncode}): "
                         f"{' '.join(merge_command(actor, tmp, python))}", file=str(tmp))
    info = {"step": step, "source": str(actor), "trainer": "verl", "judge_gate": gate_history(ckpt_dir)}
    (tmp / "export.json").write_text(json.dumps(info, indent=2))
    write_card(tmp, info)  # the judge gate's outcomes, the override included (training.model_card)
    return move_into_place(tmp, out)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if len(args) not in (1, 2) or args[0].startswith("-"):
            print("usage: python -m training.verl_export CHECKPOINT_DIR [TARGET]", file=sys.stderr)
            return 2
        print(export_latest(*args))
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
