"""The in-process judge: a transformers model in this process (CPU or GPU), no server needed.

It renders the very same token ids as the HTTP backend and returns the same quantities:
choice mode reads the next-token logits of the two answer tokens (p_yes normalised over them,
which is what the server's constrained logprobs give), explain mode generates and parses JSON.
``generate_json`` generates and parses too (no grammar constraint in process, so a weak model
may fail more often; attempts are bounded and a failure is recorded, never an empty object).
Choice mode encodes the prefix a rollout's criteria share once and scores the criteria against
its KV cache in chunks (``prefix_reuse.py``; same ids, same p_yes); ``prefix_reuse=False`` keeps
the one-forward-per-item path (the reference the fast path is tested against). Other work is
batched by length with left padding; the model runs in a worker thread so the event loop stays free.
"""

from __future__ import annotations

import asyncio
import threading

from reward._optional import require, require_model
from reward.judge.base import Judge
from reward.judge.cache import VerdictCache
from reward.judge.identity import local_model_id
from reward.judge.limits import answer_budget, context_failure, longest_token_chars, min_tokens
from reward.judge.parsing import explain_parser, parse_json_object
from reward.judge.prefix_reuse import common_prefix_len, encode_prefix, group_by_prefix, score_suffixes
from reward.judge.render import PromptRenderer, load_tokenizer
from reward.judge.replies import BadReply, finite_p_yes
from reward.judge.templates import Template
from reward.judge.types import JSONResult, JudgeConfig, JudgeItem, Verdict


