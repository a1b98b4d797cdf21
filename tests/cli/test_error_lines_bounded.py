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
    assert r.output.startswith("error: ")
    # issue 39: the line names the file and the field (it was an OS error quoting the value)
    assert str(path) in r.output and "field 'model'" in r.output and "10,000,000 characters" in r.output


def test_bounded_keeps_both_ends():
    text = "start " + "x" * 5000 + " end"
    out = bounded(text, 200)
    assert len(out) <= 200 and out.startswith("start ") and out.endswith(" end") and "characters cut" in out
    assert bounded("short", 200) == "short"


@pytest.mark.parametrize(("doc", "field"), [({"model": "x" * 200_000}, "model"),
                                            ({"judge": {"url": "y" * 200_000}}, "judge.url"),
                                            ({"data": {"paths": ["a", "z" * 200_000]}}, "data.paths[1]")])
def test_an_oversized_config_value_is_refused_naming_file_and_field(tmp_path, doc, field):
    from reward.errors import InputError
    from reward.textio import load_yaml

    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    with pytest.raises(InputError) as exc:
        load_yaml(path)
    assert exc.value.file == str(path) and exc.value.field == field
    assert len(str(exc.value)) < 400


def test_an_oversized_override_is_named_by_its_key(tmp_path):
    from reward.errors import InputError
    from training.trl_config import load_config

    with pytest.raises(InputError, match=r"--set model.*characters"):
        load_config(REPO_ROOT / "configs/trl/stage3_clinical_rubric.yaml", [f"model={'x' * 200_000}"])
