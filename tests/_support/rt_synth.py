"""A scripted generator for the synthesis pipeline's unit tests, and own Easy-style rows.

:class:`ScriptedGenerator` has the generation layer's ``generate(requests, on_done, desc)``; the
answer to each request comes from a function of its messages, so a test says which role
(planner, actor, critic, negation) answers what. It logs every request it received. The rows of
:func:`easy_rows` are written by us in the HealthBench format (never HealthBench text).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from training.generation import GenOutput


class ScriptedGenerator:
    def __init__(self, script: Callable[[list[dict]], str | None]) -> None:
        self.script = script
        self.requests: list[list[dict]] = []
        self.structured: list[dict | None] = []

    def generate(self, requests, on_done, desc: str = "generate") -> None:
        for req in requests:
            self.requests.append(req.messages)
            self.structured.append(req.structured)
            text = self.script(req.messages)
            on_done(req.key, GenOutput(text) if text is not None else GenOutput(None, error="scripted failure"))


def role(messages: list[dict]) -> str:
    system = messages[0]["content"]
    if "planning a realistic conversation" in system:
        return "plan"
    if "You write realistic conversations" in system:
        return "conversation"
    if "You write grading rubrics" in system:
        return "rubric"
    if "Rewrite a rubric criterion" in system:
        return "negate"
    if '"pass"' in system:
        return "critic"
    raise AssertionError(f"unknown prompt: {system[:80]}")


def turns_asked(messages: list[dict]) -> int:
    line = next(ln for ln in messages[1]["content"].splitlines() if ln.startswith("Number of user messages:"))
    return int(line.split(":")[1].strip().rstrip("."))


def good_conversation(messages: list[dict]) -> str:
    n = turns_asked(messages)
    msgs = []
    for i in range(n):
        msgs.append({"role": "user", "content": f"User message {i + 1} about a headache that started today."})
        if i < n - 1:
            msgs.append({"role": "assistant", "content": f"Assistant reply {i + 1} asking about fever."})
    return json.dumps({"messages": msgs})


def good_items(messages: list[dict], n: int = 5) -> str:
    axis = next(ln for ln in messages[1]["content"].splitlines() if ln.startswith("Axis:")).split()[1]
    return json.dumps({"items": [{"criterion": f"The reply covers point {i} for {axis} of this case.",
                                  "points": 1 + i} for i in range(n)]})


def happy(messages: list[dict]) -> str:
    r = role(messages)
    if r == "plan":
        return json.dumps({"analysis": "a headache", "turns": 2, "structure": ["asks", "adds detail"]})
    if r == "conversation":
        return good_conversation(messages)
    if r == "rubric":
        return good_items(messages)
    if r == "negate":
        crit = messages[1]["content"].removeprefix("Criterion: ")
        return json.dumps({"criterion": f"The reply fails to do this: {crit}"})
    return json.dumps({"pass": True, "issues": []})


EASY_THEMES = ["emergency_referrals", "context_seeking", "hedging"]
AXES = ["accuracy", "completeness", "context_awareness", "communication_quality", "instruction_following"]


def easy_rows(n_per_theme: int = 3) -> list[dict]:
    rows = []
    for t in EASY_THEMES:
        for i in range(n_per_theme):
            rows.append({
                "prompt_id": f"easy-{t}-{i}",
                "prompt": [{"role": "user", "content": f"My {t.replace('_', ' ')} question number {i}: my knee hurts."}],
                "rubrics": [{"criterion": f"Mentions {ax.replace('_', ' ')} point for knee pain case {i}.",
                             "points": 5, "tags": ["level:example", f"axis:{ax}"]} for ax in AXES],
                "example_tags": [f"theme:{t}"],
            })
    return rows
