"""Generate responses with a checkpoint: through a vLLM/OpenAI-compatible server, or in-process.

Both backends take chat conversations and call ``on_done(key, output)`` as soon as each response
exists, so the caller can append it to disk before the next one arrives. A failure is an output
with ``error`` set, never an empty response passed off as the model's.

- :class:`HTTPGenerator`: ``/v1/chat/completions`` (the server applies the chat template),
  requests in flight bounded by a semaphore, bounded retries with backoff.
- :class:`TransformersGenerator`: batches sorted by length, left padding, the tokenizer's chat
  template, greedy decoding unless a temperature is set.

Reasoning models: a ``<think>...</think>`` block is split off; the text after it is what is
graded (a grader sees the answer a user would see).
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field



class GenerationSettings(BaseModel):
    """Decoding settings; part of a run's identity (changing them changes the responses)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_new_tokens: int = Field(2048, ge=1, description="tokens generated per response at most")
    temperature: float = Field(0.0, ge=0.0, description="0 = greedy")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="nucleus sampling (only when temperature > 0)")
    seed: int = Field(0, description="sampling seed; with a server each prompt gets seed + hash(prompt key)")
    thinking: bool | None = Field(None, description="chat template's enable_thinking; None = the template's default")


@dataclass(frozen=True)
class GenRequest:
    """One conversation to answer; ``key`` identifies it in the output file."""

    key: str
    messages: list[dict[str, Any]]


@dataclass(frozen=True)
class GenOutput:
    """One response. ``error`` is set (and ``text`` None) when generation failed."""

    text: str | None
    finish_reason: str | None = None
    completion_tokens: int | None = None
    reasoning: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


OnDone = Callable[[str, GenOutput], None]


def split_reasoning(text: str) -> tuple[str, str | None]:
    """``(answer, reasoning)``: the text after the last ``</think>`` and the block before it.
    An unclosed ``<think>`` (the budget ran out while thinking) leaves only what preceded it."""
    if "</think>" in text:
        before, answer = text.rsplit("</think>", 1)
        return answer.strip(), before.replace("<think>", "", 1).strip()
    if "<think>" in text:
        before, reasoning = text.split("<think>", 1)
        return before.strip(), reasoning.strip()
    return text, None


def _progress(total: int, desc: str):
    from tqdm.auto import tqdm

    # disable=None: a bar on a terminal, silence in logs and tests
    return tqdm(total=total, desc=desc, unit="resp", disable=None, dynamic_ncols=True)


def prompt_seed(seed: int, key: str) -> int:
    """A per-prompt seed independent of request order, so a resumed sampled run draws the same."""
    return (seed + int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)) % (2 ** 31)


