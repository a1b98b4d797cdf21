"""The judge over HTTP: an async client for OpenAI-compatible servers, written for vLLM.

Prompts go to ``/v1/completions`` as token ids rendered on our side (see ``render.py``), so the
server sees exactly the ids we built: special-token strings inside a rollout stay plain text,
and all criteria of a rollout share their prefix ids.

choice mode: ``max_tokens=1``, the answer constrained to the yes/no words with vLLM's
``structured_outputs`` (``guided_choice`` is ignored by current vLLM), and the logprobs of the
two answer tokens requested by id (``logprob_token_ids``; older servers fall back to the top
logprobs). vLLM applies the grammar mask before computing logprobs, so the normalised p_yes is
the constrained probability of answering yes.

explain mode: a JSON object ``{"explanation", "criteria_met"}``, constrained by a whitespace-free
regular expression (``parsing.EXPLAIN_REGEX``: a JSON schema lets a weak model spend its budget on
blanks), parsed robustly, with a bounded number of attempts. Its verdicts are keyed ``+re``: the
JSON-schema verdicts of earlier versions are another grader's.

JSON generation (``Judge.generate_json``): the caller's schema goes in ``structured_outputs``
(``{"json": schema}``, or ``{"regex": ...}`` when the caller gives one), through the same
retrying ``_post``; bounded parse attempts, later ones
sampled with a seed.
"""

from __future__ import annotations

import logging

import httpx

from reward.judge import defaults as D
from reward.judge.base import Judge
from reward.judge.cache import VerdictCache
from reward.judge.endpoints import EndpointPool
from reward.judge.identity import cache_or_reason, served_model_id
from reward.judge.parsing import EXPLAIN_REGEX, explain_parser, parse_json_object
from reward.judge.render import PromptRenderer, load_tokenizer
from reward.judge.replies import answer_logprobs, choice_p_yes, completion_text, usage_counts
from reward.judge.signature import PROBE_ITEMS, check_numbers, start_watch, startup_asking
from reward.judge.startup import establish
from reward.judge.templates import CHOICE, Template
from reward.judge.tokenizer_check import check_against_servers, tokenizer_fingerprint
from reward.judge.transport import RequestFailed, ServedTransport
from reward.judge.types import JSONResult, JudgeConfig, JudgeItem, Verdict
from reward.serving import (
    JUDGE_API_KEY_ENV,
    RetryPolicy,
    auth_headers,
    split_urls,
)

log = logging.getLogger(__name__)

