"""Block-aligned prompts against the real vLLM server: every criterion after the first of a
rollout is served its whole shared prefix from the prefix cache (no partial block recomputed),
and without the padding a partial block is recomputed."""

from __future__ import annotations

import re
import uuid

import httpx
import pytest

from reward.judge import CHOICE, JudgeConfig, JudgeItem, Message, Template, make_judge
from reward.judge.endpoints import normalise_url

pytestmark = pytest.mark.server

CRITERIA = ["Advises calling emergency services now.", "Mentions chewing aspirin if not allergic.",
            "Explains the warning signs of a heart attack.", "Avoids jargon."]


def _server_block(url: str) -> int | None:
    text = httpx.get(normalise_url(url).removesuffix("/v1") + "/metrics", timeout=10).text
    m = re.search(r'vllm:cache_config_info\{[^}]*\bblock_size="(\d+)"', text)
    return int(m.group(1)) if m else None


def _shared_len(ids: list[list[int]]) -> int:
    a = ids[0]
    return min(next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), len(a)) for b in ids[1:])


@pytest.mark.parametrize("block", [32, 0])
async def test_criteria_after_the_first_reuse_the_whole_shared_prefix(judge_url, tiny_model_dir, block):
    server_block = _server_block(judge_url)
    if server_block is None:
        pytest.skip("the server does not report its KV block size")
    nonce = uuid.uuid4().hex  # a prompt no earlier run has cached
    template = Template(name=f"{CHOICE.name}+{nonce}", mode="choice", system=f"Session {nonce}.\n" + CHOICE.system,
                        user=CHOICE.user)
    judge = make_judge(judge_url=judge_url, tokenizer=str(tiny_model_dir), cache=False,
                       config=JudgeConfig(prefix_block=block))
    for extra in ("", " Please help.", " Please help quickly.", " Please, help me quickly."):
        conv = (Message(role="user", content=f"({nonce[:6]}) Crushing chest pain, sweating. What now?{extra}"),)
        items = [JudgeItem(conversation=conv, response="Call emergency services now; chew an aspirin if you can.",
                           criterion=c) for c in CRITERIA]
        ids = [judge.renderer.render_ids(template, it) for it in items]
        shared = _shared_len(ids)
        if block or shared % server_block:  # unpadded: make sure the prefix ends inside a block
            break
    verdicts = await judge.grade(items, template, use_cache=False)  # staged: the first item goes alone
    await judge.aclose()
    assert all(v.ok for v in verdicts)
    reusable = shared // server_block * server_block  # whole blocks of the shared prefix
    assert judge.stats.cached_tokens == (len(items) - 1) * reusable
    if block and server_block and block % server_block == 0:
        assert shared % block == 0 and reusable == shared  # nothing of the prefix is recomputed
    if not block:
        assert reusable < shared  # unpadded: the partial last block is recomputed by every criterion
