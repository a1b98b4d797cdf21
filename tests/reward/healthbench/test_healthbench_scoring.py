"""HealthBench scoring: worked examples, tag rules, aggregation, length adjustment, RL reward,
the Professional format and variant recognition."""

from __future__ import annotations

import json
import math

import pytest

from reward.errors import InputError, ScoringError
from reward.healthbench.schema import HealthBenchRow, load_healthbench
from reward.healthbench.scoring import (
    MissingVerdictError,
    aggregate,
    example_score,
    example_tag_scores,
    length_adjusted,
    rl_reward,
    score_healthbench,
)
from reward.healthbench.variants import LENGTH_ADJUST, VARIANTS, verify_sha256


def _row(pid: str, items: list[tuple[float, list[str]]], example_tags: list[str] = ()) -> HealthBenchRow:
    return HealthBenchRow(
        prompt_id=pid,
        prompt=[{"role": "user", "content": "question"}],
        rubrics=[{"criterion": f"criterion {i}", "points": p, "tags": t} for i, (p, t) in enumerate(items)],
        example_tags=list(example_tags),
    )


class TestExampleScore:
    def test_worked_example(self):
        assert example_score([7, 5, 10, -6], [True, False, True, True]) == pytest.approx(0.5)

    def test_negative_score_is_not_clipped(self):
        # (2 - 10) / 2 = -4: HealthBench keeps it; only the mean is clipped
        assert example_score([2, -10], [True, True]) == pytest.approx(-4.0)

    def test_denominator_is_positive_points_only(self):
        assert example_score([4, -100], [True, False]) == pytest.approx(1.0)

    def test_no_positive_points_is_an_error_not_nan(self):
        with pytest.raises(ScoringError):
            example_score([-3, -2], [False, False])
        with pytest.raises(ScoringError):
            example_score([], [])

    def test_length_mismatch(self):
        with pytest.raises(ScoringError, match="2 rubric items but 1 verdicts"):
            example_score([1, 2], [True])

    def test_verdicts_must_be_booleans(self):
        with pytest.raises(ScoringError, match="rubric_index 1"):
            example_score([1, 2], [True, 0.5])


class TestTagScores:
    def test_example_and_rubric_tags(self):
        row = _row("r", [
            (6, ["level:example", "axis:accuracy"]),
            (4, ["level:example", "axis:completeness"]),
            (-5, ["level:example", "axis:accuracy"]),
            (3, ["level:cluster", "cluster:c1", "axis:accuracy"]),
        ], ["theme:hedging", "physician_agreed_category:x"])
        tags = example_tag_scores(row, [True, False, True, True])
        overall = (6 - 5 + 3) / 13
        assert tags["theme:hedging"] == pytest.approx(overall)
        assert tags["physician_agreed_category:x"] == pytest.approx(overall)
        assert tags["axis:accuracy"] == pytest.approx((6 - 5 + 3) / 9)
        assert tags["axis:completeness"] == pytest.approx(0.0)
        assert tags["level:example"] == pytest.approx(1 / 10)
        assert tags["level:cluster"] == pytest.approx(1.0)
        assert tags["cluster:c1"] == pytest.approx(1.0)

    def test_tag_without_positive_points_is_left_out(self):
        row = _row("r", [(5, ["axis:accuracy"]), (-4, ["axis:communication_quality"])], ["theme:t"])
        tags = example_tag_scores(row, [True, True])
        assert "axis:communication_quality" not in tags
        assert tags["axis:accuracy"] == pytest.approx(1.0)
        assert tags["theme:t"] == pytest.approx(0.2)


