"""The tree as a coach, with a scripted fake policy and the fake judge: handbook rendering and the
``handbook:FILE`` system prompt, revise keeping the best round, best-of-n picking the best sample
and writing preference pairs, resuming after a crash, and the held-out report's judge check."""

from __future__ import annotations

import asyncio
import json

import pytest
from rt_fakes import FakeJudge

from reward.errors import InputError
from reward.judge.templates import RELEVANCE, URGENCY
from reward.router import StaticRouter
from reward.stages.rubric_reward import Rollout, RubricReward
from reward.tree import Node, RubricTree
from training.generation import GenOutput
from training.optimize.best_of_n import (
    pick_best,
    preference_pairs,
    run_best_of_n,
    save_pairs,
)
from training.optimize.handbook import build_handbooks, estimate_tokens, render_handbook
from training.optimize.report import run_report
from training.optimize.revise import REVISE_INSTRUCTION, best_round, revise_rollouts
from training.optimize.store import OptimizeLog, PromptRow
from training.system_prompt import apply_system_prompt, conversation_key, system_prompt_id

KEYWORDS = {
    "Advises calling emergency services now.": "emergency services",
    "Advises calling an ambulance rather than driving.": "ambulance",
    "Suggests waiting at home to see if the pain settles.": "wait at home",
    "Acknowledges the user's worry.": "understand",
}


def _tree() -> RubricTree:
    crit = list(KEYWORDS)
    return RubricTree([
        Node(id="root", title="root", children=("communication", "safety")),  # safety second in the file
        Node(id="safety", title="Safety", children=("call_ems", "ambulance", "home_care")),
        Node(id="communication", title="Communication", children=("empathy",)),
        Node(id="call_ems", title="Call emergency services", criterion=crit[0]),
        Node(id="ambulance", title="Ambulance", criterion=crit[1]),
        Node(id="home_care", title="Home care instead of emergency", criterion=crit[2], polarity="negative"),
        Node(id="empathy", title="Acknowledges worry", criterion=crit[3]),
    ], root="root", name="chest")


def keyword_judge() -> FakeJudge:
    def decide(template, item):
        if template.name in (RELEVANCE.name, URGENCY.name):
            return 1.0
        key = KEYWORDS.get(item.criterion, item.criterion.lower())
        return 1.0 if key in item.response.lower() else 0.0
    return FakeJudge(decide)


def _reward(judge=None) -> RubricReward:
    tree = _tree()
    judge = judge or keyword_judge()
    # the penalty form's arithmetic (a reply failing every check scores 0); the loop is what is tested
    return RubricReward(tree, StaticRouter(tree), judge, scoring_variant="penalty+active")


PROMPT = [{"role": "user", "content": "Crushing chest pain for 20 minutes, sweating. What do I do?"}]
POOR = "Wait at home and see."                                    # fails everything: 0 of 4
OK = "I understand. Call emergency services now."                 # misses the ambulance check
BEST = "I understand. Call emergency services now and ask for an ambulance."
WORSE = "Call emergency services, or wait at home."                # a regression


class ScriptedPolicy:
    """A fake policy: ``script(request)`` gives the sample texts; every request is recorded."""

    backend = "fake"

    def __init__(self, script):
        self.script, self.requests = script, []

    def generate(self, requests, on_done, desc="generate"):
        for r in requests:
            self.requests.append(r)
            texts = tuple(self.script(r))
            on_done(r.key, GenOutput(texts[0], "stop", 5, samples=texts))


