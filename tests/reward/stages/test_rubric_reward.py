"""RubricReward with a fake judge: hard and soft scoring, polarity, combine modes, failures,
feedback, a gold check and input validation."""

from __future__ import annotations

import json

import pytest
from rt_fakes import FakeJudge

from reward.errors import InputError, JudgeError
from reward.judge.templates import RELEVANCE, URGENCY
from reward.router import LLMTreeRouter, StaticRouter
from reward.stages.rubric_reward import RubricReward, load_rollouts, parse_rollouts
from reward.tree import Node, RubricTree

# Criteria and the keyword whose presence in the response makes the fake judge say "met".
KEYWORDS = {
    "Advises calling emergency services now.": "emergency services",
    "Advises calling an ambulance rather than driving.": "ambulance",
    "Suggests waiting at home to see if the pain settles.": "wait at home",
    "Acknowledges the user's worry.": "understand",
}


def _tree() -> RubricTree:
    crit = list(KEYWORDS)
    return RubricTree([
        Node(id="root", title="root", children=("safety", "communication")),
        Node(id="safety", title="Safety", definition="escalation", children=("call_ems", "ambulance", "home_care")),
        Node(id="communication", title="Communication", children=("empathy",)),
        Node(id="call_ems", title="Call emergency services", criterion=crit[0]),
        Node(id="ambulance", title="Ambulance", criterion=crit[1]),
        Node(id="home_care", title="Home care instead of emergency", criterion=crit[2], polarity="negative"),
        Node(id="empathy", title="Acknowledges worry", criterion=crit[3]),
    ], root="root", name="chest")


# weights: call_ems, ambulance, home_care = 1/6 each; empathy = 1/2
W = {"call_ems": 1 / 6, "ambulance": 1 / 6, "home_care": 1 / 6, "empathy": 1 / 2}


def keyword_judge(p_met: float = 1.0, p_unmet: float = 0.0, fail: set[str] = frozenset(), **kw) -> FakeJudge:
    def decide(template, item):
        if template.name in (RELEVANCE.name, URGENCY.name):
            return 1.0
        if item.criterion in fail:
            raise RuntimeError("judge down")
        key = KEYWORDS.get(item.criterion, item.criterion.lower())
        return p_met if key in item.response.lower() else p_unmet

    return FakeJudge(decide, **kw)


PROMPT = [{"role": "user", "content": "Crushing chest pain for 20 minutes, sweating. What do I do?"}]
GOOD = ("I understand this is frightening. Call emergency services now; ask for an ambulance "
        "rather than driving yourself.")
POOR = "It is probably indigestion. Wait at home and see if it settles."
RUBRICS = [
    {"criterion": "emergency services", "points": 8},
    {"criterion": "ambulance", "points": 4},
    {"criterion": "wait at home", "points": -6},
]


def _reward(judge, **kw) -> RubricReward:
    tree = _tree()
    kw.setdefault("scoring_variant", "paper")  # the expected values below are the paper's weighted mean
    return RubricReward(tree, StaticRouter(tree), judge, **kw)


def test_hard_scores_and_polarity():
    [good, poor] = _reward(keyword_judge()).score_sync([
        {"id": "good", "prompt": PROMPT, "completion": GOOD},
        {"id": "poor", "prompt": PROMPT, "completion": POOR},
    ])
    assert good.score == pytest.approx(1.0)
    # poor: home care met -> negative leaf fails; nothing else met
    assert poor.score == pytest.approx(0.0)
    leaf = {lr.leaf_id: lr for lr in poor.leaves}
    assert leaf["home_care"].met is True and leaf["home_care"].passed == 0.0
    assert leaf["home_care"].polarity == "negative"
    assert good.tree_score == good.score and good.points_score is None
    assert set(good.nodes) == {"root", "safety", "communication", *W}
    assert good.nodes["safety"]["score"] == pytest.approx(1.0)
    assert good.routing["n_active"] == 4 and good.failures == []


def test_soft_uses_p_yes():
    rollout = {"id": "r", "prompt": PROMPT, "completion": GOOD}
    hard = _reward(keyword_judge(p_met=0.8, p_unmet=0.3)).score_sync([rollout])[0]
    soft = _reward(keyword_judge(p_met=0.8, p_unmet=0.3), scoring="soft").score_sync([rollout])[0]
    assert hard.score == pytest.approx(1.0)  # 0.8 -> yes; 0.3 -> no, and home_care is negative
    # soft: passes 0.8 on call_ems, ambulance, empathy; home_care unmet 0.3 -> pass 0.7
    expected = W["call_ems"] * 0.8 + W["ambulance"] * 0.8 + W["home_care"] * 0.7 + W["empathy"] * 0.8
    assert soft.score == pytest.approx(expected)
    assert {lr.leaf_id: lr.p_yes for lr in soft.leaves}["home_care"] == pytest.approx(0.3)