class HTTPGenerator:
    """Responses from an OpenAI-compatible chat endpoint (vLLM ``serve``).

    Args:
        url: the server (``http://host:port`` or ``.../v1``).
        model: the served model name, or a path that the server reports as a model's ``root``.
        settings: decoding settings.
        concurrency: requests in flight at most.
        timeout_s: per-request timeout; max_retries: retries after the first attempt.
        api_key_env: environment variable holding an API key, if the server wants one.
    """

    backend = "http"

    def __init__(self, url: str, model: str, settings: GenerationSettings, *, concurrency: int = 32,
                 timeout_s: float = 600.0, max_retries: int = 3, api_key_env: str = "RUBRICSTREE_GENERATE_API_KEY") -> None:
        import os

        from reward.judge.endpoints import normalise_url

        self.base = normalise_url(url)
        self.settings = settings
        self.concurrency = concurrency
        self.timeout_s, self.max_retries = timeout_s, max_retries
        key = os.environ.get(api_key_env, "")
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.model = self._served_name(model)

    def _served_name(self, model: str) -> str:
        import httpx

        try:
            data = httpx.get(f"{self.base}/models", headers=self._headers, timeout=30).json()["data"]
        except (httpx.HTTPError, KeyError, ValueError) as exc:
            raise ValueError(f"cannot list the models served at {self.base}: {exc}") from exc
        ids = [m.get("id") for m in data]
        if model in ids:
            return model
        by_root = [m["id"] for m in data if m.get("root") == model]
        if len(by_root) == 1:
            return by_root[0]
        raise ValueError(f"the server at {self.base} does not serve '{model}' (it serves {ids}); "
                         "pass the served model name as --model")

    def _body(self, req: GenRequest) -> dict[str, Any]:
        s = self.settings
        body: dict[str, Any] = {"model": self.model, "messages": req.messages, "max_tokens": s.max_new_tokens,
                                "temperature": s.temperature}
        if s.temperature > 0:
            body["top_p"] = s.top_p
            body["seed"] = prompt_seed(s.seed, req.key)
        if s.thinking is not None:
            body["chat_template_kwargs"] = {"enable_thinking": s.thinking}
        return body

    async def _one(self, client, sem: asyncio.Semaphore, req: GenRequest) -> GenOutput:
        import httpx

        last = "no attempt"
        for attempt in range(self.max_retries + 1):
            if attempt:
                await asyncio.sleep(min(30.0, 2.0 ** attempt) * random.uniform(0.5, 1.5))
            try:
                async with sem:
                    resp = await client.post(f"{self.base}/chat/completions", json=self._body(req))
            except httpx.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}"
                continue
            if resp.status_code != 200:
                last = f"HTTP {resp.status_code}: {resp.text[:300]}"
                if resp.status_code in (400, 401, 403, 404, 422):
                    break  # a bad request (e.g. the prompt is longer than the context) stays bad
                continue
            try:
                data = resp.json()
                choice = data["choices"][0]
                text = choice["message"].get("content") or ""
            except (KeyError, IndexError, TypeError, ValueError) as exc:
                last = f"malformed answer: {exc}: {resp.text[:200]}"
                continue
            answer, reasoning = split_reasoning(text)
            reasoning = choice["message"].get("reasoning_content") or choice["message"].get("reasoning") or reasoning
            usage = data.get("usage") or {}
            return GenOutput(answer, choice.get("finish_reason"), usage.get("completion_tokens"), reasoning)
        return GenOutput(None, error=last)

    async def agenerate(self, requests: Sequence[GenRequest], on_done: OnDone, desc: str = "generate") -> None:
        """Async form of :meth:`generate`."""
        import httpx

        sem = asyncio.Semaphore(self.concurrency)
        limits = httpx.Limits(max_connections=self.concurrency)
        bar = _progress(len(requests), desc)
        try:
            async with httpx.AsyncClient(timeout=self.timeout_s, limits=limits, headers=self._headers) as client:
                async def run(req: GenRequest) -> None:
                    out = await self._one(client, sem, req)
                    on_done(req.key, out)  # in the event loop thread: appends never interleave
                    bar.update(1)

                tasks = [asyncio.ensure_future(run(r)) for r in requests]
                try:
                    await asyncio.gather(*tasks)
                except BaseException:
                    for t in tasks:  # a failing callback (a crash) stops the rest cleanly
                        t.cancel()
                    await asyncio.gather(*tasks, return_exceptions=True)
                    raise
        finally:
            bar.close()

    def generate(self, requests: Sequence[GenRequest], on_done: OnDone, desc: str = "generate") -> None:
        """Answer every request, calling ``on_done(key, output)`` as each finishes."""
        asyncio.run(self.agenerate(requests, on_done, desc))

    def close(self) -> None:
        """Nothing to release (clients live only inside :meth:`generate`)."""


