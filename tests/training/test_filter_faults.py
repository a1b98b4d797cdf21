"""The difficulty filter degrades, never aborts (issue 38). It sends one request per sample (timeout,
retries and concurrency from its config), so a request that times out costs one sample's retry; a
prompt whose sample still fails after the retries is skipped and counted; the filter stops only
when more than ``max_failed_fraction`` of the prompts are lost; a rerun draws only what is missing,
with the same per-sample seeds, so it ends with the same kept rows as a run that never failed.

Against the real vLLM judge server (the tiny random model serving as the policy), through
scripts/fault_proxy.py making 30% of the generation requests hang. The reward is a fixed function
of each sample's text (the tiny model's answers carry no letter), so the kept set changes whenever
a sample's text does: it tests the sampling, not a reward."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx
import pytest
from rt_net import free_port
from rt_paths import REPO_ROOT

from training.difficulty import DifficultyConfig, FilterRefused, run_filter

QUESTIONS = 30


def _data(tmp_path):
    path = tmp_path / "mcq.jsonl"
    rows = [{"question": f"Question {i}: which organ makes insulin?", "options": {"A": "Pancreas", "B": "Liver",
             "C": "Kidney", "D": "Spleen"}, "answer_idx": "A", "answer": "Pancreas", "id": f"q{i}"}
            for i in range(QUESTIONS)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def text_reward(prompts, completions, completion_ids=None, **kw):
    """A fixed function of the sample's text: 0, 0.25, ..., 1 by its length."""
    return [(len(c[0]["content"]) % 5) / 4 for c in completions]


def _cfg(**kw) -> DifficultyConfig:
    base = {"n": 4, "max_new_tokens": 8, "temperature": 1.0, "seed": 0, "timeout_s": 3.0, "max_retries": 1,
            "concurrency": 8, "max_failed_fraction": 1.0}
    return DifficultyConfig(**{**base, **kw})


def _kept(splits) -> set[str]:
    return {r["question"] for s in ("rubric", "rule") for r in splits[s]}


@pytest.fixture
def proxy(judge_url, tmp_path):
    port, stats = free_port(), tmp_path / "proxy.json"
    proc = subprocess.Popen([sys.executable, str(REPO_ROOT / "scripts/fault_proxy.py"), "--upstream",
                             judge_url.rstrip("/").removesuffix("/v1"), "--port", str(port), "--rate", "0.3",
                             "--faults", "hang", "--hang-s", "60", "--seed", "3", "--stats", str(stats)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            httpx.get(url + "/v1/models", timeout=2)
            break
        except httpx.HTTPError:
            time.sleep(0.1)
    yield url, stats
    proc.kill()
    proc.wait()


@pytest.mark.server
@pytest.mark.slow
def test_a_server_timing_out_30_percent_skips_and_counts_and_a_rerun_keeps_the_same_rows(tmp_path, judge_url, proxy):
    url, proxy_stats = proxy
    data = _data(tmp_path)
    common = {"model": "tiny", "served_model": "tiny", "kind": "mcq", "reward_fn": text_reward}
    clean_splits, clean = run_filter(data, out_dir=tmp_path / "clean", cfg=_cfg(), generate_url=judge_url, **common)
    assert clean.counts["skipped"] == 0
    kept = _kept(clean_splits)
    assert 0 < len(kept) < QUESTIONS  # the reward separates the rows: a changed sample would show

    # 30% of requests hang; 3 s timeout, one retry: a sample is lost with p = 0.09, a 4-sample prompt with ~0.31
    splits, stats = run_filter(data, out_dir=tmp_path / "faulty", cfg=_cfg(), generate_url=url, **common)
    faults = json.loads(proxy_stats.read_text())
    assert faults["hang"] > 0
    skipped = {r["question"] for r in splits["skipped"]}
    assert stats.counts["skipped"] == len(skipped) >= 1 and sum(stats.counts.values()) == QUESTIONS
    scores = [json.loads(line) for line in (tmp_path / "faulty" / "scores.jsonl").read_text().splitlines()]
    assert sum(r["split"] == "skipped" for r in scores) == len(skipped)
    # every row it could sample was sampled as in the clean run (per-sample seeds survive retries)
    assert _kept(splits) == kept - skipped

    # the rerun (no faults) draws only the lost samples and keeps exactly the clean run's rows
    lines = (tmp_path / "faulty" / "samples.jsonl").read_text().splitlines()
    assert len(lines) < QUESTIONS * 4
    splits, stats = run_filter(data, out_dir=tmp_path / "faulty", cfg=_cfg(), generate_url=judge_url, **common)
    assert stats.counts["skipped"] == 0 and _kept(splits) == kept
    assert len((tmp_path / "faulty" / "samples.jsonl").read_text().splitlines()) == QUESTIONS * 4


def test_the_filter_refuses_only_above_the_stated_fraction(tmp_path, monkeypatch):
    """2 of 10 prompts lose a sample for good: 0.1 allowed -> refused (what was drawn is kept and a
    rerun draws only the rest); 0.2 allowed -> both skipped and counted, the others filtered."""
    import training.difficulty as diff

    data = tmp_path / "mcq.jsonl"
    data.write_text("".join(json.dumps({"question": f"Q{i}?", "options": {"A": "a", "B": "b"}, "answer_idx": "A"})
                            + "\n" for i in range(10)), encoding="utf-8")
    asked: list[int] = []

    def server(prompts, *, url, model, cfg, todo, keys, on_sample):
        out = {}
        for i, j in todo:
            asked.append(i)
            text = prompts[i][-1]["content"][:3]
            bad = "Q3?" in prompts[i][-1]["content"] or "Q7?" in prompts[i][-1]["content"]
            out[(i, j)] = None if bad and j == 1 else text
            if out[(i, j)] is not None:
                on_sample(i, j, text)
        return out

    monkeypatch.setattr(diff, "generate_with_server", server)
    kw = {"model": "m", "generate_url": "http://policy.invalid", "kind": "mcq", "reward_fn": text_reward}
    with pytest.raises(FilterRefused, match="2 of 10 prompts") as exc:
        run_filter(data, out_dir=tmp_path / "out", cfg=_cfg(max_failed_fraction=0.1), **kw)
    assert exc.value.field == "difficulty.max_failed_fraction" and "samples.jsonl" in str(exc.value)
    assert len(asked) == 40 and not (tmp_path / "out" / "stats.json").exists()
    asked.clear()
    splits, stats = run_filter(data, out_dir=tmp_path / "out", cfg=_cfg(max_failed_fraction=0.2), **kw)
    assert len(asked) == 2  # only the two lost samples are asked again
    assert stats.counts["skipped"] == 2 and sorted(r["question"] for r in splits["skipped"]) == ["Q3?", "Q7?"]
    assert sum(stats.counts.values()) == 10
