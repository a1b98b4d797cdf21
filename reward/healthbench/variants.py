"""The published HealthBench files (names, row counts, SHA-256) and the length-adjustment
coefficient of each variant, so a local file can be recognised before its score is reported."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

BASE_URL = "https://openaipublic.blob.core.windows.net/simple-evals/healthbench/"


@dataclass(frozen=True)
class Variant:
    """One published HealthBench file."""

    name: str
    file_name: str
    rows: int
    sha256: str

    @property
    def url(self) -> str:
        return BASE_URL + self.file_name


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant("full", "2025-05-07-06-14-12_oss_eval.jsonl", 5000,
                "e99dd3c6372c10d6fcc5e385c5fae69d0dd40392dae56836ef9493ae324ecd2f"),
        Variant("hard", "hard_2025-05-08-21-00-10.jsonl", 1000,
                "b0320430e5cd974e746585594c1dd10b5a3fc2aff9c72b26106c2c4a069d74e9"),
        Variant("consensus", "consensus_2025-05-09-20-00-46.jsonl", 3671,
                "fabe37553327238928b05357d8b309737b5d426d6dee432a3376da618d0969d6"),
    )
}

# HealthBench Professional ships in another format and has no published hash we rely on.
PROFESSIONAL_ROWS = 525

# p in ``score - p * ((len(response) - 2000) / 500)``, per variant (later HealthBench revisions).
LENGTH_ADJUST: dict[str, float] = {
    "hard": 0.0392,
    "full": 0.0299,
    "consensus": 0.0020,
    "professional": 0.0147,
}


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of a file, read in chunks so a large file does not fill memory."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify_sha256(path: str | Path) -> str | None:
    """Name of the published variant whose SHA-256 matches the file at ``path``, else ``None``.

    Args:
        path: a local JSONL file (it must exist).
    """
    digest = sha256_file(path)
    for variant in VARIANTS.values():
        if variant.sha256 == digest:
            return variant.name
    return None
