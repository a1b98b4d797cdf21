"""Who the judge is, by content: the part of the verdict cache key and of an evaluation's
``config.json`` that names the judge.

A path or a served name is not an identity: new weights copied over the same folder, or another
model served under the same name, would be served the old judge's verdicts. So:

- a local model folder is fingerprinted by its content (:func:`model_fingerprint`): the names and
  sizes of its files, the full bytes of its small files (config, tokenizer, index) and, for
  weight files, their safetensors header plus 16 evenly spaced 64 KiB samples. Any retrained or
  replaced checkpoint changes it; reading it costs a few MiB, not the whole model. The value is
  stable across runs and machines (no mtimes), so a cache keeps hitting for the same judge.
- a server is named by what it reports in ``/v1/models`` (``root``, ``max_model_len``), the
  fingerprint of ``root`` when that folder is readable here, and a user-settable ``revision``
  (``JudgeSettings.revision``) for what a server cannot tell us (new weights at the same hub id).
- a hub id that is not a local folder is used as given (with the revision when one is set).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
SMALL_FILE_BYTES = 8 << 20  # files below this are hashed whole (configs, tokenizers, indexes)
SAMPLES, SAMPLE_BYTES = 16, 64 << 10


def model_fingerprint(path: str | Path) -> str | None:
    """A content fingerprint (16 hex chars) of a local model folder or file; None when ``path``
    is not local (a hub id)."""
    p = Path(path)
    if not p.exists():
        return None
    p = p.resolve()
    files = sorted(f for f in (p.rglob("*") if p.is_dir() else [p])
                   if f.is_file() and not (p.is_dir() and ".cache" in f.relative_to(p).parts))
    stats = tuple((str(f.relative_to(p) if p.is_dir() else f.name), f.stat().st_size, f.stat().st_mtime_ns)
                  for f in files)
    return _fingerprint(str(p), stats)


@lru_cache(maxsize=32)
def _fingerprint(root: str, stats: tuple) -> str:
    """Cached per (folder, file names/sizes/mtimes): a rewritten file is read again."""
    base = Path(root)
    h = hashlib.sha256()
    for rel, size, _mtime in stats:
        f = base / rel if base.is_dir() else base
        h.update(f"{rel}\0{size}\0".encode())
        with f.open("rb") as fh:
            if size <= SMALL_FILE_BYTES and not rel.endswith(WEIGHT_SUFFIXES):
                h.update(fh.read())
                continue
            if rel.endswith(".safetensors") and size >= 8:
                (n,) = struct.unpack("<Q", fh.read(8))
                h.update(fh.read(min(n, SMALL_FILE_BYTES)))
            for k in range(SAMPLES):
                fh.seek(max(0, (size - SAMPLE_BYTES) * k // max(1, SAMPLES - 1)))
                h.update(fh.read(SAMPLE_BYTES))
    return h.hexdigest()[:16]


def local_model_id(model: str, dtype: str) -> str:
    """The in-process judge's identity: name, dtype and content fingerprint."""
    fp = model_fingerprint(model)
    return f"hf:{model}:{dtype}" + (f":{fp}" if fp else "")


def served_model_id(model: str, entry: Mapping[str, Any] | None, revision: str | None = None) -> str:
    """A served judge's identity from its ``/v1/models`` entry (None: the server did not say)."""
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
    if revision:
        out += f"!{revision}"
    return out
