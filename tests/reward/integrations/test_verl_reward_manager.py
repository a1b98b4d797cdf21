"""verl's own reward managers computing our rewards on CPU, on a hand-built DataProto tokenized
with the tiny model's tokenizer: verl's reward-loop ``naive`` manager (loaded from config the way
verl loads it, so ``reward_kwargs`` reach compute_score), verl's legacy synchronous manager, and
our group-aware ``RubricsTreeRewardManager`` (streaming ``run_single`` and ``run_batch``); then
the clinical and error-rubric paths against the real vLLM judge server (``server`` marker)."""

from __future__ import annotations

import asyncio
import json
import math

import pytest
from rt_paths import TESTS_DIR

verl = pytest.importorskip("verl")
np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")

from omegaconf import OmegaConf  # noqa: E402  (verl brings omegaconf)
from rt_fakes import FakeJudge  # noqa: E402
from rt_verl import make_batch  # noqa: E402

from reward.errors import JudgeError  # noqa: E402
from reward.integrations.verl import EXTRA_DEFAULTS, RewardContext, VerlRewardSettings, compute_score_sync  # noqa: E402

FIXTURES = TESTS_DIR / "fixtures"
KEYS = set(EXTRA_DEFAULTS) | {"score"}
MCQ_INFO = {"options": json.dumps({"A": "Aspirin", "B": "Heparin", "C": "Warfarin", "D": "Alteplase"}),
            "judge_prompt": [{"role": "user", "content": "Best first drug? A. Aspirin B. Heparin C. Warfarin "
                                                         "D. Alteplase"}]}
CONV = [{"role": "user", "content": "Crushing chest pain for 20 minutes and sweating. What now?"}]
RUBRICS = [{"criterion": "emergency services", "points": 8}, {"criterion": "ambulance", "points": 4},
           {"criterion": "wait at home", "points": -6}]


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_model_dir))


def mcq_rows() -> list[dict]:
    replies = ["Aspirin first.\nAnswer: A", "I pick heparin.\nAnswer: B", "Answer: (A)", "not sure"]
    return [{"prompt": MCQ_INFO["judge_prompt"], "response": t, "data_source": "medqa", "ground_truth": "A",
             "extra_info": MCQ_INFO, "uid": "q1"} for t in replies]


def verl_config(reward_kwargs: dict, *, manager: str = "naive", n: int = 4, workers: int = 1):
    rm = ({"source": "register", "name": "naive", "module": {"path": None, "name": "unused"}} if manager == "naive"
          else {"source": "importlib", "name": "RubricsTreeRewardManager",
                "module": {"path": "pkg://reward.integrations.verl.manager", "name": "unused"}})
    return OmegaConf.create({
        "actor_rollout_ref": {"rollout": {"n": n}},
        "reward": {"num_workers": workers, "reward_manager": rm,
                   "custom_reward_function": {"path": "pkg://reward.integrations.verl.compute_score",
                                              "name": "compute_score", "reward_kwargs": reward_kwargs},
                   "reward_model": {"enable": False}, "sandbox_fusion": {"url": None}},
    })


async def _run_each(manager, data) -> list[dict]:
    return await asyncio.gather(*(manager.run_single(data[i:i + 1]) for i in range(len(data))))


def run_each(make_manager, data) -> list[dict]:
    """What verl's reward-loop worker does: build the manager in the worker's event loop (verl's
    managers keep the loop they were built in), then run_single on one-row slices, concurrently."""
    async def go():
        return await _run_each(make_manager(), data)

    return asyncio.run(go())


