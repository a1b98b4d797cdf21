"""A served judge's identity includes what the server reports about how it runs the model
(review of issue 26): two servers of the same weights at another dtype or quantization must not
share cached verdicts. Against the real vLLM test server: what it reports by default (version,
KV-cache dtypes; not the model dtype, which vLLM does not report without dev mode)."""

from __future__ import annotations

from reward.judge.cache import verdict_key
from reward.judge.identity import served_model_id
from reward.judge.server_facts import facts_suffix, server_facts
from reward.judge.templates import default_template
from reward.judge.types import JudgeItem, Message

ENTRY = {"id": "judge", "root": "/models/not-here", "max_model_len": 4096}


def test_another_dtype_or_quantization_is_another_judge():
    bf16 = served_model_id("judge", ENTRY, None, {"vllm": "0.32.0", "dtype": "bfloat16", "quantization": "None"})
    fp32 = served_model_id("judge", ENTRY, None, {"vllm": "0.32.0", "dtype": "float32", "quantization": "None"})
    fp8 = served_model_id("judge", ENTRY, None, {"vllm": "0.32.0", "dtype": "bfloat16", "quantization": "fp8"})
    assert len({bf16, fp32, fp8, served_model_id("judge", ENTRY)}) == 4
    item = JudgeItem(conversation=(Message(role="user", content="Is 38.5 C a fever?"),), response="Yes.",
                     criterion="Says yes.")
    t = default_template("choice")
    assert len({verdict_key(m, t, item) for m in (bf16, fp32, fp8)}) == 3
    assert facts_suffix({}) == "" and facts_suffix(None) == ""


def test_the_real_server_reports_its_version_and_cache_dtype(judge_url):
    facts = server_facts(judge_url)
    assert facts.get("vllm") and facts.get("cache_dtype")
    assert "dtype" not in facts  # not reported without VLLM_SERVER_DEV_MODE (docs/reliability.md)
    from reward.serving import list_models

    entry = next(m for m in list_models(judge_url) if m.get("root"))
    assert f"vllm={facts['vllm']}" in served_model_id(entry["id"], entry, None, facts)


def test_a_server_that_is_not_vllm_reports_nothing():
    assert server_facts("http://127.0.0.1:9/v1", timeout=1.0) == {}
