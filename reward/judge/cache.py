"""A durable verdict cache in SQLite, shared safely by several processes.

A verdict is keyed by a hash of everything that decides it: the backend's model identity, the
mode, the template version, the conversation, the response, the criterion and its points. A
cached verdict costs no judge request, which makes evaluation resumable and re-scoring free.
SQLite in WAL mode lets trainer workers and evaluation jobs read while one writes; we use the
standard library's sqlite3 rather than a key-value package because WAL + busy timeout is all
the concurrency control needed and it adds no dependency.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from reward.judge.templates import Template
from reward.judge.types import JudgeItem, Verdict
from reward.paths import default_cache_dir

# where the cache keeps each judge identity's probe answers (reward.judge.signature): how a later
# run knows the judge by its numbers; quarantine and prune --routing leave it
SIGNATURE_NAMESPACE = "judge-signature"


def verdict_key(model_id: str, template: Template, item: JudgeItem) -> str:
    payload = json.dumps([
        model_id, template.mode, template.version,
        [[m.role, m.content] for m in item.conversation], item.response, item.criterion, item.points,
    ], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


class VerdictCache:
    """Key -> verdict JSON. Only successful verdicts are stored: a failure is retried next time."""

    def __init__(self, path: str | Path | None = None) -> None:
        path = Path(path) if path is not None else default_cache_dir() / "verdicts.sqlite"
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._local = threading.local()
        with self._conn() as con:
            con.execute("CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, verdict TEXT NOT NULL,"
                        " created REAL DEFAULT (CAST(strftime('%s', 'now') AS REAL)))")  # unixepoch('subsec') needs SQLite 3.42
            con.execute("CREATE TABLE IF NOT EXISTS kv (namespace TEXT, key TEXT, value TEXT,"
                        " PRIMARY KEY (namespace, key))")
            # verdicts (and JSON generations) of a judge that proved to be another during a run
            # (reward.judge.watch): kept for inspection, never served
            con.execute("CREATE TABLE IF NOT EXISTS quarantine (namespace TEXT, key TEXT, value TEXT, reason TEXT,"
                        " at REAL DEFAULT (CAST(strftime('%s', 'now') AS REAL)), PRIMARY KEY (namespace, key))")
            # who wrote each row and when, so a judge that proved to be another has every row it wrote
            # since its last good probe quarantined, whichever process wrote it (reward.judge.watch)
            for table, column in (("verdicts", "judge"), ("kv", "judge"), ("kv", "created")):
                have = {row[1] for row in con.execute(f"PRAGMA table_info({table})")}
                if column not in have:  # a cache made before these columns: its old rows have none
                    try:
                        con.execute(f"ALTER TABLE {table} ADD COLUMN {column} {'REAL' if column == 'created' else 'TEXT'}")
                    except sqlite3.OperationalError as exc:  # another process added it a moment ago
                        if "duplicate column" not in str(exc):
                            raise
            # quarantine_since selects by these two (without an index: a scan of the whole cache)
            con.execute("CREATE INDEX IF NOT EXISTS verdicts_judge_created ON verdicts (judge, created)")
            con.execute("CREATE INDEX IF NOT EXISTS kv_judge_created ON kv (judge, created)")

    def _conn(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            con.execute("PRAGMA busy_timeout=30000")
            self._local.con = con
        return con

    def get_many(self, keys: Sequence[str]) -> dict[str, Verdict]:
        out: dict[str, Verdict] = {}
        con = self._conn()
        for start in range(0, len(keys), 500):  # SQLite caps the number of bound parameters
            chunk = list(keys[start:start + 500])
            q = f"SELECT key, verdict FROM verdicts WHERE key IN ({','.join('?' * len(chunk))})"
            for key, raw in con.execute(q, chunk):
                out[key] = Verdict.model_validate_json(raw).model_copy(update={"cached": True})
        return out

    def put_many(self, pairs: Iterable[tuple[str, Verdict]], judge: str | None = None) -> None:
        """Store the successful verdicts; ``judge``: the identity that graded them (what
        :meth:`quarantine_since` selects by)."""
        now = time.time()
        rows = [(k, v.model_copy(update={"cached": False}).model_dump_json(), judge, now) for k, v in pairs if v.ok]
        if rows:
            con = self._conn()
            con.execute("BEGIN IMMEDIATE")
            try:
                con.executemany("INSERT OR REPLACE INTO verdicts (key, verdict, judge, created) VALUES (?, ?, ?, ?)", rows)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise

    # A small namespaced store for other durable results (routings), so one file holds all.
    def kv_get(self, namespace: str, key: str) -> str | None:
        row = self._conn().execute("SELECT value FROM kv WHERE namespace=? AND key=?", (namespace, key)).fetchone()
        return row[0] if row else None

    def kv_get_many(self, namespace: str, keys: Sequence[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        con = self._conn()
        for start in range(0, len(keys), 500):  # SQLite caps the number of bound parameters
            chunk = list(keys[start:start + 500])
            q = f"SELECT key, value FROM kv WHERE namespace=? AND key IN ({','.join('?' * len(chunk))})"
            out.update(con.execute(q, [namespace, *chunk]).fetchall())
        return out

    def kv_put(self, namespace: str, key: str, value: str, judge: str | None = None) -> None:
        """Store ``value``; ``judge``: the identity whose answers made it (a JSON generation, a
        routing by an LLM router), so :meth:`quarantine_since` finds it."""
        self._conn().execute("INSERT OR REPLACE INTO kv (namespace, key, value, judge, created) VALUES (?, ?, ?, ?, ?)",
                             (namespace, key, value, judge, time.time()))

    def quarantine(self, keys: Iterable[tuple[str | None, str]], reason: str) -> int:
        """Move the given rows (``(None, verdict key)`` or ``(namespace, kv key)``) out of what is
        served into the quarantine table, with ``reason``; returns how many were moved. A later
        verdict stored under the same key (the right judge grading the item again) is served as
        usual; the quarantined row stays."""
        keys = list(keys)
        if not keys:
            return 0
        con = self._conn()
        moved = 0
        con.execute("BEGIN IMMEDIATE")
        try:
            for ns, key in keys:
                if ns is None:
                    row = con.execute("SELECT verdict FROM verdicts WHERE key=?", (key,)).fetchone()
                    if row is not None:
                        con.execute("DELETE FROM verdicts WHERE key=?", (key,))
                else:
                    row = con.execute("SELECT value FROM kv WHERE namespace=? AND key=?", (ns, key)).fetchone()
                    if row is not None:
                        con.execute("DELETE FROM kv WHERE namespace=? AND key=?", (ns, key))
                if row is not None:
                    con.execute("INSERT OR REPLACE INTO quarantine (namespace, key, value, reason) VALUES (?, ?, ?, ?)",
                                ("" if ns is None else ns, key, row[0], reason))
                    moved += 1
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return moved

    def quarantine_since(self, judge: str, since: float, reason: str, *, keep: Sequence[str] = (),
                         until: float | None = None) -> int:
        """Move every row ``judge`` wrote at or after ``since`` (and at or before ``until``; wall
        time) out of what is served, verdicts and key-value rows alike (JSON generations, routings
        made from its answers), by whichever process wrote them; the namespaces in ``keep`` stay
        (the identity's probe history). Returns how many were moved."""
        con = self._conn()
        end = float("inf") if until is None else until
        con.execute("BEGIN IMMEDIATE")
        try:
            rows = [("", k, v) for k, v in con.execute(
                "SELECT key, verdict FROM verdicts WHERE judge=? AND created>=? AND created<=?", (judge, since, end))]
            con.execute("DELETE FROM verdicts WHERE judge=? AND created>=? AND created<=?", (judge, since, end))
            marks = ",".join("?" * len(keep))
            spare = f" AND namespace NOT IN ({marks})" if keep else ""
            rows += con.execute(f"SELECT namespace, key, value FROM kv WHERE judge=? AND created>=? AND created<=?"
                                f"{spare}", (judge, since, end, *keep)).fetchall()
            con.execute(f"DELETE FROM kv WHERE judge=? AND created>=? AND created<=?{spare}",
                        (judge, since, end, *keep))
            con.executemany("INSERT OR REPLACE INTO quarantine (namespace, key, value, reason) VALUES (?, ?, ?, ?)",
                            [(ns, k, v, reason) for ns, k, v in rows])
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return len(rows)

    def quarantined(self) -> int:
        """How many rows are in quarantine."""
        return self._conn().execute("SELECT COUNT(*) FROM quarantine").fetchone()[0]

    def __len__(self) -> int:
        return self._conn().execute("SELECT COUNT(*) FROM verdicts").fetchone()[0]
