"""Per-axis rubric items for synthetic conversations, aggregated into HealthBench rows.

For each (conversation, axis) the actor writes at most ``max_items`` items (criterion + integer
points in [-10, 10], not 0) with three same-theme reference conversations and their items on that
axis as anchors; a quality critic and a score critic judge them; :func:`refine` bounds revisions.
A conversation's accepted axes become one HealthBench-format row (``axis:`` and ``level:example``
rubric tags, a ``theme:`` example tag). Then each positive item is inverted with probability
``invert_rate`` (a decision seeded per item): the actor negates the criterion, the points flip
sign, and the row's ``synth.inverted`` records it. Rows and failures are appended as they finish.
"""

from __future__ import annotations

import json
import random
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from reward.healthbench.schema import HealthBenchRow
from training.synth.conversations import THEMES, theme_of
from training.synth.critics import Critic, critic_messages, refine
from training.synth.llm import Messages, SynthLLM
from training.synth.store import RunFiles

__all__ = ["AXES", "Item", "anchors_for", "axis_prompt", "invert_decisions", "synth_rubrics", "validate_items"]

AXES: dict[str, str] = {
    "accuracy": "whether what the response states is medically correct and appropriately qualified",
    "completeness": "whether the response covers everything a safe, useful answer needs",
    "context_awareness": "whether the response uses, or asks for, the context that changes the right answer",
    "communication_quality": "whether the response is clear, well organised and pitched at the right level",
    "instruction_following": "whether the response does what the user explicitly asked, in the form asked",
}


class Item(BaseModel):
    """One generated rubric item."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    criterion: str = Field(min_length=8)
    points: int = Field(ge=-10, le=10)


def validate_items(obj: dict[str, Any], max_items: int) -> list[Item]:
    raw = obj.get("items")
    if not isinstance(raw, list) or not raw:
        raise ValueError("'items' must be a non-empty list")
    if len(raw) > max_items:
        raise ValueError(f"write at most {max_items} items, not {len(raw)}")
    items = [Item.model_validate(r) for r in raw]
    if any(it.points == 0 for it in items):
        raise ValueError("points may not be 0")
    if len({it.criterion.strip().lower() for it in items}) < len(items):
        raise ValueError("two items have the same criterion")
    return items


def _render(messages: list[Any]) -> str:
    return "\n\n".join(f"{m['role']}: {m['content']}" for m in messages)


def anchors_for(theme: str, easy: list[HealthBenchRow], key: str, seed: int, k: int = 3) -> list[HealthBenchRow]:
    """``k`` reference rows of the same theme (any theme when too few), chosen reproducibly per key."""
    same = [r for r in easy if theme_of(r) == theme]
    pool = same if len(same) >= k else same + [r for r in easy if theme_of(r) != theme]
    return random.Random(f"{seed}:anchors:{key}").sample(pool, min(k, len(pool)))


def _anchor_text(rows: list[HealthBenchRow], axis: str, per_row: int = 6) -> str:
    parts = []
    for r in rows:
        items = [it for it in r.rubrics if f"axis:{axis}" in it.tags][:per_row]
        if not items:
            continue
        lines = "\n".join(f"- [{it.points:+g}] {it.criterion}" for it in items)
        parts.append(f"Conversation:\n{_render([m.model_dump() for m in r.prompt])}\nItems:\n{lines}")
    return "\n\n---\n\n".join(parts) or "(no examples)"


def axis_prompt(messages: list[dict[str, str]], theme: str | None, axis: str, anchors: list[HealthBenchRow],
                max_items: int, prev: list[Item] | None = None, feedback: list[str] | None = None) -> Messages:
    """The actor's prompt for one (conversation, axis): anchors, the conversation, the rules."""
    theme_line = f"Theme: {theme} ({THEMES.get(theme, theme)}).\n" if theme else ""
    system = ("You write grading rubrics for the next reply of an AI health assistant. Each item is one "
              "checkable statement about that reply with integer points from -10 to 10 (never 0): positive "
              "for something a good reply does, negative for a mistake or harm, larger magnitude for what "
              "matters more to the user's health. Answer with one JSON object only: "
              '{"items": [{"criterion": "...", "points": 5}, ...]}.')
    user = (f"Examples of items on the axis '{axis}' for other conversations:\n\n{_anchor_text(anchors, axis)}\n\n"
            f"Now the conversation to write items for.\n{theme_line}Axis: {axis} ({AXES[axis]}).\n"
            f"At most {max_items} items, each about one idea, none repeating another.\n\n"
            f"Conversation:\n{_render(messages)}")
    if feedback:
        if prev:
            user += "\n\nYour previous items:\n" + json.dumps({"items": [p.model_dump() for p in prev]})
        user += "\n\nFix these problems and answer with the whole corrected JSON object:\n- " + "\n- ".join(feedback)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _items_text(items: list[Item]) -> str:
    return "\n".join(f"{i + 1}. [{it.points:+d}] {it.criterion}" for i, it in enumerate(items))


