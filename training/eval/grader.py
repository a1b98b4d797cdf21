"""The grader of a HealthBench evaluation: which template, which sampling, and what of it is recorded.

Under the reference grader template (``--grader official``, or a ``--judge-template`` file whose
text has the pinned hash) the grader is asked the way the reference harness asks it: the
reference system message, temperature 0.5, max_tokens 2048, no response format, an unparseable
answer asked again at the same settings, and the reference's strict parse
(``reward.judge.official.REFERENCE_GRADER``). Under our own templates the judge keeps its own
defaults (temperature 0, a constrained JSON verdict, 512 tokens). ``--judge-max-tokens`` and
``--judge-temperature`` override either; an override of the reference settings is recorded and
makes the run not comparable (``training.eval.comparability``).

Used by ``training.eval.healthbench`` (eval) and ``rubricstree meta-eval healthbench``.
"""

from __future__ import annotations

from typing import Any

from reward.errors import InputError


def template_file(grader: str, grader_template: str | None, grading: str) -> str | None:
    """The grader template file: the user's (``--judge-template``), or the fetched reference one
    (``grader="official"``)."""
    if grader == "official" and not grader_template:
        from reward.judge.official import official_template_file

        if grading != "explain":
            raise InputError("the official grader template asks for a JSON verdict: use --judge-mode explain",
                             field="--grader official")
        return str(official_template_file())
    return grader_template


def load_grader_template(path: str | None, grading: str):
    from reward.judge.templates import default_template, load_template

    return load_template(path, grading) if path else default_template(grading)


def is_reference_template(template) -> bool:
    """The reference template text AND the reference system message: a file with the official
    body but its own system section is another grader."""
    from reward.judge.official import GRADER_SYSTEM_MESSAGE, is_official_text

    return template.mode == "explain" and is_official_text(template.user) and template.system == GRADER_SYSTEM_MESSAGE


def judge_config(settings, template_path: str | None):
    """The :class:`~reward.judge.JudgeConfig` for this grader (see the module docstring):
    ``settings`` (a :class:`~reward.judge.settings.JudgeSettings`) with the reference grader's
    sampling under the reference template, where ``--judge-max-tokens``/``--judge-temperature``
    were not given."""
    from reward.judge.official import OFFICIAL_GRADER_ATTEMPTS, REFERENCE_GRADER

    template = load_grader_template(template_path, settings.mode)
    kw: dict[str, Any] = {"template_file": template_path}
    if is_reference_template(template):
        kw.update(REFERENCE_GRADER, explain_attempts=OFFICIAL_GRADER_ATTEMPTS)
    if settings.max_tokens is not None:
        kw["max_explain_tokens"] = settings.max_tokens
    if settings.temperature is not None:
        kw["temperature"] = settings.temperature
    return settings.judge_config(**kw)


def template_facts(template) -> dict[str, Any]:
    """What the comparability verdict needs to know of the template: both parts' hashes."""
    from reward.judge.official import text_sha256

    return {"template_sha256": text_sha256(template.user),
            "system_message_sha256": text_sha256(template.system) if template.system else None,
            "reference_template": is_reference_template(template)}


def grading_record(config, template) -> dict[str, Any]:
    """The grading settings as ``metrics.json`` records them (explain mode: the sampling too)."""
    from reward.judge.official import grader_settings_record

    rec: dict[str, Any] = {"mode": config.mode, "template": template.name, "template_version": template.version,
                           **template_facts(template)}
    rec["max_explain_tokens"] = config.max_explain_tokens if config.mode == "explain" else None
    rec["sampling"] = grader_settings_record(config) if config.mode == "explain" else None
    return rec
