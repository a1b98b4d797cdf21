"""Who the judge is, by content: the part of the verdict cache key and of an evaluation's
``config.json`` that names the judge.

A path or a served name is not an identity: new weights copied over the same folder, or another
model served under the same name, would be served the old judge's verdicts. So:

- a local model folder is fingerprinted by its content (:func:`model_fingerprint`): the name,
  size and full SHA-256 of every file the model loads (weights, config, tokenizer), so a change
  of any byte changes it. Hashing a 16 GB judge reads all 16 GB once (figures in
  ``docs/reliability.md``, ``scripts/bench_judge_identity.py``); the digest of each file is
  remembered in ``file-hashes.sqlite`` in the cache directory and reused while the file's
  device, inode, size, mtime and ctime are unchanged (any write changes the ctime, which no user
  can set back), so later runs only ``stat`` the files. The value does not depend on where the
  folder lives (a copy has the same fingerprint) and is stable across runs and machines.
- a Hugging Face hub snapshot (``.../models--org--name/snapshots/<commit>``) whose files are
  still the hub's (links into its ``blobs``) is named by its commit, ``rev-<commit>``, with
  nothing to hash; a hub id that is not a local folder resolves to its snapshot in the local hub
  cache when there is one. A file written over a snapshot's link makes the folder an ordinary
  one, hashed in full.
- a server is named by what it reports in ``/v1/models`` (``root``, ``max_model_len``), the
  fingerprint of ``root`` when it is readable here, what else it reports about how it runs the
  model (vLLM version, KV-cache dtype, and dtype and quantization when it answers
  ``/server_info``: :mod:`reward.judge.server_facts`), and a user-settable ``revision``
  (``JudgeSettings.revision``) for what a server cannot tell us. A server whose entry cannot be
  read (no answer at start-up, or no ``root``) has no established identity: such a judge may
  only use the verdict cache with a ``revision`` (:func:`require_identity`).
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import sys
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from reward.errors import InputError

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
# Trainer state that sits in checkpoint folders but never decides a judge's outputs.
NOT_MODEL = re.compile(r"^(optimizer|scheduler|rng_state)[^/]*\.(pt|pth|bin)$")
READ_BYTES = 8 << 20
MEMO_FILE = "file-hashes.sqlite"
PROGRESS_BYTES = 512 << 20  # a progress bar when more than this must be hashed
_COMMIT = re.compile(r"[0-9a-f]{40}")
_memo_local: dict[tuple, str] = {}


class _Memo:
    """Path -> (dev, inode, size, mtime, ctime, sha256) in SQLite; unusable storage: no memo."""

    def __init__(self) -> None:
        self.con = None
        try:
            from reward.judge.cache import default_cache_dir

            folder = default_cache_dir()
            folder.mkdir(parents=True, exist_ok=True)
            self.con = sqlite3.connect(folder / MEMO_FILE, timeout=30.0, isolation_level=None,
                                       check_same_thread=False)
            self.con.execute("PRAGMA busy_timeout=30000")
            self.con.execute("CREATE TABLE IF NOT EXISTS file_hashes (path TEXT PRIMARY KEY, stat TEXT NOT NULL,"
                             " sha256 TEXT NOT NULL)")
        except (OSError, sqlite3.Error):
            self.con = None

    def get(self, path: str, stat: str) -> str | None:
        if self.con is None:
            return None
        try:
            row = self.con.execute("SELECT sha256 FROM file_hashes WHERE path=? AND stat=?", (path, stat)).fetchone()
        except sqlite3.Error:
            return None
        return row[0] if row else None

    def put(self, path: str, stat: str, digest: str) -> None:
        if self.con is not None:
            try:
                self.con.execute("INSERT OR REPLACE INTO file_hashes (path, stat, sha256) VALUES (?, ?, ?)",
                                 (path, stat, digest))
            except sqlite3.Error:
                pass

    def close(self) -> None:
        if self.con is not None:
            self.con.close()


def _stat_key(st: os.stat_result) -> str:
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def file_sha256(path: Path, progress=None) -> str:
    """The SHA-256 of one file, read in 8 MiB blocks (hashlib releases the GIL: threads scale)."""
    h = hashlib.sha256()
    buf = bytearray(READ_BYTES)
    view = memoryview(buf)
    with path.open("rb", buffering=0) as fh:
        while n := fh.readinto(buf):
            h.update(view[:n])
            if progress is not None:
                progress(n)
    return h.hexdigest()


def _digest(f: Path, memo: _Memo, progress=None) -> str:
    """The file's SHA-256, from the memo while its stat is unchanged; a file that changed while
    it was read is read again (and not remembered if it keeps changing)."""
    for _ in range(3):
        before = _stat_key(f.stat())
        key = (str(f), before)
        hit = _memo_local.get(key) or memo.get(*key)
        if hit:
            _memo_local[key] = hit
            return hit
        digest = file_sha256(f, progress)
        if _stat_key(f.stat()) == before:
            _memo_local[key] = digest
            memo.put(str(f), before, digest)
            return digest
    return digest


def hub_snapshot_revision(p: Path) -> str | None:
    """The commit of a hub snapshot folder whose files are all still links into its ``blobs``;
    None for anything else (an ordinary folder, a snapshot with a file written over a link)."""
    if not (p.parent.name == "snapshots" and p.parent.parent.name.startswith("models--")
            and _COMMIT.fullmatch(p.name) and p.is_dir()):
        return None
    blobs = (p.parent.parent / "blobs").resolve()
    for f in p.rglob("*"):
        if f.is_dir() and not f.is_symlink():
            continue
        if not f.is_symlink() or blobs not in f.resolve().parents:
            return None
    return p.name


def local_snapshot(model: str) -> Path | None:
    """The local hub-cache snapshot folder of a hub id (no network), or None."""
    if "/" not in model or model.startswith(("/", ".", "~")):
        return None
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(model, local_files_only=True))
    except Exception:  # not cached, no huggingface_hub, a malformed id: nothing local
        return None


def model_files(p: Path) -> list[Path]:
    """The files of a model folder that decide its outputs (not ``.cache``, not trainer state)."""
    if not p.is_dir():
        return [p]
    return sorted(f for f in p.rglob("*") if f.is_file() and ".cache" not in f.relative_to(p).parts
                  and not NOT_MODEL.match(f.name))


def model_fingerprint(path: str | Path, *, progress: bool | None = None) -> str | None:
    """A content fingerprint of a local model folder or file (16 hex chars), ``rev-<commit>``
    for an untouched hub snapshot, or None when ``path`` is neither local nor in the hub cache."""
    p = Path(path)
    if not p.exists():
        snap = local_snapshot(str(path))
        if snap is None:
            return None
        p = snap
    p = p.resolve()
    rev = hub_snapshot_revision(p)
    if rev:
        return f"rev-{rev}"
    files = model_files(p)
    todo = sum(f.stat().st_size for f in files)
    memo = _Memo()
    bar = None
    try:
        if progress is not False and todo > PROGRESS_BYTES:
            uncached = [f for f in files if not (_memo_local.get((str(f), _stat_key(f.stat())))
                                                 or memo.get(str(f), _stat_key(f.stat())))]
            left = sum(f.stat().st_size for f in uncached)
            if left > PROGRESS_BYTES:
                from tqdm import tqdm

                bar = tqdm(total=left, unit="B", unit_scale=True, desc=f"hashing judge {p.name}",
                           file=sys.stderr, disable=progress is None and not sys.stderr.isatty())
        update = bar.update if bar is not None else None
        with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1, len(files)))) as pool:
            digests = list(pool.map(lambda f: _digest(f, memo, update), files))
    finally:
        if bar is not None:
            bar.close()
        memo.close()
    h = hashlib.sha256()
    for f, digest in zip(files, digests):
        rel = f.relative_to(p).as_posix() if p.is_dir() else f.name
        h.update(f"{rel}\0{f.stat().st_size}\0{digest}\n".encode())
    return h.hexdigest()[:16]


def local_model_id(model: str, dtype: str) -> str:
    """The in-process judge's identity: name, dtype and content fingerprint."""
    fp = model_fingerprint(model)
    return f"hf:{model}:{dtype}" + (f":{fp}" if fp else "")


