"""Launch a Fathom-Vaidya stage with TRL's GRPOTrainer (GSPO) from a YAML config.

Data flow: YAML -> :class:`TrainConfig` (``training.trl_config``: overrides, env, validation)
-> optional difficulty filter (once, cached under ``difficulty.out_dir``) -> dataset
(``training.data``) -> reward functions (``reward.integrations.trl``) -> ``GRPOTrainer`` -> train,
resuming from the last ``checkpoint-*`` in ``output_dir`` when there is one.

Stages: ``mcq`` (rule reward), ``error_rubric`` (correctness - alpha * error penalty),
``clinical_rubric`` (rubric reward). The ``grpo:`` mapping goes to ``trl.GRPOConfig`` as is
(GSPO = ``importance_sampling_level: sequence``).

Per-epoch filtering (stage 3, ``difficulty.per_epoch: true``): an epoch loop. Before each epoch
the current policy (the newest epoch's Hugging Face export ``hf-epoch-N``, else the base model;
``training.hf_export``) samples ``n`` completions per
row of the full dataset, the stage reward scores them, and only rows whose mean is inside
``difficulty.keep`` train in that epoch. Each epoch is one ``trainer.train`` that resumes from
the previous epoch's checkpoint (optimizer, scheduler and step count carry over;
``ignore_data_skip`` so the new, smaller dataset is read from its start) with ``max_steps`` raised
by one pass over the kept rows; the learning-rate schedule has one horizon for all epochs
(:func:`lr_horizon`: epochs x the steps of epoch 0), and the previous epoch's trainer and vLLM
engine are released first (:func:`release_trainer`). Epochs done are recorded in ``output_dir/epochs.json``, so a
killed run resumes at the right epoch; an epoch killed midway keeps its filter result and the
step it started at (``difficulty/epoch-N/epoch.json``), so it ends after the same number of
steps as an uninterrupted one. Under ``accelerate launch`` only rank 0 filters; the other ranks
wait for its files (``output_dir`` must be on storage every node sees).
Every stage ends with a Hugging Face export of the policy (``output_dir/hf``; each stage-3 epoch
``output_dir/hf-epoch-N``), what the next stage, eval and ``vllm serve`` load. In-process
sampling (transformers) is slow for long completions: scripts/train_pipeline.sh runs one epoch per
launch (``difficulty.epochs_per_run``) and filters in between with a vLLM server on the export.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from reward.errors import InputError, ModelNotFoundError
from training.gate_record import append_outcome, gate_history
from training.hf_export import export_dir, export_trainer, link_final, require_start_model
from training.launch_checks import check_collective_timeout, check_filter_plan, check_judge, guard_start, judge_spec
from training.launch_checks import process_rank as _rank
from training.run_folder import (
    difficulty_dir,
    last_checkpoint,
    latest_export,
    next_epoch,
    run_scope,  # noqa: I001
)
from training.run_folder import epoch_dir as _epoch_dir
from training.run_folder import step_of as _step_of
from training.trl_config import TrainConfig, load_config
from training.trl_trainer_utils import apply_fsdp_options, fixed_lr_horizon, release_trainer, save_at_end_callback

log = logging.getLogger(__name__)

# the run's configuration (schema and YAML loader) lives in training.trl_config
# ---------------------------------------------------------------------------------- pieces
def build_reward_funcs(cfg: TrainConfig) -> list:
    """The stage's reward functions (``reward.integrations.trl``), from the shared settings models."""
    from reward.integrations.trl import ErrorRubricReward, MCQRuleReward, RubricRewardFunc

    r = cfg.reward
    if cfg.stage == "mcq":
        return [MCQRuleReward(name=r.name or "mcq_rule")]
    if cfg.stage == "error_rubric":
        return [ErrorRubricReward(judge_spec(cfg), config=r.error_rubric(), name=r.name or "error_rubric",
                                  on_failure=r.on_failure)]
    records = Path(cfg.output_dir) / "rubric_records" if r.records else None  # `rubricstree inspect <output_dir>`
    # applicability answers are scoped to this run (its output folder's id): a resume reuses them,
    # another run asks afresh (reward.router.applicability)
    return [RubricRewardFunc.from_settings(judge_spec(cfg), r.rubric(), records_dir=records,
                                           applicability_scope=run_scope(cfg.output_dir))]