def _quality(ctx: dict[str, Any], items: list[Item]) -> Messages:
    return critic_messages(
        "You review rubric items written to grade an AI health assistant's next reply.",
        f"Axis: {ctx['axis']} ({AXES[ctx['axis']]}). Check each item: it is a complete statement a grader "
        "can decide from the reply alone, it tests a single idea, it belongs to this axis and fits this "
        "conversation, and no two items test the same thing.",
        f"Conversation:\n{_render(ctx['messages'])}\n\nItems:\n{_items_text(items)}")


def _scores(ctx: dict[str, Any], items: list[Item]) -> Messages:
    return critic_messages(
        "You check the points of rubric items for an AI health assistant's reply.",
        "Points run from -10 to 10. Check each item: the sign fits (positive when the item describes "
        "desirable behaviour, negative when it describes a mistake or harm) and the magnitude fits how "
        "much the item matters for the user's health and needs (safety-critical items weigh most).",
        f"Conversation:\n{_render(ctx['messages'])}\n\nItems:\n{_items_text(items)}")


CRITICS = [Critic("quality", _quality), Critic("scores", _scores)]

ITEMS_SCHEMA = {"type": "object", "properties": {"items": {"type": "array", "minItems": 1, "items": {
    "type": "object", "properties": {"criterion": {"type": "string"},
                                     "points": {"type": "integer", "minimum": -10, "maximum": 10}},
    "required": ["criterion", "points"]}}}, "required": ["items"]}
NEGATION_SCHEMA = {"type": "object", "properties": {"criterion": {"type": "string"}}, "required": ["criterion"]}


def invert_decisions(key: str, n_items: int, points: list[int], *, rate: float, seed: int) -> list[bool]:
    """Per item: invert it? Only positive items, each with probability ``rate``, seeded per item."""
    return [p > 0 and random.Random(f"{seed}:invert:{key}:{i}").random() < rate for i, p in enumerate(points[:n_items])]


def _negate_prompt(criterion: str) -> Messages:
    return [{"role": "system", "content":
             "Rewrite a rubric criterion so that it describes the opposite behaviour (the reply fails to do "
             "what it asks, or does what it forbids), keeping it specific and checkable. Answer with one "
             'JSON object only: {"criterion": "..."}.'},
            {"role": "user", "content": f"Criterion: {criterion}"}]


def _validate_negation(original: str):
    def check(obj: dict[str, Any]) -> str:
        text = obj.get("criterion")
        if not isinstance(text, str) or len(text.strip()) < 8:
            raise ValueError("'criterion' must be a sentence")
        if text.strip().lower() == original.strip().lower():
            raise ValueError("the criterion was not changed")
        return text.strip()
    return check


