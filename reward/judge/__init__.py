"""The Boolean judge: one interface, an HTTP backend for vLLM servers and an in-process one.

``make_judge`` picks the backend: ``judge_url`` -> :class:`HTTPJudge` (vLLM, token ids) or
:class:`ChatJudge` (any chat API; ``judge_api``, see ``api.py``), ``judge_model`` alone ->
:class:`TransformersJudge`. Backends are imported lazily (the in-process one needs torch).
"""

from __future__ import annotations

from reward.judge.base import Judge
from reward.judge.cache import VerdictCache
from reward.judge.factory import make_judge
from reward.judge.templates import (
    CHOICE,
    EXPLAIN,
    RELEVANCE,
    URGENCY,
    Template,
    load_template,
)
from reward.judge.types import (
    JSONResult,
    JudgeConfig,
    JudgeItem,
    JudgeStats,
    Message,
    Verdict,
)
from reward.paths import default_cache_dir

__all__ = [
    "CHOICE",
    "EXPLAIN",
    "RELEVANCE",
    "URGENCY",
    "JSONResult",
    "Judge",
    "JudgeConfig",
    "JudgeItem",
    "JudgeStats",
    "Message",
    "Template",
    "Verdict",
    "VerdictCache",
    "default_cache_dir",
    "load_template",
    "make_judge",
]
