"""A TRL training run's configuration: the YAML schema (:class:`TrainConfig`) and its loader.

Data flow: YAML file -> ``--set key.sub=value`` overrides (:func:`apply_overrides`) ->
``${oc.env:VAR,default}`` expanded (:func:`reward.envvars.expand_env`) -> validated
:class:`TrainConfig`; errors name the file and the field. The judge and stage-reward sections are
the shared models of :mod:`reward.settings` (the verl YAML and the CLI read the same keys).
:mod:`training.trl_launcher` runs what this describes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from reward.calibration.gate import JudgeGateSettings
from reward.envvars import expand_env
from reward.errors import InputError
from reward.settings import JudgeSettings, StageRewardSettings
from reward.textio import load_yaml, parse_yaml
from training.judge_server import JudgeServer
from training.plan_options import PlanOptions

__all__ = ["CompletionLogOptions", "DataConfig", "DifficultyOptions", "Stage", "TrainConfig", "apply_overrides", "load_config"]

Stage = Literal["mcq", "error_rubric", "clinical_rubric"]


# ---------------------------------------------------------------------------------- config
class DataConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    paths: list[str] = Field(min_length=1, description="JSONL files of one kind")
    kind: Literal["mcq", "healthbench"] | None = Field(None, description="default: healthbench for stage 3, else mcq")
    system_prompt: str | None = Field(None, description="ours | none | a file; default: none for MCQ, ours for stage 3")
    limit: int | None = Field(None, ge=1)
    exclude: list[str] = Field(
        default_factory=list, description="evaluation JSONL files (HealthBench-Hard, the eval set in use): training "
                                          "rows with the same normalised prompt are dropped and counted")


class CompletionLogOptions(BaseModel):
    """How much of each completion TRL's ``log_completions`` table keeps (``training.trl_logging``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_chars: int | None = Field(2000, ge=1, description="first N characters of each prompt and completion")
    max_rows: int | None = Field(64, ge=1, description="first N rows of the generation batch (whole groups)")


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
    max_new_tokens: int | None = Field(
        None, ge=1, description="default: grpo.max_completion_length (the stage's own budget; a short one cuts "
                                "Qwen3's thinking and makes every question look too hard)")
    batch_size: int = Field(8, ge=1)
    concurrency: int = Field(256, ge=1, description="sample requests in flight to the policy server (one per "
                                                    "sample: 32 prompts x 8 at once)")
    timeout_s: float = Field(1800.0, gt=0, description="seconds one sample request may take before it is retried")
    max_retries: int = Field(3, ge=0, description="retries of a sample request that timed out or failed")
    lost_sample_rounds: int = Field(1, ge=0, description="times a sample still lost after its retries is asked for "
                                                         "again, once every other sample is drawn")
    min_samples: int | None = Field(None, ge=1, description="fewest samples a prompt keeps when some are lost for good "
                                                            "(default: half of n, at least 2)")
    max_failed_fraction: float = Field(0.05, ge=0.0, le=1.0, description=(
        "share of prompts left with fewer than min_samples samples after the retries that is skipped and "
        "counted; above it the filter stops (the server is failing)"))
    rubric: tuple[float, float] = (0.1, 0.4)
    rule: tuple[float, float] = (0.4, 0.7)  # (lo, hi]: lo exclusive
    keep: tuple[float, float] = (0.15, 0.7)
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    epochs_per_run: int | None = Field(
        None, ge=1, description="stage 3: train at most this many epochs, then exit (scripts/train_pipeline.sh "
                                "runs one per launch, so the next epoch's filter gets every GPU)")

    def config(self, mode: str):
        from training.difficulty import DifficultyConfig, Window

        return DifficultyConfig(
            n=self.n, temperature=self.temperature, max_new_tokens=self.max_new_tokens or 1024, mode=mode,
            batch_size=self.batch_size, chat_template_kwargs=self.chat_template_kwargs,
            concurrency=self.concurrency, timeout_s=self.timeout_s, max_retries=self.max_retries,
            lost_sample_rounds=self.lost_sample_rounds, min_samples=self.min_samples,
            max_failed_fraction=self.max_failed_fraction,
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
    # the shared models of reward.settings: the verl YAML and the CLI read the same keys
    judge: JudgeSettings = JudgeSettings()
    judge_server: JudgeServer = Field(
        default_factory=JudgeServer, description="sizing of the judge server train.sh starts (vLLM arguments)")
    memory_plan: PlanOptions = Field(default_factory=PlanOptions, description="what `rubricstree train plan` demands")
    reward: StageRewardSettings = StageRewardSettings()
    judge_gate: JudgeGateSettings = Field(default_factory=JudgeGateSettings, description=(
        "stage 3: refuse a judge whose calibration predicts a detection rate or a critical false-pass rate the "
        "reward cannot survive (reward.calibration.gate; `rubricstree judge calibrate` makes one)"))
    difficulty: DifficultyOptions = DifficultyOptions()
    completion_log: CompletionLogOptions = CompletionLogOptions()
    generation_bias: dict[str, float] = Field(
        default_factory=dict, description="text -> logit bias for transformers generation (sequence_bias); "
                                          "the smoke configs use it so a random policy answers with letters")
    seed: int = 42
    export_dtype: Literal["bfloat16", "float16", "float32"] = Field(
        "bfloat16", description="dtype of the Hugging Face export written at the end of the stage (and of each "
                                "stage-3 epoch): what the next stage, eval, the filter and vllm serve load")
    fsdp_reduce_dtype: Literal["float32", "bfloat16"] | None = Field(
        "float32", description="FSDP2: dtype gradients are reduce-scattered in (accelerate's bf16 default sums "
                               "them in bf16); null keeps accelerate's")
    grpo: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of trl.GRPOConfig")

    @model_validator(mode="before")
    @classmethod
    def _filter_budget(cls, raw: Any) -> Any:
        """The difficulty filter samples with the stage's completion budget unless told otherwise."""
        if isinstance(raw, dict) and isinstance(raw.get("difficulty"), dict) and isinstance(raw.get("grpo"), dict):
            d = raw["difficulty"]
            if d.get("max_new_tokens") is None and raw["grpo"].get("max_completion_length"):
                raw = {**raw, "difficulty": {**d, "max_new_tokens": raw["grpo"]["max_completion_length"]}}
        return raw

    @model_validator(mode="after")
    def _consistent(self) -> TrainConfig:
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
        node[parts[-1]] = parse_yaml(text, where=f"--set {key}") if text.strip() else None
    return raw


def load_config(path: str | Path, overrides: Sequence[str] = ()) -> TrainConfig:
    """Read, override, expand and validate a training config; errors name the file and field."""
    path = Path(path)
    if not path.is_file():
        raise InputError("config file not found", file=str(path))
    try:
        raw = load_yaml(path) or {}
    except (yaml.YAMLError, RecursionError) as exc:
        raise InputError(f"not valid YAML: {exc}", file=str(path)) from exc
    raw = apply_overrides(raw, overrides)
    try:
        raw = expand_env(raw)
    except InputError as exc:
        reason = exc.reason
        if exc.field == "model":  # stages 2-3: the previous stage's checkpoint, never a silent base model
            reason += ("; this stage starts from the previous stage's Hugging Face export: pass "
                       "--set model=<run root>/<previous stage>/hf (scripts/train_pipeline.sh passes it), or "
                       "--set model=Qwen/Qwen3-8B to start from a base model on purpose")
        raise InputError(reason, file=str(path), field=exc.field) from exc
    try:
        return TrainConfig.model_validate(raw)
    except ValidationError as exc:
        from reward.jsonl import validation_error

        raise validation_error(exc, file=str(path), record="config") from exc
