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
    cache.kv_put("judge-signature", "http:judge|probe-1", "{}")  # how a later run knows its judge: kept
    del cache
    res = CliRunner().invoke(app, ["cache", "prune", "--older-than-days", "30", "--routing",
                                   "--cache-dir", str(tmp_path)])
    assert res.exit_code == 0, res.output
    counts = json.loads(res.output)
    assert counts["verdicts"] == 1 and counts["kv"] == 1
    cache = VerdictCache(tmp_path / "verdicts.sqlite")
    assert set(cache.get_many(["old", "new"])) == {"new"} and cache.kv_get("routing", "k") is None
    assert cache.kv_get("judge-signature", "http:judge|probe-1") == "{}"


def test_prune_needs_a_criterion(tmp_path):
    assert CliRunner().invoke(app, ["cache", "prune", "--cache-dir", str(tmp_path)]).exit_code == 2


def test_a_cache_made_before_the_judge_columns_opens_and_quarantines_by_identity(tmp_path):
    """A cache file from before rows carried their judge: it opens (the columns are added), its old
    rows stay served, and quarantine_since moves only the rows the named identity wrote since then,
    verdicts and key-value rows alike, the probe history kept."""
    import sqlite3
    import time

    path = tmp_path / "verdicts.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE verdicts (key TEXT PRIMARY KEY, verdict TEXT NOT NULL, created REAL)")
    con.execute("CREATE TABLE kv (namespace TEXT, key TEXT, value TEXT, PRIMARY KEY (namespace, key))")
    con.execute("INSERT INTO verdicts VALUES ('old', ?, 1.0)", (Verdict(met=True, p_yes=0.9).model_dump_json(),))
    con.commit()
    con.close()
    cache = VerdictCache(path)
    since = time.time()
    cache.put_many([("a", Verdict(met=True, p_yes=0.8))], judge="http:A")
    cache.put_many([("b", Verdict(met=True, p_yes=0.7))], judge="http:B")
    cache.kv_put("routing", "r", "{}", judge="http:A")
    cache.kv_put("judge-signature", "http:A|probe-1", "{}", judge="http:A")
    assert cache.quarantine_since("http:A", since, "a test", keep=("judge-signature",)) == 2
    assert set(cache.get_many(["old", "a", "b"])) == {"old", "b"} and cache.kv_get("routing", "r") is None
    assert cache.kv_get("judge-signature", "http:A|probe-1") == "{}" and cache.quarantined() == 2
