"""Does this Python environment have what a training config will use? (``scripts/train.sh`` asks
before it starts a judge server or a trainer.)

Data flow: config (+ ``--set`` overrides) and the sharding -> the packages it needs
(:func:`requirements`) -> the installed versions (``importlib.metadata``, nothing is imported)
-> one line per missing or unaccepted package, with the ``pip install`` that fixes it.

- ``grpo.use_vllm: true`` needs ``vllm`` in the range TRL 1.16 accepts (its
  ``trl.import_utils.is_vllm_available``: 0.22.0 to 0.31.0); the ``gpu`` extra pins 0.24.0, the
  version verl 0.9.1's ``vllm`` extra is built against, so one environment serves both trainers;
- ``TRAIN_SHARDING=zero3`` needs ``deepspeed`` >= 0.18.6 (TRL 1.16's ``deepspeed`` extra).

``python -m training.env_check --config FILE [--sharding fsdp2|zero3|none] [--set k=v ...]``:
exit 0 when all is there, 2 with the problems on stderr.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib import metadata

__all__ = ["DEEPSPEED_MIN", "VLLM_RANGE", "check", "requirements"]

VLLM_RANGE = ("0.22.0", "0.31.0")  # trl/import_utils.py (TRL 1.16), inclusive
DEEPSPEED_MIN = "0.18.6"
FIX = 'pip install -e ".[train,verl,gpu]"   (the gpu extra: vllm==0.24.0, deepspeed>=0.18.6)'


def requirements(grpo: dict, sharding: str) -> dict[str, tuple[str | None, str | None, str]]:
    """package -> (lowest, highest inclusive, why) for a config's ``grpo`` mapping and sharding."""
    need: dict[str, tuple[str | None, str | None, str]] = {}
    if grpo.get("use_vllm"):
        need["vllm"] = (*VLLM_RANGE, f"grpo.use_vllm: true (vllm_mode {grpo.get('vllm_mode', 'colocate')})")
    if sharding == "zero3":
        need["deepspeed"] = (DEEPSPEED_MIN, None, "TRAIN_SHARDING=zero3")
    return need


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def check(grpo: dict, sharding: str, *, version_of=_version) -> list[str]:
    """Problems (empty: all there) with the packages :func:`requirements` names."""
    from packaging.version import Version

    problems = []
    for pkg, (lo, hi, why) in requirements(grpo, sharding).items():
        have = version_of(pkg)
        if have is None:
            problems.append(f"{pkg} is not installed, and {why} needs it")
            continue
        base = Version(Version(have).base_version)
        if (lo and base < Version(lo)) or (hi and base > Version(hi)):
            rng = f">= {lo}" + (f" and <= {hi}" if hi else "")
            problems.append(f"{pkg} {have} is installed; {why} needs {rng}")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    from reward.errors import InputError
    from training.trl_config import load_config

    p = argparse.ArgumentParser(prog="python -m training.env_check", description=__doc__)
    p.add_argument("--config", required=True)
    p.add_argument("--sharding", default="none", choices=["fsdp2", "zero3", "none"])
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    a = p.parse_args(argv)
    try:
        cfg = load_config(a.config, a.overrides)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    problems = check(cfg.grpo, a.sharding)
    for text in problems:
        print(f"missing: {text}", file=sys.stderr)
    if problems:
        print(f"install it with: {FIX}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
