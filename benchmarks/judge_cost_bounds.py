"""Server counters and the prefill lower bound of ``benchmarks/judge_cost.py``.

``read_metrics``/``reset_prefix_cache`` read and reset a vLLM server's prefix-cache counters;
``lower_bound`` is the fewest prompt tokens any grader must prefill for a set of items (the
distinct tokens of their prompt trie, and its KV-block model when the block size is known).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import httpx

from reward.judge import JudgeItem, Template
from reward.judge.base import stage_by_prefix
from reward.serving import server_root

# =============================================================================== server metrics
_METRIC = re.compile(r"^(vllm:[a-z_]+)(\{[^}]*\})?\s+([0-9.eE+-]+)$")
WATCHED = ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
           "vllm:prompt_tokens_total", "vllm:generation_tokens_total")


def read_metrics(url: str) -> tuple[dict[str, float] | None, int | None]:
    """The watched counters (summed over label sets) and the KV cache block size, if exposed."""
    try:
        text = httpx.get(f"{server_root(url)}/metrics", timeout=10).text
    except httpx.HTTPError:
        return None, None
    out = dict.fromkeys(WATCHED, 0.0)
    block = None
    for line in text.splitlines():
        m = _METRIC.match(line.strip())
        if not m:
            continue
        name, labels, value = m.groups()
        if name in out:
            out[name] += float(value)
        elif name == "vllm:cache_config_info" and labels:
            b = re.search(r'\bblock_size="(\d+)"', labels)
            block = int(b.group(1)) if b else block
    return out, block


def reset_prefix_cache(url: str) -> str:
    try:
        r = httpx.post(f"{server_root(url)}/reset_prefix_cache", timeout=30)
    except httpx.HTTPError as exc:
        return f"unavailable ({type(exc).__name__})"
    return "ok" if r.status_code == 200 else f"unavailable (HTTP {r.status_code})"


# =============================================================================== lower bound
def _lcp(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def trie_size(seqs: Sequence[Sequence[int]]) -> int:
    """Distinct prefixes of ``seqs`` (nodes of their token trie): the tokens a perfect
    token-level prefix cache computes to prefill them all."""
    s = sorted(tuple(x) for x in seqs)
    return sum(len(x) - (_lcp(x, s[i - 1]) if i else 0) for i, x in enumerate(s))


def block_model(ids: list[list[int]], waves: list[list[int]], block: int) -> int:
    """Prefill tokens under a cache that reuses only whole blocks: requests of one wave run
    together (they do not see each other's blocks), waves run in order. vLLM always computes at
    least a prompt's last token."""
    seen: set[tuple[int, ...]] = set()
    total = 0
    for wave in waves:
        new: list[tuple[int, ...]] = []
        for i in wave:
            x = ids[i]
            hit = 0
            while (hit + 1) * block <= len(x) - 1 and tuple(x[: (hit + 1) * block]) in seen:
                hit += 1
            total += len(x) - hit * block
            new += [tuple(x[: (k + 1) * block]) for k in range(len(x) // block)]
        seen.update(new)
    return total


def lower_bound(renderer, template: Template, items: list[JudgeItem], block: int | None) -> dict:
    ids = [renderer.render_ids(template, it) for it in items]
    by_conv: dict[tuple, list[int]] = {}
    for i, it in enumerate(items):
        by_conv.setdefault(it.conversation, []).append(i)
    prefill = sum(trie_size([ids[i] for i in idx]) for idx in by_conv.values())
    # the parts, for the report: the conversation prefix (instructions + conversation, the ids
    # before the response), each response segment, each criterion segment (the ids after the
    # response's fence), found structurally by rendering with a stand-in response / criterion
    conv_tok = resp_tok = crit_tok = 0
    for idx in by_conv.values():
        first = items[idx[0]]
        conv_len = _lcp(ids[idx[0]], renderer.render_ids(template, first.model_copy(update={"response": "\x01"})))
        conv_tok += conv_len
        seen_resp: set[str] = set()
        for i in idx:
            it = items[i]
            resp_len = _lcp(ids[i], renderer.render_ids(template, it.model_copy(update={"criterion": "\x01"})))
            if it.response not in seen_resp:
                seen_resp.add(it.response)
                resp_tok += resp_len - conv_len
            crit_tok += len(ids[i]) - resp_len
    out = {
        "tokens": prefill + len(items),
        "segments_tokens": conv_tok + resp_tok + crit_tok + len(items),
        "prefill_tokens": prefill,
        "decode_tokens": len(items),
        "conversation_prefix_tokens": conv_tok,
        "response_segment_tokens": resp_tok,
        "criterion_segment_tokens": crit_tok,
        "instructions_shared_tokens": trie_size(ids) + len(items),
        "conversations": len(by_conv),
        "responses": len({(it.conversation, it.response) for it in items}),
        "items": len(items),
    }
    if block:
        plans = stage_by_prefix(items)
        waves = [[i for plan in plans for i in plan[k]] for k in range(3)]
        out["block_size"] = block
        out["block_model_tokens"] = block_model(ids, waves, block) + len(items)
    return out