# ------------------------------------------------------------------ verl's own managers
def test_verl_naive_reward_loop_manager_with_our_compute_score(tokenizer):
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager
    from verl.trainer.ppo.reward import load_reward_manager

    # a clinical row whose judge is unreachable shows that reward_kwargs reach compute_score:
    # fallback_score comes only from there
    dead = {"url": "http://127.0.0.1:9", "served_model": "tiny", "tokenizer": None, "max_retries": 0,
            "timeout_s": 5, "cache": False}
    rows = mcq_rows() + [{"prompt": CONV, "response": "Call emergency services.", "data_source": "healthbench",
                          "ground_truth": json.dumps(RUBRICS), "extra_info": {"judge_prompt": CONV}}]
    kwargs = {"on_failure": "neutral", "fallback_score": 0.25, "rubric_source": "rows", "judge": dead}
    kwargs["judge"]["tokenizer"] = tokenizer.name_or_path
    managers = []
    out = run_each(lambda: managers.append(load_reward_manager(verl_config(kwargs), tokenizer)) or managers[0],
                   make_batch(tokenizer, rows))
    assert isinstance(managers[0], NaiveRewardManager)
    assert [o["reward_score"] for o in out[:4]] == [1.0, 0.0, 1.0, 0.0]
    assert out[3]["reward_extra_info"]["format_failure"] is True
    clin = out[4]["reward_extra_info"]
    assert out[4]["reward_score"] == 0.25 and clin["unscored"] is True and "fallback_score" in clin["unscored_reason"]
    assert all(set(o["reward_extra_info"]) == KEYS for o in out)  # verl stacks each key across the batch


def test_verl_legacy_naive_manager_with_sync_compute_score(tokenizer):
    from verl.workers.reward_manager import NaiveRewardManager as LegacyNaive

    data = make_batch(tokenizer, mcq_rows())
    res = LegacyNaive(tokenizer=tokenizer, num_examine=0, compute_score=compute_score_sync)(data, return_dict=True)
    assert res["reward_tensor"].sum(dim=-1).tolist() == [1.0, 0.0, 1.0, 0.0]
    assert list(res["reward_extra_info"]["choice"]) == ["A", "B", "A", ""]


# ------------------------------------------------------------------ our manager
def keyword_judge(fail_on: str) -> FakeJudge:
    def decide(template, item):
        if fail_on in item.response:
            raise RuntimeError("judge down")
        return 1.0 if item.criterion in item.response else 0.0

    return FakeJudge(decide)


def clinical_rows(replies: list[str], uid: str) -> list[dict]:
    return [{"prompt": CONV, "response": t, "data_source": "healthbench", "ground_truth": json.dumps(RUBRICS),
             "extra_info": {"judge_prompt": CONV, "prompt_id": "p1"}, "uid": uid} for t in replies]


def test_our_manager_loads_like_verl_loads_it(tokenizer):
    from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls
    from verl.trainer.ppo.reward import load_reward_manager

    from reward.integrations.verl.manager import RubricsTreeRewardManager

    manager = load_reward_manager(verl_config({"on_failure": "neutral"}, manager="ours"), tokenizer)
    assert isinstance(manager, RubricsTreeRewardManager) and manager.group_size == 4
    assert get_reward_manager_cls("rubricstree") is RubricsTreeRewardManager
    out = run_each(lambda: manager, make_batch(tokenizer, mcq_rows()))
    assert [o["reward_score"] for o in out] == [1.0, 0.0, 1.0, 0.0]
    # the group-mean fallback needs the whole group in one worker
    with pytest.raises(ValueError, match="num_workers=1"):
        load_reward_manager(verl_config({"on_failure": "neutral"}, manager="ours", workers=8), tokenizer)


@pytest.mark.parametrize("legacy", [{"custom_reward_function": {"path": "pkg://my.reward", "name": "score"}},
                                    {"reward_model": {"reward_manager": "naive"}}])
def test_our_manager_refuses_verls_older_reward_keys(tokenizer, legacy):
    """verl 0.9.1's main_ppo ignores the older keys and its fully-async trainer lets them replace
    our reward block: a manager handed them says so, naming the key to use, instead of running."""
    from reward.errors import InputError
    from reward.integrations.verl.manager import RubricsTreeRewardManager

    config = OmegaConf.merge(verl_config({"on_failure": "neutral"}, manager="ours"), legacy)
    with pytest.raises(InputError, match=r"older reward key.*set reward\.(custom_reward_function\.path|reward_manager\.name)"):
        RubricsTreeRewardManager(config, tokenizer)


