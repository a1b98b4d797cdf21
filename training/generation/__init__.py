"""Policy generation: one layer for evaluation, the difficulty filter and data pipelines.

``make_generator`` picks the backend: a URL -> :class:`HTTPGenerator` (a vLLM/OpenAI-compatible
``/v1/chat/completions`` server, with :mod:`reward.serving`'s URL, API-key and retry policy),
else :class:`TransformersGenerator` (in this process). Both take :class:`GenRequest` lists and
call ``on_done(key, GenOutput)`` as each response exists, so callers append it to disk at once.
"""

from __future__ import annotations

from typing import Any

from training.generation.settings import (
    GenerationSettings,
    GenOutput,
    GenRequest,
    OnDone,
    prompt_seed,
    split_reasoning,
)

__all__ = ["GenOutput", "GenRequest", "GenerationSettings", "HTTPGenerator", "OnDone", "TransformersGenerator",
           "make_generator", "prompt_seed", "split_reasoning"]


def __getattr__(name: str) -> Any:  # the backends load lazily (the in-process one needs torch)
    if name == "HTTPGenerator":
        from training.generation.http import HTTPGenerator

        return HTTPGenerator
    if name == "TransformersGenerator":
        from training.generation.inprocess import TransformersGenerator

        return TransformersGenerator
    raise AttributeError(name)


def make_generator(model: Any, settings: GenerationSettings, *, generate_url: str | None = None,
                   concurrency: int = 32, batch_size: int = 8, **kwargs: Any):
    """The server backend when ``generate_url`` is given, else the in-process one.

    Args:
        model: served model name or path (with a URL; None = the first the server lists), or a
            model path/name or loaded model (in-process).
        settings: decoding settings.
        generate_url: an OpenAI-compatible server, or None for in-process generation.
        concurrency: server requests in flight; batch_size: in-process batch size.
        kwargs: passed to the backend (``chat_template_kwargs``, ``retry``, ``tokenizer``, ...).
    """
    if generate_url:
        from training.generation.http import HTTPGenerator

        return HTTPGenerator(generate_url, model, settings, concurrency=concurrency, **kwargs)
    from training.generation.inprocess import TransformersGenerator

    return TransformersGenerator(model, settings, batch_size=batch_size, **kwargs)
