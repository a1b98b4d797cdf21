"""``rubricstree synth`` end to end on the tiny random Qwen3 (wiring, never quality): against the
vLLM CPU server (``server``) and in process (``slow``). The tiny model writes garbage, so the
critics (or the parser) reject nearly everything: these tests check that every rejection is
recorded, that the files written are valid, that a rerun generates nothing, and that rows made by
``synth rubrics`` (happy path from the scripted generator) train two GSPO steps of stage 3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rt_paths import REPO_ROOT
from rt_synth import ScriptedGenerator, easy_rows, happy
from typer.testing import CliRunner

from reward.jsonl import JsonlLog, write_jsonl

REPO = REPO_ROOT


def _run(*args: str) -> dict:
    from rubricstree import app

    res = CliRunner().invoke(app, ["synth", *args])
    assert res.exit_code == 0, res.output
    last = [ln for ln in res.output.splitlines() if ln.strip()][-1]
    return json.loads(last[last.index('{"'):])  # stderr (a progress bar) may share the line


def _inputs(tmp_path: Path) -> dict[str, Path]:
    paths = {"easy": tmp_path / "easy.jsonl", "q": tmp_path / "q.jsonl", "conv": tmp_path / "conv.jsonl"}
    write_jsonl(paths["easy"], easy_rows())
    write_jsonl(paths["q"], [{"question": "I feel dizzy whenever I stand up. Should I worry?", "answer": "Often not."}])
    # conversations as `synth conversations` writes them (the scripted happy path: the tiny model keeps none)
    write_jsonl(paths["conv"], [{"id": f"c{i}", "theme": "hedging", "persona": "extrovert-emotional", "turns": 1,
                                 "source": "easy", "messages": [{"role": "user", "content": "Is my cough serious?"}],
                                 "iterations": 1, "plan": None} for i in range(2)])
    return paths


def _check_conversations(out: Path, counts: dict) -> None:
    from training.synth.conversations import Conversation

    fails = JsonlLog(out.with_name(out.name + ".failures.jsonl")).load()
    kept = JsonlLog(out).load()
    assert counts["kept"] == len(kept) and counts["failed"] == len(fails) and len(kept) + len(fails) == 3
    assert all(f["final"] and f["stage"] in ("plan", "conversation") for f in fails)
    for c in kept:
        Conversation.model_validate(c)


def _backend(url: str | None, model: Path | None) -> list[str]:
    return ["--generate-url", url, "--generate-concurrency", "4"] if url else ["--model", str(model)]


def _all_commands(tmp_path: Path, backend: list[str]) -> None:
    from reward.healthbench.schema import load_healthbench

    p = _inputs(tmp_path)
    out = tmp_path / "gen_conv" / "conversations.jsonl"
    common = [*backend, "--max-new-tokens", "24"]
    c1 = _run("conversations", "--questions", str(p["q"]), "--count", "1", "--out", str(out.parent), *common)
    c2 = _run("conversations", "--easy", str(p["easy"]), "--count", "2", "--out", str(out.parent), *common)
    _check_conversations(out, {"kept": c1["kept"] + c2["kept"], "failed": c1["failed"] + c2["failed"]})
    again = _run("conversations", "--easy", str(p["easy"]), "--count", "2", "--out", str(out.parent), *common)
    assert again["skipped"] == 2 and again["generator_calls"] == 0

    rows = tmp_path / "rows" / "rubrics.jsonl"
    r = _run("rubrics", "--conversations", str(p["conv"]), "--easy", str(p["easy"]), "--out", str(rows.parent),
             "--dataset-dir", str(tmp_path / "ds"), "--max-items", "3", *common)
    assert r["kept"] + r["failed"] == 2
    if r["kept"]:
        assert len(load_healthbench(rows)) == r["kept"]
    sheet = json.loads((rows.parent / "datasheet.json").read_text())
    assert sheet["rubrics"]["rows"] == r["kept"] and sheet["rubrics"]["rows_failed"] == r["failed"]
    assert (tmp_path / "ds" / "dataset_info.json").exists()

    gen = tmp_path / "generated.jsonl"
    e = _run("eval-rubrics", "--generated", str(gen), "--reference", str(p["easy"]), "--easy", str(p["easy"]),
             "--json", *common)
    assert e["n"] == 9 * 5 and 0.0 <= e["score"] <= 1.0 and set(e["by_theme"]) == {"emergency_referrals",
                                                                                    "context_seeking", "hedging"}


@pytest.mark.server
def test_all_synth_commands_against_the_vllm_server(tmp_path, judge_url):
    _all_commands(tmp_path, _backend(judge_url.split(",")[0], None))


@pytest.mark.slow
def test_all_synth_commands_in_process(tmp_path, tiny_model_dir):
    _all_commands(tmp_path, _backend(None, tiny_model_dir))


@pytest.mark.server
def test_llm_matcher_through_the_judge_server(tmp_path, judge_url):
    p = _inputs(tmp_path)
    rep = _run("eval-rubrics", "--generated", str(p["easy"]), "--reference", str(p["easy"]), "--matcher", "llm",
               "--judge-url", judge_url, "--json")
    # the tiny judge's yes/no is noise: only the wiring and the report's shape are checked
    assert rep["n"] + (rep["match_failures"] > 0) >= 1 and set(rep) >= {"score", "n", "by_axis", "by_theme"}


@pytest.mark.slow
@pytest.mark.server
def test_synth_rubric_rows_train_two_stage3_steps(tmp_path, tiny_model_dir, judge_url, monkeypatch):
    pytest.importorskip("trl")
    from reward.healthbench.schema import HealthBenchRow, load_healthbench
    from training.synth.llm import SynthLLM
    from training.synth.rubrics import synth_rubrics
    from training.synth.store import RunFiles
    from training.trl_launcher import load_config, train

    gen = ScriptedGenerator(happy)
    files = RunFiles(tmp_path / "vaidya.jsonl")
    convs = [{"id": f"c{i}", "theme": "hedging", "persona": "introvert-logical", "turns": 1, "source": "easy",
              "messages": [{"role": "user", "content": f"Case {i}: is a fever of 38.5 C dangerous for my son?"}],
              "iterations": 1, "plan": None} for i in range(4)]
    synth_rubrics(convs, [HealthBenchRow.model_validate(r) for r in easy_rows()], actor=SynthLLM(gen, model_id="s"),
                  critic=SynthLLM(gen, model_id="s"), files=files, max_items=5, seed=1)
    files.close()
    assert len(load_healthbench(files.out)) == 4
    monkeypatch.setenv("RUBRICSTREE_TINY_MODEL", str(tiny_model_dir))
    monkeypatch.setenv("RUBRICSTREE_RUN_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", judge_url)
    monkeypatch.chdir(REPO)
    result = train(load_config(REPO / "configs/smoke/stage3_clinical_rubric.yaml", [f"data.paths=[{files.out}]"]))
    steps = [h for h in result.log_history if "grad_norm" in h]
    assert [h["step"] for h in steps] == [1, 2] and result.global_step == 2
    assert steps[0]["clinical_rubric/judge/requests"] > 0
