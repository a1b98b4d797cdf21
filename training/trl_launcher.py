"""Launch a Fathom-Vaidya stage with TRL's GRPOTrainer (GSPO) from a YAML config.

Data flow: YAML (``${ENV}`` expanded, ``--set`` overrides) -> :class:`TrainConfig` (validated)
-> optional difficulty filter (once, cached under ``difficulty.out_dir``) -> dataset
(``training.data``) -> reward functions (``reward.trl_rewards``) -> ``GRPOTrainer`` -> train,
resuming from the last ``checkpoint-*`` in ``output_dir`` when there is one.

Stages: ``mcq`` (rule reward), ``error_rubric`` (correctness - alpha * error penalty),
``clinical_rubric`` (rubric reward). The ``grpo:`` mapping goes to ``trl.GRPOConfig`` as is
(GSPO = ``importance_sampling_level: sequence``).

Per-epoch filtering (stage 3, ``difficulty.per_epoch: true``): an epoch loop. Before each epoch
the current policy (the last checkpoint, else the base model) samples ``n`` completions per
row of the full dataset, the stage reward scores them, and only rows whose mean is inside
``difficulty.keep`` train in that epoch. Each epoch is one ``trainer.train`` that resumes from
the previous epoch's checkpoint (optimizer, scheduler and step count carry over;
``ignore_data_skip`` so the new, smaller dataset is read from its start) with ``max_steps`` raised
by one pass over the kept rows. Epochs done are recorded in ``output_dir/epochs.json``, so a
killed run resumes at the right epoch; an epoch killed midway keeps its filter result and the
step it started at (``difficulty/epoch-N/epoch.json``), so it ends after the same number of
steps as an uninterrupted one. Under ``accelerate launch`` only rank 0 filters; the other ranks
wait for its files (``output_dir`` must be on storage every node sees). Caveat: the learning-rate
schedule's horizon is ``max_steps`` of the epoch being trained, so a cosine schedule is
re-stretched each epoch.
In-process sampling (transformers) is slow for long completions; for paper-scale runs point
``difficulty.generate_url`` at a vLLM server that serves the current checkpoint.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from reward.errors import InputError

log = logging.getLogger(__name__)

Stage = Literal["mcq", "error_rubric", "clinical_rubric"]
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


# ---------------------------------------------------------------------------------- config
class DataConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    paths: list[str] = Field(min_length=1, description="JSONL files of one kind")
    kind: Literal["mcq", "healthbench"] | None = Field(None, description="default: healthbench for stage 3, else mcq")
    system_prompt: str | None = Field(None, description="ours | none | a file; default: none for MCQ, ours for stage 3")
    limit: int | None = Field(None, ge=1)


class JudgeOptions(BaseModel):
    """The judge (stages 2 and 3). ``url`` empty and ``model`` set: scripts/train.sh serves it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str | None = None
    model: str | None = Field(None, description="judge model: served by scripts/train.sh when no url, or "
                                                "loaded in process (in_process); with a url it is ignored")
    served_model: str | None = None
    tokenizer: str | None = Field(None, description="with a url: the judge's tokenizer; default the model "
                                                    "root the server reports (/v1/models)")
    mode: Literal["choice", "explain"] = "choice"
    temperature: float = Field(0.0, ge=0.0)
    cache: bool | str = True
    concurrency: int = Field(64, ge=1)
    timeout_s: float = Field(120.0, gt=0)
    in_process: bool = Field(False, description="run the judge model in the trainer process (no server)")


class RewardOptions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str | None = Field(None, description="metric key; default mcq_rule / error_rubric / clinical_rubric")
    on_failure: Literal["skip", "raise"] = "skip"
    # stage 2
    alpha: float = Field(1.0, ge=0.0)
    s_max: float = Field(4.0, gt=0.0)
    form: Literal["subtract", "multiply"] = "subtract"
    constrain: Literal["json", "regex"] = "json"
    max_tokens: int = Field(1024, ge=16)
    max_errors: int = Field(12, ge=1)
    max_description_chars: int = Field(400, ge=1)
    attempts: int = Field(3, ge=1, le=10)
    # stage 3
    tree: str | None = Field(None, description="taxonomy YAML; default the packaged one")
    router: Literal["static", "llm", "embedding"] = "static"
    router_options: dict[str, Any] = Field(default_factory=dict)
    rubric_source: Literal["both", "tree", "rows"] = "both"
    scoring: Literal["hard", "soft"] = "hard"
    combine: Literal["tree", "points", "mean"] = "tree"
    scoring_variant: Literal["paper", "penalty", "active", "penalty+active"] | None = Field(
        None, description="tree score variant (reward.scoring.variants); null: the default one")


