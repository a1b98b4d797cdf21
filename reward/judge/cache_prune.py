"""Keeping the durable verdict cache bounded: delete verdicts older than a cut-off and, on
request, every key-value entry (routings, JSON generations; rows written before they carried a
time have none), the judges' probe histories kept.

Data flow: an open :class:`VerdictCache` -> SQL deletes -> VACUUM (the file shrinks) -> counts.
"""

from __future__ import annotations

import time

from reward.judge.cache import VerdictCache


def prune_cache(cache: VerdictCache, *, older_than_days: float | None = None, kv: bool = False) -> dict[str, int]:
    """Delete verdicts created more than ``older_than_days`` ago (all with 0) and, with ``kv``,
    every routing/JSON entry. The judges' probe histories (``judge-signature``) stay: they are how
    a later run knows a judge by its numbers, not results to regrade. Returns ``{"verdicts": n,
    "kv": n}`` deleted."""
    from reward.judge.cache import SIGNATURE_NAMESPACE as NAMESPACE

    con = cache._conn()
    out = {"verdicts": 0, "kv": 0}
    if older_than_days is not None:
        cut = time.time() - older_than_days * 86400.0
        # rows written by SQLite < 3.42 under the old default carry no time: only "all" removes them
        where = "created IS NULL OR created <= ?" if older_than_days == 0 else "created <= ?"
        out["verdicts"] = con.execute(f"DELETE FROM verdicts WHERE {where}", (cut,)).rowcount
    if kv:
        out["kv"] = con.execute("DELETE FROM kv WHERE namespace != ?", (NAMESPACE,)).rowcount
    con.commit()
    con.execute("VACUUM")
    return out
