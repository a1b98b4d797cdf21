"""Judge.generate_json against the real vLLM CPU server (structured outputs) and in process."""

from __future__ import annotations

import pytest

from reward.judge.types import JudgeItem, Message
from reward.stages.error_rubric import (
    ERROR_TEMPLATE,
    ErrorRollout,
    ErrorRubricScorer,
    ErrorRubricSettings,
    error_regex,
    error_schema,
)

Q = (Message(role="user", content="Which vitamin prevents scurvy?\nA. Vitamin A\nB. Vitamin C"),)


@pytest.mark.server
async def test_http_generate_json_with_regex_and_schema(judge_url):
    from reward.judge import VerdictCache, make_judge

    judge = make_judge(judge_url=judge_url, cache=VerdictCache())
    try:
        items = [JudgeItem(conversation=Q, response=r, criterion="B. Vitamin C")
                 for r in ("Answer: B", "Vitamin A, because of the moon.\nAnswer: A")]
        schema = error_schema(3, 24)
        out = await judge.generate_json(ERROR_TEMPLATE, items, schema=schema, regex=error_regex(3, 24),
                                        max_tokens=200, attempts=2)
        assert all(r.ok for r in out), [r.failure for r in out]
        assert all(isinstance(r.value["errors"], list) for r in out)
        assert judge.stats.requests >= 2
        again = await judge.generate_json(ERROR_TEMPLATE, items, schema=schema, regex=error_regex(3, 24),
                                          max_tokens=200, attempts=2)
        assert all(r.cached for r in again) and [r.value for r in again] == [r.value for r in out]
        # the JSON-schema path goes through the same request path; a weak judge may fill its budget
        # with whitespace, which must end as a recorded failure or an object, never an exception
        [res] = await judge.generate_json(ERROR_TEMPLATE, items[:1], schema=schema, max_tokens=48, attempts=1)
        assert res.ok or "unparseable" in res.failure
    finally:
        await judge.aclose()


@pytest.mark.server
async def test_error_rubric_scorer_on_the_server(judge_url):
    from reward.judge import make_judge

    judge = make_judge(judge_url=judge_url, cache=False)
    try:
        cfg = ErrorRubricSettings(constrain="regex", max_errors=3, max_description_chars=24, max_tokens=200)
        rollouts = [ErrorRollout(id=i, prompt=Q, completion=c, answer_idx="B", options={"A": "Vitamin A", "B": "Vitamin C"})
                    for i, c in enumerate(["Answer: B", "Answer: A"])]
        out = await ErrorRubricScorer(judge, cfg).score(rollouts)
        assert [o.correctness for o in out] == [1.0, 0.0]
        for o in out:
            assert o.score is not None and -1.0 <= o.score <= 1.0 and 0 <= o.penalty <= 1
    finally:
        await judge.aclose()


@pytest.mark.slow
async def test_in_process_generate_json_is_bounded(tiny_model_dir):
    from reward.judge import JudgeConfig, make_judge

    judge = make_judge(judge_model=str(tiny_model_dir), cache=False, config=JudgeConfig(temperature=0.0))
    items = [JudgeItem(conversation=Q, response="Answer: B", criterion="B")]
    [r] = await judge.generate_json(ERROR_TEMPLATE, items, schema=error_schema(), max_tokens=12, attempts=2)
    # a random model rarely writes JSON: either an object or a failure with its reason, after 2 tries
    assert r.ok or ("after 2 attempts" in r.failure and r.value is None)
    assert judge.stats.requests == (1 if r.ok else 2)
