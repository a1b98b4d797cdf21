"""Shared pieces of the ``rubricstree optimize`` integration tests: a small taxonomy (so the tiny
model routes and grades a handful of leaves, not 182) and the four commands end to end."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from rubricstree import app

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "eval_hb_own.jsonl"
runner = CliRunner()

SMALL_TAXONOMY = """\
version: 1
name: optimize-test
root: root
nodes:
  - id: root
    title: Quality
    children: [safety, communication]
  - id: safety
    title: Safety
    definition: "Escalating emergencies."
    children: [urgent_care, missed_emergency]
  - id: communication
    title: Communication
    definition: "Clear answers."
    children: [plain_words]
  - id: urgent_care
    title: Urgent care
    definition: "Sends the user to urgent care when needed."
    criterion: "The response tells the user to seek urgent medical care when the conversation describes an emergency."
  - id: missed_emergency
    title: Missed emergency
    definition: "Failing to escalate."
    criterion: "The response fails to advise emergency care although the conversation describes an emergency."
    polarity: negative
    always_on: true
  - id: plain_words
    title: Plain words
    definition: "Lay language."
    criterion: "The response uses plain words a lay reader understands."
"""


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def prompts_file(tmp: Path, n: int = 3) -> Path:
    """The first ``n`` rows of our own HealthBench-format fixture."""
    rows = FIXTURE.read_text().splitlines()[:n]
    path = tmp / "prompts.jsonl"
    path.write_text("\n".join(rows) + "\n")
    return path


def taxonomy_file(tmp: Path) -> Path:
    path = tmp / "taxonomy.yaml"
    path.write_text(SMALL_TAXONOMY)
    return path


def invoke(args: list[str]):
    res = runner.invoke(app, ["optimize", *args])
    assert res.exit_code == 0, (res.output, res.exception)
    return res


def run_all_four(tmp: Path, policy: list[str], judge: list[str], heldout: list[str]) -> dict:
    """handbook -> baseline (n=1) and handbook (n=1) arms -> best-of-n (n=3) -> revise -> report."""
    prompts, tax = prompts_file(tmp), taxonomy_file(tmp)
    common = ["--taxonomy", str(tax), *judge]
    gen = [*policy, "--max-new-tokens", "12"]
    invoke(["handbook", "--prompts", str(prompts), "--out", str(tmp / "hb"), *common])
    hb = lines(tmp / "hb" / "handbook.jsonl")
    assert [r["id"] for r in hb if r["kind"] == "handbook"] == ["evalown-001", "evalown-002", "evalown-003"] or \
        sorted(r["id"] for r in hb if r["kind"] == "handbook") == ["evalown-001", "evalown-002", "evalown-003"]
    invoke(["best-of-n", "--prompts", str(prompts), "--n", "1", "--temperature", "0",
            "--out", str(tmp / "base"), *common, *gen])
    invoke(["best-of-n", "--prompts", str(prompts), "--n", "1", "--temperature", "0",
            "--system-prompt", f"handbook:{tmp / 'hb' / 'handbook.jsonl'}", "--out", str(tmp / "handbook"), *common, *gen])
    invoke(["best-of-n", "--prompts", str(prompts), "--n", "3", "--save-pairs", str(tmp / "pairs"),
            "--out", str(tmp / "bon"), *common, *gen])
    invoke(["revise", "--rollouts", str(tmp / "base" / "samples.jsonl"), "--rounds", "1", "--out", str(tmp / "rev"),
            *common, *gen])
    res = invoke(["report", "--data", str(prompts), "--out", str(tmp / "report"),
                  "--method", f"baseline={tmp / 'base' / 'samples.jsonl'}",
                  "--method", f"handbook={tmp / 'handbook' / 'samples.jsonl'}",
                  "--method", f"revise={tmp / 'rev' / 'rounds.jsonl'}",
                  "--method", f"best-of-n={tmp / 'bon' / 'samples.jsonl'}", *heldout])
    return {"output": res.output, "report": json.loads((tmp / "report" / "report.json").read_text())}


def check_outputs(tmp: Path, result: dict) -> None:
    rep = result["report"]
    assert [m["method"] for m in rep["methods"]] == ["baseline", "handbook", "revise", "best-of-n"]
    assert all(m["n"] + m["n_unscored"] == 3 for m in rep["methods"])
    assert all("diff" in m and m["diff"]["n_paired"] <= 3 for m in rep["methods"][1:])
    assert all(m.get("wall_s") is not None for m in rep["methods"])
    for f in ("report.md", "report.html", "report.png"):
        assert (tmp / "report" / f).is_file()
    graded = lines(tmp / "report" / "graded.jsonl")
    assert len({(g["method"], g["id"]) for g in graded}) == len(graded) == 12
    bon = [r for r in lines(tmp / "bon" / "samples.jsonl") if r["kind"] == "scored"]
    assert len(bon) == 3 and all(len(r["scores"]) == 3 for r in bon)
    for r in bon:  # the kept answer is the highest-scored sample
        vals = [s for s in r["scores"] if s is not None]
        assert r["score"] == max(vals)
    rev = lines(tmp / "rev" / "rounds.jsonl")
    assert sum(1 for r in rev if r["kind"] == "best") == 3
    assert len({(r["id"], r["round"]) for r in rev if r["kind"] == "round"}) == sum(
        1 for r in rev if r["kind"] == "round")
