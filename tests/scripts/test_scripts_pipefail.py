"""Launch scripts must not die of SIGPIPE at random.

`cmd | head -n 1` under `set -o pipefail`: when `cmd` writes after `head` has exited, `cmd` gets
SIGPIPE and the pipeline's status is 141, which `set -e` turns into a dead launch (it happened
to `scripts/train.sh` on a clean clone under load). Read the first line with awk or `read` instead.
"""

import re
import subprocess
from pathlib import Path

import pytest

SCRIPTS = sorted((Path(__file__).resolve().parents[2] / "scripts").glob("*.sh"))
# a pipe into a reader that may exit before its writer is done
EARLY_EXIT_READER = re.compile(r"\|\s*(head|grep\s+(-\w*q|--quiet|-m\s*\d)|sed\s+(-n\s+)?['\"]?\d*q)\b")


def _code_lines(path: Path):
    for n, line in enumerate(path.read_text().splitlines(), 1):
        code = line.split("#", 1)[0] if not line.lstrip().startswith("#") else ""
        if code.strip():
            yield n, code


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_no_early_exit_reader_under_pipefail(script):
    text = script.read_text()
    if "pipefail" not in text:
        pytest.skip(f"{script.name} does not set pipefail")
    hits = [f"{script.name}:{n}: {code.strip()}" for n, code in _code_lines(script) if EARLY_EXIT_READER.search(code)]
    assert not hits, "a pipe into an early-exit reader under pipefail can exit 141 at random:\n" + "\n".join(hits)


def test_the_pattern_catches_what_killed_train_sh():
    # the line that killed the launch must be caught by the check above
    assert EARLY_EXIT_READER.search("MEM=$(nvidia-smi --query-gpu=memory.total | head -n 1 | awk '{print $1}')")
    assert not EARLY_EXIT_READER.search("MEM=$(nvidia-smi --query-gpu=memory.total | awk 'NR == 1 {print $1}')")


def test_awk_first_line_survives_a_long_writer():
    # what train.sh does now: a writer that keeps writing after the first line is read in full
    out = subprocess.run(
        ["bash", "-c", "set -euo pipefail; v=$(seq 81559 400000 | awk 'NR == 1 {printf \"%d\", $1 / 1024}'); echo $v"],
        capture_output=True, text=True, check=True,
    )
    assert out.stdout.strip() == "79"
