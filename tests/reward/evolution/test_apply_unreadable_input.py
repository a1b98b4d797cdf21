"""``tree apply`` names the file and the line of input it cannot read (issue 26, N9): bytes that
are not UTF-8 gave a bare "'utf-8' codec can't decode byte 0xe9 in position 56", a folder a bare
"[Errno 21] Is a directory", with no file or line."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from reward.tree import default_taxonomy_path
from rubricstree import app

runner = CliRunner()
LATIN1 = b'proposals:\n  - id: p1\n    kind: add_leaf\n    title: "caf\xe9"\n'


def test_proposals_that_are_not_utf8_are_named_with_file_and_line(tmp_path):
    props = tmp_path / "props.yaml"
    props.write_bytes(LATIN1)
    r = runner.invoke(app, ["tree", "apply", str(props), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert f"{props}: record line 4: not valid UTF-8" in r.output, r.output


@pytest.mark.parametrize("which", ["proposals", "taxonomy"])
def test_a_folder_is_named(tmp_path, which):
    folder = tmp_path / "folder"
    folder.mkdir()
    props = tmp_path / "props.yaml"
    props.write_text("proposals: []\n", encoding="utf-8")
    args = [str(folder if which == "proposals" else props), "--out", str(tmp_path / "o")]
    if which == "taxonomy":
        args += ["--taxonomy", str(folder)]
    r = runner.invoke(app, ["tree", "apply", *args])
    assert r.exit_code == 2 and f"{folder}: is a folder" in r.output, r.output


def test_header_of_a_taxonomy_that_is_not_utf8_is_named_with_file_and_line(tmp_path):
    from reward.errors import InputError
    from reward.evolution.taxonomy_io import read_header

    tax = tmp_path / "tax.yaml"
    tax.write_bytes(default_taxonomy_path().read_bytes() + b"\n# caf\xe9\n")
    with pytest.raises(InputError, match=r"tax.yaml: record line \d+: not valid UTF-8"):
        read_header(tax)
