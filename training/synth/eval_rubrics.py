"""Rubric-generation evaluation: generated vs reference items, per (prompt_id, axis) datapoint.

Each reference row is split into one datapoint per axis it has items on. The datapoint's score is
the points-weighted share of its reference items (weight ``|points|``) matched by some generated
item on the same axis of the same ``prompt_id``; a missing generated row or axis scores 0. Items
whose match failed (LLM matcher) are left out of that datapoint and counted. The report gives the
mean overall, per axis and per theme. :func:`generate_rubrics` first produces the generated file
with a model (3 same-theme anchors per datapoint), appending rows as they finish.
"""

from __future__ import annotations

from collections import defaultdict
from statistics import fmean
from typing import Any

from reward.healthbench.schema import HealthBenchRow
from training.synth.conversations import theme_of
from training.synth.llm import SynthLLM
from training.synth.rubrics import (
    AXES,
    ITEMS_SCHEMA,
    anchors_for,
    axis_prompt,
    validate_items,
)
from training.synth.store import RunFiles

__all__ = ["axis_of", "evaluate", "generate_rubrics"]


def axis_of(tags: list[str]) -> str | None:
    for t in tags:
        if t.startswith("axis:"):
            return t.split(":", 1)[1]
    return None


def _by_axis(row: HealthBenchRow) -> dict[str, list[tuple[str, float]]]:
    out: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for it in row.rubrics:
        axis = axis_of(it.tags)
        if axis:
            out[axis].append((it.criterion, it.points))
    return out


def evaluate(generated: list[HealthBenchRow], reference: list[HealthBenchRow], matcher: Any) -> dict[str, Any]:
    """``{"score", "n", "by_axis", "by_theme", "missing_generated", "unmatched_failures"}``."""
    gen = {r.prompt_id: _by_axis(r) for r in generated}
    points: list[tuple[str, str, list[tuple[str, float]], list[str]]] = []
    for row in reference:
        theme = theme_of(row) or "none"
        g = gen.get(row.prompt_id, {})
        for axis, ref in sorted(_by_axis(row).items()):
            points.append((theme, axis, ref, [c for c, _ in g.get(axis, [])]))
    flags = matcher.match_many([([c for c, _ in ref], g) for _, _, ref, g in points])
    scores: list[tuple[str, str, float]] = []
    failures = 0
    for (theme, axis, ref, _), matched in zip(points, flags, strict=True):
        usable = [(abs(p), m) for (_, p), m in zip(ref, matched, strict=True) if m is not None]
        failures += len(ref) - len(usable)
        total = sum(w for w, _ in usable)
        if total > 0:
            scores.append((theme, axis, sum(w for w, m in usable if m) / total))
    by_axis: dict[str, list[float]] = defaultdict(list)
    by_theme: dict[str, list[float]] = defaultdict(list)
    for theme, axis, s in scores:
        by_axis[axis].append(s)
        by_theme[theme].append(s)
    return {"score": fmean(s for *_, s in scores) if scores else None, "n": len(scores),
            "by_axis": {a: {"score": fmean(v), "n": len(v)} for a, v in sorted(by_axis.items())},
            "by_theme": {t: {"score": fmean(v), "n": len(v)} for t, v in sorted(by_theme.items())},
            "missing_generated": sum(1 for r in reference if r.prompt_id not in gen),
            "match_failures": failures}


def generate_rubrics(reference: list[HealthBenchRow], easy: list[HealthBenchRow], llm: SynthLLM,
                     files: RunFiles, *, max_items: int = 8, seed: int = 0) -> dict[str, int]:
    """Write a generated row per reference row (items for each axis the reference has)."""
    done = files.finished_ids(id_field="prompt_id")
    todo = [r for r in reference if r.prompt_id not in done]
    prompts = {}
    for r in todo:
        msgs = [m.model_dump() for m in r.prompt]
        anchors = [a for a in anchors_for(theme_of(r) or "", [e for e in easy if e.prompt_id != r.prompt_id],
                                          r.prompt_id, seed)]
        for axis in _by_axis(r):
            if axis in AXES:
                prompts[f"{r.prompt_id}|{axis}"] = axis_prompt(msgs, theme_of(r), axis, anchors, max_items)
    answers = llm.ask_json(prompts, lambda obj: validate_items(obj, max_items), desc="generate rubrics",
                           schema=ITEMS_SCHEMA)
    counts = {"skipped": len(reference) - len(todo), "written": 0, "axis_failures": 0}
    for r in todo:
        rubrics = []
        for axis in _by_axis(r):
            items, err = answers.get(f"{r.prompt_id}|{axis}", (None, "axis not generated"))
            if items is None:
                files.record_failure({"id": r.prompt_id, "stage": "generate_axis", "axis": axis,
                                       "final": False, "error": err})
                counts["axis_failures"] += 1
                continue
            rubrics.extend({"criterion": it.criterion, "points": it.points, "tags": ["level:example", f"axis:{axis}"]}
                           for it in items)
        if not rubrics:  # recorded; its datapoints score 0 as missing
            files.record_failure({"id": r.prompt_id, "stage": "generate", "final": True, "error": "no axis usable"})
            continue
        files.outputs.append({"prompt_id": r.prompt_id, "prompt": [m.model_dump() for m in r.prompt],
                              "rubrics": rubrics, "example_tags": list(r.example_tags)})
        counts["written"] += 1
    return counts
