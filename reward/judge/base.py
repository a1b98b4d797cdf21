"""The judge interface and the flow every backend shares.

``Judge.grade(items)`` looks each item up in the durable cache, grades the rest through the
backend and stores what succeeded. Requests are staged so the server's prefix cache is warm
before siblings arrive: for each conversation the first item goes alone, then one item of every
other response of that conversation (with the rest of the first response's items), then the
rest. Concurrent siblings would otherwise all miss a prefix that the first is still filling.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal, TypeVar

from reward.aio import gather_or_cancel
from reward.errors import JudgeError
from reward.judge.budget import call_deadline
from reward.judge.cache import VerdictCache, verdict_key
from reward.judge.render import PromptRenderer
from reward.judge.templates import Template, default_template, load_template
from reward.judge.types import JSONResult, JudgeConfig, JudgeItem, JudgeStats, Verdict, sampling_suffix

OnFailure = Literal["record", "raise"]
T = TypeVar("T")
JSON_NAMESPACE = "json"  # JSON generations live in the cache's key-value store, apart from verdicts


class Judge(ABC):
    """Grades (conversation, response, criterion) items; one verdict per item, in order."""

    deadline_s: float | None = None  # bound of one grade call outside a run; served backends set it
    watch = None  # a served vLLM judge's identity watch (reward.judge.watch); None elsewhere
    probed = None  # a served vLLM judge's start-up probe answers (reward.judge.signature.ProbeResult)
    # why who grades cannot be known (a server that does not say what it serves, weights not readable
    # here without a revision: reward.judge.identity.uncached_reason); None when it can
    identity_unknown: str | None = None

    def __init__(self, renderer: PromptRenderer, *, model_id: str, config: JudgeConfig | None = None,
                 cache: VerdictCache | None = None, concurrency: int = 64) -> None:
        self.renderer = renderer
        # Block-aligned prompts have other ids than unpadded ones: their verdicts get their own
        # cache keys (unpadded keys stay as they were).
        self.model_id = model_id + (f"+block{renderer.block_size}" if getattr(renderer, "block_size", 0) else "")
        self.config = config or JudgeConfig()
        self.model_id += sampling_suffix(self.config)  # other explain sampling: other verdicts
        self.cache = cache
        self.concurrency = concurrency
        self.stats = JudgeStats()
        if self.config.template_file:
            self.template = load_template(self.config.template_file, self.config.mode)
        else:
            self.template = default_template(self.config.mode)

    # ------------------------------------------------------------------ public API
    async def grade(self, items: Sequence[JudgeItem], template: Template | None = None, *,
                    on_failure: OnFailure = "record", use_cache: bool = True) -> list[Verdict]:
        """Grade ``items``. A failed item gets a verdict with ``failure`` set (never a silent
        "no"); with ``on_failure="raise"`` the first failure raises :class:`JudgeError`."""
        template = template or self.template
        use = self.cache is not None and use_cache  # an empty cache is falsy (len 0)
        keys = [verdict_key(self.model_id, template, it) for it in items] if use else []
        return await self._through_cache(
            items, keys, load=lambda ks: self.cache.get_many(ks),
            save=lambda k, v: self.cache.put_many([(k, v)], judge=self.model_id), namespace=None,
            compute=lambda sub, done: self._grade_uncached(template, sub, on_done=done),
            failed=Verdict.failed, what="judge items", on_failure=on_failure)

    async def generate_json(self, template: Template, items: Sequence[JudgeItem], *, schema: dict,
                            max_tokens: int = 1024, attempts: int = 3, regex: str | None = None,
                            on_failure: OnFailure = "record", use_cache: bool = True) -> list[JSONResult]:
        """Ask the judge for one JSON object per item (e.g. a list of errors), not a yes/no.

        Args:
            template: the prompt (its ``criterion`` slot may carry extra text, e.g. the key).
            schema: a JSON schema; the HTTP backend constrains decoding with it, and an object
                lacking its top-level ``required`` keys counts as unparseable.
            max_tokens: decoding budget per attempt.
            attempts: bounded parse attempts per item (later ones sample) before a failure.
            regex: optional; the HTTP backend then constrains decoding with this regular
                expression (a whitespace-free rendering of the schema) instead of the schema.
                vLLM's JSON-schema grammar admits any whitespace between tokens unless the server
                runs with ``disable_any_whitespace``, and a weak judge can spend its whole budget
                on blanks; a regex leaves it none. In-process generation is unconstrained.

        Results are cached under their own key (model, template version, schema, item), apart
        from Boolean verdicts; only successes are stored. A failed item gets a result with
        ``failure`` set, never an empty object; ``on_failure="raise"`` raises :class:`JudgeError`.
        """
        use = self.cache is not None and use_cache
        constraint = {"regex": regex} if regex else {"json": schema}
        keys = [json_key(self.model_id, template, constraint, it) for it in items] if use else []
        required = tuple(schema.get("required", ()))
        return await self._through_cache(
            items, keys,
            load=lambda ks: {k: JSONResult.model_validate_json(raw).model_copy(update={"cached": True})
                             for k, raw in self.cache.kv_get_many(JSON_NAMESPACE, ks).items()},
            save=lambda k, r: self.cache.kv_put(JSON_NAMESPACE, k, r.model_dump_json(), judge=self.model_id),
            namespace=JSON_NAMESPACE,
            compute=lambda sub, done: self._generate_json_uncached(
                template, sub, constraint=constraint, required=required, max_tokens=max_tokens,
                attempts=max(1, attempts), on_done=done),
            failed=JSONResult.failed, what="judge JSON items", on_failure=on_failure)

    async def _through_cache(self, items, keys, *, load, save, compute, failed, what: str,
                             on_failure: OnFailure, namespace: str | None):
        """The flow shared by verdicts and JSON generations: serve cache hits, compute the rest
        (``compute(items, on_done)``), store each success the moment it arrives (a crash or kill
        mid-batch loses only requests in flight), count, and apply the failure policy. A served
        judge's identity watch (:mod:`reward.judge.watch`) sees every stored key, and once the
        judge proved to be another, nothing more is stored."""
        with call_deadline(self.deadline_s):  # unless a run deadline (reward.judge.budget) bounds it already
            return await self._through_cache_in_deadline(items, keys, load=load, save=save, compute=compute,
                                                         failed=failed, what=what, on_failure=on_failure,
                                                         namespace=namespace)

    async def _through_cache_in_deadline(self, items, keys, *, load, save, compute, failed, what: str,
                                         on_failure: OnFailure, namespace: str | None):
        results: list = [None] * len(items)
        if keys:
            hits = load(keys)
            for i, k in enumerate(keys):
                results[i] = hits.get(k)
            self.stats.cache_hits += sum(r is not None for r in results)
        todo = [i for i, r in enumerate(results) if r is None]
        self.stats.cache_misses += len(todo) if keys else 0
        if todo:
            watch = self.watch

            def store(j: int, r) -> None:
                if keys and r.ok:
                    if watch is not None and not watch.may_store():
                        return  # graded after the judge proved to be another: never stored
                    save(keys[todo[j]], r)
                    if watch is not None:
                        watch.stored(keys[todo[j]], namespace)

            made = await compute([items[i] for i in todo], store)
            if len(made) != len(todo):  # zip would shift every later result onto the wrong item
                raise RuntimeError(f"{type(self).__name__} returned {len(made)} results for {len(todo)} items")
            for i, r in zip(todo, made):
                results[i] = r
            self.stats.failures += sum(not r.ok for r in made)
        out = [r if r is not None else failed("not graded") for r in results]
        if on_failure == "raise":
            bad = [(i, r.failure) for i, r in enumerate(out) if not r.ok]
            if bad:
                raise JudgeError(f"{len(bad)} of {len(out)} {what} failed; first (item {bad[0][0]}): {bad[0][1]}")
        return out

    def grade_sync(self, items: Sequence[JudgeItem], template: Template | None = None, **kw) -> list[Verdict]:
        """Blocking wrapper for scripts; inside a running event loop use ``await grade``."""
        return asyncio.run(self.grade(items, template, **kw))

    async def aclose(self) -> None:
        """Release connections (HTTP backend); a no-op elsewhere."""
        return None

    async def confirm_identity(self) -> None:
        """At the end of a run that succeeded, confirm who graded it (a served judge's end-of-run
        probe, ``reward.judge.watch``); a no-op for a judge with nothing to confirm."""
        return None

    # ------------------------------------------------------------------ backend hooks
    @abstractmethod
    async def _grade_one(self, template: Template, item: JudgeItem, ids: list[int]) -> Verdict:
        """Grade one rendered item, with the backend's retries; never raise for a model failure."""

    async def _grade_uncached(self, template: Template, items: list[JudgeItem], *,
                              on_done: Callable[[int, Verdict], None] | None = None) -> list[Verdict]:
        """Default: staged concurrent single requests (what a prefix-caching server wants).
        ``on_done(index, verdict)`` is called as each verdict arrives."""
        ids = [self.renderer.render_ids(template, it) for it in items]

        async def one(i: int) -> Verdict:
            v = await self._grade_one(template, items[i], ids[i])
            if on_done is not None:
                on_done(i, v)
            return v

        out = await run_staged(items, one)
        return [v if v is not None else Verdict.failed("not graded") for v in out]

    async def _generate_json_one(self, template: Template, item: JudgeItem, ids: list[int], *, constraint: dict,
                                 required: tuple[str, ...], max_tokens: int, attempts: int) -> JSONResult:
        """Generate and parse one item, with bounded attempts; never raise for a model failure.
        Backends that cannot generate keep this default, which fails the item visibly."""
        return JSONResult.failed(f"{type(self).__name__} cannot generate JSON")

    async def _generate_json_uncached(self, template: Template, items: list[JudgeItem], *, constraint: dict,
                                      required: tuple[str, ...], max_tokens: int, attempts: int,
                                      on_done: Callable[[int, JSONResult], None] | None = None) -> list[JSONResult]:
        """Default: concurrent single requests, staged like grading so shared prefixes are warm."""
        ids = [self.renderer.render_ids(template, it) for it in items]

        async def one(i: int) -> JSONResult:
            r = await self._generate_json_one(template, items[i], ids[i], constraint=constraint, required=required,
                                              max_tokens=max_tokens, attempts=attempts)
            if on_done is not None:
                on_done(i, r)
            return r

        out = await run_staged(items, one)
        return [r if r is not None else JSONResult.failed("not generated") for r in out]


