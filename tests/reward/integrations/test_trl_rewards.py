"""The TRL reward adapters with a fake judge: names, picklability, extra kwargs, conversational
completions, None on judge failure, raise mode, and what they log through ``log_metric``."""

from __future__ import annotations

import inspect
import pickle
import subprocess
import sys

import pytest
from rt_fakes import FakeJudge
from rt_trl import CHEST, CRIT, GOOD, KEYWORDS, POOR, RUBRICS, Log, _tree, keyword_judge

from reward.errors import JudgeError
from reward.integrations.trl import ErrorRubricReward, MCQRuleReward, RubricRewardFunc
from reward.judge.templates import RELEVANCE, URGENCY
from reward.runtime import run_sync
from reward.settings import JudgeSettings
from reward.stages.rollout_text import completion_text, prompt_messages

OPTIONS = {"A": "Vitamin A", "B": "Vitamin C", "C": "Vitamin D", "D": None, "E": None}  # Arrow pads letters
PROMPT = [{"role": "user", "content": "Which vitamin prevents scurvy?\nA. Vitamin A\nB. Vitamin C\nC. Vitamin D"}]


def conv(text: str) -> list[dict]:
    return [{"role": "assistant", "content": text}]


TRL_EXTRAS = {"trainer_state": object(), "log_extra": lambda col, vals: None, "unrelated_column": None}


# ------------------------------------------------------------------ helpers
def test_completion_text_and_prompt_messages():
    assert completion_text("plain") == "plain"
    assert completion_text(conv("Answer: B")) == "Answer: B"
    assert completion_text([{"role": "assistant", "content": [{"type": "text", "text": "x"}]}]) == "x"
    assert prompt_messages("hi") == [{"role": "user", "content": "hi"}]


def test_run_sync_reuses_one_loop():
    async def loop_id():
        import asyncio

        return id(asyncio.get_running_loop())

    assert run_sync(loop_id()) == run_sync(loop_id())


# ------------------------------------------------------------------ stage 1
class TestMCQRuleReward:
    def test_name_and_pickle(self):
        f = MCQRuleReward()
        assert f.__name__ == "mcq_rule" and MCQRuleReward(name="rule").__name__ == "rule"
        g = pickle.loads(pickle.dumps(f))
        assert g.__name__ == "mcq_rule"
        assert not inspect.iscoroutinefunction(f.__call__)

    def test_conversational_completions_and_answer_columns(self):
        f = MCQRuleReward()
        comps = [conv("Scurvy is vitamin C deficiency.\nAnswer: B"), conv("Answer: A"), conv("no idea"),
                 "Answer: B"]
        n = len(comps)
        log = Log()
        out = f([PROMPT] * n, comps, None, answer=["B"] * n, options=[OPTIONS] * n, log_metric=log, **TRL_EXTRAS)
        assert out == [1.0, 0.0, 0.0, 1.0]
        assert log.d["mcq_rule/accuracy"] == 0.5 and log.d["mcq_rule/format_failures"] == 0.25

    def test_answer_idx_and_answer_text(self):
        f = MCQRuleReward()
        assert f([PROMPT], ["Answer: B"], answer_idx=["B"], answer=["Vitamin C"], options=[OPTIONS]) == [1.0]
        # the key given as its text (MedQA's ``answer``) is mapped through the options
        assert f([PROMPT], ["Answer: B"], answer=["Vitamin C"], options=[OPTIONS]) == [1.0]
        # options as a JSON string (some exports) are read too
        assert f([PROMPT], ["Answer: C"], answer=["C"], options=['{"A": "x", "C": "y"}']) == [1.0]

    def test_unreadable_key_is_none_not_zero(self):
        assert MCQRuleReward()([PROMPT], ["Answer: B"], answer=["Vitamin K"], options=[OPTIONS]) == [None]

    def test_column_length_mismatch(self):
        with pytest.raises(ValueError, match="answer"):
            MCQRuleReward()([PROMPT, PROMPT], ["a", "b"], answer=["B"])


# ------------------------------------------------------------------ stage 2
def errors_judge(**kw) -> FakeJudge:
    def generate(template, item):
        if "crash" in item.response:
            raise RuntimeError("judge down")
        return {"errors": [{"class": "causal_reasoning", "severity": 2, "description": "x"}] * item.response.count("so")}

    return FakeJudge(lambda t, i: 1.0, generate=generate, **kw)