@pytest.mark.parametrize("combine", ["tree", "points", "mean"])
def test_combine_modes_with_row_rubrics(combine):
    # completion meets "emergency services" and "wait at home" but not "ambulance"
    completion = "Call emergency services. If you prefer, wait at home first."
    [r] = _reward(keyword_judge(), combine=combine).score_sync(
        [{"id": "r", "prompt": PROMPT, "completion": completion, "rubrics": RUBRICS}])
    tree = W["call_ems"]  # call_ems passes; ambulance and empathy unmet; home_care met -> fails
    points = (8 - 6) / 12
    assert r.tree_score == pytest.approx(tree) and r.points_score == pytest.approx(points)
    assert r.score == pytest.approx({"tree": tree, "points": points, "mean": (tree + points) / 2}[combine])
    assert [it.met for it in r.rubric_items] == [True, False, True]


def test_soft_points_are_expected_points_clipped():
    [r] = _reward(keyword_judge(p_met=0.9, p_unmet=0.2), scoring="soft", combine="points").score_sync(
        [{"id": "r", "prompt": PROMPT, "completion": POOR, "rubrics": RUBRICS}])
    expected = (8 * 0.2 + 4 * 0.2 - 6 * 0.9) / 12  # negative: clipped to 0
    assert expected < 0 and r.points_score == 0.0 and r.score == 0.0


def test_rows_without_rubrics_are_scored_by_the_tree_in_every_mode():
    [r] = _reward(keyword_judge(), combine="points").score_sync([{"id": "r", "prompt": PROMPT, "completion": GOOD}])
    assert r.score == r.tree_score == pytest.approx(1.0)


def test_a_failed_leaf_unscores_the_rollout_with_reasons():
    judge = keyword_judge(fail={"Advises calling an ambulance rather than driving."})
    [r, other] = _reward(judge).score_sync([
        {"id": "r", "prompt": PROMPT, "completion": GOOD},
        {"id": "other", "prompt": PROMPT, "completion": GOOD, "rubrics": RUBRICS},
    ])
    assert r.score is None and r.tree_score is None and not r.scored
    assert len(r.failures) == 1 and r.failures[0].startswith("leaf ambulance: fake failure")
    assert {lr.leaf_id: lr.failure for lr in r.leaves}["ambulance"]
    assert other.score is None  # the same leaf is active for every rollout of the prompt


def test_a_failed_rubric_item_unscores_the_rollout():
    judge = keyword_judge(fail={"ambulance"})
    reward = _reward(judge)
    [r] = reward.score_sync([{"id": "r", "prompt": PROMPT, "completion": GOOD, "rubrics": RUBRICS}])
    assert r.score is None and r.failures == ["rubric item 1: fake failure: judge down"]
    assert reward.stats["unscored"] == 1 and reward.stats["scored"] == 0


def test_on_failure_raise():
    judge = keyword_judge(fail={"Acknowledges the user's worry."})
    with pytest.raises(JudgeError, match="rollout 'r'.*leaf empathy"):
        _reward(judge, on_failure="raise").score_sync([{"id": "r", "prompt": PROMPT, "completion": GOOD}])


def test_feedback_lists_failed_checks_heaviest_first():
    [poor] = _reward(keyword_judge()).score_sync(
        [{"id": "poor", "prompt": PROMPT, "completion": POOR, "rubrics": RUBRICS}])
    fb = poor.feedback
    assert fb.startswith("Checks this response did not pass")
    lines = fb.splitlines()[1:]
    # importance = share of its own score: rubric item 8/12, then the empathy leaf 1/2 of the tree
    assert lines[0] == "- Missing [rubric, 8 points]: emergency services"
    assert lines[1] == "- Missing [Acknowledges worry]: Acknowledges the user's worry."
    assert "- Avoid [Home care instead of emergency]: Suggests waiting at home to see if the pain settles." in lines
    assert "- Missing [Call emergency services]: Advises calling emergency services now." in lines
    assert "- Avoid [rubric, -6 points]: wait at home" in lines
    [good] = _reward(keyword_judge()).score_sync([{"id": "good", "prompt": PROMPT, "completion": GOOD}])
    assert good.feedback == ""
    limited = _reward(keyword_judge(), feedback_limit=2).score_sync(
        [{"id": "poor", "prompt": PROMPT, "completion": POOR, "rubrics": RUBRICS}])[0]
    assert limited.feedback.splitlines()[-1] == "- ... and 5 more"  # 4 leaves + 3 items failed