class DifficultyOptions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = False
    use_split: Literal["rubric", "rule", "keep"] | None = Field(
        None, description="which split trains: rule (stage 1), rubric (stage 2), keep (stage 3)")
    out_dir: str | None = Field(None, description="where results go (reused when present); default output_dir/difficulty")
    per_epoch: bool = Field(False, description="stage 3: re-filter with the current policy before each epoch")
    generate_url: str | None = None
    served_model: str | None = None
    n: int = Field(8, ge=1)
    temperature: float = Field(1.0, ge=0.0)
    max_new_tokens: int = Field(1024, ge=1)
    batch_size: int = Field(8, ge=1)
    rubric: tuple[float, float] = (0.1, 0.4)
    rule: tuple[float, float] = (0.4, 0.7)  # (lo, hi]: lo exclusive
    keep: tuple[float, float] = (0.15, 0.7)
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)

    def config(self, mode: str):
        from training.difficulty import DifficultyConfig, Window

        return DifficultyConfig(
            n=self.n, temperature=self.temperature, max_new_tokens=self.max_new_tokens, mode=mode,
            batch_size=self.batch_size, chat_template_kwargs=self.chat_template_kwargs,
            rubric=Window(lo=self.rubric[0], hi=self.rubric[1]),
            rule=Window(lo=self.rule[0], hi=self.rule[1], lo_inclusive=False),
            keep=Window(lo=self.keep[0], hi=self.keep[1]))


class TrainConfig(BaseModel):
    """One training run; see configs/trl/*.yaml."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    stage: Stage
    output_dir: str
    data: DataConfig
    judge: JudgeOptions = JudgeOptions()
    reward: RewardOptions = RewardOptions()
    difficulty: DifficultyOptions = DifficultyOptions()
    generation_bias: dict[str, float] = Field(
        default_factory=dict, description="text -> logit bias for transformers generation (sequence_bias); "
                                          "the smoke configs use it so a random policy answers with letters")
    seed: int = 42
    grpo: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of trl.GRPOConfig")

    @model_validator(mode="after")
    def _consistent(self) -> "TrainConfig":
        if "output_dir" in self.grpo:
            raise ValueError("set output_dir at the top level, not under grpo")
        if self.stage != "mcq" and not (self.judge.url or self.judge.model):
            raise ValueError(f"stage {self.stage} needs a judge: judge.url or judge.model")
        if self.difficulty.per_epoch and self.stage != "clinical_rubric":
            raise ValueError("difficulty.per_epoch is the stage 3 (clinical_rubric) filter")
        return self

    @property
    def data_kind(self) -> str:
        return self.data.kind or ("healthbench" if self.stage == "clinical_rubric" else "mcq")


# ---------------------------------------------------------------------------------- loading
def expand_env(value: Any, *, where: str = "") -> Any:
    """Replace ``${VAR}`` and ``${VAR:-default}`` in every string of a YAML tree."""
    if isinstance(value, dict):
        return {k: expand_env(v, where=f"{where}.{k}" if where else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_env(v, where=f"{where}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value

    def sub(m: re.Match) -> str:
        name, default = m.group(1), m.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is not None:
            return default
        raise InputError(f"environment variable {name} is not set (write ${{{name}:-default}} for a default)",
                         field=where or None)

    out = _ENV.sub(sub, value)
    if out == "" and _ENV.fullmatch(value):
        return None  # ${X:-} with X unset reads as "not given"
    return out


def apply_overrides(raw: dict, overrides: Sequence[str]) -> dict:
    """Apply ``key.sub=value`` overrides; values are read as YAML (``1e-6``, ``true``, ``[a, b]``)."""
    raw = json.loads(json.dumps(raw))
    for item in overrides:
        if "=" not in item:
            raise InputError(f"--set expects key=value, got {item!r}")
        key, text = item.split("=", 1)
        node = raw
        parts = key.strip().split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise InputError(f"--set {key}: '{p}' is not a mapping")
        node[parts[-1]] = yaml.safe_load(text) if text.strip() else None
    return raw


def load_config(path: str | Path, overrides: Sequence[str] = ()) -> TrainConfig:
    """Read, override, expand and validate a training config; errors name the file and field."""
    path = Path(path)
    if not path.is_file():
        raise InputError("config file not found", file=str(path))
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise InputError(f"not valid YAML: {exc}", file=str(path)) from exc
    raw = apply_overrides(raw, overrides)
    try:
        raw = expand_env(raw)
    except InputError as exc:
        raise InputError(exc.reason, file=str(path), field=exc.field) from exc
    try:
        return TrainConfig.model_validate(raw)
    except ValidationError as exc:
        from reward.jsonl import validation_error

        raise validation_error(exc, file=str(path), record="config") from exc


# ---------------------------------------------------------------------------------- pieces
def judge_spec(cfg: TrainConfig):
    from reward.trl_rewards import JudgeSpec

    j = cfg.judge
    if not j.url and not j.in_process:
        raise InputError("no judge url: start one (scripts/train.sh does when judge.model is set) or set "
                         "judge.in_process: true", field="judge.url")
    # With a url the prompt ids are rendered with the tokenizer of the model the server says it
    # serves, never with judge.model: the configs default that to the model train.sh would serve,
    # which need not be what a given server runs (wrong token ids, meaningless verdicts).
    return JudgeSpec(url=None if j.in_process else j.url, model=j.model if j.in_process else None,
                     served_model=j.served_model, tokenizer=j.tokenizer, mode=j.mode, temperature=j.temperature,
                     cache=j.cache, concurrency=j.concurrency, timeout_s=j.timeout_s)


def build_reward_funcs(cfg: TrainConfig) -> list:
    """The stage's reward functions (from ``reward.trl_rewards``, the one place they live)."""
    from reward.trl_rewards import ErrorRubricReward, MCQRuleReward, RubricRewardFunc

    r = cfg.reward
    if cfg.stage == "mcq":
        return [MCQRuleReward(name=r.name or "mcq_rule")]
    if cfg.stage == "error_rubric":
        return [ErrorRubricReward(judge_spec(cfg), name=r.name or "error_rubric", on_failure=r.on_failure,
                                  alpha=r.alpha, s_max=r.s_max, form=r.form, constrain=r.constrain,
                                  max_tokens=r.max_tokens, max_errors=r.max_errors,
                                  max_description_chars=r.max_description_chars, attempts=r.attempts)]
    return [RubricRewardFunc(judge_spec(cfg), tree=r.tree, router=r.router, router_options=r.router_options,
                             rubric_source=r.rubric_source, scoring=r.scoring, combine=r.combine,
                             scoring_variant=r.scoring_variant, on_failure=r.on_failure,
                             name=r.name or "clinical_rubric")]