def fake_errors_judge() -> FakeJudge:  # a module-level factory pickles by reference
    return errors_judge()


class TestErrorRubricReward:
    async def test_scores_penalty_and_metrics(self):
        judge = errors_judge()
        f = ErrorRubricReward(judge, alpha=1.0, s_max=4)
        assert f.__name__ == "error_rubric" and inspect.iscoroutinefunction(f.__call__)
        log = Log()
        comps = [conv("Vitamin C.\nAnswer: B"), conv("so so\nAnswer: B"), conv("so\nAnswer: A")]
        out = await f([PROMPT] * 3, comps, None, answer=["B"] * 3, options=[OPTIONS] * 3, log_metric=log,
                      **TRL_EXTRAS)
        assert out == [1.0, 0.0, -0.5]
        d = log.d
        assert d["error_rubric/correctness"] == pytest.approx(2 / 3, abs=1e-9)
        assert d["error_rubric/severity/causal_reasoning"] == pytest.approx(2.0, abs=1e-9)
        assert d["error_rubric/judge/requests"] == 3 and d["error_rubric/judge/failures"] == 0
        assert "error_rubric/judge/cache_hits" in d and d["error_rubric/unscored"] == 0

    async def test_judge_prompt_column_is_what_the_judge_sees(self):
        judge = errors_judge()
        shown = [{"role": "user", "content": "THE QUESTION"}]
        await ErrorRubricReward(judge)([PROMPT], ["Answer: B"], answer=["B"], options=[OPTIONS],
                                       judge_prompt=[shown])
        assert judge.calls[0][1].conversation[0].content == "THE QUESTION"

    async def test_failure_is_none_and_counted(self):
        log = Log()
        out = await ErrorRubricReward(errors_judge())([PROMPT] * 2, ["crash", "fine\nAnswer: B"], answer=["B"] * 2,
                                                      options=[OPTIONS] * 2, log_metric=log)
        assert out == [None, 1.0]
        assert log.d["error_rubric/judge/failures"] == 1 and log.d["error_rubric/unscored"] == 0.5

    async def test_raise_mode(self):
        with pytest.raises(JudgeError):
            await ErrorRubricReward(errors_judge(), on_failure="raise")([PROMPT], ["crash"], answer=["B"],
                                                                         options=[OPTIONS])

    async def test_multiply_form_through_config_dict(self):
        f = ErrorRubricReward(errors_judge(), config={"form": "multiply", "s_max": 2})
        assert await f([PROMPT], ["so\nAnswer: B"], answer=["B"], options=[OPTIONS]) == [0.0]

    async def test_pickles_with_a_spec_or_factory_and_rebuilds(self):
        spec = ErrorRubricReward({"url": "http://127.0.0.1:9", "served_model": "m", "tokenizer": "t"})
        g = pickle.loads(pickle.dumps(spec))
        assert g.__name__ == "error_rubric" and isinstance(g.judge_spec, JudgeSettings) and g._judge is None
        f = ErrorRubricReward(fake_errors_judge, name="err")
        await f([PROMPT], ["Answer: B"], answer=["B"], options=[OPTIONS])  # builds a judge
        h = pickle.loads(pickle.dumps(f))
        assert h._judge is None and h.__name__ == "err"
        assert await h([PROMPT], ["so\nAnswer: B"], answer=["B"], options=[OPTIONS]) == [0.5]