# ---------------------------------------------------------------------- handbook
def test_handbook_puts_safety_first_groups_by_branch_and_keeps_the_budget(tmp_path):
    reward = _reward()
    rows = [PromptRow(id="p1", prompt=PROMPT)]
    log = OptimizeLog(tmp_path / "hb.jsonl", {"t": 1})
    assert build_handbooks(reward, rows, log, max_tokens=400) == 1
    rec = log.records("handbook")[0]
    text = rec["handbook"]
    assert text.index("Safety:") < text.index("Communication:")  # safety first though second in the file
    assert "- Avoid: Suggests waiting at home" in text             # a negative leaf reads as a thing to avoid
    assert rec["conversation_key"] == conversation_key(PROMPT) and rec["cut"] == 0
    assert estimate_tokens(text) <= 400

    # a tight budget cuts leaves (counted), and never exceeds the budget
    routing = next(iter(asyncio.run(reward.route([Rollout(id="a", prompt=PROMPT, completion="")])).values()))
    small, info = render_handbook(reward.tree, routing, max_tokens=60)
    assert info["cut"] > 0 and 0 < estimate_tokens(small) <= 60
    words, winfo = render_handbook(reward.tree, routing, max_tokens=60, count_tokens=lambda t: len(t))
    assert words == "" and winfo["cut"] == 4  # by characters not even the header fits

    # resume: a second run routes nothing again and appends nothing
    assert build_handbooks(reward, rows, OptimizeLog(tmp_path / "hb.jsonl", {"t": 1})) == 0


def test_handbook_system_prompt_mode(tmp_path):
    path = tmp_path / "hb.jsonl"
    path.write_text(json.dumps({"kind": "handbook", "id": "p1", "conversation_key": conversation_key(PROMPT),
                                "handbook": "CHECKLIST"}) + "\n")
    msgs = apply_system_prompt(PROMPT, f"handbook:{path}")
    assert msgs[0] == {"role": "system", "content": "CHECKLIST"} and msgs[1:] == PROMPT
    assert system_prompt_id(f"handbook:{path}")["mode"] == "handbook:hb.jsonl"
    with pytest.raises(InputError, match="no handbook entry for this conversation") as err:
        apply_system_prompt([{"role": "user", "content": "another"}], f"handbook:{path}")
    assert "hb.jsonl" in str(err.value) and "conversation_key" in str(err.value)
    # the training data builders take the same mode: the handbook goes to the policy, not the judge
    from reward.healthbench.schema import HealthBenchRow
    from training.data import healthbench_record

    row = HealthBenchRow.model_validate({"prompt_id": "p1", "prompt": PROMPT,
                                         "rubrics": [{"criterion": "c", "points": 1, "tags": []}]})
    rec = healthbench_record(row, system_prompt=f"handbook:{path}")
    assert rec["prompt"][0]["content"] == "CHECKLIST" and rec["judge_prompt"] == PROMPT
    with pytest.raises(FileNotFoundError):
        apply_system_prompt(PROMPT, f"handbook:{tmp_path / 'missing.jsonl'}")


# ---------------------------------------------------------------------- revise
def _revise_script(request):
    """Round 1 turns POOR into BEST; any later revision regresses (WORSE)."""
    prev = request.messages[-2]["content"]
    return [BEST if prev == POOR else WORSE]


def test_revise_keeps_the_best_round_and_records_every_round(tmp_path):
    rollouts = [Rollout(id="r1", prompt=PROMPT, completion=POOR), Rollout(id="r2", prompt=PROMPT, completion=OK)]
    policy = ScriptedPolicy(_revise_script)
    log = OptimizeLog(tmp_path / "rev.jsonl", {"rounds": 2})
    best = {b["id"]: b for b in revise_rollouts(rollouts, _reward(), policy, log, rounds=2)}

    # r1: 0 -> BEST (1.0) in round 1; nothing left to fix, so no round 2
    assert best["r1"]["best_round"] == 1 and best["r1"]["completion"] == BEST and best["r1"]["score"] == 1.0
    assert set(best["r1"]["scores"]) == {"0", "1"} and best["r1"]["scores"]["0"] == 0.0
    # r2: round 1 regresses (WORSE) and round 2 revises the best so far (OK, again): the original stays
    assert best["r2"]["best_round"] == 0 and best["r2"]["completion"] == OK
    assert best["r2"]["scores"]["1"] < best["r2"]["scores"]["0"]
    assert set(best["r2"]["scores"]) == {"0", "1", "2"}
    # the feedback sent is the failed checks, most important first, in our instruction
    first = next(r for r in policy.requests if r.messages[-2]["content"] == POOR)
    ask = first.messages[-1]["content"]
    assert ask.startswith(REVISE_INSTRUCTION.split("{")[0])
    assert ask.index("Acknowledges") < ask.index("Call emergency")  # weight 1/2 before 1/6
    assert [r.messages[-2]["content"] for r in policy.requests].count(OK) == 2  # rounds 1 and 2 revise OK


