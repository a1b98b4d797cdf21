"""``python -m training.verl_data`` on bad inputs: one ``error:`` line naming the file, record or
option, exit 2, never a traceback (``--debug`` lets it through)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from rt_paths import FIXTURES, REPO_ROOT

from training.verl_data import main

HB = str(FIXTURES / "healthbench_own.jsonl")


def _bad_row(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"prompt": [{"role": "user", "content": "hi"}], "rubric": []}) + "\n")
    return path


CASES = {
    "a missing file": (lambda t: ["healthbench", str(t / "absent.jsonl"), str(t / "o.parquet")],
                       ["absent.jsonl", "file not found"]),
    "a bad row": (lambda t: ["healthbench", str(_bad_row(t)), str(t / "o.parquet")],
                  ["rows.jsonl", "line 1", "prompt_id"]),
    "an unknown data source": (lambda t: ["healthbench", HB, str(t / "o.parquet"), "--data-source", "gsm8k"],
                               ["--data-source", "gsm8k", "clinical_rubric"]),
    "the wrong kind of rows": (lambda t: ["mcq", HB, str(t / "o.parquet")], ["healthbench_own.jsonl", "question"]),
    "a system prompt that is no file": (lambda t: ["mcq", str(FIXTURES / "mcq_own.jsonl"), str(t / "o.parquet"),
                                                   "--system-prompt", str(t / "none.txt")],
                                        ["--system-prompt", "none.txt"]),
    "an output that is a folder": (lambda t: ["healthbench", HB, str(t)], ["is a folder", ".parquet"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_input_is_one_line_and_exit_2(case, tmp_path, capsys):
    args, names = CASES[case]
    assert main(args(tmp_path)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    for name in names:
        assert name in err, (name, err)
    assert not (tmp_path / "o.parquet").exists()


def test_the_module_prints_no_traceback_and_debug_shows_one(tmp_path):
    cmd = [sys.executable, "-m", "training.verl_data", "healthbench", str(tmp_path / "absent.jsonl"),
           str(tmp_path / "o.parquet")]
    res = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip() == f"error: {tmp_path / 'absent.jsonl'}: file not found"
    res = subprocess.run([*cmd, "--debug"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 1 and "Traceback" in res.stderr


@pytest.mark.parametrize("limit", ["0", "-1"])
def test_a_limit_below_one_is_refused_not_read_as_every_row_or_all_but_the_last(limit, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["healthbench", HB, str(tmp_path / "o.parquet"), "--limit", limit])
    assert exit_.value.code == 2 and "--limit: must be 1 or more" in capsys.readouterr().err
    assert not (tmp_path / "o.parquet").exists()
