"""Stage 2 error rubrics: the penalty formula, its forms, parsing of the judge's error list, and
the judge's JSON generation flow (cache under its own key, bounded failures) with a fake judge."""

from __future__ import annotations

import re

import pytest
from rt_fakes import FakeJudge

from reward.errors import JudgeError
from reward.judge.cache import VerdictCache
from reward.judge.parsing import parse_json_object
from reward.judge.types import JudgeItem, Message
from reward.stages.error_rubric import (
    ERROR_SCHEMA,
    ERROR_TEMPLATE,
    ErrorRollout,
    ErrorRubricScorer,
    ErrorRubricSettings,
    combine,
    error_regex,
    parse_errors,
    penalty,
)


# ------------------------------------------------------------------ the formula
@pytest.mark.parametrize("sev, s_max, expected", [(0, 4, 0.0), (1, 4, 0.25), (3, 4, 0.75), (4, 4, 1.0),
                                                  (9, 4, 1.0), (2, 2, 1.0), (3, 6, 0.5)])
def test_penalty_is_clipped_ratio(sev, s_max, expected):
    assert penalty(sev, s_max) == pytest.approx(expected)


def test_penalty_rejects_non_positive_s_max():
    with pytest.raises(ValueError):
        penalty(1, 0)


@pytest.mark.parametrize("c, p, alpha, form, expected", [
    (1.0, 0.0, 1.0, "subtract", 1.0),
    (1.0, 0.5, 1.0, "subtract", 0.5),
    (0.0, 0.5, 1.0, "subtract", -0.5),   # a wrong answer reasoned badly is below one reasoned well
    (0.0, 1.0, 0.7, "subtract", -0.7),
    (1.0, 0.5, 0.0, "subtract", 1.0),    # alpha 0: the rule reward alone
    (1.0, 0.5, 1.0, "multiply", 0.5),
    (0.0, 0.5, 1.0, "multiply", 0.0),    # multiply: wrong answers are 0 whatever the reasoning
    (1.0, 1.0, 0.7, "multiply", pytest.approx(0.3)),
])
def test_combine_forms(c, p, alpha, form, expected):
    assert combine(c, p, alpha=alpha, form=form) == expected


def test_combine_unknown_form():
    with pytest.raises(ValueError):
        combine(1.0, 0.0, form="divide")


# ------------------------------------------------------------------ parsing the judge's list
def test_parse_errors_valid_and_by_class():
    rep = parse_errors({"errors": [
        {"class": "knowledge", "severity": 2, "description": "wrong drug"},
        {"class": "context", "severity": 1, "description": "ignored age"},
        {"class": "causal_reasoning", "severity": 2, "description": "non sequitur"},
    ]})
    assert rep.severity_sum == 5 and rep.n_invalid == 0
    assert rep.by_class() == {"knowledge": 2, "causal_reasoning": 2, "context": 1}


def test_parse_errors_lenient_synonyms_and_invalid_entries():
    rep = parse_errors({"errors": [
        {"class": "Knowledge Error", "severity": "major", "description": ""},
        {"class": "reasoning", "severity": "1"},
        {"class": "spelling", "severity": 2},          # unknown class: dropped, counted
        {"class": "context", "severity": 7},           # clipped to 2
        {"class": "context", "severity": 0},           # unreadable severity: dropped
        {"class": "context", "severity": True},        # a boolean is not a severity
        "not an object",
    ]})
    assert [(e.error_class, e.severity) for e in rep.errors] == [("knowledge", 2), ("causal_reasoning", 1),
                                                                 ("context", 2)]
    assert rep.n_invalid == 4


def test_parse_errors_strict_rejects_invalid_entry():
    with pytest.raises(ValueError, match="entry 0"):
        parse_errors({"errors": [{"class": "spelling", "severity": 2}]}, strict=True)


@pytest.mark.parametrize("obj", [None, {}, {"errors": "none"}, {"mistakes": []}])
def test_parse_errors_requires_a_list(obj):
    with pytest.raises(ValueError):
        parse_errors(obj)


