"""reward.integrations.verl without verl: the data-source registry, MCQ scoring on real MedQA rows,
settings, the failure policies (raise / group-neutral / flagged constants) with a fake judge,
the streaming group board, and training.verl_data's parquet rows fed back to compute_score."""

from __future__ import annotations

import asyncio
import json

import pytest
from rt_fakes import FakeJudge

import reward.integrations.verl as vr
from reward.errors import InputError, JudgeError
from reward.integrations.verl import (
    DATA_SOURCES,
    EXTRA_DEFAULTS,
    GroupBoard,
    RewardContext,
    Sample,
    SampleScore,
    StreamingScorer,
    VerlRewardSettings,
    compute_score,
    group_policy,
    load_settings,
    register_data_source,
    score_samples,
)
from reward.stages.mcq import load_mcq
from reward.tree import Node, RubricTree
from training.verl_data import build_verl_parquet, verl_rows
from training.verl_data import main as verl_data_main

KEYS = set(EXTRA_DEFAULTS) | {"score"}


@pytest.fixture
def registry():
    """Restore the data-source registry after a test that registers."""
    saved = dict(DATA_SOURCES)
    yield DATA_SOURCES
    DATA_SOURCES.clear()
    DATA_SOURCES.update(saved)


def run(coro):
    return asyncio.run(coro)


# ------------------------------------------------------------------ registry
def test_builtin_data_sources():
    for name in ("mcq", "medqa", "medbullets", "error_rubric", "clinical_rubric", "healthbench"):
        assert name in DATA_SOURCES
    assert DATA_SOURCES["medqa"] is DATA_SOURCES["medbullets"] is DATA_SOURCES["mcq"]
    assert DATA_SOURCES["healthbench"] is DATA_SOURCES["clinical_rubric"]


def test_register_dispatches_and_refuses_duplicates(registry):
    @register_data_source("length_toy", "length_toy_alias")
    async def toy(samples, context):
        return [SampleScore(len(s.solution_str) / 10, {"n_errors": 0}) for s in samples]

    out = run(compute_score("length_toy_alias", "abcde", None, {}))
    assert out["score"] == 0.5 and set(out) == KEYS
    with pytest.raises(ValueError, match="already registered"):
        register_data_source("length_toy")(toy)
    with pytest.raises(ValueError, match="already registered"):
        register_data_source("brand_new", "medqa")(toy)
    assert "brand_new" not in DATA_SOURCES  # a refused registration registers nothing


def test_registry_is_restored():
    assert "length_toy" not in DATA_SOURCES


def test_unknown_data_source_names_known_ones():
    with pytest.raises(InputError, match="unknown data_source 'gsm8k'.*medqa"):
        run(compute_score("gsm8k", "42", "42", {}))


# ------------------------------------------------------------------ MCQ on real rows
def test_mcq_on_real_medqa_rows(shared_data):
    rows = load_mcq(shared_data / "medqa_usmle_4opt_test.jsonl")[:12]

    async def go():
        out = []
        for r in rows:
            other = next(k for k in r.options if k != r.answer_idx)
            info = {"options": dict(r.options)}
            right = await compute_score("medqa", f"Reasoning about it.\nAnswer: {r.answer_idx}", r.answer_idx, info)
            text = await compute_score("medqa", f"The answer is {r.options[r.answer_idx]}.", r.answer_idx,
                                       {"options": json.dumps(r.options)})
            wrong = await compute_score("medbullets", f"**Answer: ({other})**", r.answer_idx, info)
            none = await compute_score("mcq", "<think>still thinking", r.answer_idx, info)
            out.append((r, right, text, wrong, none))
        return out

    for r, right, text, wrong, none in run(go()):
        assert right["score"] == 1.0 and right["choice"] == r.answer_idx and right["acc"] == 1.0
        assert text["score"] == 1.0
        assert wrong["score"] == 0.0 and wrong["format_failure"] is False
        assert none["score"] == 0.0 and none["format_failure"] is True and none["choice"] == ""
        for res in (right, text, wrong, none):
            assert set(res) == KEYS and res["unscored"] is False


def test_mcq_bad_ground_truth_names_field():
    with pytest.raises(InputError, match="ground_truth"):
        run(compute_score("medqa", "Answer: A", "Z", {"options": {"A": "x", "B": "y"}}))


def test_mcq_options_with_arrow_nones():
    # Arrow gives 4-option rows an "E": None; that letter must not count
    out = run(compute_score("medqa", "Answer: B", "B", {"options": {"A": "a", "B": "b", "C": "c", "D": "d",
                                                                     "E": None}}))
    assert out["score"] == 1.0


