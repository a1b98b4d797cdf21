"""Stage 3 (like stage 2) never starts from the base model by accident: without the previous
stage's checkpoint (FV_STAGE2_MODEL, or --set model=...) its configs do not load, and the error
says how to pass one; an explicit --set model=... (a base model on purpose) is accepted."""

from __future__ import annotations

import pytest
from rt_paths import REPO_ROOT

from reward.errors import InputError
from training.trl_config import load_config

STAGE3 = ["configs/trl/stage3_row_rubrics.yaml", "configs/trl/stage3_clinical_rubric.yaml"]


@pytest.mark.parametrize("path", STAGE3)
def test_stage3_without_a_stage2_checkpoint_is_refused(path, monkeypatch):
    monkeypatch.delenv("FV_STAGE2_MODEL")
    with pytest.raises(InputError, match=r"FV_STAGE2_MODEL.*--set model=") as err:
        load_config(REPO_ROOT / path)
    assert err.value.field == "model" and path.rsplit("/", 1)[1] in str(err.value)
    assert load_config(REPO_ROOT / path, ["model=Qwen/Qwen3-8B"]).model == "Qwen/Qwen3-8B"  # on purpose


def test_the_launcher_says_it_and_stops(monkeypatch, capsys):
    from training.trl_launcher import main

    monkeypatch.delenv("FV_STAGE1_MODEL")
    assert main(["--config", str(REPO_ROOT / "configs/trl/stage2_error_rubric.yaml"), "--print-model"]) == 2
    out = capsys.readouterr().out
    assert "FV_STAGE1_MODEL" in out and "--set model=" in out and "previous stage" in out
