"""Hugging Face exports of a trained policy: what the next stage, ``eval``, the difficulty filter
and ``vllm serve`` load.

The trainer's own ``checkpoint-N`` folders are for resuming: under FSDP2 with
``SHARDED_STATE_DICT`` (configs/accelerate/fsdp2.yaml) they hold distributed-checkpoint shards,
no ``config.json`` and no safetensors, so nothing else can load them. At the end of every stage
(and of every stage-3 epoch) :func:`export_trainer` gathers the full state dict (a collective:
every rank calls it), and rank 0 writes ``save_pretrained`` safetensors in the export dtype, the
tokenizer and the generation config into a temporary folder that is renamed into place, so a
folder that exists is complete. ``export.json`` records the step and the source, and the model
card (``README.md``, :mod:`training.model_card`) what the judge gate said, the override included.

Layout (:func:`export_dir`): ``<output_dir>/hf`` for a stage, ``<output_dir>/hf-epoch-N`` for a
stage-3 epoch, and ``<output_dir>/hf`` then points (a relative symlink) at the last epoch's.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from training.model_card import write_card

__all__ = ["EXPORT_DTYPES", "WEIGHT_FILES", "export_dir", "export_trainer", "full_state_dict", "is_export",
           "move_into_place", "require_start_model", "save_hf"]

EXPORT_DTYPES = ("bfloat16", "float16", "float32")


def export_dir(output_dir: str | Path, epoch: int | None = None) -> Path:
    """Where a stage's (``epoch`` None) or a stage-3 epoch's export goes."""
    return Path(output_dir) / ("hf" if epoch is None else f"hf-epoch-{epoch}")


def is_export(path: str | Path) -> bool:
    """A complete export: a config and safetensors weights (single file or sharded index)."""
    p = Path(path)
    return (p / "config.json").is_file() and any(
        (p / f).is_file() for f in ("model.safetensors", "model.safetensors.index.json"))


WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")


def require_start_model(name_or_path: str, what: str = "model") -> str:
    """``name_or_path`` if a trainer can start from it: a Hugging Face id, or a local folder with a
    ``config.json`` and weights (``save_pretrained`` safetensors or bin, single or sharded).

    A folder that :func:`reward._optional.require_model` accepts may still hold no weights: a
    trainer's ``checkpoint-N`` under FSDP2 (distributed-checkpoint shards), a verl ``global_step_N``
    actor folder, or a tokenizer alone. Loading one fails late (after the judge and the data are
    up) or, worse, starts from random weights where transformers can build a model from the config;
    here it fails at once, saying what to load instead.

    Raises:
        ModelNotFoundError: the folder is not a Hugging Face export (the message says how to make one).
    """
    from reward._optional import require_model
    from reward.errors import ModelNotFoundError

    name = str(name_or_path)
    p = Path(name).expanduser()
    if not p.is_dir() or any((p / f).is_file() for f in WEIGHT_FILES):
        return require_model(name, what)
    names = {x.name for x in p.iterdir()}
    if any(n.endswith(".distcp") or n.startswith(("pytorch_model_fsdp", "model_world_size_", "global_step"))
           for n in names) or (p / "actor").is_dir():
        kind = "a sharded training checkpoint"
    else:
        require_model(name, what)  # an empty or unrelated folder: "no model at ..."
        kind = "a config without weights" if (p / "config.json").is_file() else "a tokenizer folder"
    raise ModelNotFoundError(
        f"no weights at {name} ({what}): {kind}, not a Hugging Face export. Start from the previous stage's "
        f"export (<output_dir>/hf, written at the end of every stage; `python -m training.verl_export "
        f"CKPT_DIR` for a verl checkpoint) or a Hugging Face id such as Qwen/Qwen3-8B")


def full_state_dict(accelerator: Any, model: Any) -> dict:
    """The full (unsharded) state dict of a prepared model, on CPU. A collective under FSDP/ZeRO-3:
    every rank must call it; under FSDP2 only rank 0 receives the tensors (the others get {})."""
    if accelerator is not None:
        return accelerator.get_state_dict(model)
    from torch.distributed.tensor import DTensor

    if any(isinstance(p, DTensor) for p in model.parameters()):  # FSDP2 without accelerate: the same call
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return {k: v.detach().cpu() for k, v in model.state_dict().items()}


def save_hf(model: Any, state_dict: dict, out: str | Path, *, tokenizer: Any = None, dtype: str = "bfloat16",
            meta: dict | None = None) -> Path:
    """Write ``state_dict`` (full, CPU) with ``model``'s config as a Hugging Face folder at ``out``,
    atomically (a temporary sibling renamed into place; an existing export is replaced)."""
    import torch

    if dtype not in EXPORT_DTYPES:
        raise ValueError(f"export dtype must be one of {', '.join(EXPORT_DTYPES)}, got {dtype!r}")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    want = getattr(torch, dtype)
    sd = {k: (v.to(want) if v.is_floating_point() else v).contiguous() for k, v in state_dict.items()}
    model.save_pretrained(str(tmp), state_dict=sd, safe_serialization=True)
    cfg_path = tmp / "config.json"
    cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    cfg["dtype"] = dtype  # what vLLM and from_pretrained load it as (the trainer held fp32 masters)
    if "torch_dtype" in cfg:
        cfg["torch_dtype"] = dtype
    cfg_path.write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")
    gen = getattr(model, "generation_config", None)
    if gen is not None and not (tmp / "generation_config.json").exists():
        gen.save_pretrained(str(tmp))
    if tokenizer is not None:
        tokenizer.save_pretrained(str(tmp))
    info = {"dtype": dtype, **(meta or {})}
    (tmp / "export.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    write_card(tmp, info)  # what the export is, and what the judge gate said (training.model_card)
    return move_into_place(tmp, out)


def move_into_place(tmp: str | Path, out: str | Path) -> Path:
    """Replace ``out`` (a folder, a file or a symlink) with the finished folder ``tmp``: a reader
    finds the old export or the new one, never a half-written folder."""
    tmp, out = Path(tmp), Path(out)
    if out.is_symlink() or out.is_file():
        out.unlink()
    elif out.exists():
        shutil.rmtree(out)
    tmp.replace(out)
    return out


def export_trainer(trainer: Any, out: str | Path, *, dtype: str = "bfloat16", meta: dict | None = None) -> Path:
    """Export a (TRL/transformers) trainer's current policy to ``out``; every rank must call it."""
    acc = getattr(trainer, "accelerator", None)
    wrapped = getattr(trainer, "model_wrapped", None) or trainer.model
    if acc is not None and getattr(acc, "distributed_type", None) is not None and \
            str(acc.distributed_type).endswith("DEEPSPEED"):
        sd = full_state_dict(acc, wrapped)  # the DeepSpeed engine gathers its 16-bit weights
    else:
        sd = full_state_dict(acc, trainer.model)
    main = acc is None or acc.is_main_process
    if main:
        unwrapped = acc.unwrap_model(trainer.model) if acc is not None else trainer.model
        info = {"global_step": int(getattr(getattr(trainer, "state", None), "global_step", 0) or 0), **(meta or {})}
        save_hf(unwrapped, sd, out, tokenizer=getattr(trainer, "processing_class", None), dtype=dtype, meta=info)
    if acc is not None:
        acc.wait_for_everyone()
    return Path(out)


def link_final(output_dir: str | Path, epoch: int) -> Path:
    """Point ``<output_dir>/hf`` at the export of ``epoch`` (relative symlink, replaced atomically)."""
    final = export_dir(output_dir)
    target = export_dir(output_dir, epoch).name
    tmp = final.with_name(f".hf.link-{os.getpid()}")
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(target)
    if final.exists() and not final.is_symlink():
        shutil.rmtree(final)
    tmp.replace(final)
    return final
