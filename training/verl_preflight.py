"""What a verl stage is checked for before its trainer starts (scripts/train_verl.sh), so that a
mistake is said at once, not after hours of GPU time.

- No reward key of verl's older layout (top-level ``custom_reward_function``,
  ``reward_model.reward_manager``, ...): verl 0.9.1's trainer ignores them, its fully-async trainer
  lets them replace our reward settings, gate and failure policy; refused, naming the key to use
  (:func:`reward.integrations.verl.settings.refuse_legacy_reward_keys`).
- ``trainer.save_freq`` > 0: verl saves no checkpoint otherwise, and the stage's Hugging Face export
  (the next stage's start, ``training.verl_export``) has nothing to merge when training ends.
- The judge of ``reward.custom_reward_function.reward_kwargs`` (stages 2-3) answers, and serves the
  model named (:func:`training.launch_checks.judge_answers`): a dead URL would otherwise surface in
  a reward worker, after Ray, the workers and the first validation rollouts. Whenever the run may
  grade rubric verdicts (:func:`gated`: its data holds a source other than the MCQ and error-rubric
  ones, or, data unreadable here, its settings name a judge and no error-rubric block), whatever
  keys the settings carry, its calibration must pass the judge gate (:mod:`training.judge_gate`),
  or ``judge_gate.enforce`` be false; the outcome, an override included, is appended to
  ``judge_gate.json`` in the checkpoint folder (``training.gate_record``) and reaches the export's
  model card.
- The data (``data.train_files``, ``data.val_files``, when they are local files) carries the columns
  the reward needs: in stage 3 each row's rubric items, unless ``rubric_source: tree``
  (:func:`check_verl_data`).
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
from training.gate_record import append_outcome
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
    from reward.integrations.verl.settings import refuse_legacy_reward_keys

    refuse_legacy_reward_keys(cfg, file=config_name)
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
    check_verl_data(cfg, config_name)
    gate = check_verl_judge(cfg, config_name)
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
    if gate is not None and write_record:  # passed or overridden: the run keeps what the gate said
        append_outcome(ckpt, gate)
    return ckpt


def check_verl_judge(cfg: Any, config_name: str = "config") -> dict | None:
    """The judge of ``reward.custom_reward_function.reward_kwargs`` answers (read as verl's reward
    reads them: ``load_settings``), before Ray, the workers and a first validation pass; a dead
    URL would surface inside a reward worker. Then the judge gate, whenever the run may grade rubric
    verdicts (:func:`gated`), whatever keys the settings carry. Returns the gate's outcome for the
    run's record (None: not gated)."""
    from omegaconf import OmegaConf

    from reward.integrations.verl.settings import CONFIG_ENV, load_settings
    from training.launch_checks import judge_answers

    crf = OmegaConf.select(cfg, "reward.custom_reward_function.reward_kwargs")
    kwargs = dict(OmegaConf.to_container(crf, resolve=True) or {}) if crf is not None else {}
    names_judge = "judge" in kwargs or "config" in kwargs or bool(os.environ.get(CONFIG_ENV))
    gate_it = gated(cfg, kwargs)
    # a stage whose reward settings name no judge (stage 1: the MCQ key) is not refused for a judge
    # URL left in the environment; the others get the judge the reward will build, the
    # $RUBRICSTREE_JUDGE_URL fallback included (judge_settings)
    if not (names_judge or gate_it):
        return None
    settings = load_settings(kwargs.pop("config", None), **kwargs)
    judge = settings.judge_settings().resolved()
    key = "reward.custom_reward_function.reward_kwargs"
    if gate_it and not (judge.url or judge.model):
        raise InputError(f"this run may grade rubric verdicts ({gate_it}) and its reward names no judge: set {key}.judge.url "
                         "or $RUBRICSTREE_JUDGE_URL", file=config_name, field=f"{key}.judge.url")
    judge_answers(judge, prefix=f"{key}.judge", file=config_name)
    if not gate_it:
        return None
    from training.judge_gate import enforce_judge_gate

    return enforce_judge_gate(judge, settings.judge_gate, recipe=settings, field=f"{key}.judge_gate", file=config_name,
                              tree=settings.tree,
                              override=f"the override {key}.judge_gate.enforce=false (or enforce: false in the config)")