class TransformersJudge(Judge):
    """Judge running ``model`` (name or path) with transformers.

    Args:
        model: a model name or local path; the same one a vLLM server would serve.
        device: ``"cuda"``, ``"cpu"`` or None (CUDA when available).
        dtype: torch dtype name; default float32 on CPU, bfloat16 on CUDA.
        batch_size: items per forward pass (one-forward-per-item path and explain mode).
        prefix_reuse: choice mode encodes each rollout's shared prefix once (default); False
            runs one full forward per item.
        prefix_chunk: criteria scored per forward against one shared prefix (bounds memory).
        revision: an optional label added to the judge's identity (the verdict cache key), which
            already holds a fingerprint of the model folder's content.
        max_model_len: the context in tokens (prompt plus answer); default the model's
            ``max_position_embeddings``. A longer prompt fails its item with the server's rule
            and words (``reward.judge.limits``), before any tensor is made.
    """

    def __init__(self, model: str, *, device: str | None = None, dtype: str | None = None,
                 config: JudgeConfig | None = None, cache: VerdictCache | None = None,
                 batch_size: int = 16, prefix_reuse: bool = True, prefix_chunk: int = 16,
                 revision: str | None = None, max_model_len: int | None = None) -> None:
        require_model(model, "the in-process judge")
        torch = require("torch", "the in-process judge")
        transformers = require("transformers", "the in-process judge")
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = dtype or ("bfloat16" if self.device.startswith("cuda") else "float32")
        self.torch_dtype = getattr(torch, dtype)
        self.model_name = model
        self.batch_size = batch_size
        self.prefix_reuse, self.prefix_chunk = prefix_reuse, max(1, prefix_chunk)
        tokenizer = load_tokenizer(model)
        self.model = transformers.AutoModelForCausalLM.from_pretrained(model, dtype=self.torch_dtype)
        self.model.to(self.device).eval()
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self._lock = threading.Lock()  # one forward at a time on this model
        self.max_model_len = max_model_len or getattr(self.model.config, "max_position_embeddings", None)
        self._longest_token = longest_token_chars(tokenizer)
        block = (config or JudgeConfig()).prefix_block
        super().__init__(PromptRenderer(tokenizer, block_size=block),
                         model_id=local_model_id(model, dtype) + (f"!{revision}" if revision else ""), config=config,
                         cache=cache, concurrency=1)

    async def _grade_one(self, template: Template, item: JudgeItem, ids: list[int]) -> Verdict:
        return (await self._grade_uncached(template, [item]))[0]

    def _within_context(self, template: Template, items: list[JudgeItem], failed):
        """(indices of the items that fit the context, their ids, results with a failure for the
        rest and None for these). Items far too long are refused from their length in characters,
        before they are tokenised (``reward.judge.limits``)."""
        out: list = [None] * len(items)
        fit, ids = [], []
        for i, it in enumerate(items):
            chars = sum(len(text) for text, _ in template.pieces(it)) + len(template.system)
            reason = context_failure(min_tokens(chars, self._longest_token), self.max_model_len, at_least=True)
            if reason is None:
                rendered = self.renderer.render_ids(template, it)
                reason = context_failure(len(rendered), self.max_model_len)
            if reason is None:
                fit.append(i)
                ids.append(rendered)
            else:
                out[i] = failed(reason)
        return fit, ids, out

    async def _grade_uncached(self, template: Template, items: list[JudgeItem], *,
                              on_done=None) -> list[Verdict]:
        fit, ids, out = self._within_context(template, items, lambda r: Verdict.failed(r, mode=template.mode))
        if fit:
            done = None if on_done is None else (lambda j, v: on_done(fit[j], v))
            for i, v in zip(fit, await self._grade_fitting(template, [items[i] for i in fit], ids, done)):
                out[i] = v
        return out

    async def _grade_fitting(self, template: Template, items: list[JudgeItem], ids: list[list[int]],
                             on_done) -> list[Verdict]:
        if template.mode == "choice" and self.prefix_reuse:
            keys = [self.renderer.prefix_key(template, it) for it in items]
            conv_keys = [(template.version, it.conversation) for it in items]
            return await asyncio.to_thread(self._choice_shared, ids, keys, conv_keys, _on_loop(on_done))
        fn = self._choice_batch if template.mode == "choice" else self._explain_batch
        return await asyncio.to_thread(self._run_batched, fn, ids, Verdict.failed, _on_loop(on_done))

    def _run_batched(self, fn, ids: list[list[int]], failed=Verdict.failed, on_done=None) -> list:
        """Run ``fn`` over length-sorted batches under the model lock; a batch that raises (an
        OOM, a model error) fails its items visibly through ``failed(reason)``. ``on_done(i, r)``
        is called after each batch for its items."""
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out: list = [None] * len(ids)
        with self._lock:
            for start in range(0, len(order), self.batch_size):
                chunk = order[start:start + self.batch_size]
                try:
                    results = fn([ids[i] for i in chunk])
                except Exception as exc:
                    results = [failed(f"{type(exc).__name__}: {exc}")] * len(chunk)
                for i, r in zip(chunk, results):
                    out[i] = r
                    if on_done is not None:
                        on_done(i, r)
        return out

    def _choice_shared(self, ids: list[list[int]], keys: list, conv_keys: list, on_done=None) -> list[Verdict]:
        """Choice verdicts with each group's shared prefix encoded once; prompts alone in their
        group go through the batched full-forward path. A group that raises fails its items."""
        out: list = [None] * len(ids)

        def done(i: int, v: Verdict) -> None:
            out[i] = v
            if on_done is not None:
                on_done(i, v)

        groups = group_by_prefix(ids, keys)
        singles = [i for idx, _ in groups if len(idx) == 1 for i in idx]
        if singles:
            self._run_batched(self._choice_batch, [ids[i] for i in singles], Verdict.failed,
                              lambda j, v: done(singles[j], v))
        multi = [(idx, p) for idx, p in groups if len(idx) > 1]
        # Rollouts of one conversation: their common prefix (instructions + conversation) once.
        by_conv: dict[tuple, list[tuple[list[int], int]]] = {}
        for idx, p in multi:
            by_conv.setdefault(conv_keys[idx[0]], []).append((idx, p))
        answer = (self.renderer.yes_id, self.renderer.no_id)
        with self._lock:
            for rollouts in by_conv.values():
                shared = self._conversation_prefix(ids, rollouts)
                if shared is not None:
                    self.stats.cached_tokens -= shared[1]  # computed once, counted as reused below
                for idx, p in rollouts:
                    try:
                        kv = encode_prefix(self.model, ids[idx[0]][:p], past=shared, device=self.device)
                        p_yes = score_suffixes(self.model, kv, p, [ids[i][p:] for i in idx], answer_ids=answer,
                                               pad_id=self.pad_id, chunk=self.prefix_chunk, device=self.device)
                        verdicts = [Verdict(met=q >= 0.5, p_yes=q, mode="choice") for q in p_yes]
                    except Exception as exc:
                        verdicts = [Verdict.failed(f"{type(exc).__name__}: {exc}")] * len(idx)
                    self.stats.requests += len(idx)
                    self.stats.prompt_tokens += sum(len(ids[i]) for i in idx)
                    # prefix tokens not recomputed: all but the rollout's own part of its prefix
                    self.stats.cached_tokens += p * len(idx) - (p - (shared[1] if shared else 0))
                    self.stats.completion_tokens += len(idx)
                    for i, v in zip(idx, verdicts):
                        done(i, v)
        return out

    def _conversation_prefix(self, ids: list[list[int]], rollouts: list[tuple[list[int], int]]):
        """(kv, n) of the ids every rollout of one conversation shares, or None (one rollout,
        nothing shared, or an error: each rollout then encodes its whole prefix)."""
        if len(rollouts) < 2:
            return None
        n = min(common_prefix_len([ids[idx[0]][:p] for idx, p in rollouts]), *(p for _, p in rollouts))
        if n < 1:
            return None
        try:
            return encode_prefix(self.model, ids[rollouts[0][0][0]][:n], device=self.device), n
        except Exception:  # the rollouts' own encodings will fail visibly if the model is broken
            return None

    def _pad(self, batch: list[list[int]]):
        torch = require("torch", "the in-process judge")
        width = max(len(x) for x in batch)
        input_ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for r, seq in enumerate(batch):
            input_ids[r, width - len(seq):] = torch.tensor(seq, dtype=torch.long)
            mask[r, width - len(seq):] = 1
        return input_ids.to(self.device), mask.to(self.device)

    def _choice_batch(self, batch: list[list[int]]) -> list[Verdict]:
        torch = require("torch", "the in-process judge")
        input_ids, mask = self._pad(batch)
        position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
        with torch.inference_mode():
            logits = self.model(input_ids=input_ids, attention_mask=mask, position_ids=position_ids,
                                logits_to_keep=1).logits[:, -1, :].float()
        pair = logits[:, [self.renderer.yes_id, self.renderer.no_id]]
        p_yes = torch.softmax(pair, dim=-1)[:, 0].tolist()
        finite = torch.isfinite(pair).all(dim=-1).tolist()  # an infinite logit would read as a certain answer
        self.stats.requests += len(batch)
        self.stats.prompt_tokens += sum(len(x) for x in batch)
        self.stats.completion_tokens += len(batch)
        return [_choice_verdict(p) if ok else Verdict.failed(f"non-finite yes/no logits {pair[r].tolist()}")
                for r, (p, ok) in enumerate(zip(p_yes, finite))]

    def _generate_parsed(self, batch: list[list[int]], *, parse, attempts: int, max_tokens: int,
                         temperature: float, retry_temperature: float | None = 0.7) -> list[tuple[object | None, str]]:
        """Generate for every prompt until ``parse(text)`` gives a value or the attempts run out
        (later attempts sample at temperature >= 0.7); returns (value or None, last text) each."""
        torch = require("torch", "the in-process judge")
        out: list[tuple[object | None, str]] = [(None, "")] * len(batch)
        pending = list(range(len(batch)))
        for attempt in range(attempts):
            if not pending:
                break
            if attempt:
                self.stats.retries += len(pending)
            input_ids, mask = self._pad([batch[i] for i in pending])
            temp = max(temperature, retry_temperature) if attempt and retry_temperature is not None else temperature
            kw = {"do_sample": True, "temperature": temp} if temp > 0 else {"do_sample": False}
            with torch.inference_mode():
                # the answer budget shrinks to what the context has left, as on the server
                budget = answer_budget(max_tokens, max(len(batch[i]) for i in pending), self.max_model_len)
                gen = self.model.generate(input_ids=input_ids, attention_mask=mask, pad_token_id=self.pad_id,
                                          max_new_tokens=budget, **kw)
            new = gen[:, input_ids.shape[1]:]
            self.stats.requests += len(pending)
            self.stats.prompt_tokens += sum(len(batch[i]) for i in pending)
            still = []
            for row, i in enumerate(pending):
                toks = [t for t in new[row].tolist() if t != self.pad_id]
                self.stats.completion_tokens += len(toks)
                text = self.renderer.tokenizer.decode(toks, skip_special_tokens=True)
                value = parse(text)
                out[i] = (value, text)
                if value is None:
                    still.append(i)
            pending = still
        return out

    def _explain_batch(self, batch: list[list[int]]) -> list[Verdict]:
        cfg = self.config
        results = self._generate_parsed(batch, parse=explain_parser(cfg.parse), attempts=cfg.explain_attempts,
                                        max_tokens=cfg.max_explain_tokens, temperature=cfg.temperature,
                                        retry_temperature=cfg.retry_temperature)
        return [Verdict(met=v[0], p_yes=1.0 if v[0] else 0.0, explanation=v[1], mode="explain") if v is not None
                else Verdict.failed(f"unparseable grader output: {text[:200]!r} after {cfg.explain_attempts} attempts",
                                    mode="explain")
                for v, text in results]

    async def _generate_json_uncached(self, template: Template, items: list[JudgeItem], *, constraint: dict,
                                      required: tuple[str, ...], max_tokens: int, attempts: int,
                                      on_done=None) -> list[JSONResult]:
        fit, ids, out = self._within_context(template, items, JSONResult.failed)
        if not fit:
            return out
        done = None if on_done is None else (lambda j, r: on_done(fit[j], r))

        def batch_fn(batch: list[list[int]]) -> list[JSONResult]:
            results = self._generate_parsed(batch, parse=lambda t: parse_json_object(t, required), attempts=attempts,
                                            max_tokens=max_tokens, temperature=self.config.temperature)
            return [JSONResult(value=v, text=text) if v is not None
                    else JSONResult.failed(f"unparseable JSON: {text[:200]!r} after {attempts} attempts", text=text)
                    for v, text in results]

        made = await asyncio.to_thread(self._run_batched, batch_fn, ids, JSONResult.failed, _on_loop(done))
        for i, r in zip(fit, made):
            out[i] = r
        return out


def _choice_verdict(p: float) -> Verdict:
    """A verdict from p_yes; NaN/inf logits (a broken model) fail the item, never a silent "no"."""
    try:
        p = finite_p_yes(p)
    except BadReply as exc:
        return Verdict.failed(str(exc))
    return Verdict(met=p >= 0.5, p_yes=p, mode="choice")


def _on_loop(on_done):
    """Wrap a result callback so the worker thread runs it on the event loop's thread (the
    verdict cache's SQLite connection is per thread); callbacks run before the await resumes."""
    if on_done is None:
        return None
    loop = asyncio.get_running_loop()
    return lambda i, r: loop.call_soon_threadsafe(on_done, i, r)