def test_gold_good_completion_beats_poor_one_with_the_llm_router():
    tree = _tree()
    judge = keyword_judge()
    rows = [{"id": i, "prompt": PROMPT, "completion": c, "rubrics": RUBRICS}
            for i, c in (("good", GOOD), ("poor", POOR))]
    good, poor = RubricReward(tree, LLMTreeRouter(tree, judge), judge, combine="mean").score_sync(rows)
    assert good.score == pytest.approx(1.0) and good.score > poor.score  # default (severity) variant
    # the penalty form clips at 0: everything failed there
    reward = RubricReward(tree, LLMTreeRouter(tree, judge), judge, combine="mean", scoring_variant="penalty+active")
    good, poor = reward.score_sync(rows)
    assert good.score == pytest.approx(1.0) and poor.score == pytest.approx(0.0)


async def test_one_grade_call_per_batch_and_duplicates_graded_once():
    judge = keyword_judge()
    grades = []
    real = judge.grade

    async def counting(items, template=None, **kw):
        grades.append((template.name if template else "default", len(items)))
        return await real(items, template, **kw)

    judge.grade = counting
    reward = _reward(judge)
    rows = [{"id": f"r{i}", "prompt": PROMPT, "completion": GOOD if i % 2 else POOR, "rubrics": RUBRICS}
            for i in range(6)]
    out = await reward.score(rows)
    assert grades == [("default", 2 * (4 + 3))]  # two distinct completions x (4 leaves + 3 items)
    assert [r.score for r in out] == [out[0].score, out[1].score] * 3


def test_validation_errors_name_record_and_field(tmp_path):
    with pytest.raises(InputError) as e:
        parse_rollouts([{"id": "ok", "prompt": PROMPT, "completion": "x"},
                        {"id": "bad", "prompt": [], "completion": "x"}])
    assert "record #1 (id bad)" in str(e.value) and e.value.field == "prompt"
    with pytest.raises(InputError) as e:
        parse_rollouts([{"id": "a", "prompt": PROMPT}])
    assert e.value.field == "completion"
    with pytest.raises(InputError) as e:
        parse_rollouts([{"id": "a", "prompt": PROMPT, "completion": "x",
                         "rubrics": [{"criterion": "c", "points": "many"}]}])
    assert e.value.field == "rubrics.0.points"
    with pytest.raises(InputError, match="no item has positive points"):
        parse_rollouts([{"id": "a", "prompt": PROMPT, "completion": "x",
                         "rubrics": [{"criterion": "c", "points": -1}]}])
    with pytest.raises(InputError, match="duplicate id 'a'"):
        parse_rollouts([{"id": "a", "prompt": PROMPT, "completion": "x"}] * 2)
    with pytest.raises(InputError, match="must be a mapping"):
        parse_rollouts(["not a record"])
    assert parse_rollouts([{"id": 7, "prompt": PROMPT, "completion": "x", "extra": 1}])[0].id == "7"

    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"id": "a", "prompt": PROMPT, "completion": "x"}) + "\n"
                    + json.dumps({"id": "b", "prompt": [{"role": "user"}], "completion": "x"}) + "\n")
    with pytest.raises(InputError) as e:
        load_rollouts(path)
    assert str(path) in str(e.value) and "line 2 (id b)" in str(e.value) and e.value.field == "prompt.0.content"


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="scoring"):
        _reward(keyword_judge(), scoring="fuzzy")
    with pytest.raises(ValueError, match="combine"):
        _reward(keyword_judge(), combine="max")
    with pytest.raises(ValueError, match="on_failure"):
        _reward(keyword_judge(), on_failure="zero")


def test_router_and_reward_must_share_the_tree():
    """Same name, other content: the router would activate leaves the reward cannot score."""
    other = RubricTree([Node(id="root", title="root", children=("x",)),
                        Node(id="x", title="x", criterion="does x")], root="root", name="chest")
    with pytest.raises(ValueError, match="another tree"):
        RubricReward(_tree(), StaticRouter(other), keyword_judge())
    RubricReward(_tree(), StaticRouter(_tree()), keyword_judge())  # equal content, another object: fine