def test_best_round_prefers_the_earliest_on_ties_and_ignores_unscored():
    rounds = [{"round": 0, "score": 0.5}, {"round": 1, "score": None}, {"round": 2, "score": 0.5}]
    assert best_round(rounds)["round"] == 0
    assert best_round([{"round": 0, "score": None}]) is None


def test_revise_resumes_after_a_crash_without_redoing_anything(tmp_path, monkeypatch):
    rollouts = [Rollout(id=f"r{i}", prompt=[{"role": "user", "content": f"q{i}"}], completion=POOR) for i in range(3)]
    path = tmp_path / "rev.jsonl"
    policy = ScriptedPolicy(_revise_script)
    monkeypatch.setenv("RUBRICSTREE_EVAL_CRASH_AFTER", "round:4")  # crash inside round 1's scoring
    with pytest.raises(RuntimeError, match="simulated crash"):
        revise_rollouts(rollouts, _reward(), policy, OptimizeLog(path, {"rounds": 2}), rounds=2)
    monkeypatch.delenv("RUBRICSTREE_EVAL_CRASH_AFTER")
    n_before = len(policy.requests)
    judge = keyword_judge()
    revise_rollouts(rollouts, _reward(judge), policy, OptimizeLog(path, {"rounds": 2}), rounds=2)
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    keys = [(r["kind"], r["id"], r.get("round")) for r in recs if r["kind"] in ("round", "revision", "best")]
    assert len(keys) == len(set(keys))                              # each record exactly once
    assert sum(1 for k in keys if k[0] == "round") == 6            # rounds 0 and 1 of 3 rollouts
    assert sum(1 for k in keys if k[0] == "best") == 3
    assert len(policy.requests) == n_before                          # no revision generated twice
    with pytest.raises(InputError, match="other settings"):
        OptimizeLog(path, {"rounds": 3})


# ---------------------------------------------------------------------- best-of-n
def test_best_of_n_picks_the_highest_scored_sample_and_writes_pairs(tmp_path):
    from datasets import load_from_disk

    rows = [PromptRow(id="p1", prompt=PROMPT), PromptRow(id="p2", prompt=[{"role": "user", "content": "other"}])]
    script = {"p1": [OK, POOR, BEST, OK], "p2": [OK, OK, OK, OK]}
    policy = ScriptedPolicy(lambda r: script[r.key])
    log = OptimizeLog(tmp_path / "bon.jsonl", {"n": 4})
    recs = {r["id"]: r for r in run_best_of_n(rows, _reward(), policy, log, n=4)}
    assert recs["p1"]["best_index"] == 2 and recs["p1"]["completion"] == BEST and recs["p1"]["score"] == 1.0
    assert recs["p1"]["worst_index"] == 1 and recs["p1"]["rejected"] == POOR
    assert recs["p2"]["best_index"] == 0  # a tie goes to the first sample
    assert all(r.n == 4 for r in policy.requests)
    pairs = preference_pairs(list(recs.values()))
    assert [p["id"] for p in pairs] == ["p1"]  # p2's samples tie: no pair
    assert save_pairs(list(recs.values()), tmp_path / "pairs") == 1
    ds = load_from_disk(str(tmp_path / "pairs"))
    assert ds[0]["chosen"][0]["content"] == BEST and ds[0]["rejected"][0]["content"] == POOR
    assert ds[0]["score_chosen"] > ds[0]["score_rejected"]
    # resume: nothing sampled or scored again
    again = run_best_of_n(rows, _reward(), policy, OptimizeLog(tmp_path / "bon.jsonl", {"n": 4}), n=4)
    assert len(policy.requests) == 2 and [r["id"] for r in again] == ["p1", "p2"]
    assert sum(1 for line in (tmp_path / "bon.jsonl").read_text().splitlines()
               if json.loads(line)["kind"] == "scored") == 2


