"""Text and JSON requests through the one generation layer, with a durable call cache.

:class:`SynthLLM` wraps a generator from :mod:`training.generation` (vLLM HTTP or in-process):
:meth:`ask` sends a batch of chat prompts (the generator's own concurrency and progress bar) and
returns each text or None; :meth:`ask_json` parses a JSON object from each answer and validates
it, asking again (a new attempt is a new cache key and a new sampling seed) at most ``attempts``
times, then reports the last error. Every successful answer is appended to the call cache first.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

from training.generation import GenOutput, GenRequest
from training.synth.store import CallCache, request_key

__all__ = ["SynthLLM", "parse_json_object"]

T = TypeVar("T")
Messages = list[dict[str, Any]]

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def parse_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in ``text`` (a fenced block, or the span from the first ``{`` that
    decodes). Raises ValueError naming what was wrong."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for cand in candidates:
        for start in (i for i, ch in enumerate(cand) if ch == "{"):
            try:
                obj, _ = decoder.raw_decode(cand[start:])
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                return obj
    raise ValueError(f"no JSON object in the answer: {text[:120]!r}")


class SynthLLM:
    """One role (actor or critic) over a generator.

    Args:
        generator: ``generate(requests, on_done, desc)`` as in :mod:`training.generation`.
        model_id: names the model in cache keys.
        settings: decoding settings (dict) in cache keys.
        cache: the durable call cache (None: no cache).
        attempts: JSON attempts per prompt before the prompt counts as failed.
        structured: send JSON schemas to the server (vLLM ``structured_outputs``) where given.
    """

    def __init__(self, generator: Any, *, model_id: str, settings: dict[str, Any] | None = None,
                 cache: CallCache | None = None, attempts: int = 2, structured: bool = False) -> None:
        self.generator = generator
        self.model_id = model_id
        self.settings = settings or {}
        self.cache = cache
        self.attempts = max(1, attempts)
        self.structured = structured
        self.calls = 0  # generator calls made (cache hits excluded)

    def ask(self, prompts: dict[str, Messages], *, attempt: int = 0, desc: str = "generate",
            schema: dict[str, Any] | None = None) -> dict[str, tuple[str | None, str | None]]:
        """``{key: (text, error)}`` for each prompt; cached answers are not asked again. With
        ``schema`` (and ``structured`` on), a vLLM server constrains decoding to it."""
        structured = {"json": schema} if schema is not None and self.structured else None
        out: dict[str, tuple[str | None, str | None]] = {}
        todo: list[GenRequest] = []
        ckeys: dict[str, str] = {}
        for key, messages in prompts.items():
            ck = request_key(self.model_id, {**self.settings, "structured": structured}, messages, attempt)
            ckeys[key] = ck
            hit = self.cache.get(ck) if self.cache is not None else None
            if hit is not None:
                out[key] = (hit, None)
            else:
                todo.append(GenRequest(key=f"{key}#a{attempt}", messages=messages, structured=structured))

        def done(rkey: str, res: GenOutput) -> None:
            key = rkey.rsplit("#a", 1)[0]
            self.calls += 1
            if res.ok and res.text is not None:
                if self.cache is not None:
                    self.cache.put(ckeys[key], res.text)
                out[key] = (res.text, None)
            else:
                out[key] = (None, res.error or "no text")

        if todo:
            self.generator.generate(todo, done, desc=desc)
        for key in prompts:
            out.setdefault(key, (None, "the generator returned nothing for this prompt"))
        return out

    def ask_json(self, prompts: dict[str, Messages], validate: Callable[[dict[str, Any]], T], *,
                 desc: str = "generate", round_: int = 0, schema: dict[str, Any] | None = None) -> dict[str, tuple[T | None, str | None]]:
        """``{key: (value, error)}``: ``validate`` turns the parsed object into a value or raises
        ValueError; a prompt that fails every attempt gets ``(None, last error)``. ``round_`` (a
        loop's round) is part of each attempt's identity, so a prompt repeated in a later round is
        asked afresh (a new seed), not answered from the cache with the answer that failed."""
        results: dict[str, tuple[T | None, str | None]] = {}
        pending = dict(prompts)
        for attempt in range(self.attempts):
            if not pending:
                break
            answers = self.ask(pending, attempt=round_ * self.attempts + attempt, desc=f"{desc} (try {attempt + 1})" if attempt else desc, schema=schema)
            nxt: dict[str, Messages] = {}
            for key, (text, err) in answers.items():
                if text is None:
                    results[key] = (None, f"generation failed: {err}")
                    nxt[key] = pending[key]
                    continue
                try:
                    results[key] = (validate(parse_json_object(text)), None)
                except (ValueError, TypeError, KeyError) as exc:
                    results[key] = (None, f"{type(exc).__name__}: {exc}")
                    nxt[key] = pending[key]
            pending = nxt
        return results


def build_roles(*, model: str | None, generate_url: str | None, critic_model: str | None, critic_url: str | None,
                settings: Any, cache: CallCache | None, concurrency: int = 8, batch_size: int = 4,
                attempts: int = 2, structured: bool = True) -> tuple[SynthLLM, SynthLLM]:
    """Actor and critic over the generation layer; one generator when both name the same backend."""
    from training.generation import make_generator

    if not model and not generate_url:
        raise ValueError("give a generator: --generate-url URL (a vLLM server) or --model PATH (in-process)")
    actor_gen = make_generator(model, settings, generate_url=generate_url, concurrency=concurrency,
                               batch_size=batch_size)
    c_model, c_url = critic_model or model, critic_url or generate_url
    same = (c_model, c_url) == (model, generate_url)
    critic_gen = actor_gen if same else make_generator(c_model, settings, generate_url=c_url,
                                                       concurrency=concurrency, batch_size=batch_size)
    dump = settings.model_dump()
    actor = SynthLLM(actor_gen, model_id=f"{generate_url or ''}|{model}", settings=dump, cache=cache, attempts=attempts,
                     structured=structured and bool(generate_url))
    critic = SynthLLM(critic_gen, model_id=f"{c_url or ''}|{c_model}", settings=dump, cache=cache, attempts=attempts,
                      structured=structured and bool(c_url))
    return actor, critic