def test_our_manager_streaming_gives_failed_rollouts_their_group_mean(tokenizer):
    from reward.integrations.verl.manager import RubricsTreeRewardManager

    good, poor = "Call emergency services and an ambulance.", "Wait at home."
    rows = (clinical_rows([good, poor, "FAIL " + good, "FAIL"], "g1")
            + clinical_rows(["FAIL a", "FAIL b", "FAIL c", "FAIL d"], "g2"))
    settings = VerlRewardSettings(rubric_source="rows", batch_window_s=0.02, group_timeout_s=10)
    manager = RubricsTreeRewardManager(verl_config({}, manager="ours"), tokenizer,
                                       context=RewardContext(settings, judge=keyword_judge("FAIL")))
    data = make_batch(tokenizer, rows)
    out = run_each(lambda: manager, data)
    scores = [o["reward_score"] for o in out]
    assert scores[:2] == [pytest.approx(1.0, abs=1e-9), 0.0]
    assert scores[2:4] == [pytest.approx(0.5, abs=1e-9)] * 2  # the mean of the group's scored: zero advantage
    assert scores[4:] == [0.0] * 4 and all(o["reward_extra_info"]["unscored"] for o in out[2:])
    assert manager.streaming.counts["unscored"] == 6
    # GRPO's advantage (verl's own function) of the stand-ins is zero
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    rm = manager.assemble_rm_scores(data, scores)
    adv, _ = compute_grpo_outcome_advantage(rm, (data.batch["attention_mask"][:, -rm.shape[1]:] > 0).float(),
                                            np.array(data.non_tensor_batch["uid"]))
    assert adv[2:].abs().max().item() < 1e-4 and adv[0].max().item() > 0

    batch = asyncio.run(manager.run_batch(data))  # whole-batch path: same scores, no waiting
    assert [b["reward_score"] for b in batch] == pytest.approx(scores, abs=1e-9)


def test_our_manager_raise_policy(tokenizer):
    from reward.integrations.verl.manager import RubricsTreeRewardManager

    settings = VerlRewardSettings(rubric_source="rows", on_failure="raise", batch_window_s=0)
    manager = RubricsTreeRewardManager(verl_config({}, manager="ours"), tokenizer,
                                       context=RewardContext(settings, judge=keyword_judge("FAIL")))
    with pytest.raises(JudgeError, match="judge down"):
        run_each(lambda: manager, make_batch(tokenizer, clinical_rows(["ok", "FAIL"], "g")))


# ------------------------------------------------------------------ against the real judge server
@pytest.mark.server
def test_clinical_and_error_rubric_against_judge_server(tokenizer, judge_url, tiny_model_dir):
    from verl.trainer.ppo.reward import load_reward_manager

    row = json.loads((FIXTURES / "healthbench_own.jsonl").read_text().splitlines()[0])
    rubrics = json.dumps(row["rubrics"][:3])
    clin = [{"prompt": row["prompt"], "response": t, "data_source": "clinical_rubric", "ground_truth": rubrics,
             "extra_info": {"judge_prompt": row["prompt"], "prompt_id": row["prompt_id"]}, "uid": "hb"}
            for t in ("Call emergency services now; do not lie down and wait.", "Lie down and rest.")]
    err = [{**r, "data_source": "error_rubric", "uid": "mcq"} for r in mcq_rows()[:2]]
    kwargs = {"on_failure": "neutral", "rubric_source": "rows", "group_size": 2, "group_timeout_s": 60,
              "judge": {"url": judge_url, "tokenizer": str(tiny_model_dir), "cache": False, "timeout_s": 60},
              "error_rubric": {"constrain": "regex", "max_errors": 2, "max_description_chars": 24,
                               "max_tokens": 96, "attempts": 1}}
    manager = load_reward_manager(verl_config(kwargs, manager="ours", n=2), tokenizer)
    out = run_each(lambda: manager, make_batch(tokenizer, clin + err))
    for o in out:
        info = o["reward_extra_info"]
        assert set(info) == KEYS and math.isfinite(o["reward_score"])
        assert not info["unscored"] or info["unscored_reason"]  # a stand-in always says why
    clin_out = [o["reward_extra_info"] for o in out[:2]]
    assert all(not i["unscored"] and 0.0 <= i["points_score"] <= 1.0 for i in clin_out)  # a live judge answers
    assert [o["reward_extra_info"]["acc"] for o in out[2:]] == [1.0, 0.0]
    assert manager.context.judge.stats.requests >= 2 * 3
