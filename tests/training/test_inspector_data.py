"""The inspector's data: groups and ranks, per-leaf counts, the within-group variance shares, the
not-applicable shapes, --compare's changed leaves, and errors that name the file and line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from reward.errors import InputError
from training.inspector.data import compare_groups, leaf_counts, leaf_variance_shares, load_run, not_applicable
from training.inspector.page import render


def leaf(lid: str, passed: float, weight: float = 1.0, p: float | None = None, polarity: str = "positive") -> dict:
    met = passed >= 0.5 if polarity == "positive" else passed < 0.5
    return {"leaf_id": lid, "title": lid.upper(), "polarity": polarity, "met": met, "p_yes": p,
            "passed": passed, "weight": weight, "reason": "relevant", "failure": None}


def rec(rid: str, score: float | None, leaves: list[dict], **kw) -> dict:
    return {"id": rid, "score": score, "tree_score": score, "points_score": None, "combine": "tree",
            "leaves": leaves, "nodes": {}, "failures": [] if score is not None else ["leaf a: timed out"], **kw}


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def rollout(rid: str, prompt: str, completion: str = "answer") -> dict:
    return {"id": rid, "prompt": [{"role": "user", "content": prompt}], "completion": completion}


def test_groups_ranks_and_counts(tmp_path: Path) -> None:
    scores = write(tmp_path / "s.jsonl", [
        rec("x1", 1.0, [leaf("a", 1.0, p=0.9), leaf("b", 1.0, p=0.55)]),
        rec("x2", 0.5, [leaf("a", 0.0, p=0.1), leaf("b", 1.0, p=0.95)]),
        rec("x3", 1.0, [leaf("a", 1.0, p=0.8), leaf("b", 1.0, p=0.99)]),
        rec("y1", None, [leaf("a", 1.0)]),
        rec("y2", 0.2, [leaf("a", 0.2, p=0.2)], not_applicable=["c", "d"]),
    ])
    rolls = write(tmp_path / "r.jsonl", [rollout("x1", "P"), rollout("x2", "P"), rollout("x3", "P"),
                                         rollout("y1", "Q"), rollout("y2", "Q")])
    run = load_run(scores, rolls)
    by = {r.id: r for r in run.rollouts}
    assert by["x1"].group == by["x2"].group != by["y1"].group
    assert [by[i].rank for i in ("x1", "x2", "x3", "y1", "y2")] == [1, 3, 1, None, 1]  # ties share the better rank
    assert by["x2"].group_size == 3 and by["x1"].prompt[0]["content"] == "P"
    c = leaf_counts(run.rollouts)
    assert c["a"] == {"routed": 5, "met": 3, "failed": 2, "uncertain": 0, "errors": 0, "na": 0}
    assert c["b"]["uncertain"] == 1 and c["b"]["failed"] == 0
    assert c["c"]["na"] == 1 and c["c"]["routed"] == 0


def test_variance_shares_follow_the_definition(tmp_path: Path) -> None:
    # group P: the score is the weighted mean of two leaves; only leaf a varies, so a carries it all
    rows = [rec("p1", 0.75, [leaf("a", 1.0, 1.0), leaf("b", 0.5, 1.0)]),
            rec("p2", 0.25, [leaf("a", 0.0, 1.0), leaf("b", 0.5, 1.0)]),
            # group Q: both vary, a (weight 3) and b (weight 1) in the same direction
            rec("q1", 1.0, [leaf("a", 1.0, 3.0), leaf("b", 1.0, 1.0)]),
            rec("q2", 0.0, [leaf("a", 0.0, 3.0), leaf("b", 0.0, 1.0)]),
            rec("lonely", 0.3, [leaf("a", 0.3, 1.0)])]  # a group of one: no advantage, not counted
    rolls = [rollout("p1", "P"), rollout("p2", "P"), rollout("q1", "Q"), rollout("q2", "Q"), rollout("lonely", "L")]
    run = load_run(write(tmp_path / "s.jsonl", rows), write(tmp_path / "r.jsonl", rolls))
    shares, other, var = leaf_variance_shares(run.rollouts)
    # within-group sum of squares: P 2 * 0.25^2 = 0.125; Q 2 * 0.5^2 = 0.5 -> 0.625 over 4 rollouts
    assert var == pytest.approx(0.625 / 4)
    # a: P 2 * (0.25 * 0.25) = 0.125; Q 2 * (0.375 * 0.5) = 0.375 -> 0.5 / 0.625; b: Q 2 * 0.125 * 0.5 = 0.125
    assert shares["a"] == pytest.approx(0.8) and shares["b"] == pytest.approx(0.2)
    assert other == pytest.approx(0.0, abs=1e-12)


def test_the_rest_of_the_score_goes_to_other(tmp_path: Path) -> None:
    """Under combine: mean the tree is half the score: the leaves get half, the rubric items the rest."""
    rows = [rec("p1", 0.9, [leaf("a", 1.0)], points_score=0.8, combine="mean"),
            rec("p2", 0.1, [leaf("a", 0.0)], points_score=0.2, combine="mean")]
    run = load_run(write(tmp_path / "s.jsonl", rows), write(tmp_path / "r.jsonl", [rollout("p1", "P"),
                                                                                      rollout("p2", "P")]))
    shares, other, _ = leaf_variance_shares(run.rollouts)
    assert shares["a"] == pytest.approx(0.5 / 0.8) and shares["a"] + other == pytest.approx(1.0)


@pytest.mark.parametrize("raw,expected", [
    (None, []), (["a", "b"], [("a", ""), ("b", "")]), ([{"leaf_id": "a", "reason": "no child"}], [("a", "no child")]),
    ({"a": "trigger absent", "b": True}, [("a", "trigger absent"), ("b", "")]), ("junk", [])])
def test_not_applicable_shapes(raw, expected) -> None:
    assert not_applicable({} if raw is None else {"not_applicable": raw}) == expected


def test_compare_lists_the_leaves_whose_verdicts_changed(tmp_path: Path) -> None:
    rolls = write(tmp_path / "r.jsonl", [rollout("p1", "P"), rollout("p2", "P")])
    a = load_run(write(tmp_path / "a.jsonl", [rec("p1", 1.0, [leaf("a", 1.0), leaf("b", 1.0)]),
                                              rec("p2", 1.0, [leaf("a", 1.0), leaf("b", 1.0)])]), rolls, "A")
    b = load_run(write(tmp_path / "b.jsonl", [rec("p1", 0.5, [leaf("a", 0.0), leaf("b", 1.0), leaf("c", 1.0)]),
                                              rec("p2", 0.5, [leaf("a", 0.0), leaf("b", 0.0), leaf("c", 1.0)])]),
                 rolls, "B")
    (g,) = compare_groups(a, b)
    # a: 100% -> 0% (changed); b: 100% -> 50% (moved 0.5: changed); c: routed in B only
    assert [x[0] for x in g["changed"]] == ["a", "b", "c"]
    assert g["a"] == 1.0 and g["b"] == 0.5


def test_errors_name_the_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "s.jsonl"
    bad.write_text('{"id": "a", "score": 0.5}\n{"score": 0.2}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"s\.jsonl: record line 2: field 'id'"):
        load_run(bad)
    bad.write_text('{"id": "a", "score": "high"}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"line 1 \(id a\): field 'score'"):
        load_run(bad)
    ok = write(tmp_path / "ok.jsonl", [rec("a", 0.5, [])])
    with pytest.raises(InputError, match="rollouts file"):
        load_run(ok, write(tmp_path / "other.jsonl", [rollout("zzz", "P")]))


def test_no_text_can_close_the_data_block(tmp_path: Path) -> None:
    from training.inspector.pack import build_data

    evil = "</script><script>document.title='pwned'</script><!-- <b>"
    run = load_run(write(tmp_path / "s.jsonl", [rec("a", 0.5, [leaf("a", 0.5)])]),
                   write(tmp_path / "r.jsonl", [rollout("a", evil, evil)]))
    page = render(build_data([run]))
    block = re.search(r'<script type="application/json" id="rt-data">(.*?)</script>', page, re.S).group(1)
    assert "<" not in block and json.loads(block)["S"].count(evil) == 1
    assert not re.search(r'(src|href)=["\']?https?:', page), "the page must fetch nothing"
