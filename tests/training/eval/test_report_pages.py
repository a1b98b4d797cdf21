"""Every HTML report, rendered in headless Chromium: the eval (HealthBench), MCQ, stress,
meta-eval and optimize reports each show a headline, the settings and their plots (every image
loaded, none broken), and throw no script error. Screenshots go to ``$RUBRICSTREE_SCREENSHOTS``
when set (else the test's temporary folder) for a person to look at.

The reports are written from small synthetic inputs (no model): what is under test is the page."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from rt_chromium import open_page
from rt_fakes import FakeJudge
from rt_paths import TESTS_DIR
from typer.testing import CliRunner

pytestmark = pytest.mark.slow

HB_FIXTURE = TESTS_DIR / "fixtures" / "eval_hb_own.jsonl"


def _shots(tmp_path: Path) -> Path:
    d = Path(os.environ.get("RUBRICSTREE_SCREENSHOTS") or tmp_path)
    d.mkdir(parents=True, exist_ok=True)
    return d


def look(html: Path, shot: Path, *, headline: str, settings: tuple[str, ...], min_images: int = 1) -> str:
    """Render ``html``; check the headline (visible, containing ``headline``), every settings
    label, at least ``min_images`` loaded images and no script error; save a full-page shot."""
    with open_page(html) as page:
        head = page.locator("#headline")
        assert head.count() == 1 and head.is_visible(), "no visible headline"
        text = head.inner_text()
        assert headline in text, text
        body = page.inner_text("body")
        for label in settings:
            assert label in body, f"setting {label!r} not shown"
        sizes = page.eval_on_selector_all("img", "els => els.map(e => [e.complete, e.naturalWidth])")
        assert len(sizes) >= min_images, f"{len(sizes)} images, wanted {min_images}"
        assert all(done and width > 0 for done, width in sizes), f"a broken image: {sizes}"
        # the headline is above the fold: what a reader sees first
        assert head.bounding_box()["y"] < 500
        page.screenshot(path=str(shot), full_page=True)
        assert page.errors == []
    return text


def test_healthbench_eval_report_page(tmp_path):
    from reward.healthbench.schema import load_healthbench
    from reward.healthbench.scoring import example_score, score_healthbench
    from training.eval.comparability import comparability
    from training.eval.headline import add_headline
    from training.eval.healthbench import ExampleResult
    from training.eval.report import write_healthbench_report

    rows = load_healthbench(HB_FIXTURE)
    met = {r.prompt_id: [i % 2 == 0 for i in range(len(r.rubrics))] for r in rows}
    results = [ExampleResult(r, f"answer to {r.prompt_id}", met[r.prompt_id],
                             example_score([it.points for it in r.rubrics], met[r.prompt_id]), None) for r in rows]
    m = {"benchmark": "healthbench", "model": "tiny-policy", "generate_backend": "inprocess",
         "data": {"source": str(HB_FIXTURE), "file": HB_FIXTURE.name, "sha256": "ab" * 32, "variant": None,
                  "variant_source": None, "rows_in_file": len(rows), "limit": None},
         "system_prompt": {"mode": "none"},
         "generation": {"max_new_tokens": 16000, "temperature": 0.6, "top_p": 0.95, "top_k": 20, "seed": 0,
                        "thinking": None},
         "grading": {"mode": "explain", "template": "healthbench-official", "template_version": "x",
                     "judge_backend": "chat", "judge_model": "gpt-4.1",
                     "sampling": {"temperature": 0.5, "max_tokens": 2048}},
         "n_rows": len(rows), "n_scored": len(rows), "n_unscored": 0, "unscored": [], "length_adjusted": None,
         "responses": {"mean_chars": 20.0, "finish_reasons": {"stop": len(rows)}, "empty": 0}}
    m.update(score_healthbench(rows, met, n_bootstrap=200, seed=0))
    add_headline(m, {r.row.prompt_id: r.score for r in results}, baseline=None, n_bootstrap=200, seed=0)
    m.update(comparability(m))
    write_healthbench_report(tmp_path, m, results)
    text = look(tmp_path / "report.html", _shots(tmp_path) / "eval_healthbench.png", headline="%",
                settings=("policy decoding: temperature 0.6", "grader sampling", "Not comparable", "data"),
                min_images=2)
    assert text == f"{100 * m['score']:.1f}%"


def test_mcq_report_page(tmp_path):
    from training.eval.report import write_mcq_report

    ex = []
    for i in range(40):
        answer, choice = "ABCD"[i % 4], (None if i % 7 == 0 else "ABCD"[(i * 3) % 4] if i % 5 else "ABCD"[i % 4])
        ex.append({"id": f"q{i}", "score": float(choice == answer), "choice": choice, "answer": answer,
                   "format_failure": choice is None, "categories": {"system": "cardio"}})
    correct = sum(e["score"] for e in ex)
    with (tmp_path / "example_scores.jsonl").open("w") as fh:
        fh.writelines(json.dumps(e) + "\n" for e in ex)
    m = {"benchmark": "mcq", "model": "tiny-policy", "generate_backend": "inprocess",
         "data": {"file": "medxpertqa.jsonl", "sha256": "cd" * 32, "format": "medxpertqa", "rows_in_file": 40,
                  "limit": None}, "prompt": "mcq-v1", "system_prompt": {"mode": "none"},
         "generation": {"max_new_tokens": 10000, "temperature": 0.6, "top_p": 0.95, "top_k": 20, "thinking": None},
         "n_rows": 40, "n_scored": 40, "n_unscored": 0, "unscored": [], "accuracy": correct / 40,
         "score": correct / 40, "correct": int(correct), "format_failures": 6, "std_error": 0.07,
         "categories": {"system": {"cardio": {"accuracy": correct / 40, "n": 40, "format_failures": 6,
                                              "correct": int(correct), "std_error": 0.07}}}}
    write_mcq_report(tmp_path, m)
    text = look(tmp_path / "report.html", _shots(tmp_path) / "eval_mcq.png", headline="%",
                settings=("95% CI", "no answer found", "medxpertqa", "published (copied)", "decoding"), min_images=2)
    assert text == f"{100 * correct / 40:.1f}%"


def test_stress_report_page(tmp_path):
    from rubricstree import app

    res = CliRunner().invoke(app, ["stress", "--router", "static", "--json", "--report", str(tmp_path / "rep")])
    assert res.exit_code == 0, res.output
    look(tmp_path / "rep" / "report.html", _shots(tmp_path) / "stress.png", headline="mean penalty",
         settings=("Settings", "router"), min_images=1)


def test_metaeval_healthbench_report_page(tmp_path):
    import random

    from reward.judge import JudgeConfig
    from reward.metaeval.hb_grader import load_rows, run_hb_grader

    rng = random.Random(0)
    rows = []
    for i in range(90):
        truth = rng.random() < 0.5
        labels = [truth if rng.random() < 0.85 else not truth for _ in range(3)]
        rows.append({"prompt": [{"role": "user", "content": f"q{i}"}], "completion": f"answer {int(truth)} {i}",
                     "rubric": f"criterion {i % 4}",
                     "category": f"cluster:{['emergency_referrals', 'hedging', 'communication'][i % 3]}_x",
                     "binary_labels": labels, "anonymized_physician_ids": ["d1", "d2", "d3"]})
    f = tmp_path / "meta.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    judge = FakeJudge(lambda t, it: float(it.response.split()[1] == "1") if int(it.response.split()[-1]) % 5
                      else 0.0, config=JudgeConfig(mode="explain"))
    run_hb_grader(load_rows(f), {"explain": judge}, tmp_path / "o", meta={"data": str(f), "sha256": "ef" * 32},
                  progress=False)
    look(tmp_path / "o" / "report.html", _shots(tmp_path) / "metaeval_healthbench.png",
         headline="pairwise balanced F1", settings=("sha256", "macro F1 vs majority", "n-weighted", "Per theme"),
         min_images=1)


def test_optimize_report_page(tmp_path):
    from training.optimize.report import plot, summarise, write_html

    rows = [SimpleNamespace(id=f"r{i}") for i in range(12)]
    graded = {(m, r.id): {"score": (i % 5) / 5 + (0.15 if m == "best-of-4" else 0.0)}
              for m in ("baseline", "best-of-4") for i, r in enumerate(rows)}
    result = summarise(rows, {"baseline": "base.jsonl", "best-of-4": "bo4.jsonl"}, graded, n_resamples=200, seed=0)
    result.update(judge="held-out-judge", warnings=[])
    plot(result, tmp_path / "report.png")
    write_html(result, tmp_path / "report.html")
    text = look(tmp_path / "report.html", _shots(tmp_path) / "optimize.png", headline="best-of-4",
                settings=("held-out judge", "paired bootstrap", "answers: best-of-4"), min_images=1)
    assert "points vs baseline" in text