def json_key(model_id: str, template: Template, constraint: dict, item: JudgeItem) -> str:
    """Cache key of a JSON generation: everything that decides it, including the schema/regex."""
    payload = json.dumps([
        "json", model_id, template.version, json.dumps(constraint, sort_keys=True),
        [[m.role, m.content] for m in item.conversation], item.response, item.criterion, item.points,
    ], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


async def run_staged(items: Sequence[JudgeItem], one: Callable[[int], Awaitable[T]]) -> list[T | None]:
    """Await ``one(i)`` for every item index: conversations concurrently, and within each its
    stages (:func:`stage_by_prefix`) in order, the items of one stage concurrently."""
    out: list[T | None] = [None] * len(items)

    async def run(i: int) -> None:
        out[i] = await one(i)

    async def run_conversation(stages: list[list[int]]) -> None:
        for stage in stages:
            if stage:
                await gather_or_cancel(run(i) for i in stage)

    # a stopped run (deadline, circuit breaker) cancels every sibling request at once
    await gather_or_cancel(run_conversation(s) for s in stage_by_prefix(items))
    return out


def stage_by_prefix(items: Sequence[JudgeItem]) -> list[list[list[int]]]:
    """Per conversation, three stages of item indices (see the module docstring)."""
    convs: dict[tuple, dict[str, list[int]]] = {}
    for i, it in enumerate(items):
        convs.setdefault(it.conversation, {}).setdefault(it.response, []).append(i)
    plans = []
    for responses in convs.values():
        groups = list(responses.values())
        first, others = groups[0], groups[1:]
        stage1 = first[:1]
        stage2 = first[1:] + [g[0] for g in others]
        stage3 = [i for g in others for i in g[1:]]
        plans.append([stage1, stage2, stage3])
    return plans
