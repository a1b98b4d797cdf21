"""``eval compare``: paired bootstrap arithmetic and the command on two folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from reward.errors import InputError
from rubricstree import app
from training.eval.compare import compare_runs, paired_bootstrap

runner = CliRunner()


def fake_run(folder: Path, scores: dict[str, float], model: str, bench: str = "healthbench") -> Path:
    folder.mkdir(parents=True)
    mean = sum(scores.values()) / len(scores)
    metrics = {"benchmark": bench, "model": model, "score": min(1, max(0, mean)), "bootstrap_std": 0.01,
               "n_samples": len(scores), "n_unscored": 0, "grading": {"mode": "choice"}, "data": {"sha256": "x"},
               "tags": {"theme:hedging": {"score": 0.5, "bootstrap_std": 0.1, "n_samples": 2}}}
    (folder / "metrics.json").write_text(json.dumps(metrics))
    (folder / "example_scores.jsonl").write_text(
        "".join(json.dumps({"id": k, "score": v, "score_length_adjusted": None}) + "\n" for k, v in scores.items()))
    return folder


def test_constant_difference_has_a_degenerate_interval():
    a = {f"p{i}": i / 10 for i in range(10)}
    b = {k: v + 0.2 for k, v in a.items()}
    r = paired_bootstrap(a, b, n_resamples=200, seed=1)
    assert r["n_paired"] == 10 and r["mean_diff"] == pytest.approx(0.2)
    assert r["ci95"] == pytest.approx([0.2, 0.2]) and r["p_not_better"] == 0.0


def test_pairing_uses_only_shared_ids_and_is_seeded():
    a = {"p1": 0.0, "p2": 1.0, "p3": 0.5}
    b = {"p2": 0.0, "p3": 1.0, "p4": 0.3}
    r = paired_bootstrap(a, b, seed=3)
    assert r["n_paired"] == 2 and r["mean_diff"] == pytest.approx((-1.0 + 0.5) / 2)
    assert r == paired_bootstrap(a, b, seed=3)
    assert paired_bootstrap({"x": 1.0}, {"y": 1.0})["mean_diff"] is None


def test_compare_runs_against_the_first(tmp_path):
    a = fake_run(tmp_path / "a", {"p1": 0.1, "p2": 0.3, "p3": -0.2}, "base")
    b = fake_run(tmp_path / "b", {"p1": 0.4, "p2": 0.5, "p3": 0.1}, "tuned")
    r = compare_runs([a, b], n_resamples=100)
    assert r["runs"][0].get("diff") is None
    assert r["runs"][1]["diff"]["mean_diff"] == pytest.approx((0.3 + 0.2 + 0.3) / 3)
    assert r["warnings"] == []
    mcq = fake_run(tmp_path / "c", {"p1": 1.0}, "m", bench="mcq")
    with pytest.raises(InputError, match="different benchmarks"):
        compare_runs([a, mcq])
    with pytest.raises(InputError, match="at least two"):
        compare_runs([a])


def test_compare_command_prints_a_table_and_writes_a_plot(tmp_path):
    pytest.importorskip("matplotlib")
    a = fake_run(tmp_path / "a", {"p1": 0.1, "p2": 0.3}, "base")
    b = fake_run(tmp_path / "b", {"p1": 0.4, "p2": 0.5}, "tuned")
    png = tmp_path / "cmp" / "compare.png"
    res = runner.invoke(app, ["eval", "compare", str(a), str(b), "--out", str(png.parent), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["runs"][1]["diff"]["mean_diff"] == pytest.approx(0.25) and png.stat().st_size > 1000
    res = runner.invoke(app, ["eval", "compare", str(a), str(b), "--out", str(png.parent)])
    assert res.exit_code == 0 and "+0.2500" in res.output and "tuned" in res.output
    res = runner.invoke(app, ["eval", "compare", str(a), str(tmp_path / "nope")])
    assert res.exit_code == 2 and "not an evaluation folder" in res.output


def test_compare_and_baseline_report_the_same_gain(tmp_path):
    """``eval compare A B`` and ``eval healthbench --baseline A`` (B's metrics) compute one gain: the
    clipped mean of B minus that of A on the shared examples. With negative example scores the old
    compare (mean of unclipped differences) gave another number."""
    from training.eval.headline import add_headline

    base = {"p1": -0.4, "p2": 0.3, "p3": -0.2, "p4": 0.1}
    tuned = {"p1": 0.2, "p2": 0.5, "p3": -0.1, "p4": 0.4}
    a = fake_run(tmp_path / "a", base, "base")
    b = fake_run(tmp_path / "b", tuned, "tuned")
    cmp = compare_runs([a, b], n_resamples=300, seed=7)["runs"][1]["diff"]
    metrics = {"benchmark": "healthbench", "data": {"sha256": "x"}}
    add_headline(metrics, tuned, baseline=str(a), n_bootstrap=300, seed=7)
    expected = max(0.0, sum(tuned.values()) / 4) - max(0.0, sum(base.values()) / 4)  # 0.25 - 0.0
    assert cmp["mean_diff"] == pytest.approx(metrics["baseline"]["delta"], abs=1e-12) == pytest.approx(expected)
    assert cmp["ci95"] == metrics["baseline"]["delta_ci95"]  # the same draws: one computation
    assert cmp["mean_diff"] != pytest.approx(sum(tuned[k] - base[k] for k in base) / 4)  # not the unclipped mean
