"""Handbook prompting: the routed checks of a prompt, shown to the policy before it answers.

Data flow::

    prompt rows -> RubricReward.route (each prompt once, cached) -> active leaves
      -> render: criteria grouped by top-level branch, safety first, heaviest leaf first within a
         branch, cut at a token budget -> one record {"id", "conversation_key", "handbook", ...}
         appended per prompt

The handbook file is read back by ``training.system_prompt`` (mode ``handbook:FILE``): a
conversation's key (:func:`conversation_key`, a hash of its turns) finds its section.

Token budget: counted with a tokenizer when one is given; otherwise estimated as 4 tokens per 3
whitespace-separated words (English prose runs at roughly 0.75 words per token with BPE
vocabularies), rounded up. The estimate errs on the long side so the budget is rarely overrun.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from typing import Any

from reward.aio import gather_or_cancel
from reward.router.base import Routing
from reward.stages.rubric_reward import Rollout
from reward.tree.graph import RubricTree
from training.system_prompt import conversation_key

__all__ = ["HEADER", "build_handbooks", "estimate_tokens", "render_handbook"]

HEADER = ("Reviewer's checklist for this conversation. A careful clinician reviewing your reply will "
          "check the points below; make sure your answer satisfies them where they apply.")
SAFETY_BRANCH = "safety"


def estimate_tokens(text: str) -> int:
    """Word-based token estimate (see the module docstring): ceil(words * 4 / 3)."""
    return math.ceil(len(text.split()) * 4 / 3)


def _branch_of(tree: RubricTree, leaf_id: str) -> str:
    top = [c.id for c in tree.children(tree.root)]
    anc = tree.ancestors(leaf_id)
    return next((b for b in top if b in anc or b == leaf_id), tree.root)


def render_handbook(tree: RubricTree, routing: Routing, *, max_tokens: int = 400,
                    count_tokens: Callable[[str], int] | None = None) -> tuple[str, dict[str, Any]]:
    """The handbook section for one routing, and what it holds (leaves shown / cut, tokens).

    Branches are ordered safety first (and any branch holding an always-on leaf next), then by
    their total active weight; leaves within a branch by weight. A leaf that does not fit the
    budget is left out (and counted); an empty routing gives an empty section.
    """
    count = count_tokens or estimate_tokens
    groups: dict[str, list] = {}
    for a in routing.active:
        groups.setdefault(_branch_of(tree, a.leaf_id), []).append(a)
    if not groups:
        return "", {"shown": [], "cut": 0, "tokens": 0}

    def rank(item: tuple[str, list]) -> tuple:
        branch, leaves = item
        always = any(tree[a.leaf_id].always_on for a in leaves)
        return (branch != SAFETY_BRANCH, not always, -sum(a.weight for a in leaves), branch)

    lines, shown, cut = [HEADER], [], 0
    used = count(HEADER)
    for branch, leaves in sorted(groups.items(), key=rank):
        title = f"\n{tree[branch].title}:" if branch in tree else f"\n{branch}:"
        section: list[str] = []
        for a in sorted(leaves, key=lambda x: (-x.weight, x.leaf_id)):
            node = tree[a.leaf_id]
            text = node.criterion or node.title
            line = f"- {'Avoid: ' if node.polarity == 'negative' else ''}{text}"
            need = count(line) + (0 if section else count(title))
            if used + need > max_tokens:
                cut += 1
                continue
            section.append(line)
            shown.append(a.leaf_id)
            used += need
        if section:
            lines += [title, *section]
    if not shown:
        return "", {"shown": [], "cut": cut, "tokens": 0}
    text = "\n".join(lines)
    while count(text) > max_tokens and len(lines) > 2:  # joining can add a token or two: drop the last line
        last = lines.pop()
        if last.startswith("- "):
            shown.pop()
            cut += 1
        text = "\n".join(lines)
    if lines[-1].startswith("\n"):  # a branch title left without its leaves
        lines.pop()
        text = "\n".join(lines)
    if not shown or count(text) > max_tokens:
        return "", {"shown": [], "cut": cut + len(shown), "tokens": 0}
    return text, {"shown": shown, "cut": cut, "tokens": count(text)}


def tokenizer_counter(name: str) -> Callable[[str], int]:
    """Count tokens with a transformers tokenizer (a path or hub name)."""
    from reward._optional import require_model

    require_model(name, "--tokenizer")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(name)
    return lambda text: len(tok(text, add_special_tokens=False)["input_ids"])


def build_handbooks(reward, prompts: Sequence, log, *, max_tokens: int = 400,
                    count_tokens: Callable[[str], int] | None = None, concurrency: int = 8) -> int:
    """Route every prompt not yet in ``log`` and append its handbook record; returns how many new."""
    from reward.progress import bar as progress_bar

    done = {r["id"] for r in log.records("handbook")}
    todo = [p for p in prompts if p.id not in done]
    bar = progress_bar(len(todo), unit="prompt", desc="handbook")

    async def run() -> None:
        sem = asyncio.Semaphore(max(1, concurrency))

        async def one(p) -> None:
            ro = Rollout(id=p.id, prompt=p.prompt, completion="", context=p.context)
            async with sem:
                routing = next(iter((await reward.route([ro])).values()))
            text, info = render_handbook(reward.tree, routing, max_tokens=max_tokens, count_tokens=count_tokens)
            log.append("handbook", {"id": p.id, "conversation_key": conversation_key(p.prompt), "handbook": text,
                                    "n_active": len(routing.active), **info})
            bar.update(1)

        await gather_or_cancel(one(p) for p in todo)

    try:
        asyncio.run(run())
    finally:
        bar.close()
    return len(todo)
