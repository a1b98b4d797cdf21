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
  still the hub's is named by its commit, ``rev-<commit>``: every file must be a link into the
  repository's ``blobs`` and every blob's content must match its name (the hub names a blob by
  its SHA-256, or by its git SHA-1 for small files), checked with the same remembered digests;
  a hub id that is not a local folder resolves to its snapshot in the local hub cache when there
  is one. A file written over a snapshot's link, or copied INTO a blob through its link, makes
  the folder an ordinary one, hashed in full.
- only a model folder (a folder with ``config.json`` or ``params.json``, or a weights file) is
  hashed: a root such as ``/dev/zero``, a pipe or ``/`` has no fingerprint (reading it would
  never end), and hashing stops at the run's deadline (``clock``).
- a server is named by what it reports in ``/v1/models`` (``root``, ``max_model_len``), the
  fingerprint of ``root`` when it is a model folder readable here, what else it reports about
  how it runs the model (vLLM version, KV-cache dtype and bytes per token, and dtype and
  quantization when it answers ``/server_info``: :mod:`reward.judge.server_facts`), the
  tokenizer and chat template that build the prompt ids (checked against the server at start-up,
  :mod:`reward.judge.startup`), and a user-settable ``revision`` (``JudgeSettings.revision``) for
  what a server cannot tell us. Every endpoint of a pool must agree on all of it. A server whose
  weights cannot be named by content (no answer at start-up, no ``root``, a ``root`` that is not
  a model folder readable here) may only use the verdict cache with a ``revision``
  (:func:`uncached_reason`): one that does not say what it serves grades without a cache.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import sqlite3
import stat
import sys
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from reward.errors import InputError

