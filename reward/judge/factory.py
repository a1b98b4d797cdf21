"""``make_judge``: the one factory of a live judge from its parts (``JudgeSettings.build`` calls it).

Backends are imported lazily (the in-process one needs torch): ``judge_url`` -> :class:`HTTPJudge`
(vLLM, token ids) or :class:`ChatJudge` (any chat API; ``judge_api``, see ``api.py``),
``judge_model`` alone -> :class:`TransformersJudge`.
"""

from __future__ import annotations

import os

from reward.judge.base import Judge
from reward.judge.cache import VerdictCache
from reward.judge.types import JudgeConfig

REVISION_ENV = "RUBRICSTREE_JUDGE_REVISION"


def make_judge(*, judge_url: str | list[str] | None = None, judge_model: str | None = None,
               served_model: str | None = None, tokenizer: str | None = None,
               config: JudgeConfig | None = None, cache: VerdictCache | bool | None = True,
               judge_api: str = "auto", **kwargs) -> Judge:
    """Build a judge.

    Args:
        judge_url: one URL, a comma-separated list or a list of vLLM endpoints.
        judge_model: in-process model path/name; with ``judge_url``, the tokenizer source.
        served_model: the model name the server serves (default: the first one it lists).
        cache: a :class:`VerdictCache`, True for the default location, False/None for none.
        judge_api: ``completions`` | ``chat`` | ``auto`` (``reward.judge.api``), with ``judge_url``.
        revision (in ``kwargs``; default ``$RUBRICSTREE_JUDGE_REVISION``): a label naming the
            judge's weights, part of its identity; a served judge that does not report its
            weights needs one to use the verdict cache (``reward.judge.identity``).
    """
    if not kwargs.get("revision") and os.environ.get(REVISION_ENV):
        kwargs["revision"] = os.environ[REVISION_ENV]  # names the judge's weights where nothing else can
    if cache is True:
        cache = VerdictCache()
    elif cache is False:
        cache = None
    if judge_url:
        from reward.judge.http import HTTPJudge
        from reward.serving import JUDGE_API_KEY_ENV, first_served_model, split_urls

        urls = split_urls(judge_url)
        from reward.judge.api import chat_judge_if_chosen

        if (chat := chat_judge_if_chosen(urls, judge_api, served_model, config, cache, kwargs)) is not None:
            return chat
        model = served_model or first_served_model(urls, api_key_env=kwargs.get("api_key_env") or JUDGE_API_KEY_ENV)
        return HTTPJudge(urls, model, tokenizer=tokenizer or judge_model, config=config, cache=cache, **kwargs)
    if judge_model:
        from reward.judge.inprocess import TransformersJudge

        return TransformersJudge(judge_model, config=config, cache=cache, **kwargs)
    raise ValueError("give a judge: --judge-url URL (a vLLM server) or --judge-model PATH (in-process)")
