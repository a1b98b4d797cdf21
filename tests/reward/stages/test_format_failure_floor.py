"""Stage 3: an unfinished answer (an unclosed <think>) scores below every finished answer to the
same row (``format_failure_score: floor``), however harmful, in the rows reward, the tree+rows
reward and the verl adapter; ``floor-M`` sets the margin; a number or null is used as is; the
stage-3 configs and the settings default use the floor. Keyword fake judge: verdicts are written
down as keyword rules, so the expected scores are known."""

from __future__ import annotations

import itertools

import pytest
from rt_paths import REPO_ROOT
from rt_trl import CHEST, RUBRICS, _tree, keyword_judge

from reward.integrations.trl import RubricRewardFunc
from reward.settings import StageRewardSettings
from reward.stages.reasoning import FLOOR_MARGIN, failure_score
from reward.stages.rubric_reward import RubricReward

UNCLOSED = "<think>Let me consider emergency services and aspirin... still thinking"
# every finished answer the keyword rules can tell apart: each subset of the criteria's keywords
WORDS = ["emergency", "understand", "wait", "aspirin", "nothing"]
FINISHED = ["<think>ok</think>\n" + " ".join(c) + "." for k in range(len(WORDS) + 1)
            for c in itertools.combinations(WORDS, k)]


@pytest.mark.parametrize("clip", [False, True])
async def test_rows_unfinished_scores_below_every_finished_answer(clip):
    f = RubricRewardFunc(keyword_judge(), rubric_source="rows", format_failure_score="floor", clip_below_zero=clip)
    scores = await f([CHEST] * (len(FINISHED) + 1), [*FINISHED, UNCLOSED], rubrics=[RUBRICS] * (len(FINISHED) + 1))
    finished, unfinished = scores[:-1], scores[-1]
    worst = 0.0 if clip else -0.5  # aspirin and EMS missed (+5, +5), "nothing" said (-5): -5 / 10
    assert min(finished) == pytest.approx(worst)
    assert unfinished == pytest.approx(worst - FLOOR_MARGIN) and unfinished < min(finished)
    g = RubricRewardFunc(keyword_judge(), rubric_source="rows", format_failure_score="floor-0.25")
    assert await g([CHEST], [UNCLOSED], rubrics=[RUBRICS]) == [pytest.approx(-0.75)]


@pytest.mark.parametrize("combine", ["points", "mean", "tree"])
async def test_tree_and_rows_unfinished_scores_below_every_finished_answer(combine):
    from reward.router import StaticRouter

    tree = _tree()
    reward = RubricReward(tree, StaticRouter(tree), keyword_judge(), combine=combine, clip_below_zero=False,
                          format_failure_score="floor")
    recs = [{"id": str(i), "prompt": CHEST, "completion": c, "rubrics": RUBRICS}
            for i, c in enumerate([*FINISHED, UNCLOSED])]
    out = await reward.score(recs)
    finished = [r.score for r in out[:-1]]
    assert all(s is not None for s in finished) and out[-1].format_failure
    assert out[-1].score == pytest.approx(min(finished) - FLOOR_MARGIN)  # the worst answer is among them
    assert reward.stats["format_failures"] == 1 and reward.stats["unscored"] == 0


def test_the_setting_takes_numbers_null_and_floors_only():
    assert StageRewardSettings().rubric().format_failure_score == "floor"
    assert StageRewardSettings(format_failure_score="floor-0.5").format_failure_score == "floor-0.5"
    assert StageRewardSettings(format_failure_score=-1.0).format_failure_score == -1.0
    assert StageRewardSettings(format_failure_score=None).format_failure_score is None
    with pytest.raises(ValueError, match="floor-MARGIN"):
        StageRewardSettings(format_failure_score="flor")
    assert failure_score(-1.0, 0.3) == -1.0 and failure_score(None, 0.3) is None
    assert failure_score("floor", None) is None  # nothing to be below: unscored


@pytest.mark.parametrize("name", ["stage3_row_rubrics.yaml", "stage3_clinical_rubric.yaml"])
def test_stage3_configs_score_unfinished_answers_at_the_floor(name):
    from training.trl_config import load_config

    cfg = load_config(REPO_ROOT / "configs/trl" / name)
    assert cfg.reward.rubric().format_failure_score == "floor"
