"""The settings models of the judge and of each stage reward: one schema per concept.

:class:`RewardSettings` is the stage-3 reward's recipe and its only schema: the router and its
options, the rubric source, how verdicts become a score (scoring, combine, variant, clipping,
the score of an unfinished ``<think>``), and the two judge steps that guard the score
(applicability, failure confirmation). Its defaults are the documented stage-3 recipe
(docs/training.md, ``configs/*/stage3_clinical_rubric.yaml``): the embedding router, the tree's
leaves and the row's rubric items averaged, ``severity`` prices, both steps on. It is

- the options of every command that scores (``rubricstree.reward_options`` generates them from
  the fields that name a ``flag``, as ``rubricstree.judge_options`` does for the judge);
- the TRL ``RubricRewardFunc`` (:class:`RubricRewardSettings`: plus ``name`` and ``on_failure``)
  and the ``reward:`` block of a TRL YAML (:class:`StageRewardSettings`);
- the stage-3 keys of verl's ``reward_kwargs``
  (``reward.integrations.verl.settings.VerlRewardSettings`` derives from it);
- what each run records beside its results (:meth:`RewardSettings.record`).

The reward is built in one place, :meth:`RewardSettings.build` (``reward.stages.build``). To add
a step: a field here (with ``json_schema_extra=_flag("--its-flag")`` for the command line) and a
keyword argument of the same name on ``reward.stages.rubric_reward.RubricReward``; every field
that is not about the router or the rubric source is passed to it by name
(:meth:`RewardSettings.engine_kwargs`), so nothing else changes.

Every model is frozen and refuses unknown keys; every field says what it does.
"""

from __future__ import annotations

import re
import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from reward.judge.settings import JudgeSettings

__all__ = ["ErrorRubricSettings", "JudgeSettings", "RewardSettings", "RubricRewardSettings",
           "RubricScoringSettings", "StageRewardSettings", "reward_flags"]

DEFAULT_SCORING_VARIANT = "severity"  # reward.scoring.variants.DEFAULT_SCORING_VARIANT (checked by a test)
VARIANTS = ("paper", "penalty", "active", "penalty+active", "severity")
# the fields that choose the router and the rubric items; every other recipe field is RubricReward's
ROUTING_FIELDS = ("tree", "router", "router_options", "rubric_source")
# the fields that choose how readings become verdicts (the judge's calibration, a second judge): built
# by reward.stages.panel, not RubricReward's keyword arguments
CALIBRATION_FIELDS = ("posterior", "posterior_prior", "panel_judge", "panel_leaves")


def _flag(name: str, **extra: Any) -> dict[str, Any]:
    """Field metadata for the generated command-line option (``rubricstree.reward_options``)."""
    return {"flag": name, **extra}


class _Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ErrorRubricSettings(_Settings):
    """Stage 2: the error-rubric reward (``reward.stages.error_rubric``)."""

    alpha: float = Field(1.0, ge=0.0, description="weight of the reasoning penalty (the paper chose 1.0)")
    s_max: float = Field(4.0, gt=0.0, description="severity sum at which the penalty saturates to 1")
    form: Literal["subtract", "multiply", "convex"] = Field(
        "subtract", description="subtract: c - alpha*P; multiply: c * (1 - alpha*P); "
                                "convex (the paper's trade-off): alpha*(1 - P) + (1 - alpha)*c, alpha in [0, 1]")
    max_tokens: int = Field(1024, ge=16, description="judge decoding budget for the error list")
    max_errors: int = Field(12, ge=1, description="most errors the judge may list")
    max_description_chars: int = Field(400, ge=1, description="longest error description")
    constrain: Literal["json", "regex"] = Field(
        "json", description="json: vLLM JSON-schema decoding; regex: the same shape without free whitespace")
    attempts: int = Field(3, ge=1, le=10, description="judge parse attempts before a failure")
    show_key: bool = Field(True, description="show the judge the answer key")
    strict: bool = Field(False, description="an invalid error entry fails the rollout instead of being dropped")

    @model_validator(mode="after")
    def _convex_alpha(self):
        if self.form == "convex" and self.alpha > 1.0:
            raise ValueError(f"form 'convex' needs alpha in [0, 1], got {self.alpha}")
        return self