# ------------------------------------------------------------------ settings
def test_settings_yaml_env_and_inline_override(tmp_path, monkeypatch):
    f = tmp_path / "reward.yaml"
    f.write_text("on_failure: raise\nrouter: static\nerror_rubric: {alpha: 0.7}\n")
    monkeypatch.setenv(vr.CONFIG_ENV, str(f))
    s = load_settings(router="llm")
    assert s.on_failure == "raise" and s.router == "llm" and s.error_rubric.alpha == 0.7
    assert load_settings(config=str(f), on_failure="neutral").on_failure == "neutral"


def test_settings_errors_name_file_and_field(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("on_failur: raise\n")
    with pytest.raises(InputError, match=r"bad\.yaml.*on_failur"):
        load_settings(config=str(f))
    with pytest.raises(InputError, match="reward_kwargs.*judge"):
        load_settings(judge={"urll": "http://x"})
    with pytest.raises(InputError, match="error_rubric"):
        load_settings(error_rubric={"alpha": -1})
    with pytest.raises(InputError, match="not found"):
        load_settings(config=str(tmp_path / "missing.yaml"))


def test_judge_url_from_environment(monkeypatch):
    monkeypatch.setenv(vr.JUDGE_URL_ENV, "http://judge:8000")
    assert VerlRewardSettings().judge_settings().url == "http://judge:8000"
    assert VerlRewardSettings(judge={"url": "http://other:1"}).judge_settings().url == "http://other:1"


def test_clinical_without_judge_says_what_to_set(monkeypatch):
    monkeypatch.delenv(vr.JUDGE_URL_ENV, raising=False)
    with pytest.raises(JudgeError, match="judge.url"):
        run(compute_score("healthbench", "x", json.dumps([{"criterion": "c", "points": 1}]),
                          {"judge_prompt": [{"role": "user", "content": "q"}]}, rubric_source="rows"))


# ------------------------------------------------------------------ judge-based sources, fake judge
CONV = [{"role": "user", "content": "Crushing chest pain for 20 minutes and sweating. What now?"}]
RUBRICS = [{"criterion": "emergency services", "points": 8},
           {"criterion": "ambulance", "points": 4},
           {"criterion": "wait at home", "points": -6}]
GOOD = "Call emergency services now and ask for an ambulance."
POOR = "Probably indigestion: wait at home."


def keyword_judge(fail_on: str | None = None) -> FakeJudge:
    """met when the criterion's text occurs in the response; fails on responses containing fail_on."""
    def decide(template, item):
        if fail_on and fail_on in item.response:
            raise RuntimeError("judge down")
        return 1.0 if item.criterion.lower() in item.response.lower() else 0.0

    return FakeJudge.consistent(decide)


def ctx(judge, **settings) -> RewardContext:
    return RewardContext(VerlRewardSettings(**settings), judge=judge)


def clinical(text: str, uid: str | None = None) -> Sample:
    return Sample("healthbench", text, json.dumps(RUBRICS), {"judge_prompt": CONV, "prompt_id": "p1"}, uid=uid)


def test_clinical_rows_gold_check():
    c = ctx(keyword_judge(), rubric_source="rows")
    good = run(compute_score("healthbench", GOOD, json.dumps(RUBRICS), {"judge_prompt": CONV}, context=c))
    poor = run(compute_score("clinical_rubric", POOR, json.dumps(RUBRICS), {"judge_prompt": CONV}, context=c))
    assert good["score"] == pytest.approx(1.0) and good["points_score"] == pytest.approx(1.0)
    assert poor["score"] == pytest.approx(-0.5)  # -6 of 12: not clipped at 0 (stage 3 default)
    assert good["score"] > poor["score"] and set(good) == KEYS
    clipped = ctx(keyword_judge(), rubric_source="rows", clip_below_zero=True)
    assert run(compute_score("clinical_rubric", POOR, json.dumps(RUBRICS), {"judge_prompt": CONV},
                             context=clipped))["score"] == 0.0


def test_clinical_tree_path_with_rubric_items():
    tree = RubricTree([
        Node(id="root", title="root", children=("ems", "home")),
        Node(id="ems", title="Emergency", criterion="emergency services"),
        Node(id="home", title="Home care", criterion="wait at home", polarity="negative"),
    ], root="root", name="toy")
    from reward.router import StaticRouter

    c = RewardContext(VerlRewardSettings(rubric_source="both", combine="mean"), judge=keyword_judge(), tree=tree,
                      router=StaticRouter(tree))
    [good, poor] = [run(score_samples([clinical(t)], c))[0] for t in (GOOD, POOR)]
    assert good.score == pytest.approx(1.0) and good.extra["tree_score"] == pytest.approx(1.0)
    assert good.extra["n_active_leaves"] == 2
    assert poor.score < good.score


def test_on_failure_raise():
    c = ctx(keyword_judge(fail_on="emergency"), rubric_source="rows", on_failure="raise")
    with pytest.raises(JudgeError, match="judge down.*on_failure: raise"):
        run(compute_score("healthbench", GOOD, json.dumps(RUBRICS), {"judge_prompt": CONV}, context=c))


def test_neutral_in_compute_score_needs_explicit_fallback():
    c = ctx(keyword_judge(fail_on="emergency"), rubric_source="rows", on_failure="neutral")
    with pytest.raises(JudgeError, match="RubricsTreeRewardManager"):
        run(compute_score("healthbench", GOOD, json.dumps(RUBRICS), {"judge_prompt": CONV}, context=c))
    c = ctx(keyword_judge(fail_on="emergency"), rubric_source="rows", on_failure="neutral", fallback_score=0.25)
    out = run(compute_score("healthbench", GOOD, json.dumps(RUBRICS), {"judge_prompt": CONV}, context=c))
    assert out["score"] == 0.25 and out["unscored"] is True and out["neutral_n"] == 0
    assert "judge down" in out["unscored_reason"] and "fallback_score" in out["unscored_reason"]
    assert out["judge_failures"] == 3


def test_group_policy_neutral_mean_and_all_failed():
    c = ctx(keyword_judge(fail_on="FAIL"), rubric_source="rows", clip_below_zero=True)
    samples = [clinical(GOOD, "a"), clinical(POOR, "a"), clinical(GOOD + " FAIL", "a"), clinical("FAIL", "a"),
               clinical("FAIL 1", "b"), clinical("FAIL 2", "b")]
    raws = run(score_samples(samples, c))
    assert [r.score is None for r in raws] == [False, False, True, True, True, True]
    out = group_policy(samples, raws, c.settings)
    assert [o["score"] for o in out[:2]] == [pytest.approx(1.0), 0.0]
    for o in out[2:4]:  # the group mean of the scored: advantage zero
        assert o["score"] == pytest.approx(0.5) and o["unscored"] is True and o["neutral_n"] == 2
    for o in out[4:]:  # nothing scored in group b: the constant, flagged
        assert o["score"] == 0.0 and o["unscored"] is True and "no rollout of the group" in o["unscored_reason"]
    assert all(set(o) == KEYS for o in out)
    with pytest.raises(JudgeError, match="all_failed_score"):
        group_policy(samples, raws, VerlRewardSettings(all_failed_score=None))
    with pytest.raises(JudgeError, match="4 of 6"):
        group_policy(samples, raws, VerlRewardSettings(on_failure="raise"))


def test_error_rubric_source_and_failure():
    def generate(template, item):
        if "FAIL" in item.response:
            raise RuntimeError("judge timeout")
        return {"errors": [{"class": "knowledge", "severity": 2, "description": "wrong drug"}]}

    c = RewardContext(VerlRewardSettings(), judge=FakeJudge(lambda t, i: 1.0, generate=generate))
    info = {"judge_prompt": [{"role": "user", "content": "Which drug? A. x B. y"}], "options": {"A": "x", "B": "y"}}
    right = run(compute_score("error_rubric", "y is right.\nAnswer: B", "B", info, context=c))
    assert right["score"] == pytest.approx(0.5) and right["penalty"] == pytest.approx(0.5)
    assert right["acc"] == 1.0 and right["n_errors"] == 1 and json.loads(right["errors"])["knowledge"] == 2
    samples = [Sample("error_rubric", "Answer: B", "B", info, uid="u"), Sample("error_rubric", "FAIL Answer: A", "B",
                                                                                info, uid="u")]
    out = group_policy(samples, run(score_samples(samples, c)), c.settings)
    assert out[1]["unscored"] is True and out[1]["score"] == pytest.approx(out[0]["score"])
    assert "judge timeout" in out[1]["unscored_reason"] and out[1]["acc"] == 0.0


# ------------------------------------------------------------------ streaming (one rollout at a time)
def test_streaming_group_mean_and_all_failed():
    c = ctx(keyword_judge(fail_on="FAIL"), rubric_source="rows", batch_window_s=0.01, group_timeout_s=5,
            clip_below_zero=True)

    async def go():
        s = StreamingScorer(c.settings, c, group_size=3)

        async def later(delay, sample):
            await asyncio.sleep(delay)
            return await s.score(sample)

        # the failed rollout arrives first and must wait for its two siblings
        a = await asyncio.gather(later(0, clinical("FAIL", "a")), later(0.05, clinical(GOOD, "a")),
                                 later(0.1, clinical(POOR, "a")),
                                 later(0, clinical("FAIL x", "b")), later(0.02, clinical("FAIL y", "b")),
                                 later(0.04, clinical("FAIL z", "b")))
        return a, s

    out, s = run(go())
    assert out[0]["score"] == pytest.approx(0.5) and out[0]["unscored"] is True and out[0]["neutral_n"] == 2
    assert out[1]["score"] == pytest.approx(1.0) and out[1]["unscored"] is False
    assert all(o["score"] == 0.0 and o["unscored"] for o in out[3:])
    assert s.counts == {"rollouts": 6, "unscored": 4, "neutral": 1, "constant": 3}
    assert len(s.board) == 0  # complete groups are dropped


def test_streaming_incomplete_group_times_out_with_what_it_has():
    c = ctx(keyword_judge(fail_on="FAIL"), rubric_source="rows", batch_window_s=0, group_timeout_s=0.2)

    async def go():
        s = StreamingScorer(c.settings, c, group_size=4)
        return await asyncio.gather(s.score(clinical(GOOD, "a")), s.score(clinical("FAIL", "a")))

    good, failed = run(go())
    assert failed["score"] == pytest.approx(good["score"]) and "group incomplete" in failed["unscored_reason"]


def test_streaming_raise_policy_does_not_strand_siblings():
    c = ctx(keyword_judge(fail_on="FAIL"), rubric_source="rows", on_failure="raise", batch_window_s=0)

    async def go():
        s = StreamingScorer(c.settings, c, group_size=2)
        return await asyncio.gather(s.score(clinical("FAIL", "a")), s.score(clinical(GOOD, "a")),
                                    return_exceptions=True), s

    (err, ok), s = run(go())
    assert isinstance(err, JudgeError) and ok["score"] == pytest.approx(1.0)
    assert len(s.board) == 0


def test_group_board_report_counts():
    async def go():
        b = GroupBoard(group_size=2, timeout_s=1)
        await b.report("u", 0.5)
        scores, complete = await b.report("u", None, wait=True)
        return scores, complete, len(b)

    assert run(go()) == ([0.5], True, 0)


# ------------------------------------------------------------------ verl data rows back into compute_score
def test_verl_rows_roundtrip_through_parquet(shared_data, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    out = build_verl_parquet("mcq", shared_data / "medqa_usmle_4opt_test.jsonl", tmp_path / "s1.parquet", limit=5)
    rows = pq.read_table(out).to_pylist()
    assert len(rows) == 5 and rows[0]["data_source"] == "medqa" and rows[0]["prompt"][0]["role"] == "user"
    for r in rows:
        gt = r["reward_model"]["ground_truth"]
        res = run(compute_score(r["data_source"], f"Answer: {gt}", gt, r["extra_info"]))
        assert res["score"] == 1.0

    hb = build_verl_parquet("healthbench", shared_data / "healthbench_hard_sample50.jsonl", tmp_path / "s3.parquet",
                            limit=2)
    row = pq.read_table(hb).to_pylist()[0]
    assert row["data_source"] == "clinical_rubric" and row["prompt"][0]["role"] == "system"  # our system prompt
    assert row["extra_info"]["judge_prompt"] != row["prompt"]  # the judge reads the conversation without it
    items = json.loads(row["reward_model"]["ground_truth"])
    assert items and {"criterion", "points"} <= set(items[0])
    c = ctx(keyword_judge(), rubric_source="rows")
    res = run(compute_score(row["data_source"], "some reply", row["reward_model"]["ground_truth"],
                            row["extra_info"], context=c))
    assert 0.0 <= res["score"] <= 1.0 and res["unscored"] is False


def test_verl_data_error_rubric_kind_and_cli(shared_data, tmp_path, capsys):
    rows = verl_rows("error_rubric", shared_data / "medqa_usmle_4opt_test.jsonl", limit=2)
    assert rows[0]["data_source"] == "error_rubric" and rows[0]["reward_model"]["style"] == "model"
    assert rows[0]["extra_info"]["judge_prompt"] == rows[0]["prompt"]  # no system prompt for MCQ by default
    assert verl_data_main(["mcq", str(shared_data / "medqa_usmle_4opt_test.jsonl"), str(tmp_path / "o.parquet"),
                           "--limit", "3", "--data-source", "medbullets"]) == 0
    assert (tmp_path / "o.parquet").exists()
    with pytest.raises(InputError, match="gsm8k"):
        verl_rows("mcq", shared_data / "medqa_usmle_4opt_test.jsonl", data_source="gsm8k")