def filter_reward(cfg: TrainConfig, reward_funcs: list | None = None):
    """What the stage-3 difficulty filter averages per row: the trainer's reward as a pass rate in
    0..1 (``RubricRewardFunc.as_pass_rate``), not the shaped training reward."""
    fn = (reward_funcs or build_reward_funcs(cfg))[0]
    return fn.as_pass_rate() if hasattr(fn, "as_pass_rate") else fn  # MCQ: correctness in {0, 1} already


def filter_scorer(cfg: TrainConfig, reward_funcs: list | None = None):
    """The reward the run's difficulty filter scores samples with: MCQ correctness for MCQ data
    (stages 1-2 route by it), else :func:`filter_reward`."""
    if cfg.data_kind == "mcq":
        from reward.integrations.trl import MCQRuleReward

        return MCQRuleReward()
    return filter_reward(cfg, reward_funcs)


def _data_paths(cfg: TrainConfig) -> list[str]:
    return list(cfg.data.paths)


def once_per_job(marker: Path, compute: Callable[[], Any], *, poll_s: float = 5.0) -> None:
    """Run ``compute`` (which must write ``marker`` last) in the job's first process only.

    Under ``accelerate launch`` every rank runs this launcher: without this each would sample
    the whole dataset again and they would race writing one folder. The other ranks wait for
    ``marker`` by polling the file (no collective: sampling may outlast any NCCL timeout), so the
    folder must be on storage every node sees. A crash of rank 0 ends the job (the launcher
    stops all ranks), so the wait does not hang on its own.
    """
    if _rank() == 0:
        if not marker.exists():
            compute()
        return
    t0 = last = time.monotonic()
    while not marker.exists():
        if time.monotonic() - last >= 300:
            last = time.monotonic()
            log.info("rank %d: waiting for rank 0 to write %s (%.0f min)", _rank(), marker, (last - t0) / 60)
        time.sleep(poll_s)


def _check_filter_results(cfg: TrainConfig, out: Path, dcfg, reward_funcs: list | None = None) -> None:
    """Refuse results made with other windows, data or reward settings: reusing them would train
    on the wrong rows."""
    from training.difficulty import FilterStats, reward_record
    from training.difficulty_results import check_filter_reward

    path = out / "stats.json"
    stats = FilterStats.model_validate_json(path.read_text(encoding="utf-8"))
    want = {"keep": str(dcfg.keep)} if dcfg.mode == "keep" else {"rubric": str(dcfg.rubric), "rule": str(dcfg.rule)}
    n_rows = len(_all_rows(cfg))
    diffs = [f"windows were {stats.windows}, now {want}"] if stats.windows != want else []
    diffs += [f"{stats.rows} rows were filtered, the data now has {n_rows}"] if stats.rows != n_rows else []
    if diffs:
        raise InputError("these difficulty results were made with other settings (" + "; ".join(diffs)
                         + "): delete the folder to filter again, or set difficulty.out_dir", file=str(path))
    check_filter_reward(stats, reward_record(filter_scorer(cfg, reward_funcs)), path)


def build_train_dataset(cfg: TrainConfig, reward_funcs: list | None = None):
    """The dataset of the run: the data files, or the split the difficulty filter routed here."""
    from training.data import build_dataset, build_healthbench_dataset, build_mcq_dataset
    from training.difficulty import read_rows

    d = cfg.difficulty
    if not d.enabled or d.per_epoch:
        if cfg.data.exclude:  # the rows without evaluation prompts (counted in _all_rows)
            rows = _all_rows(cfg)
            if cfg.data_kind == "mcq":
                return build_mcq_dataset(rows, system_prompt=cfg.data.system_prompt or "none")
            return build_healthbench_dataset(rows, system_prompt=cfg.data.system_prompt or "ours")
        return build_dataset(cfg.data_kind, _data_paths(cfg), system_prompt=cfg.data.system_prompt,
                             limit=cfg.data.limit)
    split = d.use_split or {"mcq": "rule", "error_rubric": "rubric", "clinical_rubric": "keep"}[cfg.stage]
    out = difficulty_dir(cfg)
    if (out / "stats.json").exists():
        log.info("difficulty filter: reusing %s", out)
    once_per_job(out / "stats.json", lambda: run_difficulty(cfg, cfg.model, out, reward_funcs))
    _check_filter_results(cfg, out, d.config("split" if cfg.data_kind == "mcq" else "keep"), reward_funcs)
    rows = read_rows(out / f"{split}.jsonl")
    if not rows:
        raise InputError(f"the difficulty filter kept no row for split '{split}'", file=str(out / f"{split}.jsonl"))
    if cfg.data_kind == "mcq":
        return build_mcq_dataset(rows, system_prompt=cfg.data.system_prompt or "none")
    return build_healthbench_dataset(rows, system_prompt=cfg.data.system_prompt or "ours")


