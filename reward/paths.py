"""Where rubricstree keeps its files: the user cache folder (verdicts, routings, fetched data),
the one way a file gets there from the network (:func:`download`: atomic, hash-checked), and the
shared data folder a checkout's tests, scripts and benchmarks read (:func:`shared_data_dir`).

The lowest layer: the judge's verdict cache, the fetched official grader template and the
downloaded HealthBench files all live under :func:`default_cache_dir`.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_DIR = "RUBRICSTREE_CACHE_DIR"
SHARED_DATA_ENV = "RUBRICSTREE_SHARED_DATA"
CHECKOUT = Path(__file__).resolve().parents[1]


def default_cache_dir() -> Path:
    """``$RUBRICSTREE_CACHE_DIR`` or the user's cache directory (platformdirs)."""
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("rubricstree"))


def shared_data_dir() -> Path | None:
    """The data shared beside the checkout and never committed (HealthBench-Hard sample, MedQA
    test rows): ``$RUBRICSTREE_SHARED_DATA`` when set, else ``../shared/data`` next to the
    checkout; None when that is not a folder. Never a machine path: a checkout elsewhere finds its own."""
    env = os.environ.get(SHARED_DATA_ENV)
    cand = Path(env).expanduser() if env else CHECKOUT.parent / "shared" / "data"
    return cand if cand.is_dir() else None


def shared_data_file(name: str) -> Path | None:
    """``name`` in :func:`shared_data_dir`, or None when the folder or the file is absent."""
    folder = shared_data_dir()
    return folder / name if folder is not None and (folder / name).is_file() else None


def download(url: str, dest: Path, *, sha256: str | None = None, expected: str = "the expected one") -> Path:
    """Stream ``url`` into ``dest`` through a temporary ``.part`` file, checked and renamed at once:
    an interrupted, failed or corrupt download never leaves a file at ``dest``.

    Args:
        sha256: the hex digest the file must have (computed while it streams); ``expected`` names
            it in the error ("the published one of HealthBench hard").

    Raises:
        InputError: HTTP error or status, or a digest that is not ``sha256`` (``file`` is the URL).
    """
    import hashlib

    import httpx

    from reward.errors import InputError

    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + f".part{os.getpid()}")
    digest = hashlib.sha256()
    try:
        with httpx.stream("GET", url, follow_redirects=True, timeout=60) as resp:
            if resp.status_code != 200:
                raise InputError(f"download failed: HTTP {resp.status_code}", file=url)
            with part.open("wb") as fh:
                for chunk in resp.iter_bytes(1 << 20):
                    fh.write(chunk)
                    digest.update(chunk)
    except (httpx.HTTPError, InputError) as exc:
        part.unlink(missing_ok=True)
        if isinstance(exc, InputError):
            raise
        raise InputError(f"download failed: {exc}", file=url) from exc
    if sha256 is not None and digest.hexdigest() != sha256.lower():
        part.unlink(missing_ok=True)
        raise InputError(f"the downloaded file's SHA-256 is not {expected} ({sha256})", file=url)
    os.replace(part, dest)
    return dest
