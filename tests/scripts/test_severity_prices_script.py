"""``scripts/severity_prices.py``: the statistic on crafted rows, and the floors in the code match
what it recomputes from the HealthBench-Hard sample (skipped when the file is absent)."""

from __future__ import annotations

import importlib.util
import json

from rt_paths import REPO_ROOT, shared_file

SCRIPT = REPO_ROOT / "scripts" / "severity_prices.py"


def _load():
    spec = importlib.util.spec_from_file_location("severity_prices", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_statistic_on_crafted_rows(tmp_path, capsys):
    mod = _load()
    rows = [{"prompt_id": "a", "rubrics": [{"points": 10}, {"points": 10}, {"points": -10}, {"points": -2}]},
            {"prompt_id": "b", "rubrics": [{"points": 5}, {"points": 5}, {"points": -5}]}]
    sh = mod.shares(rows)
    assert sh["critical"]["negative"] == [0.5] and sh["critical"]["all"] == [0.5, 0.5, 0.5]
    assert sh["minor"]["negative"] == [0.1] and sh["major"]["negative"] == [0.5]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    assert mod.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "a -10 item: median 0.500" in out and "differs" in out
    assert mod.main([str(path), "--check"]) == 1  # the code's floors are not these rows' medians
    assert mod.main([str(tmp_path / "missing.jsonl")]) == 2


def test_the_code_floors_are_the_healthbench_hard_medians(capsys):
    mod = _load()
    shared_file(mod.SAMPLE)  # skipped, saying where the shared data is looked for, when absent
    assert mod.main(["--check"]) == 0
    assert "a -10 item: median 0.155" in capsys.readouterr().out
