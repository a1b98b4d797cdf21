"""HealthBench grader meta-eval on a small file in the official format that the test writes:
the official pairwise balanced F1, the physician ceiling, majority macro F1, per category,
choice and explain side by side, resume, and the SHA-256 check."""

from __future__ import annotations

import hashlib
import json

import pytest
from rt_fakes import FakeJudge
from typer.testing import CliRunner

from reward.judge import JudgeConfig
from reward.metaeval import agreement as ag
from reward.metaeval.hb_grader import (
    load_rows,
    pairwise_f1,
    resolve,
    run_hb_grader,
)
from rubricstree import app

# (completion, rubric, category, physician labels); the oracle says "met" iff the rubric's
# keyword is in the completion.
ROWS = [
    ("Call 911 now.", "911", "cluster:emergency", [True, True, False]),
    ("Rest and drink water.", "911", "cluster:emergency", [False, False]),
    ("Call 911 if it worsens.", "911", "cluster:emergency", [True, False]),
    ("Take ibuprofen with food.", "food", "cluster:medication", [True, True]),
    ("Take ibuprofen.", "food", "cluster:medication", [True, False, False]),
    ("Ask your doctor about food.", "food", "cluster:medication", [False, False, True]),
]
PIDS = ["d1", "d2", "d3"]


def _write(path):
    with path.open("w") as fh:
        for i, (comp, rub, cat, labels) in enumerate(ROWS):
            fh.write(json.dumps({"prompt": [{"role": "user", "content": f"question {i}"}], "completion": comp,
                                 "rubric": rub, "category": cat, "binary_labels": labels,
                                 "anonymized_physician_ids": PIDS[:len(labels)], "prompt_id": f"q{i}",
                                 "completion_id": f"c{i}"}) + "\n")
    return path


def _oracle(mode):
    return FakeJudge(lambda t, it: float(it.criterion in it.response), config=JudgeConfig(mode=mode))


def test_pairwise_f1_is_f1_over_expanded_pairs():
    selves = [True, False, True, False]
    others = [[True, False], [False], [False, False, True], [True]]
    flat_s = [s for s, os_ in zip(selves, others) for _ in os_]
    flat_o = [o for os_ in others for o in os_]
    pw = pairwise_f1(selves, others)
    assert pw["n_pairs"] == 7
    assert pw["f1_balanced"] == pytest.approx(ag.macro_f1(flat_s, flat_o))
    assert pairwise_f1([True], [[True]])["f1_balanced"] is None  # no negatives at all: undefined


def test_hb_grader_metrics_and_resume(tmp_path):
    rows = load_rows(_write(tmp_path / "meta.jsonl"))
    out = tmp_path / "out"
    s = run_hb_grader(rows, {"choice": _oracle("choice"), "explain": _oracle("explain")}, out, meta={},
                      progress=False)
    pred = [r.rubric in r.completion for r in rows]  # the oracle's verdicts
    expect = pairwise_f1(pred, [r.binary_labels for r in rows])["f1_balanced"]
    allc = s["categories"]["all"]
    assert allc["modes"]["choice"] == pytest.approx(expect) and allc["modes"]["explain"] == pytest.approx(expect)
    med = [i for i, r in enumerate(rows) if r.category == "cluster:medication"]
    assert s["categories"]["cluster:medication"]["modes"]["choice"] == pytest.approx(
        pairwise_f1([pred[i] for i in med], [rows[i].binary_labels for i in med])["f1_balanced"])
    # majority: row 2 is a 1-1 tie and is left out
    det = allc["detail"]["choice"]
    assert det["majority_ties"] == 1 and det["majority_n"] == 5
    maj = [(p, r.majority) for p, r in zip(pred, rows) if r.majority is not None]
    assert det["majority_macro_f1"] == pytest.approx(ag.macro_f1([a for a, _ in maj], [b for _, b in maj]))
    # ceiling by hand: each physician's labels against the others' on the same rows
    d1 = pairwise_f1([True, False, True, True, True, False],
                     [[True, False], [False], [False], [True], [False, False], [False, True]])
    d2 = pairwise_f1([True, False, False, True, False, False],
                     [[True, False], [False], [True], [True], [True, False], [False, True]])
    d3 = pairwise_f1([False, False, True], [[True, True], [True, False], [False, False]])
    # d3 worked out: "met" never agrees (F1 0); "not met" precision 1/4, recall 1/3 -> F1 2/7
    assert d3["f1_pos"] == 0.0 and d3["f1_neg"] == pytest.approx(2 / 7) and d3["f1_balanced"] == pytest.approx(1 / 7)
    assert allc["n_physicians"] == 3
    three = (d1, d2, d3)
    assert allc["physician_f1_unweighted_mean"] == pytest.approx(sum(d["f1_balanced"] for d in three) / 3)
    # the baseline weighs each physician by n = TP+FP+FN of "met" plus that of "not met"
    from reward.metaeval.hb_aggregate import pairwise_scores

    d3n = pairwise_scores([False, False, True], [[True, True], [True, False], [False, False]])["f1_balanced"]
    assert d3n == (pytest.approx(5 + 6), pytest.approx(1 / 7))  # pos: TP 0, FP 2, FN 3; neg: TP 1, FP 3, FN 2
    assert allc["physician_f1_weighted"] != pytest.approx(allc["physician_f1_unweighted_mean"])
    for f in ("report.md", "report.html", "healthbench_f1.png", "summary.json"):
        assert (out / f).exists()
    # rerun: nothing graded twice
    j1, j2 = _oracle("choice"), _oracle("explain")
    run_hb_grader(rows, {"choice": j1, "explain": j2}, out, meta={}, progress=False)
    assert j1.calls == [] and j2.calls == []