class HTTPJudge(ServedTransport, Judge):
    """Judge served by one or more vLLM (or other OpenAI-compatible) endpoints.

    Args:
        urls: endpoint base URLs (``http://127.0.0.1:8000`` or ``.../v1``), a list or comma-separated.
        model: the served model name.
        tokenizer: tokenizer name or path; by default the model's ``root`` reported by the
            server's ``/v1/models``, else ``model``.
        api_key_env: environment variable holding the API key (the key is never logged).
        timeout_s: per-request timeout; max_retries: retries after the first attempt, with
            exponential backoff and jitter; deadline_s: an overall bound on one ``grade`` or
            ``generate_json`` call outside a run (items still unanswered then fail visibly; see
            ``reward.judge.budget``); circuit_breaker: stop after this many unanswered requests in
            a row on every endpoint (0: never);
            revision: a label for what the server cannot report (new weights behind the same hub
            id); part of the judge's identity in the verdict cache key; concurrency: global cap on requests in flight.
        probe_every_items, probe_every_s: during the run, each endpoint answers the fixed probes
            again after this many requests or seconds (and after every reconnection); a changed
            answer stops the run (:mod:`reward.judge.watch`). 0 or None: that bound is off.
        probe_idle_s: ... and before grading again after this many seconds with nothing in flight (0: off).
        transport: an httpx transport to send requests through (tests, custom networking);
            default: httpx's own.
    """

    def __init__(self, urls: list[str] | str, model: str, *, tokenizer=None, config: JudgeConfig | None = None,
                 cache: VerdictCache | None = None, concurrency: int = D.CONCURRENCY,
                 timeout_s: float = D.TIMEOUT_S, max_retries: int = D.MAX_RETRIES,
                 backoff_s: float = 0.5, max_backoff_s: float = 8.0,
                 api_key_env: str = JUDGE_API_KEY_ENV, cooldown_s: float = 10.0,
                 deadline_s: float | None = D.DEADLINE_S, circuit_breaker: int = D.CIRCUIT_BREAKER,
                 revision: str | None = None, transport: httpx.AsyncBaseTransport | None = None,
                 probe_every_items: int | None = D.PROBE_EVERY_ITEMS,
                 probe_every_s: float | None = D.PROBE_EVERY_S,
                 probe_idle_s: float | None = D.PROBE_IDLE_S) -> None:
        self.pool = EndpointPool(split_urls(urls), cooldown_s=cooldown_s)
        self.model = model
        self.timeout_s, self.max_retries = timeout_s, max_retries
        self.deadline_s = deadline_s  # bound of one grade/generate_json call outside a run (reward.judge.budget)
        self.circuit_breaker = circuit_breaker
        self.retry = RetryPolicy(max_retries=max_retries, backoff_s=backoff_s, max_backoff_s=max_backoff_s)
        self._api_key_env = api_key_env
        self._headers = auth_headers(api_key_env)
        self._transport = transport
        self._init_client_state()
        self._legacy_logprobs = False
        # Who the judge is, by content (reward.judge.startup, once, bounded by the deadline): what
        # every endpoint reports for this name (root, max_model_len, how it runs the model), all
        # agreeing; the root's content fingerprint; the tokenizer and chat template that build the
        # ids, checked against each server's /tokenize; the user's revision. It goes into the
        # verdict cache key. A judge whose weights cannot be named by content may only use the
        # cache under a revision the user names (two judges would otherwise share verdicts).
        tokenizer_name = repr(tokenizer) if isinstance(tokenizer, str) else f"{type(tokenizer).__name__} (an object)"
        known = establish([ep.url for ep in self.pool.endpoints], model, self._headers, deadline_s=deadline_s) \
            if transport is None else None
        if known is not None and known.urls != [ep.url for ep in self.pool.endpoints]:
            self.pool = EndpointPool(known.urls, cooldown_s=cooldown_s)  # endpoints silent at start-up left out
        entry = known.entry if known else None
        self.served_root = known.root if known else None
        if tokenizer is None or isinstance(tokenizer, str):
            tokenizer_name = repr(tokenizer or self.served_root or self.model)
            tokenizer = load_tokenizer(tokenizer or self.served_root or self.model)
        block = (config or JudgeConfig()).prefix_block
        renderer = PromptRenderer(tokenizer, block_size=block)
        self.tokenizer_status: dict[str, str] = {}
        if known is not None and entry is not None:
            self.tokenizer_status = check_against_servers(renderer, known.urls, model, self._headers, known.clock,
                                                          tokenizer_name=tokenizer_name)
        self.identity_unknown, cache = cache_or_reason(model, known, revision, [ep.name for ep in self.pool.endpoints],
                                                       cache, own_transport=transport is not None)
        model_id = served_model_id(model, entry, revision, known.facts if known else None,
                                   weights=known.weights if known else None,
                                   tokenizer=tokenizer_fingerprint(renderer))
        super().__init__(renderer, model_id=model_id, config=config, cache=cache, concurrency=concurrency)
        # the numbers each endpoint computes, against each other and against this identity's history
        # (choice answers: at default sampling the history is shared by both modes, so the suffix
        # below comes after)
        self.probed = check_numbers(known, model, self._headers, self._probe_answers, self.cache, self.model_id,
                                    startup_asking(self))
        self.watch = start_watch(self, self.probed, model, cooldown_s=cooldown_s, every_items=probe_every_items,
                                 every_s=probe_every_s, idle_s=probe_idle_s)
        if self.config.mode == "explain" and self.config.constrained:
            self.model_id += "+re"  # constrained by EXPLAIN_REGEX (a JSON schema before): other verdicts

    def __repr__(self) -> str:  # never show the key
        return f"HTTPJudge(urls={[e.name for e in self.pool.endpoints]}, model={self.model!r})"

    def _probe_answers(self, url: str, clock, asking) -> list[float]:
        """The answer logprobs of :data:`~reward.judge.signature.PROBE_ITEMS` at ``url``, asked as
        grading asks and read as grading reads them (a reply without both answers is a bad reply,
        retried as ``asking`` says; see :mod:`reward.judge.signature`)."""
        yes, no = self.renderer.yes_id, self.renderer.no_id
        out: list[float] = []
        for item in PROBE_ITEMS:
            body = self.choice_body(self.renderer.render_ids(CHOICE, item))
            out += asking.post(f"{url}/completions", body, self._headers, clock,
                               lambda data: answer_logprobs(data, yes, no))
        return out

    # ------------------------------------------------------------------ transport
    async def _post(self, body: dict, read=None):
        """One completions request through the shared retry loop (``reward.judge.transport``);
        returns ``read(body_json)``; raises :class:`RequestFailed` after the last attempt."""
        value = await self._request("/completions", body, read=lambda data: (data, read(data) if read else data))
        self._account(value[0])
        return value[1]

    def _on_refused(self, resp: httpx.Response, body: dict) -> bool:
        return self._maybe_legacy(resp, body)

    def _maybe_legacy(self, resp: httpx.Response, body: dict) -> bool:
        """Servers without ``logprob_token_ids`` reject it: fall back to top logprobs once."""
        if "logprob_token_ids" in body and "logprob_token_ids" in resp.text:
            self._legacy_logprobs = True
            body.pop("logprob_token_ids")
            body["logprobs"] = 20
            return True
        return False

    def _account(self, data) -> None:
        prompt, completion, cached = usage_counts(data)
        self.stats.prompt_tokens += prompt
        self.stats.completion_tokens += completion
        self.stats.cached_tokens += cached

    # ------------------------------------------------------------------ grading
    def choice_body(self, ids: list[int]) -> dict:
        r = self.renderer
        body = {
            "model": self.model, "prompt": ids, "max_tokens": 1, "temperature": 0.0,
            "logprobs": 2, "return_tokens_as_token_ids": True,
            "structured_outputs": {"choice": [r.yes_word, r.no_word]},
        }
        if self._legacy_logprobs:
            body["logprobs"] = 20
        else:
            body["logprob_token_ids"] = [r.yes_id, r.no_id]
        return body

    async def _grade_one(self, template: Template, item: JudgeItem, ids: list[int]) -> Verdict:
        if template.mode == "choice":
            return await self._grade_choice(ids)
        return await self._grade_explain(ids)

    async def _grade_choice(self, ids: list[int]) -> Verdict:
        yes, no = self.renderer.yes_id, self.renderer.no_id
        try:
            p = await self._post(self.choice_body(ids), lambda data: choice_p_yes(data, yes, no))
        except RequestFailed as exc:
            return Verdict.failed(str(exc))
        return Verdict(met=p >= 0.5, p_yes=p, mode="choice")

    async def _grade_explain(self, ids: list[int]) -> Verdict:
        cfg = self.config
        body = {"model": self.model, "prompt": ids, "max_tokens": cfg.max_explain_tokens,
                "temperature": cfg.temperature}
        if cfg.constrained:
            body["structured_outputs"] = {"regex": EXPLAIN_REGEX}
        parse = explain_parser(cfg.parse)
        last = "no attempt"
        for attempt in range(cfg.explain_attempts):
            if attempt:
                self.stats.retries += 1
            try:
                text, _ = await self._post(body, completion_text)
            except RequestFailed as exc:
                return Verdict.failed(str(exc), mode="explain")
            parsed = parse(text)
            if parsed is not None:
                met, why = parsed
                return Verdict(met=met, p_yes=1.0 if met else 0.0, explanation=why, mode="explain")
            # only a real model answer that does not parse is resampled
            last = f"unparseable grader output: {text[:200]!r}"
            if cfg.retry_temperature is not None:  # None: asked again at the same settings
                body = {**body, "temperature": max(cfg.temperature, cfg.retry_temperature), "seed": attempt + 1}
        return Verdict.failed(f"{last} after {cfg.explain_attempts} attempts", mode="explain")

    async def _generate_json_one(self, template: Template, item: JudgeItem, ids: list[int], *, constraint: dict,
                                 required: tuple[str, ...], max_tokens: int, attempts: int) -> JSONResult:
        body = {"model": self.model, "prompt": ids, "max_tokens": max_tokens,
                "temperature": self.config.temperature, "structured_outputs": dict(constraint)}
        last, text = "no attempt", None
        for attempt in range(attempts):
            if attempt:
                self.stats.retries += 1
            try:
                text, finish = await self._post(body, completion_text)
            except RequestFailed as exc:
                return JSONResult.failed(str(exc))
            obj = parse_json_object(text, required)
            if obj is not None:
                return JSONResult(value=obj, text=text)
            cut = " (cut at max_tokens)" if finish == "length" else ""
            last = f"unparseable JSON{cut}: {text[:200]!r}"
            body = {**body, "temperature": max(self.config.temperature, 0.7), "seed": attempt + 1}
        return JSONResult.failed(f"{last} after {attempts} attempts", text=text)
