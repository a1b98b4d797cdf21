"""The TRL launcher's plumbing without training: the configs against TRL's own GRPOConfig, the
judge it builds, the difficulty filter run once per job, and stale filter results refused."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from pathlib import Path

import pytest
from rt_paths import REPO_ROOT

from reward.errors import InputError

REPO = REPO_ROOT
CONFIGS = sorted((REPO / "configs" / "trl").glob("*.yaml")) + sorted((REPO / "configs" / "smoke").glob("*.yaml"))


@pytest.fixture
def clean_env(monkeypatch):
    for var in ("RUBRICSTREE_JUDGE_URL", "RUBRICSTREE_JUDGE_MODEL", "RUBRICSTREE_JUDGE_SERVED",
                "RUBRICSTREE_RUN_ROOT", "FV_DATA", "RANK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("RUBRICSTREE_TINY_MODEL", "/some/tiny")
    return monkeypatch


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_grpo_key_is_a_grpo_config_field(path, clean_env):
    """A misspelt key would only fail on the GPU machine, when GRPOConfig is built."""
    trl = pytest.importorskip("trl")
    from training.trl_launcher import load_config

    clean_env.setenv("RUBRICSTREE_JUDGE_URL", "http://127.0.0.1:9")
    cfg = load_config(path)
    fields = {f.name for f in dataclasses.fields(trl.GRPOConfig)}
    assert sorted(set(cfg.grpo) - fields) == []


def test_paper_difficulty_windows_and_their_ends(clean_env):
    from training.trl_launcher import load_config

    d = load_config(REPO / "configs/trl/stage1_mcq.yaml").difficulty.config("split")
    assert [d.split_of(x) for x in (0.0999, 0.1, 0.4, 0.4001, 0.7, 0.7001)] == \
        ["drop", "rubric", "rubric", "rule", "rule", "drop"]
    clean_env.setenv("RUBRICSTREE_JUDGE_URL", "http://127.0.0.1:9")
    k = load_config(REPO / "configs/trl/stage3_clinical_rubric.yaml").difficulty.config("keep")
    assert [k.split_of(x) for x in (0.1499, 0.15, 0.7, 0.7001)] == ["drop", "keep", "keep", "drop"]


def test_judge_with_a_url_takes_the_servers_tokenizer_not_the_default_judge_model(clean_env):
    """configs/trl default judge.model to the model train.sh would serve (Qwen/Qwen3-32B): with a
    url given, that name must not become the tokenizer of whatever the server runs."""
    from training.trl_launcher import judge_spec, load_config

    clean_env.setenv("RUBRICSTREE_JUDGE_URL", "http://judge:8000")
    cfg = load_config(REPO / "configs/trl/stage2_error_rubric.yaml")
    assert cfg.judge.model == "Qwen/Qwen3-32B"
    spec = judge_spec(cfg)
    assert spec.url == "http://judge:8000" and spec.model is None and spec.tokenizer is None
    spec = judge_spec(load_config(REPO / "configs/trl/stage2_error_rubric.yaml", ["judge.tokenizer=/tok"]))
    assert spec.tokenizer == "/tok"
    spec = judge_spec(load_config(REPO / "configs/trl/stage2_error_rubric.yaml", ["judge.in_process=true"]))
    assert spec.url is None and spec.model == "Qwen/Qwen3-32B"


# ------------------------------------------------------------------ once per job
def test_rank_zero_computes_once(tmp_path, clean_env):
    from training.trl_launcher import once_per_job

    marker, calls = tmp_path / "stats.json", []

    def compute():
        calls.append(1)
        marker.write_text("{}")

    once_per_job(marker, compute)
    once_per_job(marker, compute)
    assert calls == [1]


def test_other_ranks_wait_for_rank_zero_and_never_compute(tmp_path, clean_env):
    from training.trl_launcher import once_per_job

    clean_env.setenv("RANK", "3")
    marker = tmp_path / "stats.json"
    timer = threading.Timer(0.3, lambda: marker.write_text("{}"))
    timer.start()
    t0 = time.monotonic()
    once_per_job(marker, lambda: pytest.fail("only rank 0 filters"), poll_s=0.05)
    assert marker.exists() and time.monotonic() - t0 >= 0.25


# ------------------------------------------------------------------ stale results
def _filtered(cfg_path: Path, out: Path, overrides: list[str]):
    """Difficulty results for the smoke MCQ rows written by the real filter with a known reward
    (means 0.25, 0.5, 1.0), without sampling."""
    from training.data import build_mcq_dataset
    from training.difficulty import filter_rows, read_rows
    from training.trl_launcher import load_config

    cfg = load_config(cfg_path, ["difficulty.enabled=true", f"difficulty.out_dir={out}", *overrides])
    rows = read_rows(REPO / "tests/fixtures/mcq_own.jsonl")
    wins = iter([1, 2, 4])
    per_row = [next(wins) for _ in rows]

    def known(prompts, completions, completion_ids=None, row_id=None, **kw):
        seen: dict[str, int] = {}
        out_ = []
        for rid in row_id:
            k = seen[rid] = seen.get(rid, -1) + 1
            out_.append(1.0 if k < per_row[int(rid.split("-")[1]) - 1] else 0.0)
        return out_

    filter_rows(rows, build_mcq_dataset(rows), [["x"] * 4 for _ in rows], known, cfg.difficulty.config("split"), out)
    return cfg


def test_filter_results_are_reused_when_they_match(tmp_path, clean_env, monkeypatch):
    pytest.importorskip("datasets")
    import training.trl_launcher as tl

    clean_env.chdir(REPO)
    cfg = _filtered(REPO / "configs/smoke/stage1_mcq.yaml", tmp_path / "d", [])
    monkeypatch.setattr(tl, "run_difficulty", lambda *a, **k: pytest.fail("the results exist"))
    ds = tl.build_train_dataset(cfg)
    second = json.loads((REPO / "tests/fixtures/mcq_own.jsonl").read_text().splitlines()[1])
    assert len(ds) == 1 and second["question"].strip() in ds[0]["prompt"][-1]["content"]  # mean 0.5 trains stage 1


def test_filter_results_made_with_other_windows_are_refused(tmp_path, clean_env, monkeypatch):
    pytest.importorskip("datasets")
    import training.trl_launcher as tl

    clean_env.chdir(REPO)
    _filtered(REPO / "configs/smoke/stage1_mcq.yaml", tmp_path / "d", [])
    cfg = tl.load_config(REPO / "configs/smoke/stage1_mcq.yaml", [
        "difficulty.enabled=true", f"difficulty.out_dir={tmp_path / 'd'}", "difficulty.rule=[0.3, 0.9]"])
    monkeypatch.setattr(tl, "run_difficulty", lambda *a, **k: pytest.fail("the results exist"))
    with pytest.raises(InputError, match=r"windows were .*\(0.4, 0.7\].*\(0.3, 0.9\]") as err:
        tl.build_train_dataset(cfg)
    assert str(tmp_path / "d" / "stats.json") in str(err.value)
    cfg = tl.load_config(REPO / "configs/smoke/stage1_mcq.yaml", [
        "difficulty.enabled=true", f"difficulty.out_dir={tmp_path / 'd'}", "data.limit=2"])
    with pytest.raises(InputError, match="3 rows were filtered, the data now has 2"):
        tl.build_train_dataset(cfg)


class KnownScores:
    """A filter reward with the settings of a rubric reward and known scores (no judge)."""

    def __init__(self, settings) -> None:
        self.settings = settings

    def __call__(self, prompts, completions, completion_ids=None, **kw):
        return [0.5] * len(completions)


def test_filter_results_scored_with_other_reward_settings_are_refused(tmp_path, clean_env):
    """The filter records the reward settings it scored with (stats.json ``reward``: what
    ``RewardSettings.record()`` writes); a stage-3 launch reuses results scored as its own filter
    would score (the run's recipe as a pass rate) and refuses others, naming what differs."""
    pytest.importorskip("datasets")
    import training.trl_launcher as tl
    from training.data import build_healthbench_dataset
    from training.difficulty import filter_rows, read_rows

    clean_env.chdir(REPO)
    cfg = tl.load_config(REPO / "configs/smoke/stage3_clinical_rubric.yaml", [
        f"output_dir={tmp_path / 'run'}", "difficulty.enabled=true", f"difficulty.out_dir={tmp_path / 'd'}",
        "judge.url=http://127.0.0.1:9/v1"])
    rows = read_rows(REPO / "tests/fixtures/healthbench_own.jsonl")
    own = tl.filter_scorer(cfg).settings
    assert own.format_failure_score == 0.0 and own.clip_below_zero  # the pass rate, not the shaped reward

    def filtered(settings) -> None:
        filter_rows(rows, build_healthbench_dataset(rows), [["x"] * 4 for _ in rows], KnownScores(settings),
                    cfg.difficulty.config("keep"), tmp_path / "d")

    filtered(own)
    stats = json.loads((tmp_path / "d" / "stats.json").read_text())
    assert stats["reward"] == own.record()
    assert len(tl.build_train_dataset(cfg)) == len(rows)  # scored as this run's filter would: reused

    filtered(own.model_copy(update={"scoring_variant": "paper", "router": "embedding"}))
    with pytest.raises(InputError, match=r"other reward settings .*router: 'embedding' -> 'static'; "
                                         r"scoring_variant: 'paper' -> 'severity'") as err:
        tl.build_train_dataset(cfg)
    assert str(tmp_path / "d" / "stats.json") in str(err.value) and err.value.field == "reward"

    stats["reward"] = None  # results from before the filter recorded its reward: cannot be checked
    (tmp_path / "d" / "stats.json").write_text(json.dumps(stats))
    with pytest.raises(InputError, match="do not record the reward settings"):
        tl.build_train_dataset(cfg)


def test_stats_file_is_written_last_and_whole(tmp_path, clean_env):
    pytest.importorskip("datasets")
    clean_env.chdir(REPO)
    _filtered(REPO / "configs/smoke/stage1_mcq.yaml", tmp_path / "d", [])
    names = {p.name for p in (tmp_path / "d").iterdir()}
    assert names == {"scores.jsonl", "rubric.jsonl", "rule.jsonl", "stats.json"}  # no .tmp left behind
    assert json.loads((tmp_path / "d" / "stats.json").read_text())["counts"]["rule"] == 1


# ------------------------------------------------------------------ durable samples
def test_samples_survive_a_killed_filter_and_are_not_drawn_again(tmp_path, monkeypatch):
    import training.difficulty as diff

    prompts = [[{"role": "user", "content": f"q{i}"}] for i in range(3)]
    cfg = diff.DifficultyConfig(n=2)
    asked: list[list[str]] = []

    def fake(chosen, *, model, cfg, tokenizer=None, on_done=None, die_after=None):
        asked.append([p[0]["content"] for p in chosen])
        out = []
        for i, p in enumerate(chosen):
            if die_after is not None and i == die_after:
                raise RuntimeError("killed")
            out.append([p[0]["content"] + "-a", p[0]["content"] + "-b"])
            on_done(i, out[-1])
        return out

    monkeypatch.setattr(diff, "generate_in_process", lambda *a, **k: fake(*a, **k, die_after=2))
    with pytest.raises(RuntimeError, match="killed"):
        diff.sample_prompts(prompts, model="/m", cfg=cfg, out_dir=tmp_path)
    monkeypatch.setattr(diff, "generate_in_process", fake)
    got = diff.sample_prompts(prompts, model="/m", cfg=cfg, out_dir=tmp_path)
    assert asked == [["q0", "q1", "q2"], ["q2"]]  # the rerun drew only what the kill lost
    assert got == [[f"q{i}-a", f"q{i}-b"] for i in range(3)]
    # other sampling settings (here another model) are not served from the file
    diff.sample_prompts(prompts, model="/other", cfg=cfg, out_dir=tmp_path)
    assert asked[-1] == ["q0", "q1", "q2"]


def test_difficulty_filter_budget_defaults_to_the_stage_completion_length():
    """Not 1024: a short budget cuts Qwen3's thinking and every question looks too hard."""
    from training.trl_config import load_config

    cfg = load_config(REPO / "configs/trl/stage1_mcq.yaml", ["difficulty.max_new_tokens=null",
                                                             "grpo.max_completion_length=7777"])
    assert cfg.difficulty.max_new_tokens == 7777 and cfg.difficulty.config("split").max_new_tokens == 7777
    cfg = load_config(REPO / "configs/trl/stage1_mcq.yaml", ["difficulty.max_new_tokens=512"])
    assert cfg.difficulty.max_new_tokens == 512


def test_a_bad_config_is_one_line_and_debug_gives_the_traceback(tmp_path, clean_env, capsys):
    from training.trl_launcher import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("stage: clinical_rubric\nnot_a_key: 1\n", encoding="utf-8")
    assert main(["--config", str(bad), "--print-output-dir"]) == 2
    out = capsys.readouterr().out
    assert out.startswith("error:") and "bad.yaml" in out and "Traceback" not in out
    with pytest.raises(InputError, match="bad.yaml"):
        main(["--config", str(bad), "--print-output-dir", "--debug"])