def _data_paths(cfg: TrainConfig) -> list[str]:
    return list(cfg.data.paths)


def difficulty_dir(cfg: TrainConfig) -> Path:
    return Path(cfg.difficulty.out_dir or Path(cfg.output_dir) / "difficulty")


def _rank() -> int:
    """This process's global rank under ``accelerate launch``/``torchrun`` (0 when alone)."""
    return int(os.environ.get("RANK", "0"))


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


def _check_filter_results(cfg: TrainConfig, out: Path, dcfg) -> None:
    """Refuse results made with other windows or data: reusing them would train on the wrong rows."""
    from training.difficulty import FilterStats

    path = out / "stats.json"
    stats = FilterStats.model_validate_json(path.read_text(encoding="utf-8"))
    want = {"keep": str(dcfg.keep)} if dcfg.mode == "keep" else {"rubric": str(dcfg.rubric), "rule": str(dcfg.rule)}
    n_rows = len(_all_rows(cfg))
    diffs = [f"windows were {stats.windows}, now {want}"] if stats.windows != want else []
    diffs += [f"{stats.rows} rows were filtered, the data now has {n_rows}"] if stats.rows != n_rows else []
    if diffs:
        raise InputError("these difficulty results were made with other settings (" + "; ".join(diffs)
                         + "): delete the folder to filter again, or set difficulty.out_dir", file=str(path))


