"""The tokenizer and chat template that build a judge's prompt ids: their fingerprint, and the
check at start-up that the server would build the same ids.

The token-id backend sends ids rendered here (``render.py``), so a tokenizer other than the
server's sends the model other tokens than the text says, and where the answer words' ids differ
the server's choice grammar masks them (vLLM then reports -9999.0). Two things follow:

- :func:`tokenizer_fingerprint` is part of the judge's identity (the verdict cache key): the
  class, vocabulary, special tokens and chat template of the tokenizer, the framing read from the
  template, the answer tokens, and the ids of a few probe texts;
- :func:`check_against_servers` asks each endpoint's ``/tokenize`` (vLLM) for the ids of the same
  probe texts, of the answer words and of a probe conversation through its chat template, and
  refuses to run when any differs, naming the endpoint and the first difference. A server without
  ``/tokenize`` cannot be checked (a warning; the fingerprint still keeps the verdicts apart).

The chat backend builds no ids; :func:`server_template_ids` gives the ids a server's own
tokenizer and template build for the probe conversation, which name them in its identity.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping

from reward.errors import InputError, JudgeDeadlineError

log = logging.getLogger(__name__)
TOKENIZE_TIMEOUT_S = 10.0
# Our own probe texts: punctuation, numbers, blanks, other scripts, an emoji and markup.
PROBE_TEXTS = (
    "Criterion: the reply advises calling emergency services. Is the criterion met? Answer yes or no.",
    "Dose 7.5 mg/kg (max 4 g/day);  fever 38,5 °C\t-> see a GP.\n\nPaciente: dolor torácico. 患者说胸痛。 🙂 <b>",
)
PROBE_SYSTEM = "You check one reply against one criterion."
PROBE_USER = "Conversation: I feel dizzy.\n\nCriterion: asks about falls."


def _framing_ids(renderer) -> list[int]:
    """The ids our renderer builds around a probe system and user text (its chat framing)."""
    f, enc = renderer.framing, renderer._encode_trusted  # noqa: SLF001 - the renderer's own trusted encoding
    if f.system_supported:
        return list(enc(f.before_system) + enc(PROBE_SYSTEM) + enc(f.between) + enc(PROBE_USER) + enc(f.after_user))
    return list(enc(f.before_system) + enc(PROBE_SYSTEM + "\n\n") + enc(PROBE_USER) + enc(f.after_user))


def _probe_messages(system_supported: bool) -> list[dict[str, str]]:
    if system_supported:
        return [{"role": "system", "content": PROBE_SYSTEM}, {"role": "user", "content": PROBE_USER}]
    return [{"role": "user", "content": PROBE_SYSTEM + "\n\n" + PROBE_USER}]


def tokenizer_fingerprint(renderer) -> str:
    """16 hex characters naming the tokenizer and chat template as the renderer uses them."""
    tok = renderer.tokenizer
    h = hashlib.sha256(type(tok).__name__.encode())
    try:
        vocab = tok.get_vocab()
        h.update(json.dumps(sorted(vocab.items()), ensure_ascii=False).encode())
    except (AttributeError, NotImplementedError, TypeError):
        pass  # a tokenizer without a listable vocabulary: its probe ids below still name it
    special = getattr(tok, "all_special_tokens", None) or []
    h.update(json.dumps(sorted(map(str, special)), ensure_ascii=False).encode())
    h.update(str(getattr(tok, "chat_template", None)).encode())
    h.update(repr(renderer.framing).encode())
    h.update(f"{renderer.yes_word}:{renderer.yes_id}/{renderer.no_word}:{renderer.no_id}".encode())
    for text in PROBE_TEXTS:
        h.update(json.dumps([renderer._encode_trusted(text), renderer.encode_untrusted(text)]).encode())  # noqa: SLF001
    h.update(json.dumps(_framing_ids(renderer)).encode())
    return h.hexdigest()[:16]


def _tokenize(url: str, body: Mapping, headers: Mapping[str, str], clock) -> tuple[int, list[int] | None]:
    from reward.judge.startup import post_json
    from reward.serving import server_root

    try:
        status, data = post_json(f"{server_root(url)}/tokenize", body, headers, clock.seconds(TOKENIZE_TIMEOUT_S))
    except JudgeDeadlineError:
        raise
    except Exception as exc:  # noqa: BLE001 - an endpoint that cannot tokenize cannot be checked
        log.debug("no /tokenize answer from %s: %s", url, exc)
        return 0, None
    tokens = data.get("tokens") if isinstance(data, dict) else None
    if status != 200 or not isinstance(tokens, list):
        return status, None
    try:
        return status, [int(t) for t in tokens]
    except (TypeError, ValueError):
        return status, None


def _first_difference(ours: list[int], theirs: list[int]) -> str:
    i = next((k for k, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
    return (f"{len(ours)} ids here, {len(theirs)} on the server; the first difference at position {i}: "
            f"{ours[i:i + 4]} here, {theirs[i:i + 4]} there")


def check_against_servers(renderer, urls: list[str], model: str, headers: Mapping[str, str], clock, *,
                          tokenizer_name: str) -> dict[str, str]:
    """Compare the renderer's ids with each endpoint's ``/tokenize``; ``{endpoint: status}``
    (``checked``, or why it could not be).

    Raises:
        InputError: an endpoint tokenizes a probe text, an answer word or the probe conversation
            other than the renderer does (names the endpoint, the text and the difference).
    """
    from reward.serving import redact_url

    out: dict[str, str] = {}
    for url in urls:
        name = redact_url(url)
        texts = (*PROBE_TEXTS, renderer.yes_word, renderer.no_word)
        status = "checked"
        for text in texts:
            code, theirs = _tokenize(url, {"model": model, "prompt": text, "add_special_tokens": False}, headers,
                                     clock)
            if theirs is None:
                status = f"not checked: no /tokenize answer (HTTP {code or 'none'})"
                break
            ours = list(renderer._encode_trusted(text))  # noqa: SLF001
            if ours != theirs:
                raise _mismatch(name, tokenizer_name, f"the text {text[:60]!r}", ours, theirs)
        out[name] = status
        if status != "checked":
            log.warning("judge endpoint %s: the tokenizer could not be checked (%s); its fingerprint still names "
                        "the verdicts", name, status)
            continue
        body = {"model": model, "messages": _probe_messages(renderer.framing.system_supported),
                "add_generation_prompt": True, "add_special_tokens": False,
                "chat_template_kwargs": {"enable_thinking": False}}
        code, theirs = _tokenize(url, body, headers, clock)
        if theirs is None:  # a server without a chat template: nothing to compare ours with
            out[name] = f"tokenizer checked; chat template not checked (HTTP {code or 'none'})"
            continue
        ours = _framing_ids(renderer)
        if ours != theirs:
            raise _mismatch(name, tokenizer_name, "a conversation through the chat template", ours, theirs)
    return out


def _mismatch(name: str, tokenizer_name: str, what: str, ours: list[int], theirs: list[int]) -> InputError:
    return InputError(
        f"the judge tokenizer {tokenizer_name} does not build the prompt ids the server at {name} builds for "
        f"{what} ({_first_difference(ours, theirs)}): the judge would read other tokens than the prompt says, and "
        "where the answer words' ids differ the server masks them. Use the tokenizer and chat template the server "
        "serves: leave --judge-tokenizer (judge.tokenizer) unset to take the server's root, or point it at the "
        "served model", field="tokenizer")


def server_template_ids(urls: list[str], model: str, headers: Mapping[str, str], clock) -> str | None:
    """A fingerprint of the ids the servers' own tokenizer and chat template build for the probe
    conversation (the chat backend's prompts), or None when no endpoint tokenizes messages.

    Raises:
        InputError: two endpoints build different ids (names the one that differs).
    """
    from reward.serving import redact_url

    body = {"model": model, "messages": _probe_messages(True), "add_generation_prompt": True,
            "add_special_tokens": False, "chat_template_kwargs": {"enable_thinking": False}}
    seen: tuple[str, list[int]] | None = None
    for url in urls:
        _, ids = _tokenize(url, body, headers, clock)
        if ids is None:
            continue
        if seen is not None and ids != seen[1]:
            raise InputError(
                f"the judge pool does not agree on who grades: {redact_url(url)} builds other prompt ids for a probe "
                f"conversation than {seen[0]} ({_first_difference(seen[1], ids)}): another tokenizer or chat template. "
                "Serve the same model at every endpoint of --judge-url", field="url")
        seen = seen or (redact_url(url), ids)
    return hashlib.sha256(json.dumps(seen[1]).encode()).hexdigest()[:16] if seen else None
