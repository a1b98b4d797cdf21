"""The figures the README quotes come from runs (issue 49, part 7): each is read from the benchmark
output it names (``benchmarks/results/*.json``, written by the scripts under ``benchmarks/``), and
this test checks that the README states it as the output has it, to the digits quoted. A figure
re-measured without the README following fails here, and so does one typed by hand."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


def _get(data, path: str):
    for part in path.split("/"):
        data = data[part]
    return data


def _f(x: float, nd: int | None) -> str:
    return str(x) if nd is None else f"{x:.{nd}f}"  # None: a count, as it is


# (what the README says, with {} for each figure; the result file; the figures' paths in it; digits)
BLIND = "blind_stress_oracle.json"
FRONTIER = "posterior_frontier.json"
NOISE = "noise_table.json"
FIGURES = [
    ("detection {} (`dev` {}), label recall {}", BLIND,
     ["parts/blind:test/detection_rate", "parts/blind:dev/detection_rate", "parts/blind:test/label_recall"], 3),
    ("a fault targeted at one leaf {} ({})", BLIND,
     ["parts/blind:test/by_perturbation/targeted_fault/detection_rate",
      "parts/blind:dev/by_perturbation/targeted_fault/detection_rate"], 3),
    ("harm below a safe non-answer {} ({})", BLIND,
     ["parts/blind:test/by_perturbation/harm_vs_safe/detection_rate",
      "parts/blind:dev/by_perturbation/harm_vs_safe/detection_rate"], 3),
    ("bundled cases: detection {} -> {} -> {}", FRONTIER,
     ["models/both/results/bundled/confirmation/detection_rate", "models/both/results/bundled/posterior/detection_rate",
      "models/both/results/bundled/+ B on critical/detection_rate"], 2),
]
FIGURES.append(("Correlated re-reads (0.10) keep the good reply above the gaming one on {} of {} `test` cases", NOISE,
                ["sets/blind:test/rows/0.1/re-read correlation 0.5/gaming/good_above",
                 "sets/blind:test/rows/0.1/re-read correlation 0.5/gaming/cases"], None))
ROUTE = "blind_route_eval.json"
COVERAGE = "calibration_coverage.json"
FIGURES.append(("recall of applicable leaves {} (`dev` {}), critical {} ({})", ROUTE,
                ["parts/blind:test/recall", "parts/blind:dev/recall", "parts/blind:test/recall_critical",
                 "parts/blind:dev/recall_critical"], 3))
FIGURES.append(("reach {} of {} critical leaves on `test` ({} on the bundled cases), {} with 10 failing and 10 passing "
                "items ({} bundled)", COVERAGE,
                ["sets/blind:test/by_severity/critical/with_a_failing_item", "sets/blind:test/by_severity/critical/leaves",
                 "sets/bundled/by_severity/critical/with_a_failing_item",
                 "sets/blind:test/by_severity/critical/meeting_the_threshold",
                 "sets/bundled/by_severity/critical/meeting_the_threshold"], None))
FIGURES.append(("graded on a median of {} leaves (English) / {} (other)", "routing_hard.json",
                ["with_reply_guards/english", "with_reply_guards/other"], None))
for rate in ("0.05", "0.1"):
    FIGURES.append(("| " + ("0.10" if rate == "0.1" else rate) + " | {} / {} | {} / {} | {} / {} |", NOISE,
                    [f"sets/blind:test/rows/{rate}/{model}/{k}" for model in
                     ("independent", "re-read correlation 0.5", "10% of leaves always misread")
                     for k in ("clean_mean", "detection_rate")], 3))


def _readme() -> str:
    return re.sub(r"\s+", " ", (ROOT / "README.md").read_text(encoding="utf-8"))


@pytest.mark.parametrize("phrase, source, paths, nd", FIGURES, ids=[f[0][:40] for f in FIGURES])
def test_the_readme_quotes_the_figure_its_source_holds(phrase, source, paths, nd):
    data = json.loads((RESULTS / source).read_text(encoding="utf-8"))
    expected = phrase.format(*(_f(_get(data, p), nd) for p in paths))
    assert expected in _readme(), f"README should say {expected!r} (from benchmarks/results/{source})"


def test_every_family_range_the_readme_gives_is_the_sources():
    """'every gaming family 0.98-1.00': the lowest and highest gaming family on blind:test."""
    from reward.stress.cases import GAMING

    data = json.loads((RESULTS / BLIND).read_text(encoding="utf-8"))
    by = data["parts"]["blind:test"]["by_perturbation"]
    rates = [by[f]["detection_rate"] for f in GAMING if f in by]
    assert f"every gaming family {min(rates):.2f}-{max(rates):.2f}" in _readme()


def test_the_checker_catches_a_figure_the_source_does_not_hold():
    data = json.loads((RESULTS / BLIND).read_text(encoding="utf-8"))
    wrong = _f(_get(data, "parts/blind:test/detection_rate") + 0.01, 3)
    assert f"detection {wrong} (" not in _readme()


def test_the_readme_states_the_gates_own_threshold_and_the_bundled_noise_figure():
    from reward.calibration.gate import JudgeGateSettings

    bar = JudgeGateSettings().min_detection
    assert f"predicted detection may lie below {bar:.2f}" in _readme()
    data = json.loads((RESULTS / NOISE).read_text(encoding="utf-8"))
    bundled = data["sets"]["bundled"]["rows"]["0.05"]["independent"]["detection_rate"]
    assert f"bundled: {bundled:.3f} at 0.05" in _readme()
