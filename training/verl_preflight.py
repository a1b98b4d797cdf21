"""What a verl stage is checked for before its trainer starts (scripts/train_verl.sh), so that a
mistake is said at once, not after hours of GPU time.

- ``trainer.save_freq`` > 0: verl saves no checkpoint otherwise, and the stage's Hugging Face export
  (the next stage's start, ``training.verl_export``) has nothing to merge when training ends.
- The judge of ``reward.custom_reward_function.reward_kwargs`` (stages 2-3) answers, and serves the
  model named (:func:`training.launch_checks.judge_answers`): a dead URL would otherwise surface in
  a reward worker, after Ray, the workers and the first validation rollouts. In stage 3 (settings
  with ``rubric_source`` or ``judge_gate``) its calibration must pass the judge gate
  (:mod:`training.judge_gate`), or ``judge_gate.enforce`` be false.
- The start model (``actor_rollout_ref.model.path``): a local folder must be an export with weights
  (:func:`training.hf_export.require_start_model`), not a raw ``global_step_N`` checkpoint.
- A rerun into a ``trainer.default_local_dir`` that holds checkpoints: with ``trainer.resume_mode:
  auto`` (verl's default) verl continues the newest of them, whatever start model the command now
  names. The first run records its start model (``rubricstree_start.json`` there); a later run that
  names another one is refused whatever ``resume_mode`` says (under ``disable`` a run that dies
  before its first save leaves the old tracker for the next ``auto`` run), with the ways out
  (another ``default_local_dir``, the same start model, or the folder moved away):
  :mod:`training.start_record`, shared with the TRL launcher. A folder without the record (a run
  before this check) is resumed, with a note. A remote start model (``hdfs://...``) is verl's to
  fetch and is not checked here.

``python -m training.verl_preflight CONFIG [OVERRIDES...]`` runs the checks on the config composed
as the trainer composes it (Hydra), writes the record, and prints the checkpoint folder (the
script exports it at the end); a failed check prints ``error: ...`` and exits 2.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reward.errors import InputError, ModelNotFoundError
from training.hf_export import require_start_model
from training.start_record import RECORD, check_start

__all__ = ["RECORD", "compose", "main", "preflight"]


def compose(config: str | Path, overrides: Sequence[str] = ()) -> Any:
    """The verl config with Hydra ``overrides``, as ``verl.trainer.main_ppo`` composes it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    path = Path(config).resolve()
    with initialize_config_dir(config_dir=str(path.parent), version_base=None):
        return hydra_compose(config_name=path.stem, overrides=list(overrides))


def preflight(cfg: Any, *, config_name: str = "config", write_record: bool = True) -> Path:
    """Run the checks of the module docstring on a composed verl config; return the checkpoint
    folder (``trainer.default_local_dir``, relative to where the trainer runs).

    Raises:
        InputError: a check failed (the message says which key and what to do).
    """
    trainer = cfg.trainer
    raw_freq = trainer.get("save_freq", -1)
    try:
        save_freq = int(-1 if raw_freq is None else raw_freq)
    except (TypeError, ValueError):
        raise InputError(f"trainer.save_freq must be a whole number of steps, got {raw_freq!r}", file=config_name,
                         field="trainer.save_freq") from None
    if save_freq <= 0:
        raise InputError(f"trainer.save_freq is {save_freq}: verl would save no checkpoint, and the stage's "
                         "Hugging Face export (the next stage's start) would have nothing to merge when training "
                         "ends; set trainer.save_freq to a positive step count", file=config_name,
                         field="trainer.save_freq")
    model = str(cfg.actor_rollout_ref.model.path)
    if "://" not in model:  # a remote path (hdfs://...) is verl's to fetch
        try:
            require_start_model(model, "actor_rollout_ref.model.path")
        except ModelNotFoundError as exc:
            raise InputError(str(exc), file=config_name, field="actor_rollout_ref.model.path") from exc
    check_verl_judge(cfg, config_name)
    ckpt = Path(str(trainer.default_local_dir))
    latest = ckpt / "latest_checkpointed_iteration.txt"
    resuming = None
    if latest.is_file():
        step = latest.read_text().strip()
        # whatever resume_mode says: under "disable" a run that dies before its first save leaves
        # this tracker, and the next "auto" run would resume the old weights
        if (ckpt / f"global_step_{step}").is_dir():
            resuming = f"step {step}"
    check_start(ckpt, model, resuming=resuming, write=write_record, file=config_name,
                field="actor_rollout_ref.model.path",
                ways_out="Use another trainer.default_local_dir (or trainer.experiment_name), name the same start "
                         "model to resume, or move that folder away to start over")
    return ckpt


def check_verl_judge(cfg: Any, config_name: str = "config") -> None:
    """The judge of ``reward.custom_reward_function.reward_kwargs`` answers (read as verl's reward
    reads them: ``load_settings``), before Ray, the workers and a first validation pass; a dead
    URL would surface inside a reward worker."""
    from omegaconf import OmegaConf

    from reward.integrations.verl.settings import CONFIG_ENV, load_settings
    from training.launch_checks import judge_answers

    crf = OmegaConf.select(cfg, "reward.custom_reward_function.reward_kwargs")
    if crf is None:
        return
    kwargs = dict(OmegaConf.to_container(crf, resolve=True) or {})
    # a stage whose reward settings name no judge (stage 1: the MCQ key) is not refused for a judge
    # URL left in the environment; the others get the judge the reward will build, the
    # $RUBRICSTREE_JUDGE_URL fallback included (judge_settings)
    if not ("judge" in kwargs or "config" in kwargs or os.environ.get(CONFIG_ENV)):
        return
    stage3 = "rubric_source" in kwargs or "judge_gate" in kwargs
    settings = load_settings(kwargs.pop("config", None), **kwargs)
    judge = settings.judge_settings().resolved()
    judge_answers(judge, prefix="reward.custom_reward_function.reward_kwargs.judge", file=config_name)
    if stage3 or "rubric_source" in settings.model_fields_set:
        from training.judge_gate import enforce_judge_gate

        key = "reward.custom_reward_function.reward_kwargs.judge_gate"
        enforce_judge_gate(judge, settings.judge_gate, field=key, file=config_name, tree=settings.tree,
                           reward={"router": settings.router if settings.rubric_source != "rows" else None,  # rows: no routing
                                   "confirm_failures": settings.confirm_failures},
                           override=f"the override {key}.enforce=false (or enforce: false in the config)")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0].startswith("-"):
        print("usage: python -m training.verl_preflight CONFIG [OVERRIDES...]", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="train_verl: %(message)s")
    try:
        cfg = compose(args[0], [a for a in args[1:] if not a.startswith("-")])
        print(preflight(cfg, config_name=args[0]))
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
