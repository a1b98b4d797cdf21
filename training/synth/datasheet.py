"""The datasheet of a synthetic run: what was kept, what failed, how often critics intervened.

Reads the conversations file, the rubric rows and both failures files (all JSONL) and counts:
kept rows by theme, axis (items), persona and turns; per stage, critic revision rate (kept items
that needed more than one round) and rejection rate (failed / attempted); the inversion rate
(inverted / positive items before inversion). Written as JSON and as a short Markdown table.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from reward.jsonl import JsonlLog

__all__ = ["build_datasheet", "write_datasheet"]


def _rate(num: int, den: int) -> float | None:
    return num / den if den else None


def build_datasheet(conversations: list[dict[str, Any]], conv_failures: list[dict[str, Any]],
                    rows: list[dict[str, Any]], rubric_failures: list[dict[str, Any]]) -> dict[str, Any]:
    conv_failed = [f for f in conv_failures if f.get("final")]
    axis_runs = [a for r in rows for a in r.get("synth", {}).get("axes", {}).values()]
    axis_failed = [f for f in rubric_failures if f.get("stage") == "rubric_axis"]
    accepted_axes = [a for a in axis_runs if a["accepted"]]
    inverted = sum(1 for r in rows for v in r.get("synth", {}).get("inverted", []) if v.get("done"))
    inversion_failed = sum(1 for r in rows for v in r.get("synth", {}).get("inverted", []) if not v.get("done"))
    positives = sum(r.get("synth", {}).get("positive_items_before_inversion", 0) for r in rows)
    axes = Counter(t.split(":", 1)[1] for r in rows for it in r["rubrics"] for t in it["tags"] if t.startswith("axis:"))
    return {
        "conversations": {
            "kept": len(conversations), "failed": len(conv_failed),
            "by_theme": dict(Counter(c["theme"] for c in conversations)),
            "by_persona": dict(Counter(c["persona"] for c in conversations)),
            "by_turns": {str(k): v for k, v in sorted(Counter(c["turns"] for c in conversations).items())},
            "failed_by_stage": dict(Counter(f.get("stage") for f in conv_failed)),
            "revision_rate": _rate(sum(1 for c in conversations if c.get("iterations", 1) > 1), len(conversations)),
            "rejection_rate": _rate(len(conv_failed), len(conversations) + len(conv_failed)),
        },
        "rubrics": {
            "rows": len(rows), "items": sum(len(r["rubrics"]) for r in rows),
            "rows_failed": sum(1 for f in rubric_failures if f.get("final")),
            "by_theme": dict(Counter(t.split(":", 1)[1] for r in rows for t in r["example_tags"] if t.startswith("theme:"))),
            "items_by_axis": dict(axes),
            "by_persona": dict(Counter(r.get("synth", {}).get("persona") for r in rows)),
            "by_turns": {str(k): v for k, v in sorted(Counter(r.get("synth", {}).get("turns") for r in rows).items())},
            "axis_revision_rate": _rate(sum(1 for a in accepted_axes if a["iterations"] > 1), len(accepted_axes)),
            "axis_rejection_rate": _rate(len(axis_failed), len(accepted_axes) + len(axis_failed)),
            "inverted_items": inverted, "inversion_failures": inversion_failed,
            "inversion_rate": _rate(inverted, positives),
        },
    }


def write_datasheet(path: str | Path, conversations_path: str | Path | None, rows_path: str | Path) -> dict[str, Any]:
    """Build from the files and write ``path`` (JSON) and ``path`` with ``.md`` (a summary)."""
    def load(p: Path | None) -> list[dict[str, Any]]:
        return JsonlLog(p).load() if p is not None and p.exists() else []

    cp = Path(conversations_path) if conversations_path else None
    rp = Path(rows_path)
    sheet = build_datasheet(load(cp), load(cp.with_name(cp.name + ".failures.jsonl") if cp else None),
                            load(rp), load(rp.with_name(rp.name + ".failures.jsonl")))
    path = Path(path)
    path.write_text(json.dumps(sheet, indent=2) + "\n")
    lines = ["# Datasheet: synthetic stage-3 rubric data", "",
             ("Synthetic conversations and rubrics written by an actor model and checked by critic models; "
              "not clinician-reviewed. Counts:"), "", "| section | key | value |", "|---|---|---|"]
    for section, values in sheet.items():
        for k, v in values.items():
            lines.append(f"| {section} | {k} | {json.dumps(v) if isinstance(v, dict) else v} |")
    path.with_suffix(".md").write_text("\n".join(lines) + "\n")
    return sheet