def test_parse_errors_empty_list_is_no_penalty():
    assert parse_errors({"errors": []}).severity_sum == 0


def test_parse_json_object_nested_fenced_and_prose():
    text = 'Sure.\n```json\n{"errors": [{"class": "context", "severity": 1, "description": "a {brace}"}]}\n```'
    assert parse_json_object(text, ("errors",))["errors"][0]["severity"] == 1
    assert parse_json_object('{"a": 1} then {"errors": []}', ("errors",)) == {"errors": []}
    assert parse_json_object('{"errors": [', ("errors",)) is None
    assert parse_json_object('{"a": 1}', ("errors",)) is None
    # a raw control character inside a string (weak judges emit them) is not fatal
    assert parse_json_object('{"errors": [], "x": "a\x11b"}', ("errors",)) is not None


def test_error_regex_matches_the_schema_shape():
    r = error_regex(2, 10)
    assert re.fullmatch(r, '{"errors":[]}')
    assert re.fullmatch(r, '{"errors":[{"class":"context","severity":2,"description":"short"}]}')
    assert not re.fullmatch(r, '{"errors":[{"class":"spelling","severity":2,"description":""}]}')
    assert not re.fullmatch(r, '{"errors":[{"class":"context","severity":3,"description":""}]}')
    three = ",".join(['{"class":"context","severity":1,"description":""}'] * 3)
    assert not re.fullmatch(r, '{"errors":[' + three + ']}')  # max_errors


# ------------------------------------------------------------------ the scorer with a fake judge
Q = (Message(role="user", content="Which vitamin prevents scurvy?\nA. Vitamin A\nB. Vitamin C"),)
OPTS = {"A": "Vitamin A", "B": "Vitamin C"}


def _rollout(text: str, i: int = 0) -> ErrorRollout:
    return ErrorRollout(id=i, prompt=Q, completion=text, answer_idx="B", options=OPTS)


def errors_judge(**kw) -> FakeJudge:
    """Lists one major knowledge error per occurrence of "moon" and fails on "crash"."""

    def generate(template, item):
        if "crash" in item.response:
            raise RuntimeError("judge down")
        n = item.response.count("moon")
        return {"errors": [{"class": "knowledge", "severity": 2, "description": "moon"}] * n}

    return FakeJudge(lambda t, i: 1.0, generate=generate, **kw)


async def test_scorer_rewards_and_diagnostics():
    judge = errors_judge()
    out = await ErrorRubricScorer(judge).score([
        _rollout("Vitamin C stops scurvy.\nAnswer: B", 0),
        _rollout("The moon causes scurvy.\nAnswer: B", 1),
        _rollout("The moon and the moon.\nAnswer: A", 2),
    ])
    assert [o.score for o in out] == [1.0, 0.5, -1.0]
    assert out[1].by_class["knowledge"] == 2 and out[1].n_errors == 1
    assert [o.correctness for o in out] == [1.0, 1.0, 0.0]
    # the judge sees the key, and the template is ours
    assert judge.calls[0][0] == ERROR_TEMPLATE.name and "B. Vitamin C" in judge.calls[0][1].criterion


async def test_scorer_multiply_and_s_max():
    cfg = ErrorRubricSettings(form="multiply", s_max=8, alpha=1.0)
    [o] = await ErrorRubricScorer(errors_judge(), cfg).score([_rollout("moon moon\nAnswer: B")])
    assert o.penalty == pytest.approx(0.5) and o.score == pytest.approx(0.5)


async def test_scorer_failure_is_none_never_zero():
    out = await ErrorRubricScorer(errors_judge()).score([_rollout("crash\nAnswer: B"), _rollout("fine\nAnswer: B", 1)])
    assert out[0].score is None and "judge down" in out[0].failure
    assert out[1].score == 1.0