# ------------------------------------------------------------------ stage 3
class TestRubricRewardFunc:
    async def test_tree_scores_macro_metrics_and_counters(self):
        judge = keyword_judge()
        f = RubricRewardFunc(judge, tree=_tree(), router="static", scoring_variant="penalty+active", rubric_source="tree")
        assert f.__name__ == "clinical_rubric" and inspect.iscoroutinefunction(f.__call__)
        log = Log()
        out = await f([CHEST] * 2, [conv(GOOD), conv(POOR)], None, log_metric=log, **TRL_EXTRAS)
        assert out == [pytest.approx(1.0, abs=1e-9), pytest.approx(0.0, abs=1e-9)]
        d = log.d
        assert d["clinical_rubric/macro/safety"] == pytest.approx(0.5, abs=1e-9)
        assert d["clinical_rubric/macro/communication"] == pytest.approx(0.5, abs=1e-9)
        assert d["clinical_rubric/tree_axis/accuracy"] == pytest.approx(0.5, abs=1e-9)
        # 3 applicability questions (once for the prompt) + 6 verdicts + 3 confirmations (POOR's
        # three failures, read again: the defaults, as the stage-3 reward runs)
        assert d["clinical_rubric/judge/requests"] == 12 and d["clinical_rubric/judge/failures"] == 0
        # cost, de-duplicated requests aside: 3 leaves per rollout (2 rollouts of one prompt), POOR's
        # 3 confirmations, and the prompt's 3 applicability questions paid once: 12 for the prompt
        assert d["clinical_rubric/cost/judge_items_per_rollout"] == pytest.approx(6, abs=1e-9)
        assert d["clinical_rubric/cost/judge_items_per_prompt"] == pytest.approx(12, abs=1e-9)
        assert "clinical_rubric/judge/cache_hits" in d

    async def test_rubrics_column_and_per_axis_means(self):
        f = RubricRewardFunc(keyword_judge(), tree=_tree(), router="static", combine="points")
        log = Log()
        out = await f([CHEST] * 2, [GOOD, POOR], rubrics=[RUBRICS] * 2, log_metric=log)
        # POOR meets only the -5 item: -5/10, not clipped at 0 (the stage 3 default)
        assert out == [pytest.approx(1.0, abs=1e-9), pytest.approx(-0.5, abs=1e-9)]
        assert log.d["clinical_rubric/axis/completeness"] == pytest.approx(0.5, abs=1e-9)
        assert log.d["clinical_rubric/axis/accuracy"] == pytest.approx(0.5, abs=1e-9)
        assert log.d["clinical_rubric/points_score"] == pytest.approx(0.25, abs=1e-9)

    async def test_rows_source_scores_healthbench_points_only(self):
        judge = keyword_judge()
        f = RubricRewardFunc(judge, rubric_source="rows", name="hb")
        log = Log()
        out = await f([CHEST] * 2, [GOOD, POOR], rubrics=[RUBRICS] * 2, log_metric=log)
        assert out == [pytest.approx(1.0, abs=1e-9), pytest.approx(-0.5, abs=1e-9)]
        clipped = RubricRewardFunc(keyword_judge(), rubric_source="rows", clip_below_zero=True)
        assert await clipped([CHEST] * 2, [GOOD, POOR], rubrics=[RUBRICS] * 2) == [pytest.approx(1.0, abs=1e-9), 0.0]
        assert len(judge.calls) == 6  # 3 items x 2 rollouts, no routing, no tree leaves
        assert log.d["hb/axis/accuracy"] == pytest.approx(0.5, abs=1e-9)

    async def test_each_prompt_routed_once(self):
        judge = keyword_judge()
        f = RubricRewardFunc(judge, tree=_tree(), router="llm", rubric_source="tree")
        await f([CHEST] * 4, [GOOD, POOR, GOOD + " ", POOR + " "])
        routing_calls = [c for c in judge.calls if c[0] in (RELEVANCE.name, URGENCY.name)]
        # 4 rollouts of one prompt: one urgency call + one relevance call per node, not x4
        assert 0 < len(routing_calls) <= len(_tree().nodes)

    async def test_failure_is_none_and_raise_mode(self):
        log = Log()
        f = RubricRewardFunc(keyword_judge(), tree=_tree(), router="static", combine="tree", rubric_source="tree")
        out = await f([CHEST] * 2, ["crash", GOOD], log_metric=log)
        assert out == [None, pytest.approx(1.0, abs=1e-9)]
        assert log.d["clinical_rubric/unscored"] == 0.5 and log.d["clinical_rubric/judge/failures"] == 3
        with pytest.raises(JudgeError):
            await RubricRewardFunc(keyword_judge(), tree=_tree(), router="static", on_failure="raise", rubric_source="tree")(
                [CHEST], ["crash"])
        rows = RubricRewardFunc(keyword_judge(), rubric_source="rows")
        assert await rows([CHEST], ["crash"], rubrics=[RUBRICS]) == [None]
        with pytest.raises(JudgeError):
            await RubricRewardFunc(keyword_judge(), rubric_source="rows", on_failure="raise")(
                [CHEST], ["crash"], rubrics=[RUBRICS])

    def test_defaults_are_the_documented_stage3_reward(self):
        """No router argument: the routed tree (embedding router) and the row's rubric items,
        averaged (the README's "tree and rows" stage-3 reward), not every leaf with the rows ignored."""
        from reward.settings import RubricRewardSettings

        f = RubricRewardFunc(keyword_judge())
        assert (f.router_source, f.rubric_source, f.combine) == ("embedding", "both", "mean")
        s = RubricRewardSettings()
        assert (s.router, s.rubric_source, s.combine) == ("embedding", "both", "mean")
        assert RubricRewardFunc.from_settings(keyword_judge(), {}).combine == "mean"
        # applicability and failure confirmation: on in the stage-3 reward, as the tree-and-rows
        # configs run it; off only in the low-level engine (tests/cli/test_reward_options.py checks
        # every command that scores takes these defaults)
        assert f.applicability and f.confirm_failures and s.applicability and s.confirm_failures
        assert f.settings == s.recipe() and f.format_failure_score == "floor"
        from reward.integrations.verl import load_settings

        v = load_settings()
        assert v.applicability and v.confirm_failures  # verl's reward_kwargs inherit the same defaults
        assert v.recipe() == s.recipe()
        from reward.stages.rubric_reward import RubricReward

        low = inspect.signature(RubricReward.__init__).parameters
        assert low["applicability"].default is False and low["confirm_failures"].default is False

    async def test_by_default_an_absent_situation_leaves_the_score_and_a_false_failure_is_overturned(self):
        """The defaults at work: the judge says the 'wait' leaf's situation is absent (it is neither
        graded nor scored), and its first reading of 'empathy' on GOOD is a false failure that the
        second reading overturns."""
        from reward.router.applicability import APPLICABILITY
        from reward.stages.confirm import readings

        confirm, settle = (r.template.name for r in readings("choice"))

        def decide(template, item):
            if template.name == APPLICABILITY.name:
                return 0.0 if item.criterion == CRIT["wait"] else 1.0
            met = KEYWORDS[item.criterion] in item.response.lower() or item.criterion == CRIT["empathy"]
            if template.name == confirm:  # asked from the other side: "is the behaviour missing?"
                return 0.0 if met else 1.0
            if item.criterion == CRIT["empathy"] and template.name != settle:
                return 0.0  # the first reading's error (the third reading, on the disagreement, is right)
            return 1.0 if met else 0.0

        judge = FakeJudge(decide)
        f = RubricRewardFunc(judge, tree=_tree(), router="static", rubric_source="tree")
        log = Log()
        [score] = await f([CHEST], [conv("Call emergency services now.")], None, log_metric=log, **TRL_EXTRAS)
        assert score == pytest.approx(1.0, abs=1e-9)  # the false failure overturned, the absent 'wait' left out
        graded = [(t, i.criterion) for t, i in judge.calls if t != APPLICABILITY.name]
        assert CRIT["wait"] not in {c for _, c in graded}
        assert (confirm, CRIT["empathy"]) in graded and (settle, CRIT["empathy"]) in graded
        off = RubricRewardFunc(FakeJudge(decide), tree=_tree(), router="static", applicability=False,
                               confirm_failures=False, rubric_source="tree")
        [plain] = await off([CHEST], [conv("Call emergency services now.")], None, log_metric=Log(), **TRL_EXTRAS)
        assert plain < score  # without either stage: 'empathy' fails at its price

    def test_pickles_with_a_spec(self):
        f = RubricRewardFunc({"url": "http://127.0.0.1:9", "served_model": "m", "tokenizer": "t"},
                             router="static", router_options={"axes": ["accuracy"]}, name="clin")
        g = pickle.loads(pickle.dumps(f))
        assert g.__name__ == "clin" and g.router_options == {"axes": ["accuracy"]} and g._runtime is None

    def test_bad_options(self):
        with pytest.raises(ValueError):
            RubricRewardFunc(keyword_judge(), rubric_source="nope")
        with pytest.raises(ValueError):
            RubricRewardFunc(keyword_judge(), on_failure="zero")
        with pytest.raises(ValueError):
            RubricRewardFunc(None)


