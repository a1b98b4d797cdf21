"""The ``memory_plan:`` block of a TRL config: what ``rubricstree train plan`` demands beyond
fitting. Its own module so that ``training.trl_config`` (which validates the block) and
``training.memory_plan`` (which reads it) both import it without importing each other."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["PlanOptions"]


class PlanOptions(BaseModel):
    """``memory_plan:`` in a TRL config: what the plan demands beyond fitting."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    vllm_min_sequences: int = Field(
        8, ge=1, description="full-length sequences the colocated vLLM's KV cache must hold at once (each GPU "
                             "generates per_device_train_batch_size x steps_per_generation; fewer at once queue)")
