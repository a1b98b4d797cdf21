"""Judge speed paths: block-aligned prompt ids (server prefix cache) and in-process shared-prefix
scoring, each checked against the plain path on the real tiny tokenizer / model."""

from __future__ import annotations

import asyncio

import pytest

from reward.judge import CHOICE, EXPLAIN, RELEVANCE, JudgeConfig, JudgeItem, Message
from reward.judge.render import PromptRenderer, load_tokenizer


def _item(conv: str = "My chest hurts, what now?", resp: str = "Call emergency services now.",
          crit: str = "Advises emergency care.", points: float | None = 5) -> JudgeItem:
    return JudgeItem(conversation=(Message(role="user", content=conv),), response=resp, criterion=crit, points=points)


def _lcp(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


CRITERIA = ["Advises emergency care.", "Mentions aspirin, with the allergy caveat.", "Is concise.",
            "Uses plain language without jargon such as STEMI."]
RESPONSES = ["Call emergency services now.", "Call now. " * 13 + "Chew an aspirin if not allergic.",
             "Rest and see how it goes; an antacid might help."]


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return load_tokenizer(str(tiny_model_dir))


@pytest.mark.parametrize("block", [16, 32, 128])
@pytest.mark.parametrize("template", [CHOICE, EXPLAIN], ids=["choice", "explain"])
def test_shared_prefixes_end_on_a_block_boundary(tokenizer, block, template):
    r = PromptRenderer(tokenizer, block_size=block)
    for resp in RESPONSES:
        ids = [r.render_ids(template, _item(resp=resp, crit=c, points=p)) for p, c in zip((5, -3, 2, 7), CRITERIA)]
        shared = min(_lcp(ids[0], x) for x in ids[1:])
        # every criterion of the rollout has the very same ids up to its criterion, and that
        # shared prefix is whole blocks (nothing of it sits in a partial block)
        assert shared % block == 0 and shared > 0
        assert all(x[:shared] == ids[0][:shared] for x in ids)
        # ... and the graded text is all in it: the response's ids end before the boundary
        resp_ids = r.encode_untrusted(resp)
        assert any(ids[0][k:k + len(resp_ids)] == resp_ids for k in range(shared - len(resp_ids) + 1))
    # responses of one conversation share a whole-block prefix too (instructions + conversation)
    a, b = (r.render_ids(template, _item(resp=x)) for x in (RESPONSES[0], RESPONSES[2]))  # differ at once
    assert _lcp(a, b) % block == 0


def test_padding_is_bounded_and_neutral_and_block_zero_is_off(tokenizer):
    plain, padded = PromptRenderer(tokenizer), PromptRenderer(tokenizer, block_size=32)
    for resp in RESPONSES:
        it = _item(resp=resp)
        a, b = plain.render_ids(CHOICE, it), padded.render_ids(CHOICE, it)
        fill = b.count(padded.filler_id) - a.count(padded.filler_id)
        assert 0 <= fill <= 2 * 31 and len(b) - len(a) - fill in range(-2, 3)  # re-split text: +-a token
        assert tokenizer.decode([padded.filler_id]).strip() == ""  # whitespace, not a word
        text = tokenizer.decode(padded.render_ids(CHOICE, it))
        assert "</response>" in text and text.index("</response>") < text.index("Criterion:")
    assert plain.block_size == 0 and plain.filler_id is None


def test_a_template_without_a_response_aligns_the_criterion(tokenizer):
    r = PromptRenderer(tokenizer, block_size=32)
    a = r.render_ids(RELEVANCE, _item(crit="Emergencies: recognising cardiac symptoms"))
    b = r.render_ids(RELEVANCE, _item(crit="Sleep hygiene"))
    assert _lcp(a, b) % 32 == 0 and _lcp(a, b) > 0


def test_block_size_is_part_of_the_cache_identity(tiny_model_dir):
    from reward.judge.cache import verdict_key
    from reward.judge.inprocess import TransformersJudge

    ids = {b: TransformersJudge(str(tiny_model_dir), config=JudgeConfig(prefix_block=b)).model_id for b in (0, 32)}
    assert ids[0] != ids[32] and ids[32].endswith("+block32") and "+block" not in ids[0]
    assert verdict_key(ids[0], CHOICE, _item()) != verdict_key(ids[32], CHOICE, _item())


# ------------------------------------------------------------------ in-process shared-prefix scoring
def _mixed_items() -> list[JudgeItem]:
    """Several conversations, several responses each, different criteria counts, interleaved,
    and one rollout with a single criterion."""
    out = []
    for c, conv in enumerate(["My chest hurts, what now?", "My baby has a fever of 38.4 C.", "Is 6.8% HbA1c bad?"]):
        for r, resp in enumerate(RESPONSES[: 3 - c]):
            crits = CRITERIA[: 1 if (c, r) == (0, 1) else 4 - r]
            out += [_item(conv=conv, resp=resp, crit=k, points=p) for p, k in zip((5, -3, 2, 7), crits)]
    out.append(_item(conv="A lone question.", resp="A lone answer.", crit="Is alone."))  # a single-item group
    return out[::2] + out[1::2]  # interleave groups


def _both(model_dir, items, block: int, **kw):
    from reward.judge.inprocess import TransformersJudge

    cfg = JudgeConfig(prefix_block=block)
    fast = TransformersJudge(str(model_dir), config=cfg, cache=None, **kw)
    slow = TransformersJudge(str(model_dir), config=cfg, cache=None, prefix_reuse=False)
    return asyncio.run(fast.grade(items)), asyncio.run(slow.grade(items)), fast


def _assert_same(fast, slow):
    assert all(v.ok for v in fast + slow)
    assert [v.met for v in fast] == [v.met for v in slow]
    assert [v.p_yes for v in fast] == pytest.approx([v.p_yes for v in slow], abs=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("block", [0, 32])
def test_shared_prefix_scoring_matches_one_forward_per_item(tiny_model_dir, block):
    items = _mixed_items()
    fast, slow, judge = _both(tiny_model_dir, items, block, prefix_chunk=3)
    _assert_same(fast, slow)
    assert judge.stats.cached_tokens > 0  # the shared prefixes were reused, not recomputed
    assert len({round(v.p_yes, 6) for v in fast}) > 3  # not a constant answer


@pytest.mark.slow
def test_a_single_criterion_and_a_single_item(tiny_model_dir):
    one = [_item()]
    fast, slow, _ = _both(tiny_model_dir, one, 32)
    _assert_same(fast, slow)
    two_rollouts = [_item(resp=RESPONSES[0]), _item(resp=RESPONSES[1])]
    fast, slow, _ = _both(tiny_model_dir, two_rollouts, 32)
    _assert_same(fast, slow)


@pytest.mark.slow
def test_hundreds_of_criteria_are_chunked_and_agree(tiny_model_dir):
    crits = [f"Criterion {k}: " + CRITERIA[k % 4] + " " + "and more " * (k % 7) for k in range(210)]
    items = [_item(resp=RESPONSES[1], crit=c) for c in crits]
    fast, slow, judge = _both(tiny_model_dir, items, 32, prefix_chunk=16)
    _assert_same(fast, slow)
    assert judge.stats.requests == 210 and judge.stats.completion_tokens == 210
