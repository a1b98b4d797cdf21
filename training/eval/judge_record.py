"""Who grades an evaluation, as ``config.json`` and ``metrics.json`` record it: the judge's
backend and model name, the endpoints it is reached at, the weights the server reports (vLLM's
``root``) and its full identity (:mod:`reward.judge.identity`: root, fingerprint, max_model_len,
vLLM version and dtypes where the server reports them). A served name alone is not an identity:
any server can answer to ``gpt-4.1`` (vLLM's ``--served-model-name``). The comparability verdict
(:mod:`training.eval.comparability`) and the baseline check read these fields.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reward.errors import InputError


def _endpoints(urls: list[str]) -> list[str]:
    from reward.serving import normalise_url, redact_url

    return [redact_url(normalise_url(u)) for u in urls]


def served_judge_record(judge_url: str, judge_api: str = "auto", served_model: str | None = None,
                        api_key_env: str | None = None) -> dict[str, Any]:
    """The record of a served judge, read from its server without building the judge (a finished
    run re-scores without it).

    Raises:
        InputError: a vLLM server (token-id backend) whose models cannot be listed.
    """
    from reward.judge.api import list_models as list_any
    from reward.judge.api import served_judge_identity
    from reward.judge.chat import API_KEY_ENV, api_key_for
    from reward.judge.identity import chat_model_id, served_model_id
    from reward.judge.server_facts import server_facts
    from reward.serving import JUDGE_API_KEY_ENV, list_models, redact_url, split_urls

    urls = split_urls(judge_url)
    rec: dict[str, Any] = {**served_judge_identity(judge_url, judge_api, served_model, api_key_env),
                           "endpoints": _endpoints(urls)}
    if rec["backend"] == "chat":  # identified by endpoint, model name and (vLLM) the weights it reports
        key = api_key_for(urls, api_key_env or API_KEY_ENV)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        entry = next((m for m in list_any(urls[0], key) or [] if m.get("id") == rec["model"]), None)
        root = str(entry["root"]) if entry and entry.get("root") else None
        rec["root"] = root
        rec["identity"] = chat_model_id(urls[0], rec["model"], root, server_facts(urls[0], headers) if root else None)
        return rec
    try:
        models = list_models(urls[0], api_key_env=api_key_env or JUDGE_API_KEY_ENV)
    except ValueError as exc:
        raise InputError(f"cannot identify the judge at {redact_url(judge_url)}: {exc}") from exc
    served = served_model or str(models[0].get("id"))
    entry = next((m for m in models if m.get("id") == served), None)
    facts = server_facts(urls[0]) if entry else None
    rec.update(model=served, root=str(entry["root"]) if entry and entry.get("root") else None,
               identity=served_model_id(served, entry, None, facts))
    return rec


def object_judge_record(judge) -> dict[str, Any]:
    """The record of a judge object handed to the evaluation (tests, library use)."""
    rec: dict[str, Any] = {"backend": type(judge).__name__, "model": judge.model_id}
    pool = getattr(judge, "pool", None)
    if pool is not None:
        rec["endpoints"] = [ep.url for ep in pool.endpoints]
        rec["root"] = getattr(judge, "served_root", None)
        rec["identity"] = judge.model_id
    return rec


def grader_name(rec: dict[str, Any] | None) -> str:
    """One phrase naming a grader for messages: name, backend, endpoints and identity."""
    if not rec:
        return "an unrecorded grader"
    where = f" at {', '.join(rec['endpoints'])}" if rec.get("endpoints") else ""
    ident = rec.get("identity") or rec.get("fingerprint")
    return f"'{rec.get('model')}' ({rec.get('backend')}{where}" + (f"; identity {ident}" if ident else "") + ")"


def _grader_key(rec: dict[str, Any] | None):
    rec = rec or {}
    return rec.get("identity") or (rec.get("backend"), rec.get("model"), rec.get("fingerprint"))


def check_baseline_grader(folder: str | Path, settings: dict[str, Any]) -> None:
    """Refuse a ``--baseline`` graded by another grader or with other grading settings: the
    difference would mix the policy's change with the grader's.

    Raises:
        InputError: the folder holds no evaluation (``config.json``), or its judge identity or
            grading settings (template, mode, sampling) differ; the message names both graders.
    """
    import json

    path = Path(folder) / "config.json"
    try:
        base = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise InputError("not an evaluation folder (no config.json): cannot tell which grader graded the baseline",
                         file=str(path), field="--baseline") from exc
    except (OSError, ValueError) as exc:
        raise InputError(f"unreadable evaluation settings: {exc}", file=str(path), field="--baseline") from exc
    if not isinstance(base, dict):
        raise InputError("not an evaluation's settings (not a JSON object)", file=str(path), field="--baseline")
    diffs = []
    if _grader_key(base.get("judge")) != _grader_key(settings.get("judge")):
        diffs.append("judge identity")
    theirs, ours = base.get("grading") or {}, settings.get("grading") or {}
    diffs += [f"{k}: {theirs.get(k)!r} vs {ours.get(k)!r}" for k in sorted(set(theirs) | set(ours))
              if theirs.get(k) != ours.get(k)]
    if diffs:
        raise InputError(
            f"the baseline was graded by {grader_name(base.get('judge'))}, this run by "
            f"{grader_name(settings.get('judge'))}; they differ in {'; '.join(diffs)}. A difference between the "
            "two runs would mix the policy's change with the grader's: grade the baseline with this run's judge "
            "and grading options, or drop --baseline", file=str(path), field="--baseline")


def grading_fields(rec: dict[str, Any]) -> dict[str, Any]:
    """The judge's record as ``metrics.json``'s ``grading`` holds it (``judge_*`` keys), which the
    comparability verdict reads."""
    out = {"judge_backend": rec["backend"], "judge_model": rec["model"]}
    out.update({f"judge_{k}": rec[k] for k in ("endpoints", "root", "identity") if k in rec})
    return out