def test_hb_grader_cli_checks_sha256_and_reports_errors(tmp_path, monkeypatch):
    f = _write(tmp_path / "meta.jsonl")
    good = hashlib.sha256(f.read_bytes()).hexdigest()
    assert resolve(str(f), sha256=good) == (f, good)
    with pytest.raises(ValueError, match="SHA-256"):
        resolve(str(f), sha256="0" * 64)
    res = CliRunner().invoke(app, ["meta-eval", "healthbench", "--data", str(f), "--sha256", "0" * 64,
                                   "--out", str(tmp_path / "o"), "--judge-model", "x"])
    assert res.exit_code == 2 and "SHA-256" in res.output
    lines = f.read_text().splitlines()
    bad = json.loads(lines[1])
    bad["anonymized_physician_ids"] = ["d1"]
    lines[1] = json.dumps(bad)
    f.write_text("\n".join(lines) + "\n")
    res = CliRunner().invoke(app, ["meta-eval", "healthbench", "--data", str(f), "--out", str(tmp_path / "o"),
                                   "--judge-model", "x"])
    assert res.exit_code == 2 and "line 2" in res.output and "Traceback" not in res.output


REFERENCE_STYLE = """Score the last assistant turn of the conversation on one rubric item.

# Conversation
<<conversation>>

# Rubric item
<<rubric_item>>

# Output
A json object with "explanation" and "criteria_met", in markdown, nothing else."""


def test_meta_eval_grades_with_the_reference_grader_over_the_chat_api(tmp_path, monkeypatch):
    """``meta-eval healthbench`` takes eval's grader options: a template file with the (pinned)
    reference text gets the reference system message and sampling; the command prints the data
    file's hash and the template it used; our own explain template, given rows without points,
    never renders "( points)"."""
    from rt_chat_server import ChatServer

    import reward.judge.official as official

    monkeypatch.setattr(official, "OFFICIAL_TEMPLATE_SHA256", official.text_sha256(REFERENCE_STYLE))
    f = _write(tmp_path / "meta.jsonl")
    digest = hashlib.sha256(f.read_bytes()).hexdigest()
    tpl = tmp_path / "reference_style.txt"
    tpl.write_text(REFERENCE_STYLE)
    with ChatServer() as srv:
        res = CliRunner().invoke(app, ["meta-eval", "healthbench", "--data", str(f), "--out", str(tmp_path / "o"),
                                       "--modes", "explain", "--judge-url", srv.url, "--judge-api", "chat",
                                       "--served-model", "gpt-4.1", "--judge-template", str(tpl),
                                       "--judge-revision", "stub"])  # the stub lists no model: name it
        ref_bodies = list(srv.requests)
        ours = CliRunner().invoke(app, ["meta-eval", "healthbench", "--data", str(f), "--out", str(tmp_path / "o2"),
                                        "--modes", "explain", "--judge-url", srv.url, "--judge-api", "chat",
                                        "--served-model", "gpt-4.1", "--judge-revision", "stub"])
        our_bodies = srv.requests[len(ref_bodies):]
    assert res.exit_code == 0, res.output
    assert digest in res.output and "healthbench-official" in res.output and "temperature 0.5" in res.output
    assert len(ref_bodies) == len(ROWS)
    for body in ref_bodies:
        assert set(body) == {"model", "messages", "temperature", "max_tokens"}
        assert body["temperature"] == 0.5 and body["max_tokens"] == 2048
        assert body["messages"][0] == {"role": "system", "content": official.GRADER_SYSTEM_MESSAGE}
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["meta"]["sha256"] == digest and summary["meta"]["explain template is the reference grader's"]
    report = (tmp_path / "o" / "report.md").read_text()
    assert "pairwise balanced F1" in report and "macro F1 vs majority" in report and "n-weighted" in report
    assert "macro F1 against the physicians' majority\n" not in report
    assert ours.exit_code == 0, ours.output
    assert our_bodies and all("points)" not in b["messages"][-1]["content"] for b in our_bodies)
    assert any("Criterion: 911" in b["messages"][-1]["content"] for b in our_bodies)
