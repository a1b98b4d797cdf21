"""The inspector's data: groups and ranks, per-leaf counts, the not-applicable shapes, --compare's
flipped rollouts, and errors that name the file and line. What explains a score (contributions,
variance shares, the share of a change) is tested on records the real reward wrote, in
test_inspector_attribution.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from reward.errors import InputError
from training.inspector.attribution import compare_groups
from training.inspector.data import leaf_counts, load_run, not_applicable
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


@pytest.mark.parametrize("raw,expected", [
    (None, []), (["a", "b"], [("a", ""), ("b", "")]), ([{"leaf_id": "a", "reason": "no child"}], [("a", "no child")]),
    ({"a": "trigger absent", "b": True}, [("a", "trigger absent"), ("b", "")]), ("junk", [])])
def test_not_applicable_shapes(raw, expected) -> None:
    assert not_applicable({} if raw is None else {"not_applicable": raw}) == expected


def test_compare_counts_the_rollouts_whose_verdict_flipped(tmp_path: Path) -> None:
    rolls = write(tmp_path / "r.jsonl", [rollout("p1", "P"), rollout("p2", "P")])
    a = load_run(write(tmp_path / "a.jsonl", [rec("p1", 1.0, [leaf("a", 1.0), leaf("b", 1.0)]),
                                              rec("p2", 1.0, [leaf("a", 1.0), leaf("b", 1.0)])]), rolls, "A")
    b = load_run(write(tmp_path / "b.jsonl", [rec("p1", 0.5, [leaf("a", 0.0), leaf("b", 1.0), leaf("c", 1.0)]),
                                              rec("p2", 0.5, [leaf("a", 0.0), leaf("b", 0.0), leaf("c", 1.0)])]),
                 rolls, "B")
    cmp = compare_groups(a, b)
    (g,) = cmp["prompts"]
    assert g["a"] == 1.0 and g["b"] == 0.5 and cmp["delta"] == -0.5
    flips = {x["leaf_id"]: (x["up"], x["down"]) for x in g["leaves"]}
    assert flips["a"] == (0, 2) and flips["b"] == (0, 1) and "c" not in flips  # c: routed in B only
    # two runs with no id in common: the net change in the count of rollouts meeting the leaf
    other = write(tmp_path / "r2.jsonl", [rollout("q1", "P"), rollout("q2", "P")])
    c = load_run(write(tmp_path / "c.jsonl", [rec("q1", 0.5, [leaf("a", 0.0)]), rec("q2", 1.0, [leaf("a", 1.0)])]),
                 other, "C")
    (g2,) = compare_groups(a, c)["prompts"]
    assert {x["leaf_id"]: (x["up"], x["down"]) for x in g2["leaves"]}["a"] == (0, 1)


def test_errors_name_the_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "s.jsonl"
    bad.write_text('{"id": "a", "score": 0.5, "group": "g"}\n{"score": 0.2}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"s\.jsonl: record line 2: field 'id'"):
        load_run(bad)
    bad.write_text('{"id": "a", "score": "high", "group": "g"}\n', encoding="utf-8")
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