def served_model_id(model: str, entry: Mapping[str, Any] | None, revision: str | None = None,
                    facts: Mapping[str, str] | None = None) -> str:
    """A served judge's identity from its ``/v1/models`` entry (None: the server did not say) and
    what else it reports about how it runs the model (``facts``: vLLM version, cache dtype, and
    dtype and quantization where it tells them; :mod:`reward.judge.server_facts`)."""
    from reward.judge.server_facts import facts_suffix

    out = f"http:{model}"
    if entry:
        root = entry.get("root")
        if root:
            out += f"@{root}"
            fp = model_fingerprint(str(root))
            if fp:
                out += f"#{fp}"
        if entry.get("max_model_len"):
            out += f"~{entry['max_model_len']}"
    out += facts_suffix(facts)
    if revision:
        out += f"!{revision}"
    return out


def identity_established(entry: Mapping[str, Any] | None) -> bool:
    """Whether a server's ``/v1/models`` entry names the served weights (vLLM's ``root``)."""
    return bool(entry and entry.get("root"))


def require_identity(model: str, entry: Mapping[str, Any] | None, revision: str | None, urls: list[str], *,
                     need_root: bool = True) -> None:
    """Refuse a verdict cache for a served judge whose identity cannot be established.

    ``need_root``: the token-id backend (vLLM) needs the ``root`` naming the weights; the chat
    backend (hosted graders name their models by dated ids) needs the model listed at all.

    Raises:
        InputError: ``/v1/models`` gave no entry (with a ``root``) for ``model`` and no revision
            was named (two judges served under one name would share verdicts).
    """
    if revision or (identity_established(entry) if need_root else bool(entry)):
        return
    why = ("gave no /v1/models entry for it (no answer at start-up, or another name)" if entry is None
           else "lists it without the 'root' that names its weights")
    raise InputError(
        f"the judge served as '{model}' at {', '.join(urls)} {why}, so who grades cannot be established "
        "and cached verdicts of another judge could be served: name the weights with a revision "
        "(--judge-revision, judge.revision in a config, or $RUBRICSTREE_JUDGE_REVISION) or run without the "
        "verdict cache (--no-cache)",
        field="revision")


def chat_model_id(url: str, model: str, root: str | None = None, facts: Mapping[str, str] | None = None,
                  revision: str | None = None) -> str:
    """A chat-API judge's identity: the endpoint's host and the model name (all a hosted API
    reports), plus, from a vLLM server, the weights it reports (``root``) and how it runs them
    (``facts``), and the user's ``revision``. The judge and an evaluation's record both use it."""
    from urllib.parse import urlparse

    from reward.judge.server_facts import facts_suffix

    host = urlparse(url).netloc.rsplit("@", 1)[-1]  # never credentials
    out = f"chat:{host}:{model}"
    if root:
        out += f"@{root}" + facts_suffix(facts)
    return out + (f"!{revision}" if revision else "")

