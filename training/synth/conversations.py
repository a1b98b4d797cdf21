"""Themed synthetic conversations: seeds -> (plan) -> actor drafts -> critics -> kept or failed.

Seeds are real patient questions (``question``/``answer`` rows: a critic first analyses the case
and plans the number and structure of user turns) or HealthBench-format rows of the same theme
used as in-context examples. Each item gets a theme, one of four personas and a turn count (seeded
by its id). The actor writes the conversation as JSON, ending on a user message; critics check
completeness and consistency; :func:`training.synth.critics.refine` bounds the revisions. Kept
conversations are appended to the output as they finish, rejected ones to the failures file.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reward.errors import InputError
from reward.healthbench.schema import HealthBenchRow
from reward.jsonl import iter_jsonl, validation_error
from training.synth.critics import Critic, Outcome, critic_messages, refine
from training.synth.llm import Messages, SynthLLM
from training.synth.store import RunFiles

__all__ = ["PERSONAS", "THEMES", "Conversation", "Seed", "load_questions", "synth_conversations", "theme_of"]

# HealthBench theme tag -> what a conversation of that theme exercises (our wording).
THEMES: dict[str, str] = {
    "emergency_referrals": "the situation may need urgent or emergency care; the user may or may not realise it",
    "context_seeking": "the user leaves out details that matter, so a good answer would need to ask for them",
    "global_health": "the user lives where resources, drugs, guidelines or care access differ from a rich country",
    "health_data_tasks": "the user wants help with health data: notes, lab values, forms, records or summaries",
    "communication": "the user has a clear level of expertise (lay person or clinician) the answer should match",
    "hedging": "the evidence is uncertain or the question cannot be settled from what is known",
    "complex_responses": "the question needs a carefully judged amount of detail, neither too little nor too much",
}
PERSONAS: dict[str, str] = {
    "introvert-logical": "reserved and brief; asks precise, factual questions and wants reasons",
    "introvert-emotional": "reserved and brief; worried, shares feelings in few words",
    "extrovert-logical": "talkative and detailed; reasons aloud, compares options, wants numbers",
    "extrovert-emotional": "talkative and expressive; anxious or upset, tells the story at length",
}
MAX_TURNS = 5


class Seed(BaseModel):
    """A patient question with an optional reference answer (MedRedQA style)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    question: str = Field(min_length=1)
    answer: str | None = None
    id: str | None = None


class Conversation(BaseModel):
    """One kept synthetic conversation."""

    model_config = ConfigDict(extra="forbid")

    id: str
    theme: str
    persona: str
    turns: int
    source: str
    messages: list[dict[str, str]]
    iterations: int
    plan: dict[str, Any] | None = None


def load_questions(path: str | Path) -> list[Seed]:
    """``question``/``answer`` rows; errors name the file, line and field."""
    seeds = []
    for lineno, obj in iter_jsonl(path):
        try:
            seeds.append(Seed.model_validate(obj))
        except ValidationError as exc:
            raise validation_error(exc, file=str(path), record=f"line {lineno}") from exc
    if not seeds:
        raise InputError("no rows", file=str(path))
    return seeds


def theme_of(row: HealthBenchRow) -> str | None:
    for tag in row.example_tags:
        if tag.startswith("theme:"):
            return tag.split(":", 1)[1]
    return None


def _render(messages: list[Any]) -> str:
    return "\n\n".join(f"{m['role'] if isinstance(m, dict) else m.role}: "
                       f"{m['content'] if isinstance(m, dict) else m.content}" for m in messages)


def _validate_messages(obj: dict[str, Any], turns: int) -> list[dict[str, str]]:
    msgs = obj.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise ValueError("'messages' must be a non-empty list")
    out = []
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            raise ValueError(f"message {i + 1} needs role 'user' or 'assistant'")
        if not isinstance(m.get("content"), str) or not m["content"].strip():
            raise ValueError(f"message {i + 1} has no content")
        want = "user" if i % 2 == 0 else "assistant"
        if m["role"] != want:
            raise ValueError(f"message {i + 1} should be from the {want} (turns alternate, user first)")
        out.append({"role": m["role"], "content": m["content"].strip()})
    if out[-1]["role"] != "user":
        raise ValueError("the conversation must end with a user message")
    n_user = sum(m["role"] == "user" for m in out)
    if n_user != turns:
        raise ValueError(f"write exactly {turns} user message(s), not {n_user}")
    return out


