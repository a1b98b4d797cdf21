"""The reference HealthBench grader template, fetched from its public source at run time.

The project ships no copy of it. ``official_template_file()`` downloads the reference harness
(``healthbench_eval.py`` in the openai/simple-evals repository), takes the ``GRADER_TEMPLATE``
string out of it with Python's ``ast`` (no code from it is run), checks its SHA-256 against the pin
below and caches it under the user cache folder; later runs read the cache. Offline (our
machines), the fetch fails with a message naming the URL and the way out: save the template
string to a file and pass ``--judge-template FILE``.

A template file whose text has the pinned hash IS the reference template, however it arrived:
``load_template`` recognises it, names it ``healthbench-official`` and gives it the system message
the reference grader is sent (``GRADER_SYSTEM_MESSAGE``), so both routes grade identically.

The pin was computed from the template in the simple-evals revision named in ``SOURCE_URLS``;
if upstream ever edits it, the mismatch is reported with both hashes rather than graded under a
template that is not the one published numbers used.
"""

from __future__ import annotations

import ast
import hashlib
import os
from pathlib import Path

from reward.errors import InputError
from reward.judge.parsing import EXPLAIN_REGEX

OFFICIAL_TEMPLATE_SHA256 = "2adffd51fd259554ebcd036ad1072d4aa2b7ce3aec2bbffe36271f911632ed3c"
# openai/simple-evals main, the commit that added HealthBench ("healthbench"); the template is
# byte-identical at later main commits
SOURCE_COMMIT = "5e623c2b400af62a1278e23595f95b0853d7fe8a"
SOURCE_URLS = (
    f"https://raw.githubusercontent.com/openai/simple-evals/{SOURCE_COMMIT}/healthbench_eval.py",
    "https://raw.githubusercontent.com/openai/simple-evals/main/healthbench_eval.py",
)
# The reference harness sends its grader this system message (simple-evals' API default).
GRADER_SYSTEM_MESSAGE = "You are a helpful assistant."
OFFICIAL_NAME = "healthbench-official"
# The reference grader's sampler (simple-evals' chat-completion sampler as healthbench_eval builds
# it): temperature 0.5 (the sampler's default), max_tokens 2048, no response_format, and an answer
# that does not parse is asked again, unchanged, until it does. We bound the attempts (the
# reference has no bound) and count what still fails as unscored, never as "not met".
OFFICIAL_GRADER_MAX_TOKENS = 2048
OFFICIAL_GRADER_TEMPERATURE = 0.5
OFFICIAL_GRADER_ATTEMPTS = 10
REFERENCE_GRADER = {
    "temperature": OFFICIAL_GRADER_TEMPERATURE,
    "max_explain_tokens": OFFICIAL_GRADER_MAX_TOKENS,
    "constrained": False,
    "retry_temperature": None,
    "parse": "reference",
}


# which pattern constrained the verdicts: a baseline graded under another one (or under the JSON
# schema the completions backend used before) differs in its grader settings
_PATTERN_SHA = hashlib.sha256(EXPLAIN_REGEX.encode()).hexdigest()[:8]


def grader_settings_record(config) -> dict:
    """The explain-mode sampling a ``JudgeConfig`` sends, as ``metrics.json`` records it."""
    return {"temperature": config.temperature, "max_tokens": config.max_explain_tokens,
            "response_format": (f"json verdict (vLLM: pattern {_PATTERN_SHA}; hosted APIs: JSON schema)"
                                if config.constrained else None),
            "retry": ("same settings" if config.retry_temperature is None
                      else f"temperature >= {config.retry_temperature:g} with a seed"),
            "parse": config.parse, "attempts": config.explain_attempts}


def reference_grader_record() -> dict:
    """:func:`grader_settings_record` of the reference grader (attempts are ours: it has no bound)."""
    from reward.judge.types import JudgeConfig

    return grader_settings_record(JudgeConfig(mode="explain", explain_attempts=OFFICIAL_GRADER_ATTEMPTS,
                                              **REFERENCE_GRADER))


def text_sha256(text: str) -> str:
    """SHA-256 of a template's text, stripped of surrounding whitespace (as the harness strips)."""
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()


def is_official_text(text: str) -> bool:
    return text_sha256(text) == OFFICIAL_TEMPLATE_SHA256


def extract_grader_template(source: str, where: str = "healthbench_eval.py") -> str:
    """The ``GRADER_TEMPLATE`` string of a harness source file (a string literal, optionally with
    ``.strip()`` called on it), read with ``ast``: nothing in the file is executed.

    Raises:
        InputError: the file does not parse or holds no such string.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise InputError(f"not Python source: {exc}", file=where) from exc
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "GRADER_TEMPLATE"
                                                for t in node.targets):
            value = node.value
            strip = False
            if (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                    and value.func.attr == "strip" and not value.args):
                value, strip = value.func.value, True
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                return value.value.strip() if strip else value.value
    raise InputError("no GRADER_TEMPLATE string literal found", file=where, field="GRADER_TEMPLATE")


def _cache_path(cache_dir: str | Path | None) -> Path:
    from reward.paths import default_cache_dir

    base = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return base / "grader" / f"{OFFICIAL_NAME}-{OFFICIAL_TEMPLATE_SHA256[:16]}.txt"


def official_template_file(cache_dir: str | Path | None = None, *, timeout: float = 30.0) -> Path:
    """A local file holding the reference grader template, fetched once and hash-checked.

    Raises:
        InputError: no source could be fetched (offline), or what was fetched is not the
            pinned template; the message names the URL and says to pass ``--judge-template``.
    """
    dest = _cache_path(cache_dir)
    if dest.is_file() and is_official_text(dest.read_text(encoding="utf-8")):
        return dest
    import httpx

    errors = []
    for url in SOURCE_URLS:
        try:
            resp = httpx.get(url, timeout=timeout, follow_redirects=True)
        except httpx.HTTPError as exc:
            errors.append(f"{url}: {type(exc).__name__}: {exc}")
            continue
        if resp.status_code != 200:
            errors.append(f"{url}: HTTP {resp.status_code}")
            continue
        text = extract_grader_template(resp.text, where=url)
        got = text_sha256(text)
        if got != OFFICIAL_TEMPLATE_SHA256:
            errors.append(f"{url}: GRADER_TEMPLATE has SHA-256 {got}, not the pinned {OFFICIAL_TEMPLATE_SHA256}")
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        part = dest.with_name(dest.name + f".part{os.getpid()}")
        part.write_text(text, encoding="utf-8")
        os.replace(part, dest)
        return dest
    raise InputError(
        f"cannot fetch the official HealthBench grader template from {SOURCE_URLS[0]} "
        f"({'; '.join(errors)}). This machine may be offline: on a machine with internet access, "
        "save the GRADER_TEMPLATE string of openai/simple-evals' healthbench_eval.py to a file and "
        "pass --judge-template FILE (it is recognised by its SHA-256).", field="--grader official")