def build_train_dataset(cfg: TrainConfig, reward_funcs: list | None = None):
    """The dataset of the run: the data files, or the split the difficulty filter routed here."""
    from training.data import build_dataset, build_healthbench_dataset, build_mcq_dataset
    from training.difficulty import read_rows

    d = cfg.difficulty
    if not d.enabled or d.per_epoch:
        return build_dataset(cfg.data_kind, _data_paths(cfg), system_prompt=cfg.data.system_prompt,
                             limit=cfg.data.limit)
    split = d.use_split or {"mcq": "rule", "error_rubric": "rubric", "clinical_rubric": "keep"}[cfg.stage]
    out = difficulty_dir(cfg)
    if (out / "stats.json").exists():
        log.info("difficulty filter: reusing %s", out)
    once_per_job(out / "stats.json", lambda: run_difficulty(cfg, cfg.model, out, reward_funcs))
    _check_filter_results(cfg, out, d.config("split" if cfg.data_kind == "mcq" else "keep"))
    rows = read_rows(out / f"{split}.jsonl")
    if not rows:
        raise InputError(f"the difficulty filter kept no row for split '{split}'", file=str(out / f"{split}.jsonl"))
    if cfg.data_kind == "mcq":
        return build_mcq_dataset(rows, system_prompt=cfg.data.system_prompt or "none")
    return build_healthbench_dataset(rows, system_prompt=cfg.data.system_prompt or "ours")


def _all_rows(cfg: TrainConfig) -> list[dict]:
    from training.difficulty import read_rows

    rows = [r for p in _data_paths(cfg) for r in read_rows(p)]
    return rows[:cfg.data.limit] if cfg.data.limit else rows


def run_difficulty(cfg: TrainConfig, model: Any, out_dir: Path, reward_funcs: list | None = None,
                   tokenizer: Any = None):
    """Sample, score and split every row of the config's data with ``model``."""
    from training.data import build_healthbench_dataset, build_mcq_dataset
    from training.difficulty import filter_rows, sample_prompts

    d = cfg.difficulty
    raw = _all_rows(cfg)
    if cfg.data_kind == "mcq":
        from reward.trl_rewards import MCQRuleReward

        dataset = build_mcq_dataset(raw, system_prompt=cfg.data.system_prompt or "none")
        dcfg, reward = d.config("split"), MCQRuleReward()  # stages 1-2 route by MCQ correctness
    else:
        dataset = build_healthbench_dataset(raw, system_prompt=cfg.data.system_prompt or "ours")
        dcfg, reward = d.config("keep"), (reward_funcs or build_reward_funcs(cfg))[0]
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


def last_checkpoint(output_dir: str | Path) -> str | None:
    from transformers.trainer_utils import get_last_checkpoint

    return get_last_checkpoint(str(output_dir)) if Path(output_dir).is_dir() else None


def _save_at_end_callback():
    from transformers import TrainerCallback

    class SaveAtEnd(TrainerCallback):
        """Always leave a checkpoint at the last step, so the next run (or epoch) resumes there."""

        def on_step_end(self, args, state, control, **kwargs):
            if state.max_steps and state.global_step >= state.max_steps:
                control.should_save = True
            return control

    return SaveAtEnd()


