"""Benchmark baselines: the peers' one-request-per-rollout verdict list (mapping answers back to
items) and the routing-cost run with non-random routing answers (the walk must really expand)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from rt_paths import REPO_ROOT

from benchmarks.rubric_batch import answer_regex, group_rollouts, rollout_item, verdicts_from
from reward.judge import JudgeItem, Message

REPO = REPO_ROOT


def _items() -> list[JudgeItem]:
    conv = (Message(role="user", content="My chest hurts."),)
    return [JudgeItem(conversation=conv, response=r, criterion=c, points=p)
            for r in ("Call 911.", "Rest.") for c, p in (("Advises emergency care.", 10), ("Is calm.", 2.5))]


def test_a_rollouts_criteria_become_one_numbered_request():
    items = _items()
    groups = group_rollouts(items)
    assert groups == [[0, 1], [2, 3]]
    req = rollout_item(items, groups[1])
    assert req.response == "Rest." and req.criterion == "1. [10] Advises emergency care.\n2. [2.5] Is calm."


def test_verdicts_map_back_by_id_and_lost_ones_are_failures():
    v = verdicts_from({"verdicts": [{"id": 2, "met": True}, {"id": 1, "met": False}]}, 2, None)
    assert [x.met for x in v] == [False, True] and all(x.ok for x in v)
    v = verdicts_from({"verdicts": [{"id": 1, "met": True}, {"id": 1, "met": False}, {"id": 7, "met": True}]}, 2, None)
    assert [x.ok for x in v] == [False, False]  # contradictory id 1, missing id 2 (7 is out of range)
    assert "contradictory" in v[0].failure and "no verdict" in v[1].failure
    v = verdicts_from(None, 3, "unparseable JSON")
    assert len(v) == 3 and not any(x.ok for x in v) and "unparseable" in v[0].failure


def test_answer_grammar_has_exactly_one_entry_per_criterion():
    rx = re.compile(answer_regex(3))
    good = '{"verdicts":[{"id":1,"met":true},{"id":2,"met":false},{"id":3,"met":true}]}'
    assert rx.fullmatch(good)
    assert not rx.fullmatch(good.replace(',{"id":3,"met":true}', ""))  # two entries for three criteria
    assert not rx.fullmatch(good.replace('"met":true}]', '"met": true}]'))  # no free whitespace
    assert json.loads(good)


@pytest.mark.slow
def test_routing_cost_with_embedding_answers_expands_the_walk():
    pytest.importorskip("sentence_transformers")
    cmd = [sys.executable, str(REPO / "benchmarks" / "routing_cost.py"), "--oracle", "embedding",
           "--prompts", "3", "--sizes", "1,4", "--json"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout)
    first, last = res["rows"]
    assert res["flat"] and first["routing_requests_per_prompt"] == last["routing_requests_per_prompt"]
    # the walk goes past the first level: more than one sequential round, more calls than the
    # root's children plus the urgency question, and some but not all leaves active
    assert first["rounds_per_prompt_max"] >= 2 and first["expanded_nodes_mean"] >= 1
    from reward.tree import load_tree

    tree = load_tree()
    assert first["routing_requests_per_prompt"] > len(tree[tree.root].children) + 1
    # only the forced set (at most 8 leaves) is switched on without asking: routing selects
    assert 0 < first["active_fraction"] < 0.5


@pytest.mark.slow
def test_judge_inprocess_runs_every_mode_on_a_real_vocabulary_shape():
    """The code path of the GPU variant (a Qwen3 shape with the real 151,936-token vocabulary,
    all four modes), CPU-sized: shared-prefix choice agrees with one forward per item."""
    cmd = [sys.executable, str(REPO / "benchmarks" / "judge_inprocess.py"), "--size", "mini", "--workload",
           "synthetic", "--rollouts", "2", "--criteria", "3", "--modes", "choice,choice_per_item,explain,rubric_batch",
           "--explain-tokens", "16", "--repeat", "1", "--json"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout)
    m = res["modes"]
    assert res["items"] == 6 and res["rollouts"] == 2 and set(m) == {"choice", "choice_per_item", "explain",
                                                                     "rubric_batch"}
    g = res["agreement_choice_vs_per_item"]
    assert g["identical_verdicts"] and g["compared"] == 6 and g["max_abs_p_yes_diff"] < 1e-4
    assert m["choice"]["cached_tokens"] > 0 and m["choice_per_item"]["cached_tokens"] == 0
    assert m["choice"]["prompt_tokens"] == m["choice_per_item"]["prompt_tokens"]
    assert m["rubric_batch"]["forwards_or_requests"] == 2  # one generation per rollout
    assert m["explain"]["completion_tokens"] > m["choice"]["completion_tokens"] == 6