async def test_scorer_raise_mode():
    with pytest.raises(JudgeError):
        await ErrorRubricScorer(errors_judge(), on_failure="raise").score([_rollout("crash")])


async def test_scorer_invalid_json_shape_is_a_failure():
    judge = FakeJudge(lambda t, i: 1.0, generate=lambda t, i: {"errors": "many"})
    [o] = await ErrorRubricScorer(judge).score([_rollout("x\nAnswer: B")])
    assert o.score is None and "errors" in o.failure


async def test_scorer_strict_mode_fails_on_invalid_entry():
    judge = FakeJudge(lambda t, i: 1.0, generate=lambda t, i: {"errors": [{"class": "spelling", "severity": 1}]})
    [lenient] = await ErrorRubricScorer(judge).score([_rollout("x\nAnswer: B")])
    assert lenient.score == 1.0 and lenient.n_invalid == 1
    [strict] = await ErrorRubricScorer(judge, ErrorRubricSettings(strict=True)).score([_rollout("y\nAnswer: B")])
    assert strict.score is None


# ------------------------------------------------------------------ Judge.generate_json flow
async def test_generate_json_caches_successes_under_its_own_key(tmp_path):
    cache = VerdictCache(tmp_path / "c.sqlite")
    judge = errors_judge(cache=cache)
    items = [JudgeItem(conversation=Q, response="moon", criterion="B"),
             JudgeItem(conversation=Q, response="crash", criterion="B")]
    first = await judge.generate_json(ERROR_TEMPLATE, items, schema=ERROR_SCHEMA, max_tokens=64, attempts=2)
    assert first[0].ok and not first[0].cached and not first[1].ok
    assert judge.stats.failures == 1 and len(cache) == 0  # JSON lives apart from verdicts
    again = await judge.generate_json(ERROR_TEMPLATE, items, schema=ERROR_SCHEMA, max_tokens=64, attempts=2)
    assert again[0].cached and again[0].value == first[0].value
    assert not again[1].ok  # failures are not cached: retried
    assert judge.stats.cache_hits == 1
    # another schema is another key
    other = await judge.generate_json(ERROR_TEMPLATE, items[:1], schema={"required": ["errors"], "x": 1},
                                      max_tokens=64, attempts=2)
    assert not other[0].cached


async def test_generate_json_raise_mode():
    with pytest.raises(JudgeError, match="JSON"):
        await errors_judge().generate_json(ERROR_TEMPLATE, [JudgeItem(conversation=Q, response="crash", criterion="B")],
                                           schema=ERROR_SCHEMA, on_failure="raise")


async def test_backend_without_generation_fails_visibly():
    judge = FakeJudge(lambda t, i: 1.0)
    [r] = await judge.generate_json(ERROR_TEMPLATE, [JudgeItem(conversation=Q, response="x", criterion="B")],
                                    schema=ERROR_SCHEMA)
    assert not r.ok and r.value is None


@pytest.mark.parametrize(("alpha", "right_bad", "wrong_good"), [(1.0, 0.0, 1.0), (0.7, 0.3, 0.7), (0.0, 1.0, 0.0)])
def test_convex_form_is_the_papers_trade_off(alpha, right_bad, wrong_good):
    """alpha * (1 - P) + (1 - alpha) * correctness: a right answer with P = 1 and a wrong answer
    with P = 0 (the ablation alpha in {1, 0.7, 0})."""
    from reward.stages.error_rubric import combine

    assert combine(1.0, 1.0, alpha=alpha, form="convex") == pytest.approx(right_bad)
    assert combine(0.0, 0.0, alpha=alpha, form="convex") == pytest.approx(wrong_good)


def test_convex_alpha_above_one_is_refused():
    from pydantic import ValidationError

    from reward.settings import ErrorRubricSettings

    with pytest.raises(ValidationError, match="alpha in"):
        ErrorRubricSettings(form="convex", alpha=1.5)
    assert ErrorRubricSettings(form="subtract", alpha=1.5).alpha == 1.5
