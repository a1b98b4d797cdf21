"""The settings models of the judge and of each stage reward: one schema per concept.

TRL YAML (``training.trl_launcher``: ``judge:`` and ``reward:``), verl YAML (the
``reward_kwargs`` of ``reward.integrations.verl.settings.VerlRewardSettings``: ``judge:``,
``error_rubric:`` and the rubric keys) and the CLI all validate against these models, so a key
that works in one works in the others and a typo fails at load time naming its field. Every model
is frozen and refuses unknown keys; every field says what it does.

Data flow: a mapping from a config -> :class:`JudgeSettings` -> :meth:`JudgeSettings.build`
(``reward.judge.make_judge``) -> a live judge; the stage settings go to the stage rewards in
``reward.stages`` and their trainer adapters in ``reward.integrations``.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from reward.judge.settings import JudgeSettings

__all__ = ["ErrorRubricSettings", "JudgeSettings", "RubricRewardSettings",
           "RubricScoringSettings", "StageRewardSettings"]


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


class RubricScoringSettings(_Settings):
    """Stage 3 scoring: which tree, which router, which rubric items, how verdicts become a score."""

    tree: str | None = Field(None, description="taxonomy YAML; null: the packaged one")
    router: Literal["static", "llm", "embedding"] = Field("embedding", description="embedding (default), llm or "
                                                                                     "static (every leaf)")
    router_options: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of the router "
                                                                             "(axes, threshold, ...)")
    rubric_source: Literal["both", "tree", "rows"] = Field(
        "both", description="tree leaves and row items / tree only / row items only (the paper's stage 3)")
    scoring: Literal["hard", "soft"] = Field("hard", description="judge yes/no or p_yes")
    combine: Literal["tree", "points", "mean"] = Field("mean", description="the reward when both scores exist "
                                                                            "(mean: tree and rows, the stage-3 default)")
    scoring_variant: Literal["paper", "penalty", "active", "penalty+active", "severity"] | None = Field(
        None, description="tree score variant (reward.scoring.variants); null: the default one")
    grade: Literal["answer", "full"] = Field(
        "answer", description="stage 3 / rubricstree score: answer: the judge sees the text after </think>; "
                              "full: the whole completion (stage 2 always grades the full trajectory)")
    clip_below_zero: bool = Field(
        False, description="clip a rollout's rubric points score at 0 (HealthBench per-example style); "
                           "default off: a harmful answer scores below an empty one")
    format_failure_score: float | str | None = Field(
        "floor", description="score of an unclosed <think> (no final answer), counted as format_failures: "
                             "floor (0.1 below the worst score a finished answer to the row can get; floor-M: "
                             "M below), a number, or null: unscored")
    applicability: bool = Field(
        True, description="decide once per prompt which routed conditional leaves apply; the others are "
                           "not graded or scored (reward.router.applicability, docs/scoring.md)")
    confirm_failures: bool = Field(
        True, description="read each failing verdict (leaf or rubric item) again with another prompt, a third "
                           "time when the two disagree; the majority stands (reward.stages.confirm, docs/scoring.md)")

    @field_validator("format_failure_score")
    @classmethod
    def _failure_score(cls, v):
        if isinstance(v, str) and not re.fullmatch(r"floor(-\d+(\.\d+)?)?", v):
            raise ValueError(f"a number, null, 'floor' or 'floor-MARGIN' (e.g. floor-0.2), got {v!r}")
        return v


class RubricRewardSettings(RubricScoringSettings):
    """Stage 3: the rubric reward as a trainer reward function."""

    on_failure: Literal["skip", "raise"] = Field("skip", description="skip: None for an unscored rollout; raise")
    name: str = Field("clinical_rubric", description="metric key of the reward")


class StageRewardSettings(ErrorRubricSettings, RubricScoringSettings):
    """The ``reward:`` block of a TRL config: the keys of every stage in one flat mapping.

    ``name`` and ``on_failure`` apply to whichever stage runs; the stage 2 keys are
    :class:`ErrorRubricSettings`, the stage 3 keys :class:`RubricScoringSettings`.
    """

    name: str | None = Field(None, description="metric key; default mcq_rule / error_rubric / clinical_rubric")
    on_failure: Literal["skip", "raise"] = Field("skip", description="skip: None for an unscored rollout; raise")

    def error_rubric(self) -> ErrorRubricSettings:
        return ErrorRubricSettings.model_validate(self.model_dump(include=set(ErrorRubricSettings.model_fields)))

    def rubric(self) -> RubricRewardSettings:
        keys = set(RubricScoringSettings.model_fields) | {"on_failure"}
        return RubricRewardSettings.model_validate({**self.model_dump(include=keys),
                                                    "name": self.name or "clinical_rubric"})
