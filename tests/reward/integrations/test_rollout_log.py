"""The stage 3 TRL reward's completions-table columns: the leaf verdicts behind each reward, the
same columns on every call, bounded text."""

from __future__ import annotations

import pytest
from rt_trl import CHEST, GOOD, POOR, _tree, keyword_judge

from reward.integrations.rollout_log import _bounded
from reward.integrations.trl import RubricRewardFunc


class Extra:
    def __init__(self) -> None:
        self.cols: dict[str, list] = {}

    def __call__(self, column: str, values: list) -> None:
        self.cols.setdefault(column, []).extend(values)


async def test_leaf_verdict_columns() -> None:
    # the paper variant: the macro columns below are its per-macro weighted means
    f = RubricRewardFunc(keyword_judge(), tree=_tree(), router="static", name="cr", scoring_variant="paper",
                         rubric_source="tree")
    extra = Extra()
    out = await f([CHEST] * 3, [GOOD, POOR, "crash"], None, log_extra=extra, log_metric=lambda k, v: None)
    # a fake judge's fixed verdicts: exact up to float rounding
    assert out[0] == pytest.approx(1.0, abs=1e-9) and out[2] is None
    c = extra.cols
    assert set(c) == {"cr/tree_score", "cr/points_score", "cr/failed_leaves", "cr/uncertain_leaves", "cr/verdicts",
                      "cr/unscored", "cr/macro/safety", "cr/macro/communication"}
    assert all(len(v) == 3 for v in c.values())
    assert c["cr/failed_leaves"][0] == "" and set(c["cr/failed_leaves"][1].split()) == {"ems", "wait", "empathy"}
    assert c["cr/macro/safety"][:2] == [pytest.approx(1.0, abs=1e-9), pytest.approx(0.0, abs=1e-9)] and c["cr/macro/safety"][2] is None
    assert c["cr/unscored"][:2] == ["", ""] and "judge down" in c["cr/unscored"][2]
    assert "ems=1" in c["cr/verdicts"][0] or "ems=1.00" in c["cr/verdicts"][0]
    # a second batch logs the same columns (TRL aligns them by name across steps)
    again = Extra()
    await f([CHEST], [GOOD], None, log_extra=again)
    assert set(again.cols) == set(c)


def test_bounded_lists() -> None:
    ids = [f"leaf_{i:02d}" for i in range(50)]
    text = _bounded(ids, 40)
    assert len(text) <= 40 + len(" +50 more") and text.endswith("more") and text.startswith("leaf_00 leaf_01")
    assert _bounded(["a", "b"], 40) == "a b" and _bounded([], 40) == ""
