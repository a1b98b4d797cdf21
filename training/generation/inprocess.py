"""Policy responses from a transformers causal LM in this process.

Batches sorted by length (longest first, so an out-of-memory shows in the first batch), left
padding, the tokenizer's chat template, an explicit generation config (greedy unless a
temperature is set; the checkpoint's own ``generation_config`` does not decide), ``n`` samples
per prompt with ``num_return_sequences``, decoding cut at the first end-of-sequence token. The
model is a name/path (loaded here, on this rank's GPU in bf16 when there is one) or an already
loaded model (the trainer's policy: its train/eval mode is restored afterwards and it is not freed).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from training.generation.settings import (
    GenerationSettings,
    GenOutput,
    GenRequest,
    OnDone,
    progress,
    prompt_seed,
    split_reasoning,
)

__all__ = ["TransformersGenerator"]


class TransformersGenerator:
    """Responses from a transformers causal LM in this process.

    Args:
        model: a model name or local path (a training checkpoint folder), or a loaded model.
        settings: decoding settings (greedy when temperature is 0).
        batch_size: conversations per ``generate`` call.
        device: ``"cuda"``, ``"cpu"`` or None (this rank's GPU when available).
        dtype: torch dtype name; default bfloat16 on CUDA, float32 on CPU.
        tokenizer: needed with a loaded model that carries no name to load one from.
        chat_template_kwargs: extra chat-template options (``settings.thinking`` wins).
    """

    backend = "inprocess"

    def __init__(self, model: Any, settings: GenerationSettings, *, batch_size: int = 8, device: str | None = None,
                 dtype: str | None = None, tokenizer: Any = None,
                 chat_template_kwargs: dict[str, Any] | None = None) -> None:
        from reward._optional import require, require_model

        if isinstance(model, (str, Path)):
            require_model(str(model), "the policy")
        torch = require("torch", "in-process generation")
        transformers = require("transformers", "in-process generation")
        self.settings, self.batch_size = settings, batch_size
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self._owned = isinstance(model, (str, Path))
        if self._owned:
            self.model = str(model)
            if device is None and torch.cuda.is_available():
                device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
            self.device = device or "cpu"
            self.dtype = dtype or ("bfloat16" if self.device.startswith("cuda") else "float32")
            self.lm = transformers.AutoModelForCausalLM.from_pretrained(self.model, dtype=getattr(torch, self.dtype))
            self.lm.to(self.device)
        else:
            self.lm = model
            self.model = getattr(getattr(model, "config", None), "_name_or_path", "") or type(model).__name__
            self.device = str(model.device)
            self.dtype = str(getattr(model, "dtype", "")).replace("torch.", "") or None
        self.tokenizer = tokenizer or transformers.AutoTokenizer.from_pretrained(self.model)
        self.tokenizer.padding_side = "left"  # decoder-only: new tokens must follow the prompt directly
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token

    def _render(self, messages: list[dict[str, Any]]) -> str:
        kwargs: dict[str, Any] = {"tokenize": False, "add_generation_prompt": True, **self.chat_template_kwargs}
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
            if s.top_k:
                kw["top_k"] = s.top_k
        else:
            kw.update(do_sample=False)
        return GenerationConfig(**kw)

    def generate(self, requests: Sequence[GenRequest], on_done: OnDone, desc: str = "generate") -> None:
        """Answer every request, calling ``on_done(key, output)`` after each batch. Requests in
        one batch share ``n`` (a batch is cut where ``n`` changes)."""
        import torch

        texts = {r.key: self._render(r.messages) for r in requests}
        lengths = {k: len(self.tokenizer(t, add_special_tokens=False)["input_ids"]) for k, t in texts.items()}
        # longest first: an out-of-memory shows up in the first batch, not after an hour
        order = sorted(requests, key=lambda r: (r.n, -lengths[r.key]))
        config = self._generation_config()
        eos = set(config.eos_token_id)
        was_training = self.lm.training
        self.lm.eval()
        bar = progress(len(requests), desc)
        try:
            start = 0
            while start < len(order):
                batch = [order[start]]
                while len(batch) < self.batch_size and start + len(batch) < len(order) \
                        and order[start + len(batch)].n == batch[0].n:
                    batch.append(order[start + len(batch)])
                start += len(batch)
                self._run_batch(torch, batch, texts, config, eos, on_done)
                bar.update(len(batch))
        finally:
            bar.close()
            self.lm.train(was_training)

    def _run_batch(self, torch, batch: list[GenRequest], texts: dict[str, str], config, eos: set[int],
                   on_done: OnDone) -> None:
        n = batch[0].n
        if self.settings.temperature > 0:
            first = batch[0]
            torch.manual_seed(first.seed if first.seed is not None else prompt_seed(self.settings.seed, first.key))
        try:
            enc = self.tokenizer([texts[r.key] for r in batch], add_special_tokens=False,
                                 padding=True, return_tensors="pt").to(self.lm.device)
            with torch.inference_mode():
                out = self.lm.generate(**enc, generation_config=config, num_return_sequences=n)
            new = out[:, enc["input_ids"].shape[1]:].tolist()
        except Exception as exc:
            for r in batch:
                on_done(r.key, GenOutput(None, error=f"{type(exc).__name__}: {exc}"))
            return
        for j, r in enumerate(batch):
            samples, first = [], None
            for ids in new[j * n:(j + 1) * n]:
                stop = next((i for i, t in enumerate(ids) if t in eos), None)
                kept = ids if stop is None else ids[:stop]
                samples.append(self.tokenizer.decode(kept, skip_special_tokens=True))
                if first is None:
                    first = ("length" if stop is None else "stop", len(kept))
            answer, reasoning = split_reasoning(samples[0])
            on_done(r.key, GenOutput(answer, first[0], first[1], reasoning, samples=tuple(samples)))

    def close(self) -> None:
        """Free a model this generator loaded (the in-process judge may need the memory next)."""
        if not self._owned:
            return
        import gc

        import torch

        self.lm = None
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
