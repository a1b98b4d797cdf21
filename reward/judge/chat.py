"""The judge over an OpenAI-compatible chat API (``/v1/chat/completions``): hosted graders such
as gpt-4.1, and any chat server (vLLM's included).

The token-id backend (``http.py``) cannot talk to a hosted grader: those take messages, not ids.
Here the same template pieces, ``[instructions][conversation][response][criterion]``, are sent as
TEXT: the template's system text as a system message (when it has one) and its user body, values
substituted in one pass, as the user message. The server applies its own chat template and, on
vLLM, tokenises message content with special tokens parsed, so special-token strings inside the
graded values are escaped before they are sent (:mod:`reward.judge.special_tokens`).

choice mode: ``max_tokens=1, logprobs=true, top_logprobs=20``; p_yes is read from the two answer
words in the top list, case and leading-space variants summed (``yes``, `` Yes``, ...), and
normalised over yes+no. On vLLM (recognised by the ``root`` its ``/v1/models`` reports) the answer
is also constrained to the two words with ``structured_outputs``, whose mask applies before the
logprobs, so the list holds only answer tokens (prefixes such as ``y`` count for their word).
When neither word is in the list the item FAILS: never a silent "no". A word listed alone is
bounded by the smallest listed token (a full list) or fails (a cut list); a reply without
logprobs is read from its first word at p_yes 1/0, saying so (``reward.judge.chat_choice``).

explain mode: the JSON verdict ``{"explanation", "criteria_met"}``, constrained with
``response_format`` (a JSON schema) where the server takes it (on vLLM, a whitespace-free regular
expression in ``structured_outputs`` instead); a server that rejects the field is
asked again without it, and the text is parsed robustly either way. Only an answer that arrived
but does not parse is resampled (bounded attempts, later ones at a raised temperature with a
seed); transport faults are retried at the original settings. ``JudgeConfig(constrained=False,
retry_temperature=None, parse="reference")`` sends the reference HealthBench grader's request
instead: no constraint, the same settings on every attempt, its strict parse.

Transport: a bounded semaphore, a pool of endpoints (least outstanding), retries with exponential
backoff and jitter on timeouts, connection errors and 5xx; HTTP 429 waits what ``Retry-After``
(seconds or an HTTP date) or ``retry-after-ms`` says, capped. The API key comes from an environment
variable (``RUBRICSTREE_JUDGE_API_KEY`` by default; ``OPENAI_API_KEY`` as a fallback for
api.openai.com) and is never logged: ``repr`` leaves it out and error texts are redacted.

Cache: verdicts share the durable cache under a model identity ``chat:<host>:<model>``, so chat
verdicts never mix with the token-id backend's or another provider's. From a vLLM server (one that
reports a ``root``) the identity adds the root, its content fingerprint, how the server runs the
model, and the prompt ids its own tokenizer and chat template build for a probe conversation; every
endpoint of the pool must agree (:mod:`reward.judge.startup`), and a root whose content cannot be
fingerprinted here may only cache under a revision. A hosted API (no ``root``) is named by its
listed model id.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from urllib.parse import urlparse

import httpx

from reward.judge import defaults as D
from reward.judge.base import Judge, run_staged
from reward.judge.cache import VerdictCache
from reward.judge.chat_choice import NO_WORDS, YES_WORDS, choice_verdict, p_yes_from_top, sums_from_top  # noqa: F401
from reward.judge.endpoints import EndpointPool
from reward.judge.identity import cache_or_reason, chat_model_id
from reward.judge.parsing import EXPLAIN_REGEX, explain_parser, parse_json_object
from reward.judge.replies import BadReply, usage_counts
from reward.judge.signature import PROBE_ITEMS, check_numbers, start_watch, startup_asking
from reward.judge.special_tokens import DEFAULT_GUARD, SpecialTokenGuard, added_tokens
from reward.judge.startup import establish
from reward.judge.templates import CHOICE, Template
from reward.judge.tokenizer_check import server_template_ids
from reward.judge.transport import RequestFailed as _Failed
from reward.judge.transport import ServedTransport
from reward.judge.types import JSONResult, JudgeConfig, JudgeItem, Verdict
from reward.serving import RetryPolicy, split_urls

log = logging.getLogger(__name__)

API_KEY_ENV = "RUBRICSTREE_JUDGE_API_KEY"
OPENAI_KEY_ENV = "OPENAI_API_KEY"
OPENAI_HOST = "api.openai.com"
TOP_LOGPROBS = 20  # the most OpenAI's API returns
EXPLAIN_SCHEMA = {
    "type": "object",
    "properties": {"explanation": {"type": "string"}, "criteria_met": {"type": "boolean"}},
    "required": ["explanation", "criteria_met"],
    "additionalProperties": False,
}


def template_messages(template: Template, item: JudgeItem, guard: SpecialTokenGuard = DEFAULT_GUARD
                      ) -> list[dict[str, str]]:
    """The template as chat messages: its system text (if any), then the user body with every
    placeholder substituted in one pass (the same pieces the token-id renderer tokenises), the
    substituted values with their special-token strings escaped (``guard``)."""
    user = "".join(text if trusted else guard(text) for text, trusted in template.pieces(item))
    msgs = [{"role": "system", "content": template.system}] if template.system else []
    return [*msgs, {"role": "user", "content": user}]


def api_key_for(urls: list[str], api_key_env: str = API_KEY_ENV) -> str:
    """The key from ``api_key_env``; for api.openai.com also ``OPENAI_API_KEY``."""
    key = os.environ.get(api_key_env, "")
    if not key and any(urlparse(u if "//" in u else f"http://{u}").hostname == OPENAI_HOST for u in urls):
        key = os.environ.get(OPENAI_KEY_ENV, "")
    return key


class ChatJudge(ServedTransport, Judge):
    """Judge served by one or more OpenAI-compatible chat endpoints.

    Args:
        urls: endpoint base URLs (``https://api.openai.com`` or ``.../v1``).
        model: the model name (e.g. ``gpt-4.1-2025-04-14``).
        config: mode, template file, explain budget and attempts, temperature.
        cache: the durable verdict cache (None for none).
        concurrency: requests in flight at most; timeout_s: per request.
        max_retries: retries of a transport fault after the first attempt.
        max_retry_after_s: the longest wait a ``Retry-After`` may impose.
        api_key_env: the environment variable holding the key (never logged).
        response_format: constrain explain-mode answers with a JSON schema where accepted.
        transport: an httpx transport (tests, custom networking); default httpx's own.
    """

    def __init__(self, urls: list[str] | str, model: str, *, config: JudgeConfig | None = None,
                 cache: VerdictCache | None = None, concurrency: int = 16, timeout_s: float = D.TIMEOUT_S,
                 max_retries: int = D.MAX_RETRIES, backoff_s: float = 1.0, max_backoff_s: float = 30.0,
                 max_retry_after_s: float = 120.0, api_key_env: str = API_KEY_ENV, cooldown_s: float = 10.0,
                 response_format: bool = True, transport: httpx.AsyncBaseTransport | None = None,
                 discover: bool = True, deadline_s: float | None = D.DEADLINE_S,
                 circuit_breaker: int = D.CIRCUIT_BREAKER, revision: str | None = None,
                 probe_every_items: int | None = D.PROBE_EVERY_ITEMS,
                 probe_every_s: float | None = D.PROBE_EVERY_S,
                 probe_idle_s: float | None = D.PROBE_IDLE_S) -> None:
        urls = split_urls(urls)
        self.pool = EndpointPool(urls, cooldown_s=cooldown_s)
        self.model = model
        self.timeout_s, self.max_retries = timeout_s, max_retries
        self.retry = RetryPolicy(max_retries=max_retries, backoff_s=backoff_s, max_backoff_s=max_backoff_s)
        self.max_retry_after_s, self.circuit_breaker = max_retry_after_s, circuit_breaker
        self._key = api_key_for(urls, api_key_env)
        self._headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        self._transport = transport
        self._init_client_state()
        self.use_response_format = response_format
        # Who grades (reward.judge.startup, once, bounded by the deadline): every endpoint's entry for
        # this model, all agreeing; from vLLM also the root's content fingerprint, how it runs the
        # model, its answers to a fixed probe, and the ids its own template builds for a probe.
        known = establish([ep.url for ep in self.pool.endpoints], model, self._headers, deadline_s=deadline_s) \
            if discover and transport is None else None
        if known is not None and known.urls != [ep.url for ep in self.pool.endpoints]:
            self.pool = EndpointPool(known.urls, cooldown_s=cooldown_s)  # endpoints silent at start-up left out
        self.served_root = known.root if known else None
        self._listed = bool(known and known.entry)
        template = None
        if self.served_root:
            template = server_template_ids(known.urls, model, self._headers, known.clock)
        # who grades must be known to cache (and to pass the judge gate)
        self.identity_unknown, cache = cache_or_reason(model, known, revision, [ep.name for ep in self.pool.endpoints],
                                                       cache, own_transport=transport is not None, asked=discover)
        self.guard = SpecialTokenGuard(added_tokens(self.served_root)) if self.served_root else DEFAULT_GUARD
        url = self.pool.endpoints[0].url
        model_id = chat_model_id(url, model, self.served_root, known.facts if self.served_root else None, revision,
                                 weights=known.weights if known else None, template=template)
        super().__init__(None, model_id=model_id, config=config, cache=cache, concurrency=concurrency)
        # vLLM: the numbers each endpoint computes, against each other and against this identity's history
        self.probed = check_numbers(known, model, self._headers, self._probe_answers, self.cache, self.model_id,
                                    startup_asking(self))
        self.watch = start_watch(self, self.probed, model, cooldown_s=cooldown_s, every_items=probe_every_items,
                                 every_s=probe_every_s, idle_s=probe_idle_s)
        self.deadline_s = deadline_s  # bound of one grade call outside a run (reward.judge.budget)

    def __repr__(self) -> str:  # never show the key
        return f"ChatJudge(urls={[e.url for e in self.pool.endpoints]}, model={self.model!r})"

    def _probe_answers(self, url: str, clock, asking) -> list[float] | None:
        """The log-probabilities of yes and no (each summed over its spellings) for
        :data:`~reward.judge.signature.PROBE_ITEMS` at ``url``, asked as grading asks; a reply
        without logprobs is a bad reply, retried as ``asking`` says (one that lacks an answer word
        is the model's: None, no answers)."""
        prefixes = bool(self.served_root)

        def read(data) -> tuple[float, float]:
            py, pn, _ = sums_from_top(data["choices"][0]["logprobs"]["content"][0]["top_logprobs"], prefixes=prefixes)
            return py, pn

        out: list[float] = []
        for item in PROBE_ITEMS:
            body = self.choice_body(template_messages(CHOICE, item, self.guard))
            py, pn = asking.post(f"{url}/chat/completions", body, self._headers, clock, read)
            if py <= 0.0 or pn <= 0.0:
                return None
            out += [math.log(py), math.log(pn)]
        return out

    def _redact(self, text: str) -> str:
        text = super()._redact(text)
        return text.replace(self._key, "***") if self._key else text

    # ------------------------------------------------------------------ transport
    async def _post(self, body: dict, read: Callable[[dict], object] | None = None):
        """One chat request through the shared retry loop (``reward.judge.transport``): returns
        ``read(json)`` (the JSON by default) and counts its tokens; raises ``_Failed`` after the
        last attempt."""
        data, value = await self._request("/chat/completions", body,
                                          read=lambda d: (d, read(d) if read is not None else d))
        self._account(data)
        return value

    def _on_refused(self, resp: httpx.Response, body: dict) -> bool:
        return self._drop_response_format(resp, body)

    def _drop_response_format(self, resp: httpx.Response, body: dict) -> bool:
        """A server that does not take ``response_format`` is asked without it (parse only)."""
        if "response_format" in body and ("response_format" in resp.text or "json_schema" in resp.text):
            self.use_response_format = False
            body.pop("response_format")
            return True
        return False

    def _account(self, data: dict) -> None:
        prompt, completion, cached = usage_counts(data)  # counters a server garbles count 0, never crash
        self.stats.prompt_tokens += prompt
        self.stats.completion_tokens += completion
        self.stats.cached_tokens += cached

    # ------------------------------------------------------------------ requests
    def choice_body(self, messages: list[dict]) -> dict:
        body = {"model": self.model, "messages": messages, "max_tokens": 1, "temperature": 0.0,
                "logprobs": True, "top_logprobs": TOP_LOGPROBS}
        if self.served_root:  # vLLM: constrain the answer to the two words (hosted APIs lack the field)
            body["structured_outputs"] = {"choice": [YES_WORDS[0], NO_WORDS[0]]}
        return body

    def explain_body(self, messages: list[dict]) -> dict:
        body = {"model": self.model, "messages": messages, "max_tokens": self.config.max_explain_tokens,
                "temperature": self.config.temperature}
        if not self.config.constrained:  # the reference grader's request: no constraint at all
            return body
        if self.served_root:
            body["structured_outputs"] = {"regex": EXPLAIN_REGEX}
        elif self.use_response_format:
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": "rubric_item_verdict", "schema": EXPLAIN_SCHEMA, "strict": True}}
        return body

    async def _grade_uncached(self, template: Template, items: list[JudgeItem], *,
                              on_done: Callable[[int, Verdict], None] | None = None) -> list[Verdict]:
        async def one(i: int) -> Verdict:
            v = await self._grade_one(template, items[i], [])
            if on_done is not None:
                on_done(i, v)
            return v

        out = await run_staged(items, one)  # hosted APIs cache shared prefixes too
        return [v if v is not None else Verdict.failed("not graded") for v in out]

    async def _grade_one(self, template: Template, item: JudgeItem, ids: list[int]) -> Verdict:
        messages = template_messages(template, item, self.guard)
        if template.mode == "choice":
            return await self._grade_choice(messages)
        return await self._grade_explain(messages)

    async def _grade_choice(self, messages: list[dict]) -> Verdict:
        prefixes = bool(self.served_root)
        try:  # read inside the transport: a reply with NaN/inf/masked answer logprobs is retried
            return await self._post(self.choice_body(messages),
                                    lambda data: choice_verdict(data, requested=TOP_LOGPROBS, prefixes=prefixes))
        except _Failed as exc:
            return Verdict.failed(str(exc))

    async def _grade_explain(self, messages: list[dict]) -> Verdict:
        cfg = self.config
        body = self.explain_body(messages)
        last = "no attempt"
        for attempt in range(cfg.explain_attempts):
            if attempt:
                self.stats.retries += 1
            try:  # read inside the transport: a 200 without a message is a bad reply, retried there
                text = await self._post(body, _content)
            except _Failed as exc:
                return Verdict.failed(str(exc), mode="explain")
            parsed = explain_parser(cfg.parse)(text)
            if parsed is not None:
                met, why = parsed
                return Verdict(met=met, p_yes=1.0 if met else 0.0, explanation=why, mode="explain")
            last = f"unparseable grader output: {text[:200]!r}"
            if cfg.retry_temperature is not None:  # None: ask again at the same settings
                body = {**self.explain_body(messages), "temperature": max(cfg.temperature, cfg.retry_temperature),
                        "seed": attempt + 1}
        return Verdict.failed(f"{last} after {cfg.explain_attempts} attempts", mode="explain")

    async def _generate_json_uncached(self, template: Template, items: list[JudgeItem], *, constraint: dict,
                                      required: tuple[str, ...], max_tokens: int, attempts: int,
                                      on_done: Callable[[int, JSONResult], None] | None = None) -> list[JSONResult]:
        async def one(i: int) -> JSONResult:
            r = await self._generate_json_chat(template_messages(template, items[i], self.guard), constraint=constraint,
                                               required=required, max_tokens=max_tokens, attempts=attempts)
            if on_done is not None:
                on_done(i, r)
            return r

        out = await run_staged(items, one)
        return [r if r is not None else JSONResult.failed("not generated") for r in out]

    async def _generate_json_chat(self, messages: list[dict], *, constraint: dict, required: tuple[str, ...],
                                  max_tokens: int, attempts: int) -> JSONResult:
        body: dict = {"model": self.model, "messages": messages, "max_tokens": max_tokens,
                      "temperature": self.config.temperature}
        if self.use_response_format and "json" in constraint:  # a regex has no chat-API form: parse only
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": "judge_json", "schema": constraint["json"]}}
        last, text = "no attempt", None
        for attempt in range(attempts):
            if attempt:
                self.stats.retries += 1
            try:
                text = await self._post(body, _content)
            except _Failed as exc:
                return JSONResult.failed(str(exc))
            obj = parse_json_object(text, required)
            if obj is not None:
                return JSONResult(value=obj, text=text)
            last = f"unparseable JSON: {text[:200]!r}"
            body = {**body, "temperature": max(self.config.temperature, 0.7), "seed": attempt + 1}
        return JSONResult.failed(f"{last} after {attempts} attempts", text=text)


def _content(data: dict) -> str:
    """The reply's message text (an empty or null content is an empty answer, parsed as such).

    Raises:
        BadReply: a reply without ``choices[0].message`` (a gateway's error page sent with 200, a
            truncated body): the transport retries it like any fault, then the item fails.
    """
    try:
        message = data["choices"][0]["message"]
        content = message.get("content")
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise BadReply(f"a reply without choices[0].message ({type(exc).__name__}): {str(data)[:120]!r}") from exc
    if content is not None and not isinstance(content, str):
        raise BadReply(f"a message content that is no text: {type(content).__name__}")
    return content or ""
