"""``rubricstree optimize`` end to end on CPU with the tiny Qwen3 in this process, as the policy
and as the judge (wiring only: a random-weight model's scores say nothing about the methods).
The held-out report judge is the same weights under another identity (the served name differs)
only in the server test; here the report must refuse the optimisation's own judge, then run
with --allow-same-judge and say so."""

from __future__ import annotations

import json

import pytest
from rt_optimize import check_outputs, run_all_four, runner

from rubricstree import app

pytestmark = pytest.mark.slow
pytest.importorskip("torch")
pytest.importorskip("transformers")


def test_all_four_commands_in_process(tiny_model_dir, tmp_path):
    judge = ["--judge-model", str(tiny_model_dir)]
    policy = ["--model", str(tiny_model_dir)]
    result = run_all_four(tmp_path, policy, judge, [*judge, "--allow-same-judge"])
    check_outputs(tmp_path, result)
    assert result["report"]["warnings"]  # the same judge is allowed only with a warning
    # without --allow-same-judge the same judge is refused, naming the file
    res = runner.invoke(app, ["optimize", "report", "--data", str(tmp_path / "prompts.jsonl"), "--out",
                              str(tmp_path / "r2"), "--method", f"a={tmp_path / 'base' / 'samples.jsonl'}",
                              "--method", f"b={tmp_path / 'bon' / 'samples.jsonl'}", *judge])
    assert res.exit_code == 2 and "held-out" not in res.output and "same judge" in res.output


def test_eval_healthbench_with_the_handbook_system_prompt(tiny_model_dir, tmp_path):
    from rt_optimize import invoke, prompts_file, taxonomy_file

    judge = ["--judge-model", str(tiny_model_dir)]
    prompts = prompts_file(tmp_path)
    invoke(["handbook", "--prompts", str(prompts), "--out", str(tmp_path / "hb"), "--taxonomy",
            str(taxonomy_file(tmp_path)), "--tokenizer", str(tiny_model_dir), "--max-tokens", "120", *judge])
    res = runner.invoke(app, ["eval", "healthbench", "--model", str(tiny_model_dir), *judge, "--data", str(prompts),
                              "--judge-mode", "choice", "--max-new-tokens", "8", "--system-prompt",
                              f"handbook:{tmp_path / 'hb' / 'handbook.jsonl'}", "--out", str(tmp_path / "ev"), "--json"])
    assert res.exit_code == 0, res.output
    m = json.loads((tmp_path / "ev" / "metrics.json").read_text())
    assert m["system_prompt"]["mode"] == "handbook:handbook.jsonl" and m["n_scored"] + m["n_unscored"] == 3
    hb = [json.loads(x) for x in (tmp_path / "hb" / "handbook.jsonl").read_text().splitlines()]
    books = [r for r in hb if r["kind"] == "handbook"]
    assert all(0 < r["tokens"] <= 120 and r["shown"] for r in books)  # counted with the real tokenizer
