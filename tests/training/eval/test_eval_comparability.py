"""The comparability verdict: every reason a number is not comparable, and the one case it is."""

from __future__ import annotations

from reward.healthbench.variants import VARIANTS
from reward.judge.official import OFFICIAL_TEMPLATE_SHA256
from training.eval.comparability import comparability, is_published_grader, markdown_lines


def published_like() -> dict:
    return {
        "grading": {"mode": "explain", "judge_model": "gpt-4.1-2025-04-14", "template": "healthbench-official",
                    "template_sha256": OFFICIAL_TEMPLATE_SHA256},
        "data": {"file": "hard_2025-05-08-21-00-10.jsonl", "sha256": VARIANTS["hard"].sha256, "rows_in_file": 1000},
        "n_rows": 1000, "n_unscored": 0, "length_adjusted": None, "system_prompt": {"mode": "none"},
        "responses": {"finish_reasons": {"stop": 1000}},
    }


def test_gpt41_official_template_and_published_file_are_comparable():
    v = comparability(published_like())
    assert v == {"comparable_to_published": True, "comparability_notes": []}
    assert markdown_lines({**published_like(), **v})[0].startswith("**Comparable")


def test_our_template_and_tiny_judge_list_every_reason():
    m = published_like()
    m["grading"] = {"mode": "choice", "judge_model": "tiny", "template": "rubricstree-choice-v1",
                    "template_sha256": "0" * 64}
    m["data"] = {"file": "eval_hb_own.jsonl", "sha256": "f" * 64, "rows_in_file": 4}
    m.update(n_rows=2, n_unscored=1, length_adjusted={"score": 0.1}, system_prompt={"mode": "ours"},
             responses={"finish_reasons": {"length": 2}})
    v = comparability(m)
    assert v["comparable_to_published"] is False
    expected = ["not gpt-4.1", "not the official HealthBench grader template", "not explain",
                "not a published HealthBench file", "only 2 of the file's 4", "unscored",
                "length adjustment is on", "system prompt is 'ours'", "stopped at the token budget"]
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