def _all_rows(cfg: TrainConfig) -> list[dict]:
    """Every data file's rows, concatenated (the difficulty filter and data hygiene work on them
    raw). Each file is read by its loader first, so a bad row is named by file, line and field
    here, as on the path without the filter, not by an index into the concatenation later."""
    from reward.healthbench.schema import load_healthbench
    from reward.stages.mcq import load_mcq
    from training.difficulty import read_rows

    rows = []
    for p in _data_paths(cfg):
        (load_mcq if cfg.data_kind == "mcq" else load_healthbench)(p)
        rows += read_rows(p)
    if cfg.data.exclude:
        from training.data_hygiene import drop_overlap, exclusion_hashes

        rows, dropped = drop_overlap(rows, exclusion_hashes(cfg.data.exclude))
        log.info("data hygiene: dropped %d training row(s) whose prompt is in %s", dropped,
                 ", ".join(cfg.data.exclude))
    return rows[:cfg.data.limit] if cfg.data.limit else rows


def run_difficulty(cfg: TrainConfig, model: Any, out_dir: Path, reward_funcs: list | None = None,
                   tokenizer: Any = None):
    """Sample, score and split every row of the config's data with ``model``."""
    from training.data import build_healthbench_dataset, build_mcq_dataset
    from training.difficulty import filter_rows, sample_prompts

    d = cfg.difficulty
    raw = _all_rows(cfg)
    reward = filter_scorer(cfg, reward_funcs)  # stages 1-2: MCQ correctness; 3: raw 0..1, not the shaped reward
    if cfg.data_kind == "mcq":
        dataset = build_mcq_dataset(raw, system_prompt=cfg.data.system_prompt or "none")
        dcfg = d.config("split")
    else:
        dataset = build_healthbench_dataset(raw, system_prompt=cfg.data.system_prompt or "ours")
        dcfg = d.config("keep")
    samples = sample_prompts([row["prompt"] for row in dataset], model=model, cfg=dcfg, generate_url=d.generate_url,
                             served_model=d.served_model, tokenizer=tokenizer, out_dir=out_dir)
    return filter_rows(raw, dataset, samples, reward, dcfg, out_dir)


def _bias_kwargs(cfg: TrainConfig) -> dict:
    if not cfg.generation_bias:
        return {}
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(cfg.model)
    bias = [[tok.encode(text, add_special_tokens=False), float(b)] for text, b in cfg.generation_bias.items()]
    return {"sequence_bias": [b for b in bias if b[0]]}


def grpo_args(cfg: TrainConfig, **overrides: Any):
    from trl import GRPOConfig

    kw = {"seed": cfg.seed, **cfg.grpo, **overrides}
    bias = _bias_kwargs(cfg)
    if bias:
        kw["generation_kwargs"] = {**(kw.get("generation_kwargs") or {}), **bias}
    return GRPOConfig(output_dir=cfg.output_dir, **kw)


