"""Stage 3, one epoch per launch (what scripts/train_pipeline.sh runs): each epoch ends with its
Hugging Face export (``hf-epoch-N``, ``hf`` pointing at the newest), the next epoch's filter
samples from that export (``--print-next-epoch`` names it, ``epoch.json`` records it), and a run
with every epoch done changes nothing. A judge-free stand-in reward keeps it on CPU."""

from __future__ import annotations

import json

import pytest
from rt_paths import REPO_ROOT

pytest.importorskip("trl")

REPO = REPO_ROOT


class _LengthReward:
    __name__ = "clinical_rubric"

    def __call__(self, prompts, completions, completion_ids=None, **kw):
        from reward.stages.rollout_text import completion_text

        return [min(1.0, len(completion_text(c)) / 10) for c in completions]


@pytest.mark.slow
def test_one_epoch_per_launch_filters_the_next_epoch_with_the_last_export(tiny_model_dir, tmp_path, monkeypatch,
                                                                           capsys):
    import training.trl_launcher as tl
    from training.hf_export import is_export

    monkeypatch.setenv("RUBRICSTREE_TINY_MODEL", str(tiny_model_dir))
    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", "http://127.0.0.1:9")  # never called: the stand-in reward
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(tl, "build_reward_funcs", lambda cfg: [_LengthReward()])
    monkeypatch.setattr(tl, "check_judge", lambda cfg: None)  # the stand-in needs no judge
    out = tmp_path / "s3"
    sets = [f"output_dir={out}", "difficulty.per_epoch=true", "difficulty.keep=[0.0, 1.0]", "difficulty.n=2",
            "difficulty.max_new_tokens=4", "data.limit=2", "grpo.num_train_epochs=2", "grpo.max_completion_length=8",
            "difficulty.epochs_per_run=1"]
    cfg = tl.load_config(REPO / "configs/smoke/stage3_clinical_rubric.yaml", sets)
    assert tl.next_epoch(cfg) == {"epoch": 0, "policy": str(tiny_model_dir), "filtered": False}

    first = tl.train(cfg)
    assert [e["epoch"] for e in first.epochs] == [0]
    assert is_export(out / "hf-epoch-0") and (out / "hf").resolve() == (out / "hf-epoch-0").resolve()
    assert tl.next_epoch(cfg) == {"epoch": 1, "policy": str(out / "hf-epoch-0"), "filtered": False}
    # the pipeline's filter step for epoch 1 (plain python), then the trainer's launch
    assert tl.main(["--config", str(REPO / "configs/smoke/stage3_clinical_rubric.yaml"), *sum(
        (["--set", s] for s in sets), []), "--filter-only"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["epoch"] == 1
    marker = json.loads((out / "difficulty" / "epoch-1" / "epoch.json").read_text())
    assert marker["policy"] == str(out / "hf-epoch-0") and marker["start_step"] == first.global_step
    second = tl.train(cfg)
    assert [e["epoch"] for e in second.epochs] == [0, 1]
    assert is_export(out / "hf-epoch-1") and (out / "hf").resolve() == (out / "hf-epoch-1").resolve()
    assert json.loads((out / "hf-epoch-1" / "export.json").read_text())["epoch"] == 1
    assert tl.next_epoch(cfg)["epoch"] is None
    assert tl.train(cfg).epochs == second.epochs  # all done: nothing trains
