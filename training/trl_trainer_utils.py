"""Pieces of a TRL trainer's life the launcher (``training.trl_launcher``) sets up around it:
a save at the last step, one learning-rate horizon across stage-3 epochs, the FSDP2 gradient
reduction dtype, and releasing a finished epoch's trainer (model, optimiser, colocated vLLM)."""

from __future__ import annotations

from typing import Any

__all__ = ["apply_fsdp_options", "fixed_lr_horizon", "release_trainer", "save_at_end_callback"]


def save_at_end_callback():
    from transformers import TrainerCallback

    class SaveAtEnd(TrainerCallback):
        """Always leave a checkpoint at the last step, so the next run (or epoch) resumes there."""

        def on_step_end(self, args, state, control, **kwargs):
            if state.max_steps and state.global_step >= state.max_steps:
                control.should_save = True
            return control

    return SaveAtEnd()


def fixed_lr_horizon(trainer, horizon: int) -> None:
    """Make ``trainer`` build its schedule over ``horizon`` steps, not its own ``max_steps`` (which
    grows by one epoch at a time): the cosine decays once across all epochs instead of restarting.
    A resumed scheduler keeps its step count (its state) and gets the same lambda."""
    build = trainer.create_scheduler

    def create_scheduler(num_training_steps: int, optimizer=None):
        return build(num_training_steps=max(horizon, num_training_steps), optimizer=optimizer)

    trainer.create_scheduler = create_scheduler


def release_trainer(trainer) -> None:
    """Free a finished epoch's trainer before the next one is built: its vLLM engine (colocated),
    model, optimiser and the CUDA cache; without this both epochs' engines share the GPUs."""
    if trainer is None:
        return
    gen = getattr(trainer, "vllm_generation", None)
    llm = getattr(gen, "llm", None)
    if llm is not None:
        try:
            from vllm.distributed.parallel_state import destroy_model_parallel

            del gen.llm
            destroy_model_parallel()
        except ImportError:
            pass
    acc = getattr(trainer, "accelerator", None)
    if acc is not None:
        acc.free_memory()  # drops the accelerator's references to model, optimiser and scheduler
    for name in ("vllm_generation", "model", "model_wrapped", "optimizer", "lr_scheduler", "ref_model"):
        if hasattr(trainer, name):
            setattr(trainer, name, None)
    import gc

    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:
        pass


def apply_fsdp_options(plugin: Any, reduce_dtype: str | None) -> bool:
    """Set the FSDP2 gradient reduction dtype on accelerate's plugin before the model is prepared.

    accelerate maps ``mixed_precision: bf16`` to ``MixedPrecisionPolicy(param_dtype=bf16,
    reduce_dtype=bf16)``: gradients are then reduce-scattered (summed over ranks) in bf16. Neither
    the accelerate YAML nor ``TrainingArguments.fsdp_config`` can change that, so the launcher sets
    the policy here (``Trainer.train`` prepares the model later and reads it). Returns whether a
    policy was set (False: no FSDP2 plugin, or ``reduce_dtype`` None)."""
    if plugin is None or reduce_dtype is None or int(getattr(plugin, "fsdp_version", 1) or 1) != 2:
        return False
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy

    old = plugin.mixed_precision_policy
    param = getattr(old, "param_dtype", None)
    output = getattr(old, "output_dtype", None)
    plugin.mixed_precision_policy = MixedPrecisionPolicy(param_dtype=param, reduce_dtype=getattr(torch, reduce_dtype),
                                                         output_dtype=output)
    return True
