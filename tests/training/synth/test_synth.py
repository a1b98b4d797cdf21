"""The synthesis pipeline's logic with a scripted generator (tests/_support/rt_synth.py): the bounded
actor-critic loop, recorded failures, resume without regenerating, seeded inversion at its rate,
rows the HealthBench loader accepts, the datasheet, and the CLI's errors."""

from __future__ import annotations

import json

import pytest
from rt_synth import ScriptedGenerator, easy_rows, happy, role

from reward.healthbench.schema import HealthBenchRow, load_healthbench
from reward.jsonl import JsonlLog, write_jsonl
from training.synth.conversations import build_items, synth_conversations
from training.synth.datasheet import build_datasheet
from training.synth.llm import SynthLLM, parse_json_object
from training.synth.rubrics import invert_decisions, synth_rubrics
from training.synth.store import CallCache, RunFiles


def _roles(script, cache=None):
    gen = ScriptedGenerator(script)
    return gen, SynthLLM(gen, model_id="fake", cache=cache), SynthLLM(gen, model_id="fake", cache=cache)


def _easy():
    return [HealthBenchRow.model_validate(r) for r in easy_rows()]


def _items(n=4, seed=0):
    return build_items(questions=None, easy=_easy(), themes=["emergency_referrals", "hedging"], n=n, seed=seed)


def test_parse_json_object_finds_fenced_and_embedded_objects():
    assert parse_json_object('sure ```json\n{"a": 1}\n``` done') == {"a": 1}
    assert parse_json_object('noise {bad} then {"b": [1, 2]} tail') == {"b": [1, 2]}
    with pytest.raises(ValueError):
        parse_json_object("no json here")


def test_conversations_happy_path_then_resume_generates_nothing(tmp_path):
    out = tmp_path / "conv.jsonl"
    files = RunFiles(out)
    cache = CallCache(files.calls_path)
    _gen, actor, critic = _roles(happy, cache)
    counts = synth_conversations(_items(), actor=actor, critic=critic, files=files)
    files.close()
    cache.close()
    assert counts == {"skipped": 0, "kept": 4, "failed": 0}
    kept = JsonlLog(out).load()
    for c in kept:
        assert c["messages"][-1]["role"] == "user" and c["iterations"] == 1
        assert sum(m["role"] == "user" for m in c["messages"]) == c["turns"] <= 5
    # a rerun: every item finished, nothing asked
    files2 = RunFiles(out)
    gen2, actor2, critic2 = _roles(happy, CallCache(files2.calls_path))
    assert synth_conversations(_items(), actor=actor2, critic=critic2, files=files2)["skipped"] == 4
    assert gen2.requests == []


def test_killed_mid_loop_rerun_reuses_the_call_cache(tmp_path):
    out = tmp_path / "conv.jsonl"
    files = RunFiles(out)
    cache = CallCache(files.calls_path)
    _gen, actor, critic = _roles(happy, cache)
    synth_conversations(_items(2), actor=actor, critic=critic, files=files)
    files.close()
    cache.close()
    n_calls = len(JsonlLog(files.calls_path).load())
    # the outputs are lost, the cache is not: a rerun asks the generator nothing
    out.unlink()
    files2 = RunFiles(out)
    cache2 = CallCache(files2.calls_path)
    gen2, actor2, critic2 = _roles(happy, cache2)
    assert synth_conversations(_items(2), actor=actor2, critic=critic2, files=files2)["kept"] == 2
    assert gen2.requests == [] and len(cache2) == n_calls


def test_critic_loop_stops_at_three_iterations_and_records_the_failure(tmp_path):
    def script(messages):
        if role(messages) == "critic":
            return json.dumps({"pass": False, "issues": ["the last user message is cut off"]})
        return happy(messages)

    files = RunFiles(tmp_path / "conv.jsonl")
    gen, actor, critic = _roles(script)
    counts = synth_conversations(_items(3), actor=actor, critic=critic, files=files)
    files.close()
    assert counts["kept"] == 0 and counts["failed"] == 3
    assert sum(role(m) == "conversation" for m in gen.requests) == 3 * 3  # 3 rounds per item, no more
    fails = JsonlLog(files.failures_path).load()
    assert len(fails) == 3 and all(f["final"] and f["iterations"] == 3 for f in fails)
    assert all(len(f["feedback"]) == 3 and "cut off" in f["feedback"][-1][0] for f in fails)
    assert not (tmp_path / "conv.jsonl").exists() or JsonlLog(tmp_path / "conv.jsonl").load() == []


