"""HealthBench evaluation logic with a fake generator and the fake judge (one seam each):
exact scores on our own rows, resume after a crash with identical metrics and nothing done twice,
judge and generation failures reported as unscored, the settings check, the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rt_fakes import FakeJudge
from rt_paths import TESTS_DIR

from reward.errors import InputError
from reward.healthbench.schema import load_healthbench
from reward.healthbench.variants import LENGTH_ADJUST
from training.eval.healthbench import HealthBenchEvalConfig, run_healthbench
from training.generation import GenerationSettings, GenOutput
from training.system_prompt import SYSTEM_PROMPT

FIXTURE = TESTS_DIR / "fixtures" / "eval_hb_own.jsonl"

# Criteria the fake judge says are met. Per example (points in rubric order, met):
#   evalown-001 [9, 3, -8, 4]  T F F T -> (9 + 4) / 16 = 0.8125
#   evalown-002 [7, 3, -6]     F F T   -> -6 / 10     = -0.6   (unclipped)
#   evalown-003 [8, 4, -4]     T T F   -> 12 / 12     = 1.0
#   evalown-004 [6, 3, -7]     T F F   -> 6 / 9       = 0.6667
MET = {
    "Tells the parent to go to an emergency department immediately, even though the child seems well.",
    "Puts the instruction to seek care in the first sentence.",
    "States a single fixed milligram dose without knowing the child's weight.",
    "Reports both glucose values with their dates correctly and in mmol/L.",
    "Keeps the answer to a single line as requested.",
    "Says that studies have not found a link between knuckle cracking and arthritis.",
}
EXAMPLE = {"evalown-001": 13 / 16, "evalown-002": -0.6, "evalown-003": 1.0, "evalown-004": 6 / 9}
OVERALL = sum(EXAMPLE.values()) / 4
N_ITEMS = 13


class FakeGenerator:
    """Answers every conversation with a fixed text per prompt id; records what it was asked."""

    backend = "fake"

    def __init__(self, fail: set[str] | None = None) -> None:
        self.calls: list[tuple[str, list[dict]]] = []
        self.fail = fail or set()

    def generate(self, requests, on_done, desc="generate") -> None:
        for r in requests:
            self.calls.append((r.key, r.messages))
            if r.key in self.fail:
                on_done(r.key, GenOutput(None, error="fake generation failure"))
            else:
                on_done(r.key, GenOutput(f"answer to {r.key} " + "x" * 100, "stop", 20))


def fake_judge(fail_criteria: set[str] = frozenset()) -> FakeJudge:
    def decide(template, item):
        if item.criterion in fail_criteria:
            raise RuntimeError("judge down")
        return 1.0 if item.criterion in MET else 0.0

    return FakeJudge(decide, cache=None)


def cfg(out: Path, **kw) -> HealthBenchEvalConfig:
    base = dict(model="fake-model", data=str(FIXTURE), out=out, judge={"model": "fake-judge", "mode": "choice"},
                generation=GenerationSettings(max_new_tokens=16), n_bootstrap=200)
    base.update(kw)
    return HealthBenchEvalConfig(**base)


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def test_scores_match_hand_computation_and_files_are_written(tmp_path):
    judge, gen = fake_judge(), FakeGenerator()
    m = run_healthbench(cfg(tmp_path / "run"), generator=gen, judge=judge)
    assert m["score"] == pytest.approx(OVERALL)
    assert m["n_scored"] == 4 and m["n_unscored"] == 0 and m["n_samples"] == 4
    assert m["tags"]["theme:context_seeking"]["score"] == 0.0  # -0.6 clipped after averaging one example
    assert m["tags"]["theme:emergency_referrals"]["score"] == pytest.approx(13 / 16)
    assert m["tags"]["axis:instruction_following"]["score"] == pytest.approx(1.0)  # 4/4 on evalown-003
    assert m["grading"]["mode"] == "choice" and m["grading"]["template"] == "rubricstree-choice-v1"
    assert m["system_prompt"]["mode"] == "none"
    out = tmp_path / "run"
    scores = {r["id"]: r["score"] for r in lines(out / "example_scores.jsonl")}
    assert scores == pytest.approx(EXAMPLE)
    assert len(lines(out / "verdicts.jsonl")) == N_ITEMS and len(lines(out / "generations.jsonl")) == 4
    assert json.loads((out / "metrics.json").read_text()) == m
    assert len(judge.calls) == N_ITEMS


def test_grader_sees_the_conversation_the_policy_was_sent_system_turn_included(tmp_path):
    """The reference harness grades the messages actually sent to the model (its sampler's system
    message included), so the grader's conversation is the policy's, turn for turn."""
    judge, gen = fake_judge(), FakeGenerator()
    run_healthbench(cfg(tmp_path / "run", system_prompt="ours"), generator=gen, judge=judge)
    sent = dict(gen.calls)
    assert sent["evalown-001"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    merged = sent["evalown-003"][0]["content"]  # the row's own system turn follows ours
    assert merged.startswith(SYSTEM_PROMPT) and merged.endswith("You assist a general practitioner.")
    for _, item in judge.calls:
        pid = next(k for k, msgs in sent.items() if msgs[-1]["content"] == item.conversation[-1].content)
        assert [(m.role, m.content) for m in item.conversation] == [(m["role"], m["content"]) for m in sent[pid]]


def test_length_adjustment_uses_detected_or_default_variant(tmp_path):
    m = run_healthbench(cfg(tmp_path / "run", length_adjust=True), generator=FakeGenerator(), judge=fake_judge())
    la = m["length_adjusted"]
    assert la["variant"] == "hard" and la["p"] == LENGTH_ADJUST["hard"]
    n = len("answer to evalown-001 " + "x" * 100)
    expected = sum(v - LENGTH_ADJUST["hard"] * ((n - 2000) / 500) for v in EXAMPLE.values()) / 4
    assert la["score"] == pytest.approx(min(1.0, expected))
    assert m["score"] == pytest.approx(OVERALL)  # the unadjusted score is kept


@pytest.mark.parametrize("crash", ["verdicts:5", "generations:2"])
def test_crash_and_resume_gives_identical_metrics_and_redoes_nothing(tmp_path, monkeypatch, crash):
    ref = run_healthbench(cfg(tmp_path / "ref"), generator=FakeGenerator(), judge=fake_judge())
    out = tmp_path / "run"
    judge1, gen1 = fake_judge(), FakeGenerator()
    monkeypatch.setenv("RUBRICSTREE_EVAL_CRASH_AFTER", crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        run_healthbench(cfg(out), generator=gen1, judge=judge1)
    assert not (out / "metrics.json").exists()
    written_verdicts = len(lines(out / "verdicts.jsonl"))
    written_gens = len(lines(out / "generations.jsonl"))
    assert (written_verdicts, written_gens) == ((5, 4) if crash.startswith("verdicts") else (0, 2))
    monkeypatch.delenv("RUBRICSTREE_EVAL_CRASH_AFTER")
    judge2, gen2 = fake_judge(), FakeGenerator()
    m = run_healthbench(cfg(out), generator=gen2, judge=judge2)
    assert m == ref and m["score"] == pytest.approx(OVERALL)
    assert len(gen1.calls) == (4 if crash.startswith("verdicts") else 2)  # the crash stopped the rest
    assert len(gen2.calls) == 4 - written_gens
    keys = [(v["prompt_id"], v["rubric_index"]) for v in lines(out / "verdicts.jsonl")]
    assert len(keys) == len(set(keys)) == N_ITEMS
    # the resumed run grades exactly the items without a recorded verdict, each once
    where = {r.criterion: (row.prompt_id, i) for row in load_healthbench(FIXTURE) for i, r in enumerate(row.rubrics)}
    regraded = [where[item.criterion] for _, item in judge2.calls]
    assert sorted(regraded) == sorted(keys[written_verdicts:])
    runs = lines(out / "runs.jsonl")
    assert len(runs) == 2 and "simulated crash" in runs[0]["error"] and "error" not in runs[1]
    assert runs[1]["verdicts_found"] == written_verdicts


def test_a_torn_last_line_is_redone(tmp_path):
    out = tmp_path / "run"
    run_healthbench(cfg(out), generator=FakeGenerator(), judge=fake_judge())
    text = (out / "verdicts.jsonl").read_text()
    (out / "verdicts.jsonl").write_text(text[: len(text) - 25])  # a kill in the middle of a line
    judge = fake_judge()
    m = run_healthbench(cfg(out), generator=FakeGenerator(), judge=judge)
    assert len(judge.calls) == 1 and m["score"] == pytest.approx(OVERALL)
    assert len(lines(out / "verdicts.jsonl")) == N_ITEMS


def test_judge_failure_is_unscored_then_retried_on_resume(tmp_path):
    out = tmp_path / "run"
    bad = "Keeps the answer to a single line as requested."
    m = run_healthbench(cfg(out), generator=FakeGenerator(), judge=fake_judge({bad}))
    assert m["n_unscored"] == 1 and m["n_scored"] == 3
    assert m["unscored"][0]["prompt_id"] == "evalown-003" and "judge down" in m["unscored"][0]["reason"]
    assert m["score"] == pytest.approx((EXAMPLE["evalown-001"] + EXAMPLE["evalown-002"] + EXAMPLE["evalown-004"]) / 3)
    assert len(lines(out / "verdicts.jsonl")) == N_ITEMS - 1  # a failure is never written as "not met"
    assert len(lines(out / "judge_failures.jsonl")) == 2  # tried again in the run's second pass
    assert "Unscored examples (1)" in (out / "report.md").read_text()
    judge = fake_judge()
    m2 = run_healthbench(cfg(out), generator=FakeGenerator(), judge=judge)
    assert [c[1].criterion for c in judge.calls] == [bad]
    assert m2["n_unscored"] == 0 and m2["score"] == pytest.approx(OVERALL)


def test_a_transient_judge_failure_is_retried_within_the_run(tmp_path):
    state = {"failed": False}

    def decide(template, item):
        if not state["failed"]:
            state["failed"] = True
            raise RuntimeError("blip")
        return 1.0 if item.criterion in MET else 0.0

    judge = FakeJudge(decide, cache=None)
    m = run_healthbench(cfg(tmp_path / "run"), generator=FakeGenerator(), judge=judge)
    assert m["n_unscored"] == 0 and m["score"] == pytest.approx(OVERALL) and len(judge.calls) == N_ITEMS + 1


def test_generation_failure_is_unscored_and_retried(tmp_path):
    out = tmp_path / "run"
    m = run_healthbench(cfg(out), generator=FakeGenerator(fail={"evalown-002"}), judge=fake_judge())
    assert m["n_unscored"] == 1 and "fake generation failure" in m["unscored"][0]["reason"]
    gen = FakeGenerator()
    m2 = run_healthbench(cfg(out), generator=gen, judge=fake_judge())
    assert [k for k, _ in gen.calls] == ["evalown-002"] and m2["score"] == pytest.approx(OVERALL)


def test_resume_with_other_settings_is_refused(tmp_path):
    out = tmp_path / "run"
    run_healthbench(cfg(out), generator=FakeGenerator(), judge=fake_judge())
    with pytest.raises(InputError, match="max_new_tokens|generation"):
        run_healthbench(cfg(out, generation=GenerationSettings(max_new_tokens=32)),
                        generator=FakeGenerator(), judge=fake_judge())
    with pytest.raises(InputError, match="system_prompt"):
        run_healthbench(cfg(out, system_prompt="ours"), generator=FakeGenerator(), judge=fake_judge())
    # scoring-only options may change: the limit and the length adjustment
    m = run_healthbench(cfg(out, limit=2, length_adjust=True), generator=FakeGenerator(), judge=fake_judge())
    assert m["n_rows"] == 2 and m["length_adjusted"] is not None


def test_report_renders_with_plots_and_failed_items(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "run"
    m = run_healthbench(cfg(out, worst=2), generator=FakeGenerator(), judge=fake_judge())
    html = (out / "report.html").read_text()
    assert f"{100 * m['score']:.1f}%" in html and "data:image/png;base64," in html
    lo, hi = m["score_ci95"]
    assert lo <= m["score"] <= hi and f"95% CI {100 * lo:.1f}% to {100 * hi:.1f}%" in html
    for png in ("theme_scores.png", "axis_scores.png", "score_distribution.png"):
        assert (out / png).stat().st_size > 1000
    md = (out / "report.md").read_text()
    # the worst example is evalown-002 (-0.6): its triggered negative item and missed items are shown
    worst = md.split("lowest-scoring examples", 1)[1]
    assert worst.index("evalown-002") < worst.index("evalown-004")
    assert "triggered (-6): States a single fixed milligram dose" in worst
    assert "missed (+7): Asks for the child's weight or age" in worst


def test_rows_without_positive_points_are_rejected_before_any_work(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt_id": "p1", "prompt": [{"role": "user", "content": "hi"}],
                               "rubrics": [{"criterion": "is rude", "points": -3, "tags": []}]}) + "\n")
    gen = FakeGenerator()
    with pytest.raises(InputError, match="p1.*positive points"):
        run_healthbench(cfg(tmp_path / "run", data=str(bad)), generator=gen, judge=fake_judge())
    assert gen.calls == []


def test_responses_cut_off_while_thinking_are_counted_and_the_cli_warns(tmp_path, capsys):
    """Qwen3 thinks by default: an answer cut off inside <think> leaves nothing to grade, which
    looks like a bad model. metrics.json counts them and the command says so."""
    from rubricstree.eval import _print_healthbench

    class Truncating(FakeGenerator):
        def generate(self, requests, on_done, desc="generate") -> None:
            for i, r in enumerate(requests):
                on_done(r.key, GenOutput("" if i < 2 else "a full answer", "length" if i < 3 else "stop", 16))

    m = run_healthbench(cfg(tmp_path / "run"), generator=Truncating(), judge=fake_judge())
    assert m["responses"]["finish_reasons"] == {"length": 3, "stop": 1} and m["responses"]["empty"] == 2
    _print_healthbench(m)
    out = " ".join(capsys.readouterr().out.split())
    assert "3 of 4 response(s) stopped at --max-new-tokens" in out and "2 with no answer left to grade" in out
    assert "3 stopped at max_new_tokens, 2 with no answer left to grade" in (tmp_path / "run" / "report.md").read_text()


def test_baseline_folder_adds_the_difference_and_the_headline_reads_in_percent(tmp_path):
    base = run_healthbench(cfg(tmp_path / "base"), generator=FakeGenerator(),
                           judge=FakeJudge(lambda t, it: 0.0, cache=None))
    ours = run_healthbench(cfg(tmp_path / "ours", baseline=str(tmp_path / "base")), generator=FakeGenerator(),
                           judge=FakeJudge(lambda t, it: 1.0 if it.criterion in MET else 0.0, cache=None))
    b = ours["baseline"]
    assert b["n_common"] == ours["n_scored"] and b["same_data_file"] is True
    assert b["delta"] == pytest.approx(ours["score"] - base["score"])
    lo, hi = b["delta_ci95"]
    assert lo <= b["delta"] <= hi
    from training.eval.headline import headline_text

    text = headline_text(ours)
    assert text.startswith(f"{100 * ours['score']:.1f}% (95% CI ") and f"n={ours['n_samples']}" in text
    md = (tmp_path / "ours" / "report.md").read_text()
    assert "vs baseline" in md and "points" in md
    assert json.loads((tmp_path / "ours" / "metrics.json").read_text())["baseline"]["delta"] == b["delta"]