def _actor_prompt(ctx: dict[str, Any], prev: list[dict[str, str]] | None, feedback: list[str]) -> Messages:
    plan = f"\nPlan to follow:\n{json.dumps(ctx['plan'], ensure_ascii=False)}" if ctx.get("plan") else ""
    seed = ctx["seed_text"]
    system = ("You write realistic conversations between a person and an AI health assistant, to train and "
              "test assistants. Write only the conversation, as one JSON object "
              '{"messages": [{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}, ...]}. '
              "Roles alternate starting with the user, and the last message is from the user (the assistant's "
              "next reply is what will be graded, so do not write it).")
    user = (f"Theme: {ctx['theme']} ({THEMES[ctx['theme']]}).\n"
            f"The user is {ctx['persona']}: {PERSONAS[ctx['persona']]}.\n"
            f"Number of user messages: {ctx['turns']}.{plan}\n\n{seed}")
    if prev is not None or feedback:
        user += ("\n\nYour previous draft:\n" + json.dumps({"messages": prev}, ensure_ascii=False) if prev else "")
        user += "\n\nFix these problems and answer with the whole corrected JSON object:\n- " + "\n- ".join(feedback)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _completeness(ctx: dict[str, Any], msgs: list[dict[str, str]]) -> Messages:
    return critic_messages(
        "You review synthetic medical conversations for completeness.",
        "Check that every message is complete: no cut-off sentences, no placeholders, no empty or "
        "one-word filler turns, each assistant turn actually answers what came before it, and the "
        "final user message is a real message that asks for or invites a reply.",
        f"Conversation:\n{_render(msgs)}")


def _consistency(ctx: dict[str, Any], msgs: list[dict[str, str]]) -> Messages:
    plan = f"\nPlanned structure: {json.dumps(ctx['plan'], ensure_ascii=False)}" if ctx.get("plan") else ""
    return critic_messages(
        "You review synthetic medical conversations for consistency.",
        f"Check that the conversation fits the theme '{ctx['theme']}' ({THEMES[ctx['theme']]}), that the "
        f"user sounds like this persona: {PERSONAS[ctx['persona']]}, that facts (age, symptoms, timeline) "
        f"do not contradict each other, and that it follows the plan.{plan}",
        f"Conversation:\n{_render(msgs)}")


CRITICS = [Critic("completeness", _completeness), Critic("consistency", _consistency)]

_MESSAGE = {"type": "object", "properties": {"role": {"enum": ["user", "assistant"]}, "content": {"type": "string"}},
            "required": ["role", "content"]}
CONVERSATION_SCHEMA = {"type": "object", "properties": {"messages": {"type": "array", "items": _MESSAGE,
                                                                     "minItems": 1, "maxItems": 2 * MAX_TURNS - 1}},
                       "required": ["messages"]}
PLAN_SCHEMA = {"type": "object", "properties": {"analysis": {"type": "string"},
                                                "turns": {"type": "integer", "minimum": 1, "maximum": MAX_TURNS},
                                                "structure": {"type": "array", "items": {"type": "string"}}},
               "required": ["analysis", "turns", "structure"]}


def _plan_prompt(ctx: dict[str, Any]) -> Messages:
    return [{"role": "system", "content":
             "You are a clinician planning a realistic conversation between a patient and an AI health assistant. "
             'Answer with one JSON object only: {"analysis": "...", "turns": <1-5>, "structure": ["...", ...]} '
             "where structure has one short line per user message saying what it contributes."},
            {"role": "user", "content": f"Theme: {ctx['theme']} ({THEMES[ctx['theme']]}).\n"
             f"User persona: {PERSONAS[ctx['persona']]}.\n\n{ctx['seed_text']}\n\n"
             "Analyse the case (what matters clinically, what is missing) and plan the conversation."}]