def test_trl_sees_the_names_and_async():
    utils = pytest.importorskip("trl.trainer.utils")
    assert utils.get_callable_name(MCQRuleReward()) == "mcq_rule"
    assert utils.get_callable_name(RubricRewardFunc(keyword_judge(), name="x")) == "x"
    assert utils.is_async_callable(ErrorRubricReward(errors_judge()))
    assert not utils.is_async_callable(MCQRuleReward())


def test_module_imports_no_trainer():
    code = ("import sys, reward.integrations.trl, reward.integrations.trl, reward.integrations.verl, "
            "reward.settings; "
            "print(sorted(m for m in ('trl', 'torch', 'transformers', 'datasets', 'verl') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_spec_built_judge_is_rebuilt_for_another_event_loop():
    import asyncio

    f = ErrorRubricReward(fake_errors_judge)
    call = dict(answer=["B"], options=[OPTIONS])
    assert run_sync(f([PROMPT], ["Answer: B"], **call)) == [1.0]
    first = f._judge
    assert run_sync(f([PROMPT], ["Answer: B"], **call)) == [1.0]
    assert f._judge is first  # same loop: same judge (its HTTP client survives)
    assert asyncio.run(f([PROMPT], ["Answer: B"], **call)) == [1.0]
    assert f._judge is not first  # another loop: rebuilt


class TestGradeRubricRows:
    """The stage 3 row score TRL's RubricRewardFunc and verl's clinical source both use."""

    async def test_gold_dedup_soft_and_unscorable(self):
        from reward.stages.row_rubrics import grade_rubric_rows

        judge = FakeJudge(lambda t, item: 0.8 if KEYWORDS[item.criterion] in item.response.lower() else 0.3)
        rows = [(CHEST, GOOD, RUBRICS), (CHEST, GOOD, RUBRICS), (CHEST, POOR, RUBRICS),
                (CHEST, GOOD, [{"criterion": "Says it is nothing.", "points": -5}]), (CHEST, GOOD, [])]
        hard = await grade_rubric_rows(judge, rows)
        # 3 items for GOOD (asked once for both copies and for the 4th row's repeat), 3 for POOR
        assert len(judge.calls) == 6
        assert [g.score for g in hard] == [1.0, 1.0, 0.0, None, None] and hard[0].met == [True, False, True]
        assert hard[3].failures == [] and hard[4].failures == []  # unscorable rows, not judge failures
        soft = await grade_rubric_rows(judge, rows[:3], soft=True)
        # GOOD: (0.8*5 - 0.3*5 + 0.8*5) / 10 = 0.65; POOR: (0.3*5 - 0.8*5 + 0.3*5) / 10 -> clipped to 0
        assert [g.score for g in soft] == [pytest.approx(0.65, abs=1e-9), pytest.approx(0.65, abs=1e-9), 0.0]

    async def test_a_failed_item_leaves_the_rollout_unscored_with_its_reason(self):
        from reward.stages.row_rubrics import grade_rubric_rows

        [g] = await grade_rubric_rows(keyword_judge(), [(CHEST, "crash", RUBRICS)])
        assert g.score is None and g.met is None and len(g.failures) == 3 and "judge down" in g.failures[0]


async def test_rows_without_rubric_items_are_said_not_silently_scored_by_the_tree(caplog):
    """A ``rubrics`` column that is there but empty for some rows (direct TRL use: the launcher's
    schema needs one item) would leave those rows to the tree alone: said once, with the count."""
    f = RubricRewardFunc(keyword_judge(), tree=_tree(), router="static")  # rubric_source 'both', the recipe
    with caplog.at_level("WARNING", logger="reward.integrations.trl"):
        await f([CHEST] * 2, [GOOD, POOR], rubrics=[RUBRICS, []])
        await f([CHEST] * 2, [GOOD, POOR], rubrics=[[], []])
    said = [r.getMessage() for r in caplog.records if "carry no rubric item" in r.getMessage()]
    assert len(said) == 1 and "1 of 2 rollouts" in said[0] and "the tree alone does" in said[0], said
