"""The labelled case sets a command can run on, by name, and the frozen blind set's manifest.

- ``bundled``: ``reward/data/stress_cases.yaml``, the 84 cases the reward was built with (60, then 24 gaming cases);
- ``blind``: ``reward/data/blind/`` (issue 44), written and labelled by people who never saw the
  router or the scorer, in 32 languages, frozen by ``manifest.json`` and split by conversation into
  ``dev`` (may be used to tune: thresholds, prices, calibration) and ``test`` (only to report);
  ``blind`` runs both parts side by side, ``blind:dev`` and ``blind:test`` one of them;
- any other value: a case file or a folder of case files of your own (``load_cases``).

The manifest names every file of the set with its SHA-256: the set as first committed
(``frozen``), the set now (``files``), and every change since (``changes``: the file, the date
and why). :func:`manifest_problems` is what ``tests/reward/stress/test_blind_manifest.py`` checks.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path

BLIND = "blind"
BUNDLED = "bundled"
PARTS = ("dev", "test")


def blind_dir() -> Path:
    return Path(str(resources.files("reward") / "data" / "blind"))


def resolve_cases(spec: str | Path | None, *, default: str = BUNDLED) -> list[tuple[str, Path | None]]:
    """``[(label, path)]`` for a ``--cases`` value (see the module docstring); a path of None is the
    bundled file (``load_cases``' default)."""
    value = str(spec) if spec is not None else default
    if value == BUNDLED:
        return [(BUNDLED, None)]
    if value == BLIND:
        return [(f"{BLIND}:{p}", blind_dir() / p) for p in PARTS]
    if value.startswith(f"{BLIND}:"):
        part = value.split(":", 1)[1]
        if part not in PARTS:
            from reward.errors import InputError

            raise InputError(f"no part '{part}' in the blind set (its parts: {', '.join(PARTS)})", field="cases")
        return [(value, blind_dir() / part)]
    return [(value, Path(value))]


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def manifest_problems(root: Path | None = None) -> list[str]:
    """What does not agree between the blind set's files and its manifest (empty: all well).

    Every file must be listed with its current SHA-256; every listed file must exist; a file whose
    hash differs from the frozen one needs a ``changes`` entry naming it with a reason."""
    root = root or blind_dir()
    manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    files, frozen = manifest.get("files") or {}, manifest.get("frozen") or {}
    changed = {c.get("file") for c in manifest.get("changes") or [] if (c.get("why") or "").strip()}
    problems = []
    on_disk = {p.relative_to(root).as_posix() for p in root.rglob("*.yaml")}
    for rel in sorted(on_disk - set(files)):
        problems.append(f"{rel}: not in the manifest")
    for rel, digest in sorted(files.items()):
        path = root / rel
        if not path.is_file():
            problems.append(f"{rel}: listed in the manifest but missing")
            continue
        now = sha256_file(path)
        if now != digest:
            problems.append(f"{rel}: its SHA-256 is {now[:12]}..., the manifest says {digest[:12]}... (a label "
                            "changed without a manifest entry)")
        if rel in frozen and frozen[rel] != digest and rel not in changed:
            problems.append(f"{rel}: changed since the set was frozen, with no 'changes' entry saying why")
    for rel in sorted(set(frozen) - set(files)):
        if rel not in changed:
            problems.append(f"{rel}: removed since the set was frozen, with no 'changes' entry saying why")
    return problems