def _validate_plan(obj: dict[str, Any]) -> dict[str, Any]:
    turns = obj.get("turns")
    if not isinstance(turns, int) or not 1 <= turns <= MAX_TURNS:
        raise ValueError(f"'turns' must be an integer 1-{MAX_TURNS}")
    structure = obj.get("structure")
    if not isinstance(structure, list) or len(structure) != turns or not all(isinstance(s, str) for s in structure):
        raise ValueError("'structure' must list one line per user message")
    return {"analysis": str(obj.get("analysis", "")), "turns": turns, "structure": structure}


def build_items(*, questions: list[Seed] | None, easy: list[HealthBenchRow] | None, themes: list[str],
                n: int, seed: int, multi_turn_share: float = 0.5) -> dict[str, dict[str, Any]]:
    """``n`` item contexts (id -> theme, persona, turns, seed text), reproducible from ``seed``."""
    if not questions and not easy:
        raise InputError("give seeds: a questions file (question/answer rows) or HealthBench-Easy rows")
    by_theme: dict[str, list[HealthBenchRow]] = {}
    for row in easy or []:
        by_theme.setdefault(theme_of(row) or "", []).append(row)
    items: dict[str, dict[str, Any]] = {}
    for i in range(n):
        rng = random.Random(f"{seed}:conv:{i}")
        theme = themes[i % len(themes)]
        persona = rng.choice(sorted(PERSONAS))
        turns = 1 if rng.random() >= multi_turn_share else rng.randint(2, MAX_TURNS)
        if questions:
            q = questions[i % len(questions)]
            ref = f"\nA clinician's reply to it: {q.answer}" if q.answer else ""
            text, source = f"Seed: a real patient question to build on:\n{q.question}{ref}", "question"
        else:
            pool = by_theme.get(theme) or [r for rows in by_theme.values() for r in rows]
            shots = rng.sample(pool, min(2, len(pool)))
            text = "Examples of conversations of this theme (write a new one, on another case):\n\n" + "\n\n---\n\n".join(
                _render([m.model_dump() for m in r.prompt]) for r in shots)
            source = "easy"
        items[f"conv-{source}-{seed}-{i:05d}"] = {"theme": theme, "persona": persona, "turns": turns,
                                         "seed_text": text, "source": source, "plan": None}
    return items


def synth_conversations(items: dict[str, dict[str, Any]], *, actor: SynthLLM, critic: SynthLLM,
                        files: RunFiles, max_iters: int = 3) -> dict[str, int]:
    """Run the pipeline on the items not finished in ``files``; returns counts."""
    done = files.finished_ids()
    todo = {k: v for k, v in items.items() if k not in done}
    counts = {"skipped": len(items) - len(todo), "kept": 0, "failed": 0}
    need_plan = {k: _plan_prompt(v) for k, v in todo.items() if v["source"] == "question"}
    if need_plan:
        plans = critic.ask_json(need_plan, _validate_plan, desc="plan", schema=PLAN_SCHEMA)
        for k, (plan, err) in plans.items():
            if plan is None:
                files.record_failure({"id": k, "stage": "plan", "final": True, "error": err,
                                       "theme": todo[k]["theme"], "persona": todo[k]["persona"]})
                counts["failed"] += 1
                del todo[k]
            else:
                todo[k] = {**todo[k], "plan": plan, "turns": plan["turns"]}
    outcomes: dict[str, Outcome] = refine(
        todo, actor=actor, critic=critic, draft_prompt=_actor_prompt,
        parse_draft=lambda obj, ctx: _validate_messages(obj, ctx["turns"]), critics=CRITICS,
        max_iters=max_iters, desc="conversations", draft_schema=CONVERSATION_SCHEMA)
    for k, out in outcomes.items():
        ctx = todo[k]
        if out.accepted:
            files.outputs.append(Conversation(id=k, theme=ctx["theme"], persona=ctx["persona"], turns=ctx["turns"],
                                              source=ctx["source"], messages=out.draft, iterations=out.iterations,
                                              plan=ctx["plan"]).model_dump())
            counts["kept"] += 1
        else:
            files.record_failure({"id": k, "stage": "conversation", "final": True, "iterations": out.iterations,
                                   "theme": ctx["theme"], "persona": ctx["persona"], "turns": ctx["turns"],
                                   "feedback": out.feedback, "last_draft": out.draft})
            counts["failed"] += 1
    return counts