def test_revision_sees_the_critics_feedback_and_is_kept():
    from training.synth.critics import Critic, critic_messages, refine

    def script(messages):
        if role(messages) == "critic":  # passes only a draft written after its feedback
            ok = "revised" in messages[1]["content"]
            return json.dumps({"pass": ok, "issues": [] if ok else ["name the patient's age"]})
        return json.dumps({"rev": "name the patient's age" in messages[1]["content"]})

    gen = ScriptedGenerator(script)
    check = Critic("c", lambda ctx, d: critic_messages("r", "t", "revised" if d["rev"] else "first"))
    out = refine({"a": 0}, actor=SynthLLM(gen, model_id="f"), critic=SynthLLM(gen, model_id="f"),
                 draft_prompt=lambda ctx, prev, fb: [{"role": "system", "content": "You write realistic conversations"},
                                                     {"role": "user", "content": "\n".join(fb)}],
                 parse_draft=lambda obj, ctx: {"rev": bool(obj["rev"])}, critics=[check])
    assert out["a"].accepted and out["a"].iterations == 2 and out["a"].draft == {"rev": True}
    assert out["a"].feedback == [["c: name the patient's age"], []]


def test_garbage_actor_output_is_a_recorded_failure(tmp_path):
    files = RunFiles(tmp_path / "conv.jsonl")
    gen, actor, critic = _roles(lambda m: "lorem ipsum" if role(m) == "conversation" else happy(m))
    counts = synth_conversations(_items(2), actor=actor, critic=critic, files=files)
    files.close()
    assert counts == {"skipped": 0, "kept": 0, "failed": 2}
    fails = JsonlLog(files.failures_path).load()
    assert all("unusable" in f["feedback"][0][0] for f in fails)
    # bounded: 3 rounds x 2 JSON attempts per item
    assert sum(role(m) == "conversation" for m in gen.requests) == 2 * 3 * 2


def test_question_seeds_are_planned_first(tmp_path):
    from training.synth.conversations import Seed

    items = build_items(questions=[Seed(question="Is a rash after amoxicillin an allergy?", answer="Often not.")],
                        easy=None, themes=["context_seeking"], n=2, seed=1)
    files = RunFiles(tmp_path / "conv.jsonl")
    gen, actor, critic = _roles(happy)
    synth_conversations(items, actor=actor, critic=critic, files=files)
    files.close()
    kept = JsonlLog(tmp_path / "conv.jsonl").load()
    assert len(kept) == 2 and all(c["turns"] == 2 and c["plan"]["structure"] for c in kept)
    assert "amoxicillin" in next(m for m in gen.requests if role(m) == "plan")[1]["content"]


def test_inversion_decisions_hit_the_rate_over_1000_items():
    flags = [f for k in range(200) for f in invert_decisions(f"c{k}", 5, [3, 5, 2, 8, 1], rate=0.1, seed=7)]
    assert len(flags) == 1000
    rate = sum(flags) / 1000
    assert abs(rate - 0.1) < 0.03  # 3 standard errors (sqrt(0.09 / 1000) = 0.0095)
    assert invert_decisions("c0", 3, [-4, -2, -1], rate=1.0, seed=7) == [False] * 3  # negatives never
    assert flags == [f for k in range(200) for f in invert_decisions(f"c{k}", 5, [3, 5, 2, 8, 1], rate=0.1, seed=7)]


def _conversations(n):
    return [{"id": f"c{i}", "theme": ["emergency_referrals", "hedging"][i % 2], "persona": "introvert-logical",
             "turns": 1, "source": "easy", "messages": [{"role": "user", "content": f"Question {i} about a cough."}],
             "iterations": 1, "plan": None} for i in range(n)]


def test_rubric_rows_load_invert_at_rate_and_fill_the_datasheet(tmp_path):
    out = tmp_path / "rubrics.jsonl"
    files = RunFiles(out)
    gen, actor, critic = _roles(happy)
    convs = _conversations(40)  # 40 x 5 axes x 5 positive items = 1000
    counts = synth_rubrics(convs, _easy(), actor=actor, critic=critic, files=files, max_items=5, seed=3)
    files.close()
    assert counts == {"skipped": 0, "kept": 40, "failed": 0}
    rows = load_healthbench(out)  # the HealthBench loader accepts them
    raw = JsonlLog(out).load()
    assert all({t.split(":")[0] for t in r.example_tags} == {"theme"} for r in rows)
    assert all(sum(t.startswith("axis:") for t in it.tags) == 1 for r in rows for it in r.rubrics)
    sheet = build_datasheet(convs, [], raw, [])
    assert sheet["rubrics"]["items"] == 1000
    assert abs(sheet["rubrics"]["inversion_rate"] - 0.1) < 0.03
    for r in raw:
        for inv in r["synth"]["inverted"]:
            item = r["rubrics"][inv["index"]]
            assert inv["done"] and item["points"] == -inv["original_points"] < 0
            assert item["criterion"].startswith("The reply fails to do this:")
    # anchors: each rubric prompt shows three same-theme rows' items
    prompt = next(m for m in gen.requests if role(m) == "rubric")[1]["content"]
    assert prompt.count("Conversation:\n") == 4  # 3 anchors + the conversation itself


