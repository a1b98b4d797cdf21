"""``judge calibrate`` on two cases of the blind set's dev part, its per-leaf coverage checked
against the labels (issue 44): shared by the tiny-server and the SmolLM2 tests."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from reward.stress.sets import blind_dir
from rubricstree import app

runner = CliRunner()


def labelled_failures(part: str, n: int) -> dict[str, int]:
    """Per leaf, the distinct replies of the part's first ``n`` cases labelled to fail it (a good
    reply once per conversation): what calibration must count as the leaf's failing items, whatever
    the router does (a labelled failure is always an item)."""
    from reward.stress import load_cases
    from reward.tree import load_tree

    cases = load_cases(blind_dir() / part, load_tree())[:n]
    seen, out = set(), {}
    for c in cases:
        for text, failed in ((c.clean, c.clean_failed), (c.perturbed, c.failed)):
            for lid in failed:
                if (c.conversation, text, lid) not in seen:
                    seen.add((c.conversation, text, lid))
                    out[lid] = out.get(lid, 0) + 1
    return out


def calibrate_on_blind(judge_args: list[str], report) -> dict:
    """``judge calibrate`` on the blind set's dev part (its first two cases: the whole part is the
    benchmark's), the per-leaf coverage table checked against the labels."""
    res = runner.invoke(app, ["judge", "calibrate", *judge_args, "--cases", "blind:dev", "--limit-cases", "2",
                              "--json", "--quiet", "--report", str(report)])
    assert res.exit_code == 0, res.output
    rec = json.loads(res.stdout.strip().splitlines()[-1])
    from reward.stress import load_cases
    from reward.tree import load_tree

    total = len(load_cases(blind_dir() / "dev", load_tree()))
    assert rec["cases"] == f"blind:dev (2 of {total})", rec["cases"]
    wanted = labelled_failures("dev", 2)
    assert wanted, "the first two dev cases carry labelled failures"
    for lid, n in wanted.items():
        assert rec["coverage"][lid]["fail_items"] == n, (lid, rec["coverage"][lid])
    md = (report / "report.md").read_text(encoding="utf-8")
    assert "## Coverage, per leaf" in md
    rows = {line.split("|")[1].strip(): line for line in md.splitlines() if line.startswith("| ")}
    for lid, n in wanted.items():
        assert rows[lid].split("|")[2].strip() == str(n), rows[lid]  # the table's failing items
    return rec

