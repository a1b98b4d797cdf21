"""The one judge schema: :class:`JudgeSettings`, and its one factory :meth:`JudgeSettings.build`.

TRL YAML (``judge:``), verl YAML (``reward_kwargs.judge``), the evaluation config (``judge:``),
every CLI command that grades (its judge options are generated from these fields by
``rubricstree.judge_options``), the benchmarks, synth, optimize and meta-eval all validate
against this model, so a key that works in one works in the others and a typo fails at load time
naming its field. ``reward.settings`` re-exports it beside the stage settings.

Data flow: a mapping / CLI flags -> :class:`JudgeSettings` -> :meth:`JudgeSettings.build`
(``reward.judge.make_judge``) -> a live judge. The served backends take their defaults from here
(``reward.judge.defaults``), so a timeout, retry count or deadline has one default everywhere.
"""

from __future__ import annotations

import argparse
import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from reward.judge import defaults as D


def _flag(name: str, *aliases: str, group: str = "judge") -> dict[str, Any]:
    """Field metadata for the generated CLI option: its flag and hidden deprecated aliases."""
    return {"flag": name, "aliases": list(aliases), "group": group}


class JudgeSettings(BaseModel):
    """How to build a judge: a served one (``url``: vLLM or any OpenAI-compatible chat API) or a
    model in this process.

    With ``url`` the judge is remote and ``model`` is never its tokenizer (configs default
    ``model`` to what ``scripts/train.sh`` would serve, which need not be what a given server
    runs); set ``tokenizer`` for that. Without ``url``, ``model`` runs in process unless
    ``in_process`` is false (then a launcher such as ``scripts/train.sh`` serves it first).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str | None = Field(None, description="judge endpoint(s), comma-separated: vLLM or an OpenAI-compatible "
                                              "chat API (with or without /v1)", json_schema_extra=_flag("--judge-url"))
    model: str | None = Field(None, description="judge model: loaded in process (no url), or the model "
                                                "scripts/train.sh serves when no url is given",
                              json_schema_extra=_flag("--judge-model"))
    served_model: str | None = Field(None, description="the model name on the server (default: the only or first "
                                                       "it lists)",
                                     json_schema_extra=_flag("--served-model", "--served-judge",
                                                             "--judge-served-model"))
    tokenizer: str | None = Field(None, description="with a url: the judge's tokenizer (default: the model root "
                                                    "the server reports)", json_schema_extra=_flag("--judge-tokenizer"))
    api: Literal["completions", "chat", "auto"] = Field(
        "auto", description="completions (vLLM, token ids) | chat (/v1/chat/completions, hosted graders) | auto "
                            "(a vLLM /v1/models root -> completions)", json_schema_extra=_flag("--judge-api"))
    api_key_env: str | None = Field(None, description="environment variable with the judge's API key (default "
                                                      "RUBRICSTREE_JUDGE_API_KEY; OPENAI_API_KEY for api.openai.com)",
                                    json_schema_extra=_flag("--judge-api-key-env"))
    mode: Literal["choice", "explain"] = Field("choice", description="choice: yes/no by logprobs; explain: a short "
                                                                     "reason before the verdict (JSON)",
                                               json_schema_extra=_flag("--judge-mode", "--mode", "--grading"))
    temperature: float | None = Field(None, ge=0.0, description="sampling temperature of generated (JSON) answers "
                                                                "(default: 0; 0.5 under the reference HealthBench "
                                                                "grader template)",
                                      json_schema_extra=_flag("--judge-temperature"))
    max_tokens: int | None = Field(None, ge=16, description="decoding budget of an explain-mode verdict (default: "
                                                            "512; 2048 under the reference HealthBench grader "
                                                            "template)", json_schema_extra=_flag("--judge-max-tokens"))
    template: str | None = Field(None, description="a grader template file replacing ours (placeholders "
                                                   "{{conversation}}, {{response}}, {{rubric_item}}, ... or the "
                                                   "reference <<conversation>>, <<rubric_item>>)",
                                 json_schema_extra=_flag("--judge-template", "--grader-template"))
    cache: bool | str = Field(True, description="true: the default verdict cache; a path: that cache; false: none")
    concurrency: int = Field(D.CONCURRENCY, ge=1, description="most judge requests in flight (served judge)",
                             json_schema_extra=_flag("--judge-concurrency"))
    timeout_s: float = Field(D.TIMEOUT_S, gt=0, description="seconds one judge request may take (served judge)",
                             json_schema_extra=_flag("--item-timeout", "--timeout"))
    max_retries: int = Field(D.MAX_RETRIES, ge=0, description="retries of a failed judge request (served judge)",
                             json_schema_extra=_flag("--max-retries"))
    deadline_s: float | None = Field(
        D.DEADLINE_S, gt=0, description="seconds a run may spend waiting on servers, from its first request: the "
                                   "judge's start-up checks and requests, and the policy server's in eval (a "
                                   "command's whole run; in training, one reward call); then the run stops "
                                   "keeping what was done (served judge)", json_schema_extra=_flag("--deadline"))
    circuit_breaker: int = Field(
        D.CIRCUIT_BREAKER, ge=0, description="stop the run when this many requests in a row got no answer (timeout or refused "
                              "connection) from every endpoint; 0: never (served judge)",
        json_schema_extra=_flag("--circuit-breaker"))
    probe_every_items: int = Field(D.PROBE_EVERY_ITEMS, ge=0, description="during a run, each endpoint answers the "
                                   "fixed probe items again after this many requests (and after every reconnection); "
                                   "a changed answer stops the run; 0: off (served vLLM judge)",
                                   json_schema_extra=_flag("--probe-every-items"))
    probe_every_s: float = Field(D.PROBE_EVERY_S, ge=0, description="... or after this many seconds, whichever comes "
                                 "first; 0: off (served vLLM judge)", json_schema_extra=_flag("--probe-every-s"))
    probe_idle_s: float = Field(D.PROBE_IDLE_S, ge=0, description="an endpoint with nothing in flight that was quiet "
                                "this many seconds answers the probe items before it grades again (a restart between "
                                "two training steps); 0: off (served vLLM judge)", json_schema_extra=_flag("--probe-idle-s"))
    revision: str | None = Field(None, description="a label naming the judge's weights beyond what the server "
                                                   "reports (part of the verdict cache key)",
                                 json_schema_extra=_flag("--judge-revision"))
    in_process: bool | None = Field(None, description="true: run the judge model in this process (no server); "
                                                      "null: in process when only model is given")

    def resolved(self) -> JudgeSettings:
        """The judge actually built: in process (``url`` dropped) or remote (``model`` dropped)."""
        if self.in_process or (self.in_process is None and not self.url and self.model):
            return self.model_copy(update={"url": None, "in_process": True})
        return self.model_copy(update={"model": None})

    @property
    def served(self) -> bool:
        return bool(self.resolved().url)

    def judge_config(self, **overrides: Any):
        """The backend-independent :class:`~reward.judge.types.JudgeConfig` of these settings."""
        from reward.judge.types import JudgeConfig

        given = {"temperature": self.temperature, "max_explain_tokens": self.max_tokens}
        return JudgeConfig(**{"mode": self.mode, "template_file": self.template,
                              **{k: v for k, v in given.items() if v is not None}, **overrides})

    def build(self, *, cache: Any = None, config: Any = None, **backend: Any):
        """A live judge (``reward.judge.make_judge``), the one place settings become a judge.

        Args:
            cache: a :class:`~reward.judge.cache.VerdictCache` or False overriding ``self.cache``
                (commands with ``--cache-dir``/``--no-cache``).
            config: a :class:`~reward.judge.types.JudgeConfig` overriding the one built from these
                settings (callers that grade with their own template or mode).
            backend: extra backend arguments (``transport``, a tokenizer object, ``device``, ...).
        """
        from reward.judge.cache import VerdictCache
        from reward.judge.factory import make_judge

        s = self.resolved()
        if cache is None:
            cache = VerdictCache(s.cache) if isinstance(s.cache, str) else s.cache
        kw: dict[str, Any] = {}
        if s.url:
            kw = {"concurrency": s.concurrency, "timeout_s": s.timeout_s, "max_retries": s.max_retries,
                  "deadline_s": s.deadline_s, "circuit_breaker": s.circuit_breaker,
                  "probe_every_items": s.probe_every_items, "probe_every_s": s.probe_every_s,
                  "probe_idle_s": s.probe_idle_s}
            if s.api_key_env:
                kw["api_key_env"] = s.api_key_env
        if s.revision:
            kw["revision"] = s.revision
        judge = make_judge(**{"judge_url": s.url, "judge_model": s.model, "served_model": s.served_model,
                              "tokenizer": s.tokenizer, "config": config or self.judge_config(), "cache": cache,
                              "judge_api": s.api, **kw, **backend})
        judge.built_from = self  # what a panel's second judge inherits (reward.stages.panel)
        return judge

    def for_another_judge(self, spec: str) -> JudgeSettings:
        """These settings for the judge at ``spec`` (a URL: served; else a model path: in process):
        how it is asked and bounded (mode, temperature, template, timeouts, retries, deadline,
        breaker, probes, concurrency) carried over, who it is (url, model, served name, tokenizer,
        API, key, revision) its own."""
        own = {"url", "model", "served_model", "tokenizer", "api", "api_key_env", "revision", "in_process"}
        kept = {k: v for k, v in self.model_dump().items() if k not in own}
        return JudgeSettings(**kept, **({"url": spec} if "://" in spec else {"model": spec}))


def _value_type(annotation: Any) -> Any:
    """The type a command line parses for a field: a Literal becomes ``str`` (pydantic checks the
    choice), ``X | None`` becomes ``X | None`` of that."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is typing.Literal:
        return str
    if args and typing.get_origin(args[0]) is typing.Literal:
        return str | None
    return annotation


