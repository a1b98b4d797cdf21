"""May this HealthBench number be set beside a published one? One verdict, with every reason.

Published HealthBench numbers were graded by gpt-4.1 with the reference grader template and
system message (explain mode: a JSON verdict per rubric item) sampled the reference way
(temperature 0.5, max_tokens 2048, no response format, retries at the same settings, the
reference parse), on the published data file, with no system prompt added, every example scored
within the token budget, and the plain (not length-adjusted) clipped mean. A run that differs in
any of these gives a number of another configuration; each difference is its own note. Greedy
decoding of a thinking policy is a note too. :func:`comparability`
reads a run's ``metrics.json`` content and returns

    {"comparable_to_published": bool, "comparability_notes": [one line per reason]}

``comparable_to_published`` is True exactly when there is no note.

The grader is not identified by the name it answers to: any server can answer to ``gpt-4.1``
(vLLM's ``--served-model-name gpt-4.1``). The run records who grades
(:mod:`training.eval.judge_record`): its endpoints, the weights the server reports (vLLM's
``root``) and its full identity. A grader is the reference one only when all of these hold:
it is named gpt-4.1 (a dated snapshot included); every endpoint is OpenAI's own API,
``https://api.openai.com`` (https, default port: a local server cannot present that host's
certificate); and the server reports no local weights (``root``: vLLM does, OpenAI does not).
Anything else (a gateway or proxy in front of OpenAI included) is named with its reason; a run
that did not record its endpoints (an older version) is not comparable either.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reward.healthbench.variants import VARIANTS
from reward.judge import official

PUBLISHED_GRADERS = ("gpt-4.1", "gpt-4.1-2025-04-14")
PUBLISHED_DATA = {v.sha256: v.name for v in VARIANTS.values()}


def is_published_grader(name: str | None) -> bool:
    """gpt-4.1 itself (a dated snapshot included), not gpt-4.1-mini or -nano; a provider prefix
    (``openai/gpt-4.1``) is allowed."""
    if not name:
        return False
    return name.strip().lower().rsplit("/", 1)[-1] in PUBLISHED_GRADERS


REFERENCE_HOST = "api.openai.com"


def is_reference_endpoint(url: str) -> bool:
    """OpenAI's own API: https, host api.openai.com, the default port."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return False
    return parts.scheme == "https" and (parts.hostname or "").lower() == REFERENCE_HOST and port in (None, 443)


def identity_notes(g: Mapping[str, Any]) -> list[str]:
    """Why a grader NAMED gpt-4.1 is not shown to be OpenAI's gpt-4.1 (none when it is)."""
    name = g.get("judge_model")
    endpoints = g.get("judge_endpoints")
    if not endpoints:
        return [f"the grader named {name!r} has no recorded endpoint (a run of an older version, or a judge "
                "object): a name alone does not show it is OpenAI's gpt-4.1"]
    notes = []
    others = [u for u in endpoints if not is_reference_endpoint(u)]
    if others:
        notes.append(f"the grader named {name!r} is served at {', '.join(others)}, not by OpenAI "
                     f"(https://{REFERENCE_HOST}): any server can answer to that name")
    if g.get("judge_root"):
        notes.append(f"the server of the grader named {name!r} reports local weights {g['judge_root']!r} "
                     f"(identity {g.get('judge_identity')}): a vLLM server, not OpenAI's gpt-4.1")
    return notes


def _grader_notes(g: Mapping[str, Any]) -> list[str]:
    """One note per way the grader differs from the reference one: template body, system
    message, mode, and each explain-mode sampling setting."""
    notes = []
    pin = official.OFFICIAL_TEMPLATE_SHA256
    if g.get("template_sha256") != pin:
        notes.append(f"grader template {g.get('template')!r} is not the official HealthBench grader template "
                     f"(SHA-256 {str(g.get('template_sha256'))[:16]}..., official {pin[:16]}...)")
    system_pin = official.text_sha256(official.GRADER_SYSTEM_MESSAGE)
    if g.get("system_message_sha256") != system_pin:
        notes.append(f"grader system message (SHA-256 {str(g.get('system_message_sha256'))[:16]}...) is not the "
                     f"reference grader's {official.GRADER_SYSTEM_MESSAGE!r}")
    if g.get("mode") != "explain":
        notes.append(f"grading mode is {g.get('mode')!r} (one yes/no token), not explain (a JSON verdict per item)")
        return notes
    sampling = g.get("sampling")
    if not isinstance(sampling, Mapping):
        return [*notes, "the grader's sampling settings are not recorded (a run of an older version)"]
    for key, want in official.reference_grader_record().items():
        if key == "attempts":  # ours: the reference retries without bound; what still fails is unscored
            continue
        if sampling.get(key) != want:
            notes.append(f"grader {key} is {sampling.get(key)!r}, not the reference grader's {want!r}")
    return notes


THINKING_SAMPLING = "temperature 0.6, top_p 0.95, top_k 20"


