"""Error lines are bounded (issue 26, N8): ``train plan`` printed a 10 MB error line for a 10 MB
model value in its config. Every command's error line now keeps the start and the end of such a
message and says how much of the middle was cut."""

from __future__ import annotations

import pytest
import yaml
from rt_paths import REPO_ROOT
from typer.testing import CliRunner

from rubricstree import app
from rubricstree.errors import MAX_LINE, bounded

runner = CliRunner()


@pytest.mark.slow
def test_train_plan_with_a_ten_megabyte_model_value_prints_one_short_error_line(tmp_path):
    cfg = yaml.safe_load((REPO_ROOT / "configs/trl/stage3_clinical_rubric.yaml").read_text(encoding="utf-8"))
    cfg["model"] = "x" * 10_000_000
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    r = runner.invoke(app, ["train", "plan", str(path), "--gpus", "8", "--gpu-memory-gb", "80"])
    assert r.exit_code == 2
    assert len(r.output) < MAX_LINE + 100, len(r.output)
    assert r.output.startswith("error: ") and "characters cut" in r.output


def test_bounded_keeps_both_ends():
    text = "start " + "x" * 5000 + " end"
    out = bounded(text, 200)
    assert len(out) <= 200 and out.startswith("start ") and out.endswith(" end") and "characters cut" in out
    assert bounded("short", 200) == "short"
