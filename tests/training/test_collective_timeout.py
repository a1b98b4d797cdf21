"""A reward call's wait on the judge must end before the other ranks' collective times out (issue
38): under a multi-process launch each rank scores its own rollouts, then all meet in the gather of
the rewards, which fails after ``grpo.ddp_timeout`` (1800 s by default) and ends the job. Stage 2's
judge (600 s per request, 5 tries) could keep a rank 3,000 s. The launcher refuses, before any model
loads, a config whose judge rounds x ``judge.deadline_s`` reach the collective timeout; the shipped
configs fit."""

from __future__ import annotations

import pytest
from rt_paths import REPO_ROOT

from reward.errors import InputError
from training.launch_checks import check_collective_timeout, judge_rounds
from training.trl_config import load_config

TRL = REPO_ROOT / "configs" / "trl"
URL = ["judge.url=http://judge.invalid:8000/v1"]


@pytest.fixture
def eight_ranks(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "8")


@pytest.mark.parametrize("name, rounds", [("stage1_mcq", 0), ("stage2_error_rubric", 1),
                                          ("stage3_row_rubrics", 1), ("stage3_clinical_rubric", 5)])
def test_the_shipped_configs_fit_under_their_collective_timeout(name, rounds, eight_ranks):
    cfg = load_config(TRL / f"{name}.yaml", URL)
    assert judge_rounds(cfg) == rounds
    check_collective_timeout(cfg)


def test_stage2s_retries_past_the_collective_timeout_are_refused_naming_both_ways_out(eight_ranks):
    cfg = load_config(TRL / "stage2_error_rubric.yaml", [*URL, "judge.deadline_s=3000"])
    with pytest.raises(InputError) as exc:
        check_collective_timeout(cfg)
    assert exc.value.field == "judge.deadline_s"
    assert "grpo.ddp_timeout = 1800" in str(exc.value) and "below 1800" in str(exc.value)
    check_collective_timeout(load_config(TRL / "stage2_error_rubric.yaml",
                                         [*URL, "judge.deadline_s=3000", "grpo.ddp_timeout=3600"]))


def test_no_deadline_is_no_bound(eight_ranks):
    cfg = load_config(TRL / "stage2_error_rubric.yaml", [*URL, "judge.deadline_s=null"])
    with pytest.raises(InputError, match="without bound"):
        check_collective_timeout(cfg)


def test_every_judge_round_of_a_tree_reward_counts(eight_ranks):
    """Applicability (a question, then a second reading of critical leaves read as absent), grading and
    two confirmation readings run one after another, each with its own deadline: 5 x 1500 s does not
    fit the default 1800 s, the config's 9000 s does."""
    with pytest.raises(InputError, match=r"5 x judge.deadline_s = 7500"):
        check_collective_timeout(load_config(TRL / "stage3_clinical_rubric.yaml", [*URL, "grpo.ddp_timeout=1800"]))
    fewer = load_config(TRL / "stage3_clinical_rubric.yaml", [*URL, "reward.confirm_failures=false",
                                                            "reward.applicability=false", "grpo.ddp_timeout=1800"])
    assert judge_rounds(fewer) == 1
    check_collective_timeout(fewer)
    assert judge_rounds(load_config(TRL / "stage3_clinical_rubric.yaml", [*URL, "reward.router=llm"])) == 9


def test_one_process_has_no_collective(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "1")
    check_collective_timeout(load_config(TRL / "stage2_error_rubric.yaml", [*URL, "judge.deadline_s=null"]))


def test_the_launcher_refuses_before_any_model_loads(eight_ranks, tmp_path, monkeypatch):
    import training.trl_launcher as tl

    def no_model(*a, **k):
        raise AssertionError("the reward or the policy was built")

    monkeypatch.setattr(tl, "build_reward_funcs", no_model)
    monkeypatch.setattr(tl, "make_trainer", no_model)
    cfg = load_config(TRL / "stage2_error_rubric.yaml", [*URL, "judge.deadline_s=3000",
                                                         f"output_dir={tmp_path / 'run'}"])
    with pytest.raises(InputError, match="ddp_timeout"):
        tl.train(cfg)