def decoding_notes(gen: Mapping[str, Any]) -> list[str]:
    """Policy decoding that published numbers would not have used: greedy decoding with thinking
    on (or left to the template, which turns it on for Qwen3), which Qwen3's guidance warns against."""
    if gen and not gen.get("temperature") and gen.get("thinking") is not False:
        return [f"greedy decoding with thinking {'on' if gen.get('thinking') else 'left to the chat template'}: "
                f"thinking models are meant to sample (Qwen3 recommends {THINKING_SAMPLING}); "
                "greedy decoding can loop or repeat"]
    return []


def comparability(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """The verdict and its reasons for one HealthBench run (see the module docstring).

    Args:
        metrics: the run's metrics (``grading``, ``data``, ``system_prompt``, ``n_unscored``,
            ``length_adjusted``, ``responses``, ``generation``, ``n_rows`` as ``metrics.json`` holds them).
    """
    notes: list[str] = []
    g = metrics.get("grading") or {}
    d = metrics.get("data") or {}
    judge = g.get("judge_model")
    if not is_published_grader(judge):
        notes.append(f"grader model is {judge!r}, not gpt-4.1 (published numbers are graded by gpt-4.1)")
    else:
        notes += identity_notes(g)
    notes += _grader_notes(g)
    sha = d.get("sha256")
    if sha not in PUBLISHED_DATA:
        notes.append(f"data file {d.get('file')!r} (SHA-256 {str(sha)[:16]}...) is not a published HealthBench file")
    rows_in_file, n_rows = d.get("rows_in_file"), metrics.get("n_rows")
    if rows_in_file is not None and n_rows is not None and n_rows < rows_in_file:
        notes.append(f"only {n_rows} of the file's {rows_in_file} examples were evaluated (--limit)")
    if metrics.get("n_unscored"):
        notes.append(f"{metrics['n_unscored']} example(s) unscored after judge or generation failures "
                     "(excluded from the mean; rerun to retry them)")
    if metrics.get("length_adjusted"):
        notes.append("length adjustment is on (a later HealthBench revision; published numbers here are unadjusted)")
    sp = (metrics.get("system_prompt") or {}).get("mode")
    if sp != "none":
        notes.append(f"system prompt is {sp!r}, not none (the official setting adds no system prompt)")
    cut = ((metrics.get("responses") or {}).get("finish_reasons") or {}).get("length", 0)
    if cut:
        notes.append(f"{cut} response(s) stopped at the token budget (max_new_tokens) and were graded cut off")
    notes += decoding_notes(metrics.get("generation") or {})
    return {"comparable_to_published": not notes, "comparability_notes": notes}


def decoding_line(metrics: Mapping[str, Any]) -> str:
    """The policy's decoding in one line, shown beside the verdict."""
    gen = metrics.get("generation") or {}
    if not gen:
        return ""
    think = {True: "on", False: "off"}.get(gen.get("thinking"), "template default")
    if gen.get("temperature"):
        how = f"temperature {gen['temperature']:g}, top_p {gen.get('top_p', 1.0):g}"
        how += f", top_k {gen['top_k']}" if gen.get("top_k") else ""
    else:
        how = "greedy"
    src = f" ({gen['decoding_source']})" if gen.get("decoding_source") else ""
    return f"policy decoding: {how}{src}; thinking {think}; max_new_tokens {gen.get('max_new_tokens')}"


def markdown_lines(metrics: Mapping[str, Any]) -> list[str]:
    """The verdict as the first lines of ``report.md``."""
    if "comparable_to_published" not in metrics:
        return []
    dec = [f"_{decoding_line(metrics)}_", ""] if decoding_line(metrics) else []
    if metrics["comparable_to_published"]:
        return [("**Comparable to published HealthBench numbers**: OpenAI's gpt-4.1 grader (api.openai.com) with the reference template, "
                 "system message and sampling, published data, no system prompt, every example scored."), "", *dec]
    return ["**Not comparable to published HealthBench numbers**, because:", ""] + \
        [f"- {n}" for n in metrics.get("comparability_notes", [])] + ["", *dec]


def html_block(metrics: Mapping[str, Any]) -> str:
    """The verdict as a block at the top of ``report.html``."""
    import html

    if "comparable_to_published" not in metrics:
        return ""
    dec = f"<p class=sub id=decoding>{html.escape(decoding_line(metrics))}</p>" if decoding_line(metrics) else ""
    if metrics["comparable_to_published"]:
        return ("<p class=ok id=verdict><b>Comparable to published HealthBench numbers</b>: OpenAI's gpt-4.1 grader (api.openai.com) with the "
                "reference template, system message and sampling, published data, no system prompt, every example "
                "scored.</p>" + dec)
    items = "".join(f"<li>{html.escape(n)}</li>" for n in metrics.get("comparability_notes", []))
    return (f"<div class=warn id=verdict><b>Not comparable to published HealthBench numbers</b>, because:"
            f"<ul>{items}</ul></div>{dec}")
