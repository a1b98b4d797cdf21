"""Locate a HealthBench file, check it against the published hashes, and name its variant.

``--data`` may be a local path, an http(s) URL (downloaded once into the cache folder), a
variant name (``full``, ``hard``, ``consensus``: the official URL) or ``easy`` (full minus hard,
derived from the two official files). When the file's name is one
of the published names, its SHA-256 must be the published one: a score on a modified file must
not be reported as a HealthBench score. The variant decides the length-adjustment coefficient.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from reward.errors import InputError
from reward.healthbench.variants import LENGTH_ADJUST, VARIANTS, sha256_file
from reward.paths import download

log = logging.getLogger(__name__)

DEFAULT_VARIANT = "hard"  # the length-adjustment coefficient used when nothing identifies the file


@dataclass(frozen=True)
class HealthBenchData:
    """A resolved data file.

    Attributes:
        path: the local file.
        source: what the user gave (path, URL or variant name).
        sha256: the file's SHA-256.
        variant: ``full``/``hard``/``consensus``/``professional``, or None when unknown.
        variant_source: how the variant was found: ``sha256``, ``format``, ``file name`` or None.
    """

    path: Path
    source: str
    sha256: str
    variant: str | None
    variant_source: str | None

    @property
    def length_adjust_variant(self) -> str:
        return self.variant if self.variant in LENGTH_ADJUST else DEFAULT_VARIANT


def _by_file_name(name: str):
    return next((v for v in VARIANTS.values() if v.file_name == name), None)


def _download(url: str, cache_dir: Path) -> Path:

    name = Path(urlparse(url).path).name
    if name in ("", ".", ".."):
        name = "healthbench.jsonl"
    # keyed by the whole URL: /a/data.jsonl and /b/data.jsonl are two files (the name is kept
    # for the variant check)
    dest = cache_dir / "healthbench" / hashlib.sha256(url.encode()).hexdigest()[:16] / name
    if dest.is_file():
        return dest
    log.info("downloading %s to %s", url, dest)
    known = _by_file_name(name)
    try:  # atomic and hash-checked: a failed download leaves no file behind
        return download(url, dest, sha256=known.sha256 if known else None,
                        expected=f"the published one of HealthBench {known.name}" if known else "the expected one")
    except InputError:
        _remove_if_empty(dest.parent)
        raise


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass


def _is_professional(path: Path) -> bool:
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    return False  # load_healthbench will report it with its line number
                return isinstance(obj, dict) and "rubric_items" in obj
    return False


def resolve_healthbench(data: str, cache_dir: str | Path | None = None) -> HealthBenchData:
    """Turn ``--data`` into a verified local file.

    Args:
        data: a local path, an http(s) URL, or a variant name (``full``, ``hard``, ``consensus``).
        cache_dir: where downloads go (default: the verdict cache folder, ``$RUBRICSTREE_CACHE_DIR``).

    Raises:
        InputError: the file is missing, a download failed, or a file named like a published
            variant does not have its published SHA-256 (the error names the file).
    """
    from reward.paths import default_cache_dir

    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    if data in VARIANTS:
        path = _download(VARIANTS[data].url, cache)
    elif data == "easy":  # full minus hard by prompt_id (training/eval/data_variants.py)
        from training.eval.data_variants import build_easy

        path = build_easy(_download(VARIANTS["full"].url, cache), _download(VARIANTS["hard"].url, cache),
                          cache / "healthbench")
    elif urlparse(data).scheme in ("http", "https"):
        path = _download(data, cache)
    else:
        path = Path(data)
        if not path.is_file():
            raise InputError("data file not found", file=data)
    digest = sha256_file(path)
    named = _by_file_name(path.name)
    if named is not None and digest != named.sha256:
        raise InputError(f"SHA-256 {digest} is not the published one of HealthBench {named.name} "
                         f"({named.sha256}): the file is modified or truncated", file=str(path))
    by_hash = next((v.name for v in VARIANTS.values() if v.sha256 == digest), None)
    if by_hash is not None:
        variant, how = by_hash, "sha256"
    elif data == "easy":
        variant, how = "easy", "derived"
    elif _is_professional(path):
        variant, how = "professional", "format"
    else:
        # a subset or a local copy: a variant word in the name is a hint, never a verification
        stem = path.name.lower()
        guess = next((v for v in ("consensus", "hard", "professional") if v in stem), None)
        variant, how = (guess, "file name") if guess else (None, None)
    return HealthBenchData(path=path, source=data, sha256=digest, variant=variant, variant_source=how)