def test_rubric_axes_that_fail_are_recorded_and_rows_without_axes_are_not_kept(tmp_path):
    def script(messages):
        if role(messages) == "critic" and "for accuracy of" not in messages[1]["content"]:
            return json.dumps({"pass": False, "issues": ["item 2 tests two ideas"]})
        return happy(messages)

    out = tmp_path / "rubrics.jsonl"
    files = RunFiles(out)
    _gen, actor, critic = _roles(script)
    synth_rubrics(_conversations(2), _easy(), actor=actor, critic=critic, files=files, invert_rate=0.0)
    files.close()
    rows = JsonlLog(out).load()
    assert {t for r in rows for it in r["rubrics"] for t in it["tags"] if t.startswith("axis:")} == {"axis:accuracy"}
    fails = JsonlLog(files.failures_path).load()
    assert len(fails) == 2 * 4 and all(f["stage"] == "rubric_axis" and f["iterations"] == 3 for f in fails)

    files2 = RunFiles(tmp_path / "none.jsonl")
    _, actor, critic = _roles(lambda m: json.dumps({"pass": False, "issues": ["no"]}) if role(m) == "critic" else happy(m))
    counts = synth_rubrics(_conversations(1), _easy(), actor=actor, critic=critic, files=files2)
    files2.close()
    assert counts["kept"] == 0 and any(f["final"] for f in JsonlLog(files2.failures_path).load())


def test_cli_names_the_file_and_line_of_a_bad_seed(tmp_path):
    from typer.testing import CliRunner

    from rubricstree import app

    bad = tmp_path / "q.jsonl"
    write_jsonl(bad, [{"question": "ok?"}, {"answer": "no question"}])
    res = CliRunner().invoke(app, ["synth", "conversations", "--questions", str(bad), "--out",
                                   str(tmp_path / "c"), "--generate-url", "http://127.0.0.1:9"])
    assert res.exit_code == 2 and "q.jsonl" in res.output and "line 2" in res.output and "question" in res.output


def test_structured_outputs_carry_each_role_s_schema_only_when_asked(tmp_path):
    from training.synth.conversations import CONVERSATION_SCHEMA
    from training.synth.critics import VERDICT_SCHEMA

    gen = ScriptedGenerator(happy)
    on = SynthLLM(gen, model_id="f", structured=True)
    synth_conversations(_items(1), actor=on, critic=on, files=RunFiles(tmp_path / "a.jsonl"))
    kinds = {(role(m), json.dumps(s, sort_keys=True)) for m, s in zip(gen.requests, gen.structured, strict=True)}
    assert ("conversation", json.dumps({"json": CONVERSATION_SCHEMA}, sort_keys=True)) in kinds
    assert ("critic", json.dumps({"json": VERDICT_SCHEMA}, sort_keys=True)) in kinds
    gen2 = ScriptedGenerator(happy)
    off = SynthLLM(gen2, model_id="f")
    synth_conversations(_items(1), actor=off, critic=off, files=RunFiles(tmp_path / "b.jsonl"))
    assert set(gen2.structured) == {None}


def test_rerun_after_a_kill_records_each_axis_failure_once(tmp_path):
    def script(messages):
        if role(messages) == "critic" and "for accuracy of" not in messages[1]["content"]:
            return json.dumps({"pass": False, "issues": ["vague"]})
        return happy(messages)

    out = tmp_path / "rubrics.jsonl"
    files = RunFiles(out)
    cache = CallCache(files.calls_path)
    _, actor, critic = _roles(script, cache)
    synth_rubrics(_conversations(1), _easy(), actor=actor, critic=critic, files=files, invert_rate=0.0)
    files.close()
    cache.close()
    out.unlink()  # killed before the row was written: the failures and the call cache survive
    files2 = RunFiles(out)
    gen2, actor2, critic2 = _roles(script, CallCache(files2.calls_path))
    assert synth_rubrics(_conversations(1), _easy(), actor=actor2, critic=critic2, files=files2,
                         invert_rate=0.0)["kept"] == 1
    files2.close()
    assert gen2.requests == []
    fails = JsonlLog(files2.failures_path).load()
    assert sorted(f["axis"] for f in fails) == sorted(["completeness", "context_awareness", "communication_quality",
                                                       "instruction_following"])