class TrainResult(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    output_dir: str
    global_step: int
    start_step: int
    resumed_from: str | None
    log_history: list[dict]
    epochs: list[dict] = Field(default_factory=list)


def _step_of(checkpoint: str | None) -> int:
    if not checkpoint:
        return 0
    state = Path(checkpoint) / "trainer_state.json"
    return int(json.loads(state.read_text())["global_step"]) if state.exists() else 0


def make_trainer(cfg: TrainConfig, train_dataset, reward_funcs: list, **arg_overrides: Any):
    from trl import GRPOTrainer

    args = grpo_args(cfg, **arg_overrides)
    world = max(1, int(os.environ.get("WORLD_SIZE", "1")))
    per_step = args.per_device_train_batch_size * args.gradient_accumulation_steps * world
    # the paper's batch is 32 prompts x 8 generations; fewer GPUs than the config assumes change it
    log.info("global batch: %d completions per optimizer step = %s prompts x %d generations "
             "(per_device_train_batch_size %d x gradient_accumulation_steps %d x %d processes)",
             per_step, f"{per_step / args.num_generations:g}", args.num_generations,
             args.per_device_train_batch_size, args.gradient_accumulation_steps, world)
    return GRPOTrainer(model=cfg.model, reward_funcs=reward_funcs, args=args,
                       train_dataset=train_dataset, callbacks=[_save_at_end_callback()])


def train(cfg: TrainConfig) -> TrainResult:
    """Run the stage; resume from the last checkpoint in ``output_dir`` when there is one."""
    if cfg.difficulty.per_epoch:
        return _train_per_epoch(cfg)
    reward_funcs = build_reward_funcs(cfg)
    dataset = build_train_dataset(cfg, reward_funcs)
    trainer = make_trainer(cfg, dataset, reward_funcs)
    ckpt = last_checkpoint(cfg.output_dir)
    if ckpt:
        log.info("resuming from %s", ckpt)
    trainer.train(resume_from_checkpoint=True if ckpt else None)
    return TrainResult(output_dir=cfg.output_dir, global_step=trainer.state.global_step, start_step=_step_of(ckpt),
                       resumed_from=ckpt, log_history=list(trainer.state.log_history))


def _prompts_per_step(args) -> int:
    world = max(1, int(os.environ.get("WORLD_SIZE", "1")))
    return max(1, args.per_device_train_batch_size * args.gradient_accumulation_steps * world // args.num_generations)


def _train_per_epoch(cfg: TrainConfig) -> TrainResult:
    """Stage 3: filter with the current policy before each epoch (see the module docstring)."""
    from training.data import build_healthbench_dataset
    from training.difficulty import FilterStats, read_rows

    reward_funcs = build_reward_funcs(cfg)
    epochs_file = Path(cfg.output_dir) / "epochs.json"
    done: list[dict] = json.loads(epochs_file.read_text()) if epochs_file.exists() else []
    n_epochs = int(math.ceil(float(cfg.grpo.get("num_train_epochs", 1))))
    first_ckpt = last_checkpoint(cfg.output_dir)
    trainer = None
    for epoch in range(len(done), n_epochs):
        out = Path(cfg.output_dir) / "difficulty" / f"epoch-{epoch}"
        # epoch.json (written after the filter) records the step the epoch starts at: an epoch
        # interrupted midway resumes with its own filter result and step budget, instead of
        # re-filtering with a half-trained policy and training a longer epoch
        marker = out / "epoch.json"

        def filter_epoch(epoch: int = epoch, out: Path = out, marker: Path = marker) -> None:
            ckpt = last_checkpoint(cfg.output_dir)
            tokenizer = None
            if ckpt and not (Path(ckpt) / "tokenizer_config.json").exists():
                from transformers import AutoTokenizer

                tokenizer = AutoTokenizer.from_pretrained(cfg.model)
            run_difficulty(cfg, ckpt or cfg.model, out, reward_funcs, tokenizer=tokenizer)
            tmp = marker.with_suffix(".tmp")
            tmp.write_text(json.dumps({"epoch": epoch, "start_step": _step_of(ckpt), "policy": ckpt or cfg.model}))
            tmp.replace(marker)

        if marker.exists():
            log.info("epoch %d: resuming with the filter result in %s", epoch, out)
        once_per_job(marker, filter_epoch)
        start = int(json.loads(marker.read_text())["start_step"])
        stats = FilterStats.model_validate_json((out / "stats.json").read_text())
        kept = read_rows(out / "keep.jsonl")
        ckpt = last_checkpoint(cfg.output_dir)
        if not kept:
            log.warning("epoch %d: the filter kept no row; skipping the epoch", epoch)
            done.append({"epoch": epoch, "kept": 0, "counts": stats.counts, "start_step": start, "end_step": start})
        else:
            dataset = build_healthbench_dataset(kept, system_prompt=cfg.data.system_prompt or "ours")
            args = grpo_args(cfg)
            steps = max(1, math.ceil(len(kept) / _prompts_per_step(args)))
            trainer = make_trainer(cfg, dataset, reward_funcs, max_steps=start + steps, ignore_data_skip=True,
                                   num_train_epochs=1)
            trainer.train(resume_from_checkpoint=ckpt)
            done.append({"epoch": epoch, "kept": len(kept), "counts": stats.counts, "start_step": start,
                         "end_step": trainer.state.global_step})
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
def main(argv: Sequence[str] | None = None) -> int:
    """``python -m training.trl_launcher --config FILE [--set k=v ...]`` (what scripts/train.sh
    runs, under ``accelerate launch`` on GPU machines). ``--print-judge`` prints the judge's
    ``url<TAB>model<TAB>served_model`` (empty fields as ``-``) and exits."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m training.trl_launcher", description=main.__doc__)
    p.add_argument("--config", required=True)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--print-judge", action="store_true")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        cfg = load_config(a.config, a.overrides)
    except InputError as exc:
        print(f"error: {exc}", flush=True)
        return 2
    if a.print_judge:
        j = cfg.judge
        needs = cfg.stage != "mcq" and not j.in_process
        print("\t".join(x or "-" for x in ((j.url if needs else None), (j.model if needs else None),
                                           j.served_model)))
        return 0
    res = train(cfg)
    print(json.dumps({"output_dir": res.output_dir, "global_step": res.global_step, "start_step": res.start_step,
                      "resumed_from": res.resumed_from, "epochs": res.epochs}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