def not_gated_sources() -> set[str]:
    """The data sources whose score reads no rubric verdict: the MCQ rule (stage 1) and the error
    rubric (stage 2, error lists), with their aliases."""
    from reward.integrations.verl.sources import DATA_SOURCES

    plain = {DATA_SOURCES["mcq"], DATA_SOURCES["error_rubric"]}
    return {name for name, fn in DATA_SOURCES.items() if fn in plain}


def data_sources(cfg: Any) -> set[str] | None:
    """The ``data_source`` values of the run's train and validation files, or None when one cannot
    be read here (a remote path, a missing file, no such column)."""
    from omegaconf import OmegaConf

    files: list[str] = []
    for key in ("data.train_files", "data.val_files"):
        value = OmegaConf.select(cfg, key)
        if value is None:
            continue
        value = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
        files += [str(v) for v in (value if isinstance(value, list) else [value])]
    column = OmegaConf.select(cfg, "data.reward_fn_key") or "data_source"
    found: set[str] = set()
    for f in files:
        if "://" in f or not Path(f).is_file():
            return None
        try:
            import pyarrow.parquet as pq

            found |= {str(v) for v in pq.read_table(f, columns=[column]).column(column).to_pylist()}
        except Exception:  # noqa: BLE001 - unreadable here: the gate then decides from the settings
            return None
    return found or None


def gated(cfg: Any, kwargs: dict) -> str | None:
    """Why this verl run passes the judge gate, or None when it grades no rubric verdict: its data
    holds a source other than the MCQ and error-rubric ones; or, data unreadable here, its reward
    settings name a judge (or stage-3 keys) and no error-rubric block. Which keys are present
    decides nothing more: a stage-3 reward without ``judge_gate`` or ``rubric_source`` is gated too."""
    from reward.integrations.verl.settings import CONFIG_ENV
    from reward.settings import RewardSettings

    sources = data_sources(cfg)
    if sources is not None:
        graded = sorted(sources - not_gated_sources())
        return f"data sources {', '.join(graded)}" if graded else None
    file = kwargs.get("config") or os.environ.get(CONFIG_ENV)
    keys = set(kwargs) | (set(_yaml_keys(file)) if file else set())
    if "error_rubric" in keys:
        return None
    stage3 = keys & ({"judge_gate"} | set(RewardSettings.model_fields))
    if stage3 or "judge" in keys:
        return (f"reward settings {', '.join(sorted(stage3 or {'judge'}))}, and data sources that cannot be read "
                "here to tell otherwise")
    return None


def _yaml_keys(path: str) -> list[str]:
    from reward.textio import load_yaml

    try:
        data = load_yaml(path)
    except Exception:  # noqa: BLE001 - load_settings says what is wrong with the file
        return []
    return list(data) if isinstance(data, dict) else []


def check_verl_data(cfg: Any, config_name: str = "config") -> None:
    """The local parquet files of ``data.train_files`` and ``data.val_files`` carry the columns the
    reward needs (:func:`training.verl_data.check_parquet_columns`: stage 3's rubric items under a
    ``rubric_source`` that grades them); a file not there yet is verl's to report."""
    from omegaconf import OmegaConf

    from reward.integrations.verl.settings import load_settings
    from training.verl_data import check_parquet_columns

    kwargs = dict(OmegaConf.to_container(OmegaConf.select(cfg, "reward.custom_reward_function.reward_kwargs")
                                         or OmegaConf.create({}), resolve=True) or {})
    rubric_source = load_settings(kwargs.pop("config", None), **kwargs).rubric_source
    files: list[str] = []
    for key in ("data.train_files", "data.val_files"):
        value = OmegaConf.select(cfg, key)
        value = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
        files += [str(v) for v in ([value] if isinstance(value, str) else value or [])]
    for f in files:
        if "://" not in f and Path(f).is_file():
            check_parquet_columns(f, rubric_source=rubric_source, prompt_key=str(cfg.data.get("prompt_key", "prompt")),
                                  source_key=str(cfg.data.get("reward_fn_key", "data_source")))


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0].startswith("-"):
        print("usage: python -m training.verl_preflight CONFIG [OVERRIDES...] [--debug]", file=sys.stderr)
        return 2
    debug = "--debug" in args[1:]
    logging.basicConfig(level=logging.INFO, format="train_verl: %(message)s")
    try:  # other flags are Hydra's, for verl's main_ppo (train_verl.sh passes the same line to both)
        cfg = compose(args[0], [a for a in args[1:] if not a.startswith("-")])
        print(preflight(cfg, config_name=args[0]))
    except InputError as exc:
        if debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
