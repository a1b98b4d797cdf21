"""``rubricstree cache prune`` (issue 10, smaller list): the SQLite cache grew without bound."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from reward.judge import Verdict, VerdictCache
from rubricstree import app


def test_prune_deletes_old_verdicts_and_routings(tmp_path):
    cache = VerdictCache(tmp_path / "verdicts.sqlite")
    cache.put_many([("old", Verdict(met=True, p_yes=0.9)), ("new", Verdict(met=False, p_yes=0.1))])
    cache._conn().execute("UPDATE verdicts SET created = created - 40 * 86400 WHERE key = 'old'")
    cache._conn().commit()
    cache.kv_put("routing", "k", "{}")
    del cache
    res = CliRunner().invoke(app, ["cache", "prune", "--older-than-days", "30", "--routing",
                                   "--cache-dir", str(tmp_path)])
    assert res.exit_code == 0, res.output
    counts = json.loads(res.output)
    assert counts["verdicts"] == 1 and counts["kv"] == 1
    cache = VerdictCache(tmp_path / "verdicts.sqlite")
    assert set(cache.get_many(["old", "new"])) == {"new"} and cache.kv_get("routing", "k") is None


def test_prune_needs_a_criterion(tmp_path):
    assert CliRunner().invoke(app, ["cache", "prune", "--cache-dir", str(tmp_path)]).exit_code == 2