log = logging.getLogger(__name__)

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
# Trainer state that sits in checkpoint folders but never decides a judge's outputs.
NOT_MODEL = re.compile(r"^(optimizer|scheduler|rng_state)[^/]*\.(pt|pth|bin)$")
READ_BYTES = 8 << 20
MEMO_FILE = "file-hashes.sqlite"
PROGRESS_BYTES = 512 << 20  # a progress bar when more than this must be hashed
_COMMIT = re.compile(r"[0-9a-f]{40}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
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


def _blob_matches(blob: Path, memo: _Memo, progress=None) -> bool:
    """Whether a hub blob's content is what its name says: its SHA-256 (64 hex digits, large
    files), or its git blob SHA-1 (40 hex digits, small files)."""
    name = blob.name
    if _SHA256.fullmatch(name):
        return _digest(blob, memo, progress) == name
    if _COMMIT.fullmatch(name):
        h = hashlib.sha1(f"blob {blob.stat().st_size}\0".encode())  # noqa: S324 - git's own naming
        with blob.open("rb") as fh:
            while chunk := fh.read(READ_BYTES):
                h.update(chunk)
                if progress is not None:
                    progress(len(chunk))
        return h.hexdigest() == name
    return False


def hub_snapshot_revision(p: Path, memo: _Memo | None = None, progress=None) -> str | None:
    """The commit of a hub snapshot folder whose files are all still links into its ``blobs``
    with the content their names say; None for anything else (an ordinary folder, a file written
    over a link, a blob written through its link)."""
    if not (p.parent.name == "snapshots" and p.parent.parent.name.startswith("models--")
            and _COMMIT.fullmatch(p.name) and p.is_dir()):
        return None
    blobs = (p.parent.parent / "blobs").resolve()
    links = []
    for f in p.rglob("*"):
        if f.is_dir() and not f.is_symlink():
            continue
        if not f.is_symlink() or blobs not in f.resolve().parents or not f.resolve().is_file():
            return None
        links.append(f.resolve())
    own = memo is None
    memo = memo or _Memo()
    try:
        if not all(_blob_matches(b, memo, progress) for b in links):
            return None
    finally:
        if own:
            memo.close()
    return p.name


def is_model_path(p: Path) -> bool:
    """Whether ``p`` looks like a model a server loads: a folder with ``config.json`` or
    ``params.json`` (or a ``.gguf``), or a regular weights file. Anything else (``/dev/zero``, a
    pipe, ``/``, a stray file) is not hashed: reading it could take for ever."""
    try:
        if p.is_dir():
            return any((p / f).is_file() for f in ("config.json", "params.json")) or any(p.glob("*.gguf"))
        return stat.S_ISREG(p.stat().st_mode) and p.suffix in WEIGHT_SUFFIXES
    except OSError:
        return False


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


def model_fingerprint(path: str | Path, *, progress: bool | None = None, clock=None) -> str | None:
    """A content fingerprint of a local model folder or file (16 hex chars), ``rev-<commit>``
    for an untouched hub snapshot, or None when ``path`` is neither a model here (see
    :func:`is_model_path`) nor in the hub cache.

    ``clock``: an object whose ``check()`` raises when the time for start-up is spent
    (:class:`reward.judge.startup.StartupClock`); it is called between blocks of every file read.
    """
    p = Path(path)
    if not p.exists():
        snap = local_snapshot(str(path))
        if snap is None:
            return None
        p = snap
    try:
        p = p.resolve()
    except (OSError, RuntimeError):  # a link loop: nothing to read
        return None
    if not is_model_path(p):
        return None
    try:
        return _content_fingerprint(p, progress, clock)
    except OSError as exc:  # a file that cannot be read (permissions, removed meanwhile): not named by content
        log.warning("cannot fingerprint the model at %s: %s", p, exc)
        return None


def _content_fingerprint(p: Path, progress: bool | None, clock) -> str:
    tick = (lambda n: clock.check()) if clock is not None else None
    memo = _Memo()
    try:
        rev = hub_snapshot_revision(p, memo, tick)
    except BaseException:
        memo.close()
        raise
    if rev:
        memo.close()
        return f"rev-{rev}"
    files = model_files(p)
    todo = sum(f.stat().st_size for f in files)
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
        if tick is not None:
            shown = update
            update = (lambda n: (tick(n), shown(n))) if shown is not None else tick
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


_COMPUTE = object()  # served_model_id's default: fingerprint the root here


def served_model_id(model: str, entry: Mapping[str, Any] | None, revision: str | None = None,
                    facts: Mapping[str, str] | None = None, *, weights: Any = _COMPUTE,
                    tokenizer: str | None = None) -> str:
    """A served judge's identity from its ``/v1/models`` entry (None: the server did not say),
    what else it reports about how it runs the model (``facts``: vLLM version, cache dtype, and
    dtype and quantization where it tells them; :mod:`reward.judge.server_facts`), the content
    fingerprint of its weights (``weights``; by default computed from the entry's ``root``), the
    fingerprint of the tokenizer and chat template that build the prompt ids (``tokenizer``) and
    the user's ``revision``."""
    from reward.judge.server_facts import facts_suffix

    out = f"http:{model}"
    if entry:
        root = entry.get("root")
        if root:
            out += f"@{root}"
            fp = model_fingerprint(str(root)) if weights is _COMPUTE else weights
            if fp:
                out += f"#{fp}"
        if entry.get("max_model_len"):
            out += f"~{entry['max_model_len']}"
    out += facts_suffix(facts)
    if tokenizer:
        out += f"+tok-{tokenizer}"
    if revision:
        out += f"!{revision}"
    return out


def identity_established(entry: Mapping[str, Any] | None, weights: str | None = None) -> bool:
    """Whether a server's ``/v1/models`` entry names the served weights (vLLM's ``root``) and
    their content is known here (``weights``, the root's fingerprint)."""
    return bool(entry and entry.get("root") and weights)


def pinned_hosted_snapshot(model: str, urls: list[str]) -> bool:
    """Whether ``model`` is a provider's dated snapshot id (``gpt-4.1-2025-04-14``) at a hosted API:
    the provider vouches that the name always serves the same weights. A local server's names
    carry no such promise (llama.cpp and Ollama serve whatever file is loaded under a name)."""
    from reward.serving import is_local_url

    return bool(_DATED.search(model)) and not any(is_local_url(u) for u in urls)


_DATED = re.compile(r"-(19|20)\d\d-?(0[1-9]|1[0-2])-?(0[1-9]|[12]\d|3[01])$")


def uncached_reason(model: str, entry: Mapping[str, Any] | None, revision: str | None, urls: list[str], *,
                    weights: str | None = None) -> str | None:
    """Whether a served judge's verdicts may be cached: None when they may, else why not (the
    judge then grades without the verdict cache, saying so once).

    Who grades must be known for a cached verdict to be served again. It is, when the user names
    the weights (``revision``), when the server reports a ``root`` whose content is fingerprinted
    here (``weights``), or for a provider's dated snapshot at a hosted API
    (:func:`pinned_hosted_snapshot`). A server that does not say what it serves (no
    ``/v1/models`` entry for the name, or one without ``root``: llama.cpp, Ollama, most gateways)
    is graded without a cache.

    Raises:
        InputError: the server reports a ``root`` whose content cannot be fingerprinted here (a
            remote server, or a path that is not a model): it says what it serves but nothing here
            can check it, so a revision (or ``--no-cache``) must be named.
    """
    if revision:
        return None
    if entry and entry.get("root"):
        if weights:
            return None
        raise InputError(
            f"the judge served as '{model}' at {', '.join(urls)} reports its weights at "
            f"'{str(entry['root'])[:200]}', which is not a model folder readable here (a remote server, or a path "
            "that is not a model), so their content cannot be fingerprinted and cached verdicts of another judge "
            "could be served: name the weights with a revision (--judge-revision, judge.revision in a config, or "
            "$RUBRICSTREE_JUDGE_REVISION) or run without the verdict cache (--no-cache)", field="revision")
    if entry and pinned_hosted_snapshot(model, urls):
        return None
    why = ("gave no /v1/models entry for it (no answer at start-up, or another name)" if entry is None
           else "lists it without the 'root' that names its weights (a server that does not say what it serves)")
    return (f"the judge served as '{model}' at {', '.join(urls)} {why}: another model loaded under the same name "
            "would be served this one's verdicts, so it grades WITHOUT the verdict cache. Name the weights with a "
            "revision you vouch for (--judge-revision, judge.revision in a config, $RUBRICSTREE_JUDGE_REVISION) to "
            "cache")


def transport_reason(model: str, revision: str | None) -> str | None:
    """Why a judge given its own httpx transport may not cache (None with a revision): start-up
    does not ask such a judge who it is (the transport may be a test double or a proxy), so only a
    revision the user names can stand for its weights."""
    if revision:
        return None
    return (f"the judge '{model}' was given its own HTTP transport, so start-up did not ask the server which "
            "weights it serves: it grades WITHOUT the verdict cache. Name the weights with a revision you vouch "
            "for (revision=...) to cache")


def cache_or_reason(model: str, known: Any, revision: str | None, urls: list[str], cache: Any, *,
                    own_transport: bool, asked: bool = True) -> tuple[str | None, Any]:
    """``(why, cache)`` for a served judge (vLLM completions or chat) at start-up: why who grades
    cannot be known (None when it can), and the verdict cache it may use (None when it cannot: two
    judges would share verdicts; the reason is logged). ``known``: what start-up learnt
    (``reward.judge.startup.establish``), None when it did not ask; ``own_transport``: the judge
    was given its own httpx transport (start-up asks nobody, so only a revision stands for its
    weights); ``asked``: start-up was to ask (a chat judge built with ``discover=False`` is not)."""
    if own_transport:
        why = transport_reason(model, revision)
    elif known is None and not asked:
        return None, cache
    else:
        why = unknown_reason(model, known.entry if known else None, revision, urls,
                             weights=known.weights if known else None, cached=cache is not None)
    if why and cache is not None:
        log.warning("%s", why)
        cache = None
    return why, cache


def unknown_reason(model: str, entry: Mapping[str, Any] | None, revision: str | None, urls: list[str], *,
                   weights: str | None = None, cached: bool = True) -> str | None:
    """:func:`uncached_reason` for a judge built with the verdict cache (``cached``: its refusal
    raised) or without it (the refusal returned as the reason): why who grades cannot be known,
    or None. The judge gate refuses a judge with a reason (``reward.calibration.gate``)."""
    try:
        return uncached_reason(model, entry, revision, urls, weights=weights)
    except InputError as exc:
        if cached:
            raise
        return exc.reason


def chat_model_id(url: str, model: str, root: str | None = None, facts: Mapping[str, str] | None = None,
                  revision: str | None = None, *, weights: Any = _COMPUTE, template: str | None = None) -> str:
    """A chat-API judge's identity: the endpoint's host and the model name (all a hosted API
    reports), plus, from a vLLM server, the weights it reports (``root``) and their content
    fingerprint (``weights``; by default computed from ``root``), how it runs them (``facts``),
    the fingerprint of the prompt ids its own tokenizer and chat template build for a fixed probe
    conversation (``template``), and the user's ``revision``. The judge and an evaluation's
    record both use it."""
    from urllib.parse import urlparse

    from reward.judge.server_facts import facts_suffix

    host = urlparse(url).netloc.rsplit("@", 1)[-1]  # never credentials
    out = f"chat:{host}:{model}"
    if root:
        fp = model_fingerprint(str(root)) if weights is _COMPUTE else weights
        out += f"@{root}" + (f"#{fp}" if fp else "") + facts_suffix(facts)
    if template:
        out += f"+tpl-{template}"
    return out + (f"!{revision}" if revision else "")