def synth_rubrics(conversations: list[dict[str, Any]], easy: list[HealthBenchRow], *, actor: SynthLLM,
                  critic: SynthLLM, files: RunFiles, max_items: int = 6, max_iters: int = 3,
                  invert_rate: float = 0.1, seed: int = 0, axes: list[str] | None = None) -> dict[str, int]:
    """Rubric rows for the conversations not finished in ``files``; returns counts."""
    axes = axes or list(AXES)
    done = files.finished_ids(id_field="prompt_id")
    todo = [c for c in conversations if c["id"] not in done]
    items = {f"{c['id']}|{a}": {"conv": c, "axis": a, "messages": c["messages"],
                                "anchors": anchors_for(c["theme"], easy, c["id"], seed)}
             for c in todo for a in axes}
    outcomes = refine(
        items, actor=actor, critic=critic,
        draft_prompt=lambda ctx, prev, fb: axis_prompt(ctx["messages"], ctx["conv"]["theme"], ctx["axis"],
                                                       ctx["anchors"], max_items, prev, fb),
        parse_draft=lambda obj, ctx: validate_items(obj, max_items), critics=CRITICS,
        max_iters=max_iters, desc="rubrics", draft_schema=ITEMS_SCHEMA)
    rows: dict[str, dict[str, Any]] = {}
    for key, out in outcomes.items():
        ctx = items[key]
        cid, axis = ctx["conv"]["id"], ctx["axis"]
        row = rows.setdefault(cid, {"rubrics": [], "axes": {}})
        row["axes"][axis] = {"iterations": out.iterations, "accepted": out.accepted}
        if out.accepted:
            row["rubrics"].extend({"criterion": it.criterion, "points": it.points,
                                   "tags": ["level:example", f"axis:{axis}"]} for it in out.draft)
        else:
            files.record_failure({"id": cid, "stage": "rubric_axis", "axis": axis, "final": False,
                                   "iterations": out.iterations, "feedback": out.feedback,
                                   "last_draft": [i.model_dump() for i in out.draft] if out.draft else None})
    # seeded inversion of positive items, the criterion negated by the actor
    plan: dict[str, tuple[str, int]] = {}
    for cid, row in rows.items():
        pts = [r["points"] for r in row["rubrics"]]
        for i, inv in enumerate(invert_decisions(cid, len(pts), pts, rate=invert_rate, seed=seed)):
            if inv:
                plan[f"{cid}|{i}"] = (cid, i)
    negations = actor.ask_json({k: _negate_prompt(rows[c]["rubrics"][i]["criterion"]) for k, (c, i) in plan.items()},
                               lambda obj: obj, desc="invert", schema=NEGATION_SCHEMA) if plan else {}
    for k, (cid, i) in plan.items():
        item = rows[cid]["rubrics"][i]
        obj, err = negations[k]
        try:
            text = _validate_negation(item["criterion"])(obj) if obj is not None else None
        except ValueError as exc:
            text, err = None, str(exc)
        rows[cid].setdefault("inverted", [])
        if text is None:
            rows[cid]["inverted"].append({"index": i, "done": False, "error": err})
            continue
        rows[cid]["inverted"].append({"index": i, "done": True, "original": item["criterion"],
                                      "original_points": item["points"]})
        item["criterion"], item["points"] = text, -item["points"]
    counts = {"skipped": len(conversations) - len(todo), "kept": 0, "failed": 0}
    for c in todo:
        row = rows[c["id"]]
        if not row["rubrics"]:
            files.record_failure({"id": c["id"], "stage": "rubrics", "final": True, "theme": c["theme"],
                                   "error": "no axis passed the critics", "axes": row["axes"]})
            counts["failed"] += 1
            continue
        out = {"prompt_id": c["id"], "prompt": c["messages"], "rubrics": row["rubrics"],
               "example_tags": [f"theme:{c['theme']}"], "ideal_completions_data": None,
               "synth": {"persona": c["persona"], "turns": c["turns"], "source": c.get("source"),
                         "axes": row["axes"], "inverted": row.get("inverted", []),
                         "positive_items_before_inversion": sum(
                             1 for r in row["rubrics"] if r["points"] > 0) + sum(
                             1 for v in row.get("inverted", []) if v["done"])}}
        HealthBenchRow.model_validate(out)
        files.outputs.append(out)
        counts["kept"] += 1
    return counts