class RewardSettings(_Settings):
    """The stage-3 reward's recipe (see the module docstring); the defaults are the stage-3 recipe."""

    tree: str | None = Field(None, description="taxonomy YAML (not given or null: the packaged one)",
                             json_schema_extra=_flag("--taxonomy"))
    router: Literal["static", "llm", "embedding"] = Field(
        "embedding", description="embedding (offline, no judge call), llm (the judge walks the tree) or static "
                                 "(every leaf)", json_schema_extra=_flag("--router"))
    router_options: dict[str, Any] = Field(
        default_factory=dict, description="keyword arguments of the router: threshold, emergency_threshold, axes, "
                                          "...", json_schema_extra=_flag("--router-option"))
    rubric_source: Literal["both", "tree", "rows"] = Field(
        "both", description="both: the routed tree leaves and the row's rubric items; tree: leaves only; rows: the "
                            "row's items only (the paper's stage 3; no routing, each item graded once)",
        json_schema_extra=_flag("--rubric-source"))
    scoring: Literal["hard", "soft"] = Field("hard", description="hard: the judge's yes/no; soft: its p_yes",
                                             json_schema_extra=_flag("--scoring"))
    combine: Literal["tree", "points", "mean"] = Field(
        "mean", description="the reward when a rollout has both scores: tree, points, or mean (their average)",
        json_schema_extra=_flag("--combine"))
    scoring_variant: Literal["paper", "penalty", "active", "penalty+active", "severity"] = Field(
        DEFAULT_SCORING_VARIANT, description="tree score variant (reward.scoring.variants): severity prices a "
                                             "failure by its harm", json_schema_extra=_flag("--scoring-variant"))
    grade: Literal["answer", "full"] = Field(
        "answer", description="answer: the judge sees the text after </think> (an unclosed think block is a format "
                              "failure); full: the whole completion", json_schema_extra=_flag("--grade"))
    clip_below_zero: bool = Field(
        False, description="clip the rubric points score at 0 (HealthBench per-example style); off: a harmful "
                           "answer scores below an empty one", json_schema_extra=_flag("--clip-below-zero"))
    format_failure_score: float | str | None = Field(
        "floor", description="score of an unclosed <think> (no final answer), counted as format_failures: floor "
                             "(0.1 below the worst score a finished answer to the row can get; floor-M: M below), "
                             "a number, or none: unscored", json_schema_extra=_flag("--format-failure-score"))
    applicability: bool = Field(
        True, description="decide once per prompt which routed conditional leaves apply; the others are not graded "
                          "or scored (tree leaves only)", json_schema_extra=_flag("--applicability"))
    applicability_threshold: float = Field(
        0.5, ge=0.0, le=1.0, description="p(situation present) below which a conditional leaf is not applicable",
        json_schema_extra=_flag("--applicability-threshold"))
    confirm_failures: bool = Field(
        True, description="read each failing verdict again with another prompt, a third time when the two "
                          "disagree; the majority stands (tree path; rows: each item graded once)",
        json_schema_extra=_flag("--confirm-failures"))
    posterior: Literal["auto", "on", "off"] = Field(
        "auto", description="score each leaf at P(met | its readings) from the judge's calibration "
                            "(reward.scoring.posterior); auto: when the judge has a calibration the gate passes; on: "
                            "required (refused without one); off: the readings as they are",
        json_schema_extra=_flag("--posterior"))
    posterior_prior: float = Field(
        0.1, gt=0.0, lt=1.0, description="P(a reply fails a leaf that applies) before any reading (posterior)",
        json_schema_extra=_flag("--posterior-prior"))
    panel_judge: str | None = Field(
        None, description="a second judge (a server URL, or a model path run in process) that reads the "
                          "panel_leaves once per reply; its readings enter the posterior (needs its own "
                          "calibration)", json_schema_extra=_flag("--panel-judge"))
    panel_leaves: Literal["critical", "flagged", "all"] = Field(
        "critical", description="what the second judge reads: critical leaves, critical leaves and those the first "
                                "judge's calibration flags (systematic, one-sided, error above 0.25), or every leaf",
        json_schema_extra=_flag("--panel-leaves"))

    @field_validator("scoring_variant", mode="before")
    @classmethod
    def _variant(cls, v):
        return DEFAULT_SCORING_VARIANT if v is None else v

    @field_validator("format_failure_score", mode="before")
    @classmethod
    def _failure_score(cls, v):
        if isinstance(v, str) and v.strip().lower() in ("none", "null", ""):
            return None
        if isinstance(v, str):
            try:
                return float(v)
            except ValueError:
                pass
            if not re.fullmatch(r"floor(-\d+(\.\d+)?)?", v):
                raise ValueError(f"a number, none, 'floor' or 'floor-MARGIN' (e.g. floor-0.2), got {v!r}")
        return v

    # ------------------------------------------------------------------ use
    def engine_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of ``RubricReward`` these settings set (every field but the routing ones)."""
        return {k: v for k, v in self.model_dump().items()
                if k not in ROUTING_FIELDS + CALIBRATION_FIELDS and k in RewardSettings.model_fields}

    def recipe(self) -> RewardSettings:
        """The recipe alone (a subclass's trainer keys dropped)."""
        return RewardSettings.model_validate(self.model_dump(include=set(RewardSettings.model_fields)))

    def record(self) -> dict[str, Any]:
        """What a run writes down about its reward: every recipe field, by name."""
        return self.recipe().model_dump(mode="json")

    def build(self, judge: Any, *, tree: Any = None, router: Any = None, on_failure: str = "skip",
              cache_routing: bool = True, applicability_scope: str | None = None):
        """The reward of these settings (``reward.stages.build.build_reward``): a ``RubricReward``,
        or with ``rubric_source: rows`` a ``RowRubricReward``. ``tree``/``router``: already built
        ones (tests, a command that routes first); ``judge``: a live judge."""
        from reward.stages.build import build_reward

        return build_reward(self, judge, tree=tree, router=router, on_failure=on_failure,
                            cache_routing=cache_routing, applicability_scope=applicability_scope)


RubricScoringSettings = RewardSettings  # the name before the recipe had its own model


class MonitorSettings(_Settings):
    """Thresholds of the gaming monitors (None: that monitor logs but never warns)."""

    length_correlation: float | None = Field(0.5, description="warn when the reward's correlation with length "
                                                              "inside groups exceeds this")
    escalation_share: float | None = Field(0.2, description="warn when this share of rollouts on routine prompts "
                                                            "escalate to emergency care")
    refusal_share: float | None = Field(0.2, description="warn when this share of rollouts deflect without help")
    judge_failure_share: float | None = Field(0.1, description="warn when this share of rollouts is unscored")
    leaf_drop: float | None = Field(0.3, description="warn when a leaf's pass rate falls this far below its mean "
                                                     "over the first steps")
    baseline_steps: int = Field(3, ge=1, description="the steps whose per-leaf pass rates are the baseline")


class RubricRewardSettings(RewardSettings):
    """Stage 3: the rubric reward as a trainer reward function (TRL ``RubricRewardFunc``)."""

    on_failure: Literal["skip", "group_mean", "raise"] = Field(
        "skip", description="skip: None for an unscored rollout (alone in TRL: left out of its group); group_mean: the "
                            "mean of its group's scored rollouts (beside other reward functions); raise")
    name: str = Field("clinical_rubric", description="metric key of the reward")
    monitors: MonitorSettings = Field(default_factory=MonitorSettings, description="gaming monitors' thresholds")


class StageRewardSettings(ErrorRubricSettings, RewardSettings):
    """The ``reward:`` block of a TRL config: the keys of every stage in one flat mapping.

    ``name`` and ``on_failure`` apply to whichever stage runs; the stage 2 keys are
    :class:`ErrorRubricSettings`, the stage 3 keys :class:`RewardSettings`.
    """

    name: str | None = Field(None, description="metric key; default mcq_rule / error_rubric / clinical_rubric")
    on_failure: Literal["skip", "group_mean", "raise"] = Field(
        "skip", description="skip: None for an unscored rollout (alone in TRL: left out of its group); group_mean: the "
                            "mean of its group's scored rollouts (beside other reward functions); raise")
    records: bool = Field(
        True, description="stage 3: write each rollout's score record to <output_dir>/rubric_records/step-N.jsonl "
                          "(`rubricstree inspect <output_dir>` opens them)")
    monitors: MonitorSettings = Field(default_factory=MonitorSettings, description="gaming monitors' thresholds")

    def error_rubric(self) -> ErrorRubricSettings:
        return ErrorRubricSettings.model_validate(self.model_dump(include=set(ErrorRubricSettings.model_fields)))

    def rubric(self) -> RubricRewardSettings:
        keys = set(RewardSettings.model_fields) | {"on_failure", "monitors"}
        return RubricRewardSettings.model_validate({**self.model_dump(include=keys),
                                                    "name": self.name or "clinical_rubric"})


# ---------------------------------------------------------------------- command-line options
def _value_type(annotation: Any) -> Any:
    """The type a command line parses for a field: Literals and mixed unions become ``str``
    (pydantic checks the value), ``X | None`` stays optional."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is typing.Literal:
        return str
    if annotation is bool or annotation is float or annotation is int:
        return annotation
    if len(args) == 1 and args[0] in (str, float, int):
        return args[0] | None
    return str | None


def reward_flags() -> dict[str, dict[str, Any]]:
    """``{field: {"flag", "help", "default", "type", "choices"}}``: the reward options every command
    that scores takes (``rubricstree.reward_options``)."""
    out = {}
    for name, field in RewardSettings.model_fields.items():
        meta = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        if "flag" not in meta:
            continue
        default = field.default_factory() if field.default_factory is not None else field.default
        choices = typing.get_args(field.annotation) if typing.get_origin(field.annotation) is typing.Literal else ()
        out[name] = {"flag": meta["flag"], "help": field.description, "default": default,
                     "type": _value_type(field.annotation), "choices": tuple(choices)}
    return out
