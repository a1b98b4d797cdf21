"""The comparability verdict: every reason a number is not comparable, and the one case it is."""

from __future__ import annotations

import pytest

from reward.healthbench.variants import VARIANTS
from reward.judge.official import GRADER_SYSTEM_MESSAGE, OFFICIAL_TEMPLATE_SHA256, reference_grader_record, text_sha256
from training.eval.comparability import comparability, is_published_grader, markdown_lines


def published_like() -> dict:
    return {
        "grading": {"mode": "explain", "judge_model": "gpt-4.1-2025-04-14", "template": "healthbench-official",
                    "judge_backend": "chat", "judge_endpoints": ["https://api.openai.com/v1"], "judge_root": None,
                    "judge_identity": "chat:api.openai.com:gpt-4.1-2025-04-14",
                    "template_sha256": OFFICIAL_TEMPLATE_SHA256,
                    "system_message_sha256": text_sha256(GRADER_SYSTEM_MESSAGE),
                    "sampling": reference_grader_record()},
        "data": {"file": "hard_2025-05-08-21-00-10.jsonl", "sha256": VARIANTS["hard"].sha256, "rows_in_file": 1000},
        "n_rows": 1000, "n_unscored": 0, "length_adjusted": None, "system_prompt": {"mode": "none"},
        "responses": {"finish_reasons": {"stop": 1000}},
        "generation": {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "thinking": None, "max_new_tokens": 16000},
    }


def test_gpt41_official_template_and_published_file_are_comparable():
    v = comparability(published_like())
    assert v == {"comparable_to_published": True, "comparability_notes": []}
    assert markdown_lines({**published_like(), **v})[0].startswith("**Comparable")


def test_our_template_and_tiny_judge_list_every_reason():
    m = published_like()
    m["grading"] = {"mode": "choice", "judge_model": "tiny", "template": "rubricstree-choice-v1",
                    "template_sha256": "0" * 64, "system_message_sha256": "1" * 64}
    m["data"] = {"file": "eval_hb_own.jsonl", "sha256": "f" * 64, "rows_in_file": 4}
    m.update(n_rows=2, n_unscored=1, length_adjusted={"score": 0.1}, system_prompt={"mode": "ours"},
             responses={"finish_reasons": {"length": 2}})
    m["generation"] = {"temperature": 0.0, "thinking": True, "max_new_tokens": 8}
    v = comparability(m)
    assert v["comparable_to_published"] is False
    expected = ["not gpt-4.1", "not the official HealthBench grader template", "system message", "not explain",
                "not a published HealthBench file", "only 2 of the file's 4", "unscored",
                "length adjustment is on", "system prompt is 'ours'", "stopped at the token budget",
                "greedy decoding with thinking on"]
    assert len(v["comparability_notes"]) == len(expected)
    for note, want in zip(v["comparability_notes"], expected, strict=True):
        assert want in note


def test_each_reason_alone_makes_it_not_comparable():
    for change in ({"n_unscored": 3}, {"system_prompt": {"mode": "file:sp.txt"}}, {"length_adjusted": {"p": 0.04}}):
        v = comparability({**published_like(), **change})
        assert v["comparable_to_published"] is False and len(v["comparability_notes"]) == 1


def test_grader_names():
    assert is_published_grader("gpt-4.1") and is_published_grader("openai/gpt-4.1-2025-04-14")
    assert not is_published_grader("gpt-4.1-mini") and not is_published_grader("Qwen/Qwen3-32B")
    assert not is_published_grader(None)


def _with(path: str, value) -> dict:
    """published_like() with one field (``a.b``) changed."""
    m = published_like()
    cur = m
    *head, last = path.split(".")
    for k in head:
        cur = cur[k]
    cur[last] = value
    return m


# every difference from the reference run, alone: it flips the verdict, with its own note
DIFFERENCES = [
    ("grading.judge_model", "gpt-4.1-mini", "not gpt-4.1"),
    # named gpt-4.1 but not shown to be OpenAI's: the identity decides, not the name
    ("grading.judge_endpoints", ["http://127.0.0.1:18260/v1"], "not by OpenAI"),
    ("grading.judge_endpoints", ["http://api.openai.com/v1"], "not by OpenAI"),
    ("grading.judge_endpoints", ["https://api.openai.com:8443/v1"], "not by OpenAI"),
    ("grading.judge_endpoints", ["https://api.openai.com/v1", "https://gw.example.org/v1"], "gw.example.org"),
    ("grading.judge_endpoints", None, "no recorded endpoint"),
    ("grading.judge_root", "/models/tiny", "reports local weights '/models/tiny'"),
    ("grading.template_sha256", "a" * 64, "not the official HealthBench grader template"),
    ("grading.system_message_sha256", text_sha256("You grade rubric items."), "system message"),
    ("grading.system_message_sha256", None, "system message"),
    ("grading.mode", "choice", "not explain"),
    ("grading.sampling.temperature", 0.0, "grader temperature is 0.0"),
    ("grading.sampling.max_tokens", 512, "grader max_tokens is 512"),
    ("grading.sampling.response_format", "json verdict (schema or regex)", "grader response_format"),
    ("grading.sampling.retry", "temperature >= 0.7 with a seed", "grader retry"),
    ("grading.sampling.parse", "robust", "grader parse is 'robust'"),
    ("grading.sampling", None, "sampling settings are not recorded"),
    ("data.sha256", "f" * 64, "not a published HealthBench file"),
    ("n_rows", 10, "only 10 of the file's 1000"),
    ("n_unscored", 2, "unscored"),
    ("length_adjusted", {"p": 0.04}, "length adjustment"),
    ("system_prompt", {"mode": "ours"}, "system prompt is 'ours'"),
    ("responses", {"finish_reasons": {"stop": 990, "length": 10}}, "token budget"),
    ("generation.temperature", 0.0, "greedy decoding"),
]


@pytest.mark.parametrize(("path", "value", "note"), DIFFERENCES, ids=[f"{p}={v}" for p, v, _ in DIFFERENCES])
def test_each_difference_alone_flips_the_verdict_with_its_own_note(path, value, note):
    v = comparability(_with(path, value))
    assert v["comparable_to_published"] is False
    assert len(v["comparability_notes"]) == 1, v["comparability_notes"]
    assert note in v["comparability_notes"][0]


def test_greedy_without_thinking_is_not_flagged_and_the_bounded_attempts_are_not_a_difference():
    m = _with("generation", {"temperature": 0.0, "thinking": False, "max_new_tokens": 2048})
    m["grading"]["sampling"]["attempts"] = 3
    assert comparability(m)["comparable_to_published"] is True
