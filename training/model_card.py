"""The model card of a Hugging Face export (``README.md`` beside the weights).

It says what the export is (stage, start model, step, trainer) and what the judge gate said at
every launch of the run that trained it (``training.gate_record``). A run that went on past a
refusal (``judge_gate.enforce: false``) gets a warning at the top of the card naming what the gate
refused: the reward it trained on rested on a judge the calibration did not vouch for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from training.gate_record import overridden

__all__ = ["CARD", "card_text", "write_card"]

CARD = "README.md"


def card_text(meta: dict[str, Any]) -> str:
    """The card's Markdown from an export's ``export.json`` fields (``judge_gate``: the run's gate history)."""
    history = list(meta.get("judge_gate") or [])
    over = overridden(history)
    lines = ["---", "tags: [rubricstree]", "---", "", "# Policy export", ""]
    if over:
        lines += ["> **Trained past the judge gate.** The judge gate refused this run's judge and training went on "
                  f"under `judge_gate.enforce: false` ({len(over)} of {len(history)} launch(es)). The rubric reward "
                  "rested on a judge its calibration did not vouch for:", ""]
        lines += [f"> - {h.get('at', '?')}: {h.get('line', '')}" for h in over]
        lines += [""]
    facts = [(k, meta[k]) for k in ("stage", "started_from", "global_step", "step", "epoch", "trainer", "source",
                                    "dtype") if meta.get(k) is not None]
    lines += ["| | |", "|---|---|", *(f"| {k} | {v} |" for k, v in facts), ""]
    lines += ["## Judge gate", ""]
    if not history:
        lines += ["No judge gate was recorded for this run (stages 1 and 2 grade no rubric verdicts).", ""]
    else:
        lines += [f"- {h.get('at', '?')}: {'OVERRIDDEN' if h.get('overridden') else 'passed' if h.get('passed') else 'refused'}"
                  f" (judge {h.get('judge_id', '?')}): {h.get('line', '')}" for h in history]
        lines += [""]
    return "\n".join(lines)


def write_card(folder: str | Path, meta: dict[str, Any]) -> Path:
    path = Path(folder) / CARD
    path.write_text(card_text(meta), encoding="utf-8")
    return path