def judge_flags() -> dict[str, dict[str, Any]]:
    """``{field: {"flag", "aliases", "help", "default", "type"}}``: the judge options every command
    line takes (the CLI's ``rubricstree.judge_options``, the benchmarks' :func:`add_judge_arguments`)."""
    out = {}
    for name, field in JudgeSettings.model_fields.items():
        meta = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        if "flag" in meta:
            out[name] = {"flag": meta["flag"], "aliases": list(meta.get("aliases", [])), "help": field.description,
                         "default": field.default, "type": _value_type(field.annotation)}
    return out


def add_judge_arguments(parser: argparse.ArgumentParser, *, defaults: dict[str, Any] | None = None) -> None:
    """The judge options on an ``argparse`` parser (scripts and benchmarks), old spellings hidden;
    read them back with :func:`settings_from_args`."""
    group = parser.add_argument_group("judge", "the judge (reward.judge.settings.JudgeSettings)")
    for name, f in judge_flags().items():
        kind = next((a for a in typing.get_args(f["type"]) if a is not type(None)), f["type"])
        default = (defaults or {}).get(name, f["default"])
        group.add_argument(f["flag"], dest=f"judge__{name}", type=kind, default=default,
                           help=f"{f['help']} (default: {default})")
        for alias in f["aliases"]:
            group.add_argument(alias, dest=f"judge__{name}", type=kind, help=argparse.SUPPRESS)


def settings_from_args(ns: argparse.Namespace, **overrides: Any) -> JudgeSettings:
    """The :class:`JudgeSettings` of an ``argparse`` namespace filled by :func:`add_judge_arguments`."""
    data = {k[len("judge__"):]: v for k, v in vars(ns).items() if k.startswith("judge__")}
    return settings_from_values({**data, **overrides})


def settings_from_values(values: dict[str, Any]) -> JudgeSettings:
    """Validated settings from command-line values (``None``: not given). ``--judge-model`` with
    ``--judge-url`` names the judge's tokenizer, as it always has on the command line."""
    data = {k: v for k, v in values.items() if v is not None}
    if data.get("url") and data.get("model") and not data.get("tokenizer"):
        data["tokenizer"] = data["model"]
    return JudgeSettings.model_validate(data)
