"""The judge is identified by content (issue 10, defect 4): new weights or a new tokenizer at the
same path, another model behind the same served name, or a user revision change the identity
that keys the verdict cache and an evaluation's ``config.json``, so neither mixes two judges."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from reward.errors import InputError
from reward.judge.identity import model_fingerprint, served_model_id
from training.eval.healthbench import HealthBenchEvalConfig, _judge_identity
from training.eval.store import check_settings


@pytest.fixture
def tiny(tiny_model_dir) -> Path:
    """The tiny random Qwen3 (the test server's, else built once): conftest's fixture, no machine path."""
    return tiny_model_dir


def _retrain(folder: Path) -> None:
    """Same shapes, same file size, other values: what a further training step writes."""
    from safetensors.torch import load_file, save_file

    f = folder / "model.safetensors"
    tensors = load_file(f)
    save_file({k: v + 0.01 for k, v in tensors.items()}, f, metadata={"format": "pt"})


def test_fingerprint_follows_weights_and_tokenizer_not_path(tmp_path, tiny):
    a = tmp_path / "judge"
    shutil.copytree(tiny, a)
    fp = model_fingerprint(a)
    assert fp == model_fingerprint(str(a)) and fp == model_fingerprint(tiny)  # content, not place
    _retrain(a)
    fp2 = model_fingerprint(a)
    assert fp2 != fp
    tok = a / "tokenizer.json"
    tok.write_text(tok.read_text(encoding="utf-8").replace('"<|im_end|>"', '"<|im_stop|>"', 1), encoding="utf-8")
    assert model_fingerprint(a) != fp2
    assert model_fingerprint("Qwen/not-a-local-folder") is None


def test_served_identity_names_root_length_and_revision():
    base = served_model_id("judge", {"id": "judge", "root": "org/a", "max_model_len": 4096})
    assert base != served_model_id("judge", {"id": "judge", "root": "org/b", "max_model_len": 4096})
    assert base != served_model_id("judge", {"id": "judge", "root": "org/a", "max_model_len": 8192})
    assert base != served_model_id("judge", {"id": "judge", "root": "org/a", "max_model_len": 4096}, "v2")
    assert base == served_model_id("judge", {"id": "judge", "root": "org/a", "max_model_len": 4096})


def test_eval_resume_refuses_a_judge_with_other_weights_at_the_same_path(tmp_path, tiny):
    judge_dir = tmp_path / "judge"
    shutil.copytree(tiny, judge_dir)
    cfg = HealthBenchEvalConfig(model="m", data="x.jsonl", out=str(tmp_path / "out"), judge={"model": str(judge_dir)})
    check_settings(tmp_path / "config.json", {"judge": _judge_identity(cfg, None)})
    check_settings(tmp_path / "config.json", {"judge": _judge_identity(cfg, None)})  # same judge: fine
    _retrain(judge_dir)
    with pytest.raises(InputError, match="judge"):
        check_settings(tmp_path / "config.json", {"judge": _judge_identity(cfg, None)})


@pytest.mark.slow
def test_in_process_verdict_cache_key_changes_with_the_weights(tmp_path, tiny):
    from reward.judge import VerdictCache
    from reward.judge.inprocess import TransformersJudge

    judge_dir = tmp_path / "judge"
    shutil.copytree(tiny, judge_dir)
    cache = VerdictCache(tmp_path / "v.sqlite")
    first = TransformersJudge(str(judge_dir), cache=cache).model_id
    _retrain(judge_dir)
    second = TransformersJudge(str(judge_dir), cache=cache).model_id
    assert first != second and str(judge_dir) in first