def test_pick_best_skips_unscored_samples():
    assert pick_best([None, 0.2, 0.9, 0.9]) == (2, 1)
    assert pick_best([None, None]) == (None, None)


# ---------------------------------------------------------------------- report
def test_report_needs_a_held_out_judge_and_pairs_the_rows(tmp_path):
    rubric = [{"criterion": "Advises calling emergency services now.", "points": 5},
              {"criterion": "Acknowledges the user's worry.", "points": 5}]
    rows = [PromptRow(id=f"p{i}", prompt=[{"role": "user", "content": f"q{i}"}], rubrics=rubric) for i in range(4)]
    base, better = tmp_path / "base.jsonl", tmp_path / "better.jsonl"
    base.write_text("".join(json.dumps({"id": f"p{i}", "completion": POOR}) + "\n" for i in range(4)))
    better.write_text("".join(json.dumps({"kind": "scored", "id": f"p{i}", "completion": BEST}) + "\n"
                              for i in range(4)))
    (tmp_path / "better.jsonl.settings.json").write_text(json.dumps({"judge": "fake"}))
    same = keyword_judge()
    with pytest.raises(InputError, match="same judge"):
        run_report(rows, {"baseline": str(base), "best": str(better)}, same, tmp_path / "rep")
    held_out = keyword_judge()
    held_out.model_id = "fake-heldout"
    res = run_report(rows, {"baseline": str(base), "best": str(better)}, held_out, tmp_path / "rep")
    assert res["methods"][0]["score"] == 0.0 and res["methods"][1]["score"] == 1.0
    assert res["methods"][1]["diff"]["n_paired"] == 4 and res["methods"][1]["diff"]["mean_diff"] == 1.0
    assert not res["warnings"]
    for f in ("report.md", "report.html", "report.json", "report.png"):
        assert (tmp_path / "rep" / f).is_file()
    # allowed with the same judge, but said
    res2 = run_report(rows, {"baseline": str(base), "best": str(better)}, same, tmp_path / "rep2",
                      allow_same_judge=True)
    assert res2["warnings"] and "reward hacking" in (tmp_path / "rep2" / "report.md").read_text()


# ---------------------------------------------------------------------- CLI errors
def test_cli_errors_name_the_file_line_and_field_without_a_traceback(tmp_path):
    from typer.testing import CliRunner

    from rubricstree import app

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "a", "prompt": PROMPT}) + "\n" + json.dumps({"id": "b", "prompt": []}) + "\n")
    run = CliRunner().invoke
    res = run(app, ["optimize", "best-of-n", "--prompts", str(bad), "--n", "1", "--temperature", "0",
                    "--out", str(tmp_path / "o"), "--judge-url", "http://127.0.0.1:9"])
    assert res.exit_code == 2 and "bad.jsonl" in res.output and "line 2" in res.output and "prompt" in res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    res = run(app, ["optimize", "best-of-n", "--prompts", str(bad), "--n", "4", "--temperature", "0",
                    "--out", str(tmp_path / "o"), "--judge-url", "http://127.0.0.1:9"])
    assert res.exit_code == 2 and "--temperature > 0" in res.output
    res = run(app, ["optimize", "report", "--data", str(bad), "--out", str(tmp_path / "r"), "--method", "nofile",
                    "--method", "b=x", "--judge-url", "http://127.0.0.1:9"])
    assert res.exit_code == 2 and "NAME=FILE" in res.output
    res = run(app, ["optimize", "revise", "--rollouts", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "o"),
                    "--judge-url", "http://127.0.0.1:9", "--model", "m"])
    assert res.exit_code == 2 and "missing.jsonl" in res.output