@dataclass
class TransformersGenerator:
    """Responses from a transformers causal LM in this process.

    Args:
        model: a model name or local path (a training checkpoint folder).
        settings: decoding settings (greedy when temperature is 0).
        batch_size: conversations per ``generate`` call.
        device: ``"cuda"``, ``"cpu"`` or None (CUDA when available).
        dtype: torch dtype name; default bfloat16 on CUDA, float32 on CPU.
    """

    model: str
    settings: GenerationSettings
    batch_size: int = 8
    device: str | None = None
    dtype: str | None = None
    backend: str = field(default="inprocess", init=False)

    def __post_init__(self) -> None:
        from reward._optional import require

        torch = require("torch", "in-process generation")
        transformers = require("transformers", "in-process generation")
        self.device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.dtype = self.dtype or ("bfloat16" if self.device.startswith("cuda") else "float32")
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(self.model)
        self.tokenizer.padding_side = "left"  # decoder-only: new tokens must follow the prompt directly
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.lm = transformers.AutoModelForCausalLM.from_pretrained(self.model, dtype=getattr(torch, self.dtype))
        self.lm.to(self.device).eval()

    def _render(self, messages: list[dict[str, Any]]) -> str:
        kwargs: dict[str, Any] = {"tokenize": False, "add_generation_prompt": True}
        if self.settings.thinking is not None:
            kwargs["enable_thinking"] = self.settings.thinking
        return self.tokenizer.apply_chat_template(messages, **kwargs)

    def _generation_config(self):
        from transformers import GenerationConfig

        s = self.settings
        eos = {self.tokenizer.eos_token_id}
        model_eos = getattr(self.lm.generation_config, "eos_token_id", None)
        eos |= set(model_eos) if isinstance(model_eos, list) else {model_eos}
        kw: dict[str, Any] = {"max_new_tokens": s.max_new_tokens, "pad_token_id": self.tokenizer.pad_token_id,
                              "eos_token_id": sorted(e for e in eos if e is not None)}
        # an explicit config: the checkpoint's own generation_config (sampling, say) must not
        # silently decide how it is evaluated
        if s.temperature > 0:
            kw.update(do_sample=True, temperature=s.temperature, top_p=s.top_p)
        else:
            kw.update(do_sample=False)
        return GenerationConfig(**kw)

    def generate(self, requests: Sequence[GenRequest], on_done: OnDone, desc: str = "generate") -> None:
        """Answer every request, calling ``on_done(key, output)`` after each batch."""
        import torch

        texts = {r.key: self._render(r.messages) for r in requests}
        lengths = {k: len(self.tokenizer(t, add_special_tokens=False)["input_ids"]) for k, t in texts.items()}
        # longest first: an out-of-memory shows up in the first batch, not after an hour
        order = sorted(requests, key=lambda r: -lengths[r.key])
        config = self._generation_config()
        eos = set(config.eos_token_id)
        bar = _progress(len(requests), desc)
        try:
            for start in range(0, len(order), self.batch_size):
                batch = order[start:start + self.batch_size]
                if self.settings.temperature > 0:
                    torch.manual_seed(prompt_seed(self.settings.seed, batch[0].key))
                try:
                    enc = self.tokenizer([texts[r.key] for r in batch], add_special_tokens=False,
                                         padding=True, return_tensors="pt").to(self.device)
                    with torch.inference_mode():
                        out = self.lm.generate(**enc, generation_config=config)
                    new = out[:, enc["input_ids"].shape[1]:].tolist()
                except Exception as exc:  # OOM, a too-long prompt: these responses fail, visibly
                    for r in batch:
                        on_done(r.key, GenOutput(None, error=f"{type(exc).__name__}: {exc}"))
                    bar.update(len(batch))
                    continue
                for r, ids in zip(batch, new):
                    stop = next((i for i, t in enumerate(ids) if t in eos), None)
                    kept = ids if stop is None else ids[:stop]
                    text = self.tokenizer.decode(kept, skip_special_tokens=True)
                    answer, reasoning = split_reasoning(text)
                    on_done(r.key, GenOutput(answer, "length" if stop is None else "stop", len(kept), reasoning))
                bar.update(len(batch))
        finally:
            bar.close()

    def close(self) -> None:
        """Free the model (the in-process judge may need the memory next)."""
        import gc

        import torch

        self.lm = None
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def make_generator(model: str, settings: GenerationSettings, *, generate_url: str | None = None,
                   concurrency: int = 32, batch_size: int = 8):
    """The server backend when ``generate_url`` is given, else the in-process one.

    Args:
        model: served model name (with a URL) or model path/name (in-process).
        settings: decoding settings.
        generate_url: an OpenAI-compatible server, or None for in-process generation.
        concurrency: server requests in flight; batch_size: in-process batch size.
    """
    if generate_url:
        return HTTPGenerator(generate_url, model, settings, concurrency=concurrency)
    return TransformersGenerator(model, settings, batch_size=batch_size)