class TestAggregate:
    def test_mean_then_clip(self):
        assert aggregate([-4.0, 0.5, 0.5], n_bootstrap=10)["score"] == 0.0
        assert aggregate([1.5, 0.9], n_bootstrap=10)["score"] == 1.0
        assert aggregate([0.2, 0.4], n_bootstrap=10)["score"] == pytest.approx(0.3)

    def test_n_samples(self):
        assert aggregate([0.1, 0.2, 0.3], n_bootstrap=5)["n_samples"] == 3

    def test_bootstrap_reproducible_and_positive(self):
        values = [0.0, 0.25, 0.5, 0.75, 1.0, 0.3, 0.6]
        a = aggregate(values, n_bootstrap=1000, seed=7)
        b = aggregate(values, n_bootstrap=1000, seed=7)
        c = aggregate(values, n_bootstrap=1000, seed=8)
        assert a == b
        assert a["bootstrap_std"] > 0
        assert a["bootstrap_std"] != c["bootstrap_std"]
        # std of a mean of 7 values: roughly sd / sqrt(7)
        import numpy as np
        assert a["bootstrap_std"] == pytest.approx(np.std(values) / math.sqrt(len(values)), rel=0.2)

    def test_constant_values_have_zero_std(self):
        assert aggregate([0.4] * 5, n_bootstrap=50)["bootstrap_std"] == pytest.approx(0.0)

    def test_empty_and_nan_are_errors(self):
        with pytest.raises(ScoringError):
            aggregate([])
        with pytest.raises(ScoringError):
            aggregate([0.1, float("nan")])


class TestScoreHealthbench:
    def _data(self):
        rows = [
            _row("a", [(7, ["axis:accuracy"]), (5, ["axis:completeness"]), (10, ["axis:accuracy"]),
                       (-6, ["axis:accuracy"])], ["theme:t1"]),
            _row("b", [(2, ["axis:accuracy"]), (-10, ["axis:completeness"])], ["theme:t2"]),
        ]
        verdicts = {"a": [True, False, True, True], "b": [True, True]}
        return rows, verdicts

    def test_overall_and_tags(self):
        rows, verdicts = self._data()
        out = score_healthbench(rows, verdicts, n_bootstrap=50)
        assert set(out) == {"score", "bootstrap_std", "n_samples", "tags"}
        # a: 0.5, b: (2 - 10) / 2 = -4 -> mean -1.75 -> clipped 0
        assert out["score"] == 0.0
        assert out["n_samples"] == 2
        assert out["tags"]["theme:t1"]["score"] == pytest.approx(0.5)
        assert out["tags"]["theme:t2"]["score"] == 0.0
        assert out["tags"]["theme:t2"]["n_samples"] == 1
        # axis:completeness: a -> 0/5, b -> no positive points, left out
        assert out["tags"]["axis:completeness"]["n_samples"] == 1
        assert out["tags"]["axis:accuracy"]["score"] == pytest.approx(((7 + 10 - 6) / 17 + 1.0) / 2)
        assert list(out["tags"]) == sorted(out["tags"])

    def test_missing_verdict_names_prompt_and_index(self):
        rows, verdicts = self._data()
        verdicts["a"] = [True, None, True, True]
        with pytest.raises(MissingVerdictError) as exc:
            score_healthbench(rows, verdicts)
        assert exc.value.prompt_id == "a" and exc.value.rubric_index == 1
        assert "'a'" in str(exc.value) and "rubric_index 1" in str(exc.value)
        verdicts["a"] = [True, False]
        with pytest.raises(MissingVerdictError, match="rubric_index 2"):
            score_healthbench(rows, verdicts)
        del verdicts["a"]
        with pytest.raises(MissingVerdictError, match="'a'"):
            score_healthbench(rows, verdicts)

    def test_unknown_prompt_in_verdicts(self):
        rows, verdicts = self._data()
        verdicts["zzz"] = [True]
        with pytest.raises(ScoringError, match="zzz"):
            score_healthbench(rows, verdicts)

    def test_length_adjustment(self):
        rows, verdicts = self._data()
        verdicts["b"] = [True, False]  # b scores 1.0
        responses = {"a": "x" * 2500, "b": "x" * 1500}
        out = score_healthbench(rows, verdicts, responses, 0.1, n_bootstrap=10)
        # a: 0.5 - 0.1 = 0.4 ; b: 1.0 + 0.1 = 1.1 (not clipped per example) -> mean 0.75
        assert out["score"] == pytest.approx(0.75)
        assert out["tags"]["theme:t2"]["score"] == 1.0  # 1.1 clipped after the mean
        assert out["tags"]["theme:t1"]["score"] == pytest.approx(0.4)
        # rubric tags are item-level and not length adjusted
        assert out["tags"]["axis:accuracy"]["score"] == pytest.approx(((7 + 10 - 6) / 17 + 1.0) / 2)
        with pytest.raises(ScoringError, match="no response"):
            score_healthbench(rows, verdicts, {"a": "x"}, 0.1)

    def test_empty_rows(self):
        with pytest.raises(ScoringError):
            score_healthbench([], {})