class TrainResult(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    output_dir: str
    global_step: int
    start_step: int
    resumed_from: str | None
    log_history: list[dict]
    epochs: list[dict] = Field(default_factory=list)


def make_trainer(cfg: TrainConfig, train_dataset, reward_funcs: list, **arg_overrides: Any):
    from trl import GRPOTrainer

    from training.trl_logging import bound_completion_logs, wandb_mode_for

    for fn in reward_funcs:  # a column the reward needs and the data lacks: refused before the model loads
        if hasattr(fn, "check_columns"):
            fn.check_columns(train_dataset.column_names)
    args = grpo_args(cfg, **arg_overrides)
    world = max(1, int(os.environ.get("WORLD_SIZE", "1")))
    per_step = args.per_device_train_batch_size * args.gradient_accumulation_steps * world
    # the paper's batch is 32 prompts x 8 generations; fewer GPUs than the config assumes change it
    log.info("global batch: %d completions per optimizer step = %s prompts x %d generations "
             "(per_device_train_batch_size %d x gradient_accumulation_steps %d x %d processes)",
             per_step, f"{per_step / args.num_generations:g}", args.num_generations,
             args.per_device_train_batch_size, args.gradient_accumulation_steps, world)
    wandb_mode_for(args.report_to)  # offline, said in a log line, when there is no key
    trainer = GRPOTrainer(model=cfg.model, reward_funcs=reward_funcs, args=args,
                          train_dataset=train_dataset, callbacks=[save_at_end_callback()])
    c = cfg.completion_log  # small completions tables: first rows, first characters
    trainer.add_callback(bound_completion_logs(trainer, c.max_chars, c.max_rows))
    plugin = getattr(trainer.accelerator.state, "fsdp_plugin", None)
    if apply_fsdp_options(plugin, cfg.fsdp_reduce_dtype):
        log.info("FSDP2: gradients reduce-scattered in %s", cfg.fsdp_reduce_dtype)
    sync_each = bool((args.accelerator_config.gradient_accumulation_kwargs or {}).get("sync_each_batch"))
    if plugin is not None and args.gradient_accumulation_steps > 1 and not sync_each:
        log.warning("FSDP with gradient_accumulation_steps %d and no sync_each_batch keeps every parameter's "
                    "unsharded gradient on every GPU between micro-batches; set grpo.accelerator_config."
                    "gradient_accumulation_kwargs.sync_each_batch: true", args.gradient_accumulation_steps)
    return trainer


def export_policy(cfg: TrainConfig, trainer, out: Path, **meta: Any) -> Path:
    """The Hugging Face export of the trainer's current policy (every rank calls it)."""
    path = export_trainer(trainer, out, dtype=cfg.export_dtype, meta={  # the gate's outcomes go into its model card
        "stage": cfg.stage, "started_from": cfg.model, "judge_gate": gate_history(cfg.output_dir), **meta})
    log.info("Hugging Face export of the policy: %s", path)
    return path


def train(cfg: TrainConfig) -> TrainResult:
    """Run the stage; resume from the last checkpoint in ``output_dir`` when there is one (of a run
    from the same start model: :func:`guard_start`)."""
    guard_start(cfg)
    check_collective_timeout(cfg)
    gate = check_judge(cfg)
    if gate is not None and _rank() == 0:  # passed or overridden: the run keeps what the gate said
        append_outcome(cfg.output_dir, gate)
    check_filter_plan(cfg)
    if cfg.difficulty.per_epoch:
        return _train_per_epoch(cfg)
    reward_funcs = build_reward_funcs(cfg)
    dataset = build_train_dataset(cfg, reward_funcs)
    trainer = make_trainer(cfg, dataset, reward_funcs)
    ckpt = last_checkpoint(cfg.output_dir)
    if ckpt:
        log.info("resuming from %s", ckpt)
    trainer.train(resume_from_checkpoint=True if ckpt else None)
    export_policy(cfg, trainer, export_dir(cfg.output_dir))
    return TrainResult(output_dir=cfg.output_dir, global_step=trainer.state.global_step, start_step=_step_of(ckpt),
                       resumed_from=ckpt, log_history=list(trainer.state.log_history))


def _prompts_per_step(args) -> int:
    world = max(1, int(os.environ.get("WORLD_SIZE", "1")))
    return max(1, args.per_device_train_batch_size * args.gradient_accumulation_steps * world // args.num_generations)


def lr_horizon(cfg: TrainConfig, n_epochs: int, prompts_per_step: int) -> int:
    """One learning-rate horizon for all stage-3 epochs: ``n_epochs`` x the steps of epoch 0 (its
    kept rows; the full data when it kept none). Every rank computes the same from the files."""
    from training.difficulty import read_rows

    keep0 = Path(cfg.output_dir) / "difficulty" / "epoch-0" / "keep.jsonl"
    rows = len(read_rows(keep0)) if keep0.exists() else 0
    rows = rows or len(_all_rows(cfg))
    return max(1, n_epochs * math.ceil(rows / prompts_per_step))


def filter_epoch_with_policy(cfg: TrainConfig, epoch: int, reward_funcs: list | None = None) -> None:
    """Filter the rows for ``epoch`` with the current policy (its Hugging Face export, or
    ``difficulty.generate_url`` when a server serves it) and write ``epoch.json`` last."""
    out = _epoch_dir(cfg, epoch)
    policy = latest_export(cfg.output_dir, before=epoch) or cfg.model
    ckpt = last_checkpoint(cfg.output_dir)
    run_difficulty(cfg, policy, out, reward_funcs)
    marker = out / "epoch.json"
    tmp = marker.with_suffix(".tmp")
    tmp.write_text(json.dumps({"epoch": epoch, "start_step": _step_of(ckpt), "policy": policy,
                               "served_by": cfg.difficulty.generate_url}))
    tmp.replace(marker)


def _train_per_epoch(cfg: TrainConfig) -> TrainResult:
    """Stage 3: filter with the current policy before each epoch (see the module docstring)."""
    from training.data import build_healthbench_dataset
    from training.difficulty import FilterStats, read_rows, reward_record
    from training.difficulty_results import check_filter_reward

    reward_funcs = build_reward_funcs(cfg)
    epochs_file = Path(cfg.output_dir) / "epochs.json"
    done: list[dict] = json.loads(epochs_file.read_text()) if epochs_file.exists() else []
    n_epochs = int(math.ceil(float(cfg.grpo.get("num_train_epochs", 1))))
    first_ckpt = last_checkpoint(cfg.output_dir)
    trainer = None
    ran = 0
    for epoch in range(len(done), n_epochs):
        out = Path(cfg.output_dir) / "difficulty" / f"epoch-{epoch}"
        # epoch.json (written after the filter) records the step the epoch starts at: an epoch
        # interrupted midway resumes with its own filter result and step budget, instead of
        # re-filtering with a half-trained policy and training a longer epoch
        marker = out / "epoch.json"

        def filter_epoch(epoch: int = epoch) -> None:
            filter_epoch_with_policy(cfg, epoch, reward_funcs)

        if ran >= (cfg.difficulty.epochs_per_run or n_epochs):
            log.info("stopping after %d epoch(s) this run (difficulty.epochs_per_run)", ran)
            break
        if marker.exists():
            log.info("epoch %d: resuming with the filter result in %s", epoch, out)
        once_per_job(marker, filter_epoch)
        start = int(json.loads(marker.read_text())["start_step"])
        stats = FilterStats.model_validate_json((out / "stats.json").read_text())
        check_filter_reward(stats, reward_record(filter_scorer(cfg, reward_funcs)), out / "stats.json")
        kept = read_rows(out / "keep.jsonl")
        ckpt = last_checkpoint(cfg.output_dir)
        if not kept:
            log.warning("epoch %d: the filter kept no row; skipping the epoch", epoch)
            done.append({"epoch": epoch, "kept": 0, "counts": stats.counts, "start_step": start, "end_step": start})
        else:
            dataset = build_healthbench_dataset(kept, system_prompt=cfg.data.system_prompt or "ours")
            args = grpo_args(cfg)
            steps = max(1, math.ceil(len(kept) / _prompts_per_step(args)))
            release_trainer(trainer)  # the previous epoch's model, optimiser and vLLM engine
            trainer = make_trainer(cfg, dataset, reward_funcs, max_steps=start + steps, ignore_data_skip=True,
                                   num_train_epochs=1)
            fixed_lr_horizon(trainer, lr_horizon(cfg, n_epochs, _prompts_per_step(args)))
            trainer.train(resume_from_checkpoint=ckpt)
            export_policy(cfg, trainer, export_dir(cfg.output_dir, epoch), epoch=epoch)
            if _rank() == 0:
                link_final(cfg.output_dir, epoch)
            done.append({"epoch": epoch, "kept": len(kept), "counts": stats.counts, "start_step": start,
                         "end_step": trainer.state.global_step, "export": str(export_dir(cfg.output_dir, epoch))})
        ran += 1
        if _rank() == 0:
            epochs_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = epochs_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(done, indent=2))
            tmp.replace(epochs_file)
    final = last_checkpoint(cfg.output_dir)
    history = list(trainer.state.log_history) if trainer else (
        json.loads((Path(final) / "trainer_state.json").read_text())["log_history"] if final else [])
    return TrainResult(output_dir=cfg.output_dir, global_step=_step_of(final), start_step=_step_of(first_ckpt),
                       resumed_from=first_ckpt, log_history=history, epochs=done)


# ---------------------------------------------------------------------------------- entry point
def _filter_only(cfg: TrainConfig) -> int:
    """``--filter-only``: the difficulty filter of the run (cached under ``difficulty.out_dir``)."""
    if cfg.difficulty.per_epoch:  # the next stage-3 epoch's filter (plain python, one process)
        nxt = next_epoch(cfg)
        if nxt["epoch"] is not None and not nxt["filtered"]:
            filter_epoch_with_policy(cfg, nxt["epoch"])
        print(json.dumps({"filtered": nxt["epoch"] is not None, **nxt,
                          "out_dir": str(_epoch_dir(cfg, nxt["epoch"] or 0))}), flush=True)
        return 0
    if cfg.difficulty.enabled:
        build_train_dataset(cfg, build_reward_funcs(cfg))
    print(json.dumps({"filtered": bool(cfg.difficulty.enabled), "out_dir": str(difficulty_dir(cfg))}), flush=True)
    return 0


def _said(exc: Exception, debug: bool) -> int:
    """A bad input in one line (exit 2), or with ``--debug`` its traceback."""
    if debug:
        raise exc
    return print(f"error: {exc}", flush=True) or 2


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m training.trl_launcher --config FILE [--set k=v ...]`` (what scripts/train.sh
    runs, under ``accelerate launch`` on GPU machines). ``--print-judge`` prints the judge's
    ``url<TAB>model<TAB>served_model`` (empty fields as ``-``) and exits."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m training.trl_launcher", description=main.__doc__)
    p.add_argument("--config", required=True)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--print-judge", action="store_true")
    p.add_argument("--print-output-dir", action="store_true", help="print output_dir and exit")
    p.add_argument("--print-model", action="store_true", help="print the model (after overrides) and exit")
    p.add_argument("--print-next-epoch", action="store_true",
                   help="stage 3: print the next epoch, the policy its filter samples from and whether it is filtered")
    p.add_argument("--filter-only", action="store_true",
                   help="run the difficulty filter (cached under difficulty.out_dir) and exit")
    p.add_argument("--check-only", action="store_true",
                   help="a dry run: the launch checks (the judge answers and, in stage 3, passes the judge gate; "
                        "the filter plan) and exit, loading no model")
    p.add_argument("--gate-only", action="store_true",
                   help="stage 3: the judge answers and passes the judge gate (other stages: not gated), and exit; "
                        "needs no start model (scripts/train.sh and the pipeline ask it before anything starts)")
    p.add_argument("--debug", action="store_true", help="a bad input raises with its traceback instead of one line")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        cfg = load_config(a.config, a.overrides)
        if not (a.print_judge or a.print_output_dir or a.gate_only):
            require_start_model(cfg.model, f"model: in {a.config}")
    except (InputError, ModelNotFoundError) as exc:
        return _said(exc, a.debug)
    if a.print_judge:
        j = cfg.judge
        needs = cfg.stage != "mcq" and not j.in_process
        print("\t".join(x or "-" for x in ((j.url if needs else None), (j.model if needs else None),
                                           j.served_model)))
        return 0
    if a.print_output_dir:
        print(cfg.output_dir)
        return 0
    if a.print_model:
        print(cfg.model)
        return 0
    if a.print_next_epoch:
        print(json.dumps(next_epoch(cfg)), flush=True)
        return 0
    if a.gate_only:
        from training.launch_checks import gate_only

        return gate_only(cfg)
    if a.check_only:
        try:
            check_judge(cfg)
            check_filter_plan(cfg)
        except InputError as exc:
            return _said(exc, a.debug)
        print(json.dumps({"checks": "passed", "stage": cfg.stage}), flush=True)
        return 0
    if a.filter_only:
        try:
            # a resume from another start model and a dead judge are refused before hours of sampling
            guard_start(cfg)
            if (cfg.difficulty.enabled or cfg.difficulty.per_epoch) and cfg.data_kind != "mcq":
                check_judge(cfg)  # the healthbench filter scores with the judge; the MCQ filter with the key
            return _filter_only(cfg)
        except InputError as exc:  # and a bad data row, stale filter results: file, line and field
            return _said(exc, a.debug)
    try:
        res = train(cfg)
    except InputError as exc:  # said before any model is loaded (guard_start, check_judge, check_filter_plan)
        return _said(exc, a.debug)
    print(json.dumps({"output_dir": res.output_dir, "global_step": res.global_step, "start_step": res.start_step,
                      "resumed_from": res.resumed_from, "epochs": res.epochs}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
