"""May this HealthBench number be set beside a published one? One verdict, with every reason.

Published HealthBench numbers were graded by gpt-4.1 with the reference grader template
(explain mode: a JSON verdict per rubric item), on the published data file, with no system
prompt added, every example scored, and the plain (not length-adjusted) clipped mean. A run
that differs in any of these gives a number of another configuration. :func:`comparability`
reads a run's ``metrics.json`` content and returns

    {"comparable_to_published": bool, "comparability_notes": [one line per reason]}

``comparable_to_published`` is True exactly when there is no note. The grader is identified by
the model name the judge server answers to (a local server could serve anything under any
name: the note is about the name, which is all a run can know).
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


def comparability(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """The verdict and its reasons for one HealthBench run (see the module docstring).

    Args:
        metrics: the run's metrics (``grading``, ``data``, ``system_prompt``, ``n_unscored``,
            ``length_adjusted``, ``responses``, ``n_rows`` as ``metrics.json`` holds them).
    """
    notes: list[str] = []
    g = metrics.get("grading") or {}
    d = metrics.get("data") or {}
    judge = g.get("judge_model")
    if not is_published_grader(judge):
        notes.append(f"grader model is {judge!r}, not gpt-4.1 (published numbers are graded by gpt-4.1)")
    pin = official.OFFICIAL_TEMPLATE_SHA256
    if g.get("template_sha256") != pin:
        notes.append(f"grader template {g.get('template')!r} is not the official HealthBench grader template "
                     f"(SHA-256 {str(g.get('template_sha256'))[:16]}..., official {pin[:16]}...)")
    if g.get("mode") != "explain":
        notes.append(f"grading mode is {g.get('mode')!r} (one yes/no token), not explain (a JSON verdict per item)")
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
    return {"comparable_to_published": not notes, "comparability_notes": notes}


def markdown_lines(metrics: Mapping[str, Any]) -> list[str]:
    """The verdict as the first lines of ``report.md``."""
    if "comparable_to_published" not in metrics:
        return []
    if metrics["comparable_to_published"]:
        return [("**Comparable to published HealthBench numbers**: gpt-4.1 grader, official template, "
                 "published data, no system prompt, every example scored."), ""]
    return ["**Not comparable to published HealthBench numbers**, because:", ""] + \
        [f"- {n}" for n in metrics.get("comparability_notes", [])] + [""]


def html_block(metrics: Mapping[str, Any]) -> str:
    """The verdict as a block at the top of ``report.html``."""
    import html

    if "comparable_to_published" not in metrics:
        return ""
    if metrics["comparable_to_published"]:
        return ("<p class=ok><b>Comparable to published HealthBench numbers</b>: gpt-4.1 grader, official "
                "template, published data, no system prompt, every example scored.</p>")
    items = "".join(f"<li>{html.escape(n)}</li>" for n in metrics.get("comparability_notes", []))
    return f"<div class=warn><b>Not comparable to published HealthBench numbers</b>, because:<ul>{items}</ul></div>"
