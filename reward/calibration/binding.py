"""What a calibration is of: everything besides the judge's error rates that decides whether its
prediction describes a run.

A calibration measures one judge, asked with some prompts, scored by some recipe and some code,
on some cases. Each of these is reduced to a value the record keeps and the gate compares with
the run's:

- :func:`template_hash`: the content of every prompt the reward asks the judge with (its grading
  template, the confirmation readings, the applicability questions), so a template file edited in
  place is another calibration's;
- :func:`scoring_settings` and :func:`settings_hash`: the recipe fields that change a score
  (``reward.settings.RewardSettings``; the taxonomy file is bound by its content fingerprint
  instead of its path);
- :func:`scoring_code_version`: the code that turns verdicts into a score and error rates into a
  prediction (``reward/scoring/*.py``, the noise model), with comments and docstrings left out, so
  a price changed in code is another calibration's;
- :func:`distinct_cases`: the cases counted by content, so copies of one case count once;
- :func:`judge_binding`: who grades, beyond the identity string: the answers of the judge's
  endpoints to the fixed probe items (a model swapped behind its name answers otherwise), the
  endpoints themselves, and why who grades cannot be known when it cannot.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reward.settings import CALIBRATION_FIELDS, RewardSettings

# the recipe fields the rows path never reads: no routing, each row item graded once
ROUTING_ONLY = ("router", "router_options", "applicability", "applicability_threshold", "confirm_failures")
# the modules whose code decides a score (the urgency pricing of reward.stages.guards and the posterior
# verdicts among them), and the noise model that predicts detection from error rates
SCORING_MODULES = ("reward/scoring/__init__.py", "reward/scoring/tree_score.py", "reward/scoring/variants.py",
                   "reward/scoring/posterior.py", "reward/stages/guards.py",
                   "reward/stress/noise.py", "reward/stress/errors.py")


def _sha(payload: Any) -> str:
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def template_hash(template: Any, mode: str) -> str:
    """The content of every prompt the reward asks a judge in ``mode`` with: its own ``template``
    (a judge's ``template``: a file's text as read when the judge was built), the second and third
    readings of failure confirmation, and the two applicability questions (each
    :attr:`~reward.judge.templates.Template.version`)."""
    from reward.router.applicability import APPLICABILITY, APPLICABILITY_CONFIRM
    from reward.stages.confirm import readings

    second, third = readings(mode)
    return _sha([template.version, second.template.version, third.template.version,
                 APPLICABILITY.version, APPLICABILITY_CONFIRM.version])


def scoring_settings(recipe: RewardSettings) -> dict[str, Any]:
    """The recipe fields that change a score, by name: all of them but the taxonomy's path (its
    content is bound by fingerprint) and the fields that read the judge through its calibration
    (``reward.settings.CALIBRATION_FIELDS``: posterior verdicts, a panel's second judge), which the
    calibration is the input of, not a prediction for; with ``rubric_source: rows`` also without
    the fields the rows path never reads (:data:`ROUTING_ONLY`)."""
    fields = recipe.recipe().model_dump(mode="json", exclude={"tree", *CALIBRATION_FIELDS})
    if fields["rubric_source"] == "rows":
        fields = {k: v for k, v in fields.items() if k not in ROUTING_ONLY}
    return fields


def settings_hash(fields: dict[str, Any]) -> str:
    return _sha(fields)


def _code_only(source: str) -> str:
    """The module's syntax tree without docstrings: comments and layout changes leave it alone."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, annotate_fields=False, include_attributes=False)


def scoring_code_version(root: str | Path | None = None) -> str:
    """A hash of the code of :data:`SCORING_MODULES` (``root``: the folder holding ``reward/``;
    by default this package's), comments and docstrings left out."""
    base = Path(root) if root is not None else Path(__file__).resolve().parents[2]
    return _sha([[name, _code_only((base / name).read_text(encoding="utf-8"))] for name in SCORING_MODULES])


def _norm(text: str | None) -> str:
    return re.sub(r"\s+", " ", text or "").strip().casefold()


def case_content(case: Any) -> str:
    """What a case asks the judge and what its labels say, without its id, note or tags; spacing and
    case folded, so a copy that differs only there is the same case."""
    return _sha([[(m.role, _norm(m.content)) for m in case.prompt], _norm(case.context), _norm(case.clean),
                 _norm(case.perturbed), sorted(case.failed), sorted(case.clean_failed),
                 sorted(case.applicable) if case.applicable is not None else None])


def distinct_cases(cases: Sequence[Any]) -> int:
    """How many of ``cases`` differ in content (:func:`case_content`)."""
    return len({case_content(c) for c in cases})


def judge_binding(judge: Any) -> dict[str, Any]:
    """Who grades, as a built judge established it at start-up: ``judge_id`` (its identity string:
    for a served vLLM judge the content fingerprint of the weights, how they are run, and the
    tokenizer and template that build its prompts), ``probe`` (its endpoints' agreed answers to
    the fixed probe items and the tolerance measured for them; None where nothing was probed: a
    hosted API, a model in this process), ``endpoints`` (the pool, credentials removed) and
    ``unknown`` (why who grades cannot be known, None when it can)."""
    probed = getattr(judge, "probed", None)
    probe = None
    if probed is not None and not probed.reference.empty():
        probe = {"text": probed.reference.text, "answers": probed.reference.answers, "tolerance": probed.tolerance}
    pool = getattr(judge, "pool", None)
    endpoints = sorted(ep.name for ep in pool.endpoints) if pool is not None else []
    return {"judge_id": judge.model_id, "probe": probe, "endpoints": endpoints,
            "unknown": getattr(judge, "identity_unknown", None)}