def test_length_adjusted_formula():
    assert length_adjusted(0.5, 2000, 0.0392) == pytest.approx(0.5)
    assert length_adjusted(0.5, 3000, 0.0392) == pytest.approx(0.5 - 0.0392 * 2)
    assert length_adjusted(0.5, "y" * 1000, 0.02) == pytest.approx(0.5 + 0.02 * 2)
    assert LENGTH_ADJUST == {"hard": 0.0392, "full": 0.0299, "consensus": 0.0020, "professional": 0.0147}


class TestRlReward:
    def test_clipped_per_example(self):
        assert rl_reward([2, -10], [True, True]) == 0.0
        assert rl_reward([2, -10], [True, True], clip=False) == pytest.approx(-4.0)
        assert rl_reward([7, 5, 10, -6], [True, False, True, True]) == pytest.approx(0.5)

    def test_probabilities_give_expected_points(self):
        assert rl_reward([4, 6, -5], [0.5, 1.0, 0.2]) == pytest.approx((2 + 6 - 1) / 10)

    def test_bad_inputs(self):
        for bad in (1.5, -0.1, float("nan"), "yes", None):
            with pytest.raises(ScoringError):
                rl_reward([1, 2], [True, bad])
        with pytest.raises(ScoringError):
            rl_reward([-1], [True])


class TestLoader:
    def test_professional_is_normalised(self, tmp_path):
        pro = {"id": "p-1", "conversation": {"messages": [{"role": "user", "content": "Dose of X?"}]},
               "rubric_items": [{"criterion_text": "States the dose", "points": 5},
                                {"criterion_text": "Wrong unit", "points": -3}],
               "use_case": "dosing", "type": "single_turn", "difficulty": "hard",
               "specialty": "cardiology", "extra_field": 1}
        path = tmp_path / "pro.jsonl"
        path.write_text(json.dumps(pro) + "\n")
        (row,) = load_healthbench(path)
        assert row.prompt_id == "p-1"
        assert row.prompt[0].content == "Dose of X?"
        assert [(r.criterion, r.points) for r in row.rubrics] == [("States the dose", 5), ("Wrong unit", -3)]
        assert row.example_tags == ["use_case:dosing", "type:single_turn", "difficulty:hard",
                                    "specialty:cardiology"]
        out = score_healthbench([row], {"p-1": [True, True]}, n_bootstrap=5)
        assert out["tags"]["specialty:cardiology"]["score"] == pytest.approx(0.4)

    def test_errors_name_file_line_and_field(self, tmp_path):
        good = {"prompt_id": "a", "prompt": [{"role": "user", "content": "hi"}],
                "rubrics": [{"criterion": "c", "points": 1, "tags": []}], "example_tags": [],
                "unknown": "ignored"}
        bad = dict(good, prompt_id="b", rubrics=[{"criterion": "c", "tags": []}])
        path = tmp_path / "rows.jsonl"
        path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
        with pytest.raises(InputError) as exc:
            load_healthbench(path)
        msg = str(exc.value)
        assert "rows.jsonl" in msg and "line 2" in msg and "prompt_id b" in msg and "rubrics.0.points" in msg
        path.write_text(json.dumps(good) + "\n" + json.dumps(good) + "\n")
        with pytest.raises(InputError, match="duplicate prompt_id"):
            load_healthbench(path)
        path.write_text(json.dumps({"foo": 1}) + "\n")
        with pytest.raises(InputError, match="neither HealthBench"):
            load_healthbench(path)


def test_verify_sha256(tmp_path, monkeypatch):
    import hashlib

    from reward.healthbench import variants

    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"prompt_id": "x"}\n')
    assert verify_sha256(path) is None
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    fake = variants.Variant("hard", VARIANTS["hard"].file_name, 1000, digest)
    monkeypatch.setitem(variants.VARIANTS, "hard", fake)
    assert verify_sha256(path) == "hard"
    assert VARIANTS["hard"].url.endswith("/healthbench/hard_2025-05-08-21-00-10.jsonl")
    assert VARIANTS["full"].rows == 5000 and VARIANTS["consensus"].rows == 3671
