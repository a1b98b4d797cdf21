"""--data easy (full minus hard by prompt_id), the training-budget defaults of evaluation, and
the published-figures file."""

from __future__ import annotations

import json

import pytest

from reward.errors import InputError
from training.eval.budgets import default_max_new_tokens
from training.eval.data_variants import build_easy
from training.eval.published import figures_for, load_published


def _rows(path, ids):
    path.write_text("".join(json.dumps({"prompt_id": i, "prompt": [], "rubrics": []}) + "\n" for i in ids))
    return path


def test_easy_is_full_minus_hard_in_full_order_and_built_once(tmp_path):
    full = _rows(tmp_path / "full.jsonl", ["a", "b", "c", "d", "e"])
    hard = _rows(tmp_path / "hard.jsonl", ["d", "b"])
    easy = build_easy(full, hard, tmp_path / "cache")
    assert [json.loads(x)["prompt_id"] for x in easy.read_text().splitlines()] == ["a", "c", "e"]
    mtime = easy.stat().st_mtime_ns
    assert build_easy(full, hard, tmp_path / "cache") == easy and easy.stat().st_mtime_ns == mtime


def test_easy_refuses_files_that_are_not_a_pair_and_names_bad_lines(tmp_path):
    full = _rows(tmp_path / "full.jsonl", ["a", "b"])
    with pytest.raises(InputError, match="not the published pair"):
        build_easy(full, _rows(tmp_path / "hard.jsonl", ["z"]), tmp_path / "c1")
    (tmp_path / "bad.jsonl").write_text('{"prompt_id": "a"}\n{"no_id": 1}\n')
    with pytest.raises(InputError, match="line 2"):
        build_easy(tmp_path / "bad.jsonl", full, tmp_path / "c2")


def test_budgets_follow_training_unless_thinking_is_off_or_given():
    assert default_max_new_tokens("healthbench", None) == 16000
    assert default_max_new_tokens("healthbench", True) == 16000
    assert default_max_new_tokens("mcq", None) == 10000
    assert default_max_new_tokens("healthbench", False) == 2048 and default_max_new_tokens("mcq", False) == 1024
    assert default_max_new_tokens("mcq", True, given=77) == 77


def test_published_figures_load_and_are_marked_copied(tmp_path):
    figs = load_published()
    hard = figures_for("healthbench-hard", figs)
    assert hard and all(f.copied and f.source and f.score is not None for f in hard)
    assert any(f.score == pytest.approx(0.501) for f in hard)
    assert figures_for("healthbench-hard", figs) != figures_for("medxpertqa", figs)
    bad = tmp_path / "p.yaml"
    bad.write_text("references:\n  - model: x\n    benchmark: b\n    score: 51\n    grader: g\n"
                   "    setting: s\n    source: src\n    copied: true\n")
    with pytest.raises(InputError, match=r"record 0.*score"):
        load_published(bad)


def test_compare_with_published_draws_copied_figures_of_the_same_benchmark(tmp_path):
    from typer.testing import CliRunner

    from rubricstree import app

    for name, s in (("a", 0.2), ("b", 0.3)):
        d = tmp_path / name
        d.mkdir()
        (d / "metrics.json").write_text(json.dumps({
            "benchmark": "healthbench", "model": name, "score": s, "bootstrap_std": 0.01, "n_samples": 2,
            "n_unscored": 0, "grading": {"mode": "explain"}, "data": {"sha256": "x", "variant": "hard"}, "tags": {}}))
        (d / "example_scores.jsonl").write_text("".join(json.dumps({"id": i, "score": s}) + "\n" for i in ("p1", "p2")))
    res = CliRunner().invoke(app, ["eval", "compare", str(tmp_path / "a"), str(tmp_path / "b"), "--published",
                                   "--out", str(tmp_path / "c"), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)  # progress goes to stderr
    assert out["published"] and all(p["benchmark"] == "healthbench-hard" and p["copied"] for p in out["published"])
    assert (tmp_path / "c" / "compare.png").stat().st_size > 0
