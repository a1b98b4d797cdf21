"""Records the judge takes and returns: items to grade, verdicts, and cost counters."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Mode = Literal["choice", "explain"]


class Message(BaseModel):
    """One chat turn."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    role: str
    content: str


class JudgeItem(BaseModel):
    """One (conversation, response, criterion) triple to grade.

    ``points`` is shown to the judge only by templates that ask for it (HealthBench style);
    the Boolean verdict never depends on its sign: for a negative-points item "met" means the
    undesirable behaviour is present, as in HealthBench.
    """

    model_config = ConfigDict(frozen=True)

    conversation: tuple[Message, ...]
    response: str
    criterion: str
    points: float | None = None


class Verdict(BaseModel):
    """The judge's answer for one item.

    ``met`` is None exactly when ``failure`` is set: a failed call is never a silent "no".
    ``p_yes`` is the probability of "yes" normalised over yes/no (choice mode) or 1.0/0.0 from
    the parsed JSON (explain mode).
    """

    model_config = ConfigDict(frozen=True)

    met: bool | None
    p_yes: float | None = Field(None, ge=0.0, le=1.0, allow_inf_nan=False)  # NaN is never a verdict
    explanation: str | None = None
    failure: str | None = None
    cached: bool = False
    mode: Mode = "choice"

    @property
    def ok(self) -> bool:
        return self.failure is None

    @classmethod
    def failed(cls, reason: str, mode: Mode = "choice") -> Verdict:
        return cls(met=None, p_yes=None, failure=reason, mode=mode)


@dataclass
class JudgeStats:
    """What the judge computed: the numbers that decide the cost of a rubric reward."""

    requests: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    retries: int = 0
    failures: int = 0
    by_endpoint: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "by_endpoint"}

    def reset(self) -> None:
        for f in fields(self):
            setattr(self, f.name, {} if f.name == "by_endpoint" else 0)


class JudgeConfig(BaseModel):
    """Settings shared by every judge backend."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: Mode = Field("choice", description="choice: one constrained yes/no token; explain: JSON with an explanation")
    max_explain_tokens: int = Field(512, ge=16, description="decoding budget of explain mode")
    explain_attempts: int = Field(3, ge=1, le=10, description="parse attempts in explain mode before a failure")
    template_file: str | None = Field(None, description="a user template file replacing ours (explain mode)")
    temperature: float = Field(0.0, ge=0.0, description="sampling temperature of explain mode")
    constrained: bool = Field(True, description=(
        "constrain explain-mode answers to the JSON verdict (a JSON schema or regex where the backend takes one); "
        "false: the grader answers freely and the text is parsed, as the reference HealthBench grader does"))
    retry_temperature: float | None = Field(0.7, ge=0.0, description=(
        "an unparseable explain answer is asked again at max(temperature, this) with a seed; "
        "None: asked again at the same settings, no seed (the reference grader's retry)"))
    parse: Literal["robust", "reference"] = Field("robust", description=(
        "robust: the last JSON object with a boolean criteria_met anywhere in the text (fences, prose, "
        "'true' strings tolerated); reference: the whole answer, a ```json fence stripped, must be one JSON "
        "object whose criteria_met is a JSON boolean (the reference grader's parse)"))
    prefix_block: int = Field(32, ge=0, description=(
        "pad the ids shared by a rollout's criteria (and by a conversation's responses) to a multiple of this "
        "many tokens, so a server's prefix cache, which reuses whole KV blocks, reuses all of them; use the "
        "server's block size or a multiple of it (32 covers vLLM's GPU default 16 and our CPU server's 32); "
        "0 = no padding. Changes the prompt ids, so it is part of the verdict cache key"))


class JSONResult(BaseModel):
    """The judge's answer to a JSON generation request (``Judge.generate_json``).

    ``value`` is the parsed object, None exactly when ``failure`` says why nothing usable came
    back (transport failure, unparseable text after the allowed attempts): a failure is never
    an empty object. ``text`` is the raw generated text of the last attempt, for audits.
    """

    model_config = ConfigDict(frozen=True)

    value: dict | None = None
    failure: str | None = None
    text: str | None = None
    cached: bool = False

    @property
    def ok(self) -> bool:
        return self.failure is None

    @classmethod
    def failed(cls, reason: str, text: str | None = None) -> JSONResult:
        return cls(value=None, failure=reason, text=text)


def sampling_suffix(config: JudgeConfig) -> str:
    """A verdict-cache key suffix naming explain-mode sampling settings other than the defaults
    (empty for the defaults, so existing cache keys stay valid): a verdict sampled at another
    temperature, budget, constraint or parse is another grader's verdict."""
    if config.mode != "explain":
        return ""
    d = JudgeConfig()
    parts = []
    if config.temperature != d.temperature:
        parts.append(f"t{config.temperature:g}")
    if config.max_explain_tokens != d.max_explain_tokens:
        parts.append(f"mt{config.max_explain_tokens}")
    if config.constrained != d.constrained:
        parts.append("free")
    if config.retry_temperature != d.retry_temperature:
        parts.append("rt-same" if config.retry_temperature is None else f"rt{config.retry_temperature:g}")
    if config.parse != d.parse:
        parts.append(f"parse-{config.parse}")
    return f"+{','.join(parts)}" if parts else ""
