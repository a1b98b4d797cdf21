"""Judge mode of the stress test end to end: against the real vLLM judge server (the command, with
the holistic baseline, then a rerun served from the durable cache) and in-process on the tiny
model. The tiny model has random weights: these tests check wiring, never the numbers' quality."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from reward.stress import default_cases_path, load_cases, run_stress
from rubricstree import app

runner = CliRunner()
PICK = ("sy-iud-2", "ap-mi-2")  # a DKA case with device data, and a missing-instruction case


def _small_cases(tmp_path: Path) -> Path:
    raw = yaml.safe_load(default_cases_path().read_text(encoding="utf-8"))
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump([c for c in raw if c["id"] in PICK], allow_unicode=True), encoding="utf-8")
    return path


def _check_numbers(rows: list[dict]) -> None:
    for r in rows:
        for k in ("clean", "perturbed", "baseline_clean", "baseline_perturbed"):
            assert r[k] is None or 0.0 <= r[k] <= 1.0
        if r["clean"] is None or r["perturbed"] is None:
            assert r["failures"]  # unscored says why, never a silent 0


@pytest.mark.server
def test_stress_judge_mode_against_the_server_and_rerun_from_cache(tmp_path, judge_url, tiny_model_dir):
    from reward.judge import make_judge
    from reward.router import make_router
    from reward.router.base import CachedRouter
    from reward.settings import RewardSettings
    from reward.stages.build import output_scope
    from reward.tree import load_tree

    cases = _small_cases(tmp_path)
    rep = tmp_path / "rep"
    res = runner.invoke(app, ["stress", "--cases", str(cases), "--verdicts", "judge", "--judge-url", judge_url,
                              "--judge-model", str(tiny_model_dir), "--holistic-baseline", "--report", str(rep), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["cases"] == 2 and out["baseline"] is not None
    assert set(out["by_perturbation"]) == {"inaccurate_user_data", "missing_instructions"}
    rows = [json.loads(line) for line in (rep / "cases.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == sorted(PICK)
    _check_numbers(rows)
    assert all(r["n_active"] > 0 for r in rows)

    # the same work again in-process: every verdict, routing and baseline answer from the cache
    tree = load_tree()
    judge = make_judge(judge_url=judge_url, judge_model=str(tiny_model_dir))
    router = CachedRouter(make_router("embedding", tree), judge.cache)

    async def again():
        try:
            # the reward of the run, in the run's applicability scope (its report folder)
            reward = RewardSettings(scoring_variant=out["scoring_variant"]).build(
                judge, tree=tree, router=router, cache_routing=False, applicability_scope=output_scope(rep))
            return await run_stress(load_cases(cases, tree), tree, router, mode="judge", variant=out["scoring_variant"],
                                    judge=judge, baseline_judge=judge, progress=False, reward=reward)
        finally:
            await judge.aclose()

    results, _ = asyncio.run(again())
    assert judge.stats.requests == 0 and judge.stats.cache_hits > 0
    assert router.hits_durable == 2 and router.misses == 0
    by_id = {r["id"]: r for r in rows}
    for r in results:
        assert (r.clean, r.perturbed) == (by_id[r.id]["clean"], by_id[r.id]["perturbed"])
        assert (r.baseline_clean, r.baseline_perturbed) == (by_id[r.id]["baseline_clean"],
                                                             by_id[r.id]["baseline_perturbed"])


@pytest.mark.slow
def test_stress_judge_mode_in_process_on_the_tiny_model(tmp_path, tiny_model_dir):
    cases = _small_cases(tmp_path)
    res = runner.invoke(app, ["stress", "--cases", str(cases), "--verdicts", "judge", "--judge-model",
                              str(tiny_model_dir), "--router", "embedding", "--report", str(tmp_path / "rep"),
                              "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["cases"] == 2 and out["baseline"] is None
    rows = [json.loads(line) for line in (tmp_path / "rep" / "cases.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    _check_numbers(rows)


@pytest.mark.server
def test_stress_judge_mode_on_the_bundled_cases_without_a_report(tmp_path, judge_url, tiny_model_dir, monkeypatch):
    """No --cases and no --report: judge mode once crashed building its applicability scope from
    neither. The bundled cases (here two of them, for time) are the scope: a rerun asks the server
    nothing and scores the same."""
    import reward.stress.cases as cases_module

    small = _small_cases(tmp_path)
    monkeypatch.setattr(cases_module, "default_cases_path", lambda: small)
    args = ["stress", "--verdicts", "judge", "--judge-url", judge_url, "--judge-model", str(tiny_model_dir),
            "--cache-dir", str(tmp_path / "cache"), "--json"]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    out = json.loads(first.stdout.strip().splitlines()[-1])
    assert out["cases"] == 2
    cached = _cached_rows(tmp_path / "cache")
    again = runner.invoke(app, args)
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout.strip().splitlines()[-1]) == out
    assert _cached_rows(tmp_path / "cache") == cached > 0  # every verdict and applicability answer from the cache


def _cached_rows(folder: Path) -> int:
    """Verdicts in the run's durable cache: each answer the judge gives is stored there."""
    from reward.judge.cache import VerdictCache

    return len(VerdictCache(folder / "verdicts.sqlite"))
