"""What policy generation takes and gives: decoding settings, requests, outputs, helpers.

:class:`GenerationSettings` (decoding; part of an evaluation run's identity), :class:`GenRequest`
(one conversation, ``n`` samples), :class:`GenOutput` (one response or an error, never an empty
response passed off as the model's), :func:`split_reasoning` (a ``<think>`` block split off the
answer a user would see; it lives in ``reward.stages.reasoning``, which the rubric rewards share) and :func:`prompt_seed` (a per-prompt seed independent of order).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from reward.stages.reasoning import split_reasoning

__all__ = ["GenOutput", "GenRequest", "GenerationSettings", "OnDone", "progress", "prompt_seed", "split_reasoning"]


class GenerationSettings(BaseModel):
    """Decoding settings; part of a run's identity (changing them changes the responses)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_new_tokens: int = Field(2048, ge=1, description="tokens generated per response at most")
    temperature: float = Field(0.0, ge=0.0, description="0 = greedy")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="nucleus sampling (only when temperature > 0)")
    top_k: int | None = Field(None, ge=1, description="top-k sampling (only when temperature > 0); None = off")
    seed: int = Field(0, description="sampling seed; with a server each prompt gets seed + hash(prompt key)")
    thinking: bool | None = Field(None, description="chat template's enable_thinking; None = the template's default")


@dataclass(frozen=True)
class GenRequest:
    """One conversation to answer; ``key`` identifies it in the output file.

    ``n`` samples are drawn (``GenOutput.samples``); ``seed`` overrides the per-prompt seed.
    ``structured`` constrains decoding on a vLLM server (its ``structured_outputs``, e.g.
    ``{"json": schema}``); in-process generation ignores it (callers parse and validate anyway).
    """

    key: str
    messages: list[dict[str, Any]]
    n: int = 1
    seed: int | None = None
    structured: dict[str, Any] | None = None


@dataclass(frozen=True)
class GenOutput:
    """One response. ``error`` is set (and ``text`` None) when generation failed.

    ``text``/``reasoning``: the first sample, its ``<think>`` block split off; ``samples``: every
    sample's full text as generated (``n`` of them).
    """

    text: str | None
    finish_reason: str | None = None
    completion_tokens: int | None = None
    reasoning: str | None = None
    error: str | None = None
    samples: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None


OnDone = Callable[[str, GenOutput], None]


def prompt_seed(seed: int, key: str) -> int:
    """A per-prompt seed independent of request order, so a resumed sampled run draws the same."""
    return (seed + int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)) % (2 ** 31)


def progress(total: int, desc: str, unit: str = "resp"):
    """A progress bar on stderr (``reward.progress.bar``: silenced by ``--quiet``)."""
    from reward.progress import bar as progress_bar

    return progress_bar(total, desc=desc, unit=unit)
