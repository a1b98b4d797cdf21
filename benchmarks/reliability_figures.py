"""docs/reliability.md's figures that this machine can measure without a judge server.

    python benchmarks/reliability_figures.py [--identity-runs 3] [--size-gb 2] [--skip-identity]
                                             [--out benchmarks/results/reliability_figures.json]

- ``identity``: what the full-content judge identity costs, ``--identity-runs`` runs of
  ``benchmarks/judge_identity.py --size-gb 2 --shards 4 --json`` (a 2 GiB stand-in model of 4
  weight shards, hashed from the page cache; its docstring says what each figure is), each run's
  figures and their range, with the load average around them (on a shared machine the wall clock
  mostly measures the other processes; the CPU-second figures are the steadier ones).
- ``yaml_bomb``: the time ``reward.textio.load_yaml`` takes to refuse a taxonomy of ten levels of
  ten aliases (10**10 values, built as ``tests/reward/test_input_bounds.py`` builds it), best of 5,
  and what the packaged taxonomy expands to, aliases followed (the count the bound is set against).
- ``fence``: ``reward.judge.templates.fence_response`` (its memo bypassed) on a 10,000-character
  Chinese response without and with a ``<``, median of 21 calls each, in milliseconds.
- ``watch``: the share of requests the identity watch adds at the schedule's defaults (one probe of
  ``len(PROBE_ITEMS) + 1`` requests every ``probe_every_items`` requests), and the probe tolerance's
  bounds (``reward.judge.signature``: the floor, the noise ceiling and the widest tolerance,
  ``NOISE_FACTOR`` times the ceiling).

Takes under a minute on the shared 2-core machine (each identity run writes and hashes 2 GiB in the
temporary folder) and writes ``benchmarks/results/reliability_figures.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing


def identity(runs: int, size_gb: float) -> dict:
    out: list[dict] = []
    for _ in range(runs):
        load = os.getloadavg()[0]
        proc = subprocess.run([sys.executable, str(ROOT / "benchmarks/judge_identity.py"), "--size-gb", str(size_gb),
                               "--shards", "4", "--json"], capture_output=True, text=True, check=True, cwd=ROOT)
        one = json.loads(proc.stdout.strip().splitlines()[-1])
        one["memo_ms"] = round(one["memo_s"] * 1000, 2)
        one["load_average_before"] = round(load, 1)
        one["load_average_after"] = round(os.getloadavg()[0], 1)
        out.append(one)
        print(f"identity: {one['sha256_per_cpu_second_gb']} GB per CPU-second, first {one['first_s']} s "
              f"({one['first_gb_per_s']} GB/s), memo {one['memo_ms']} ms, load {load:.1f}", file=sys.stderr)

    def span(key: str) -> list[float]:
        return [min(r[key] for r in out), max(r[key] for r in out)]

    keys = ("sha256_per_cpu_second_gb", "first_s", "first_gb_per_s", "memo_ms", "extrapolated_16gb_first_s",
            "extrapolated_16gb_cpu_s", "load_average_before")
    return {"size_gb": size_gb, "shards": 4, "runs": out, "range": {k: span(k) for k in keys}}


def alias_bomb(levels: int = 10) -> str:
    """Nested aliases: level i lists ten aliases of level i-1 (10**levels values); the same text as
    ``tests/reward/test_input_bounds.py``'s ``alias_bomb``."""
    lines = ["version: 3", "name: bomb", "root: root", "nodes:", "  - id: root", "    title: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        lines.append(f"    t{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


def expanded_nodes(node, yaml) -> int:
    """How many nodes a composed YAML graph has with every alias followed (memoised per node)."""
    memo: dict[int, int] = {}

    def size(n) -> int:
        if id(n) not in memo:
            kids = [x for pair in n.value for x in pair] if isinstance(n, yaml.MappingNode) else (
                list(n.value) if isinstance(n, yaml.SequenceNode) else [])
            memo[id(n)] = 1 + sum(size(k) for k in kids)
        return memo[id(n)]

    return size(node)


def yaml_bomb(tmp: Path) -> dict:
    import yaml

    from reward.errors import InputError
    from reward.textio import load_yaml, read_text

    path = tmp / "taxonomy.yaml"
    path.write_text(alias_bomb(), encoding="utf-8")
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        try:
            load_yaml(path)
        except InputError:
            times.append(time.perf_counter() - t0)
        else:
            raise SystemExit("the alias taxonomy was not refused")
    packaged = yaml.compose(read_text(ROOT / "reward/data/taxonomy.yaml"))
    return {"bytes": path.stat().st_size, "values": 10**10, "refused_s": min(times),
            "packaged_taxonomy_expanded_nodes": expanded_nodes(packaged, yaml)}


def fence() -> dict:
    from reward.judge.templates import fence_response

    plain = fence_response.__wrapped__  # the lru_cache's memo left out: each call does the work
    sentence = "患者应每天监测血压，如果胸痛放射到手臂或下巴，请立即就医。"
    text = (sentence * (10_000 // len(sentence) + 1))[:10_000]
    with_lt = text[:5_000] + "<" + text[5_001:]

    def median_ms(t: str) -> float:
        out = []
        for _ in range(21):
            t0 = time.perf_counter()
            plain(t)
            out.append((time.perf_counter() - t0) * 1000)
        return statistics.median(out)

    return {"chars": len(text), "without_lt_ms": median_ms(text), "with_lt_ms": median_ms(with_lt)}


def watch() -> dict:
    from reward.judge import signature
    from reward.judge.settings import JudgeSettings

    s = JudgeSettings()
    per_probe = len(signature.PROBE_ITEMS) + 1
    return {"requests_per_probe": per_probe, "probe_every_items": s.probe_every_items,
            "added_share": per_probe / s.probe_every_items, "tolerance_floor": signature.TOLERANCE,
            "noise_ceiling": signature.NOISE_CEILING, "noise_factor": signature.NOISE_FACTOR,
            "widest_tolerance": signature.NOISE_FACTOR * signature.NOISE_CEILING}


def main() -> int:
    import tempfile

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--identity-runs", type=int, default=3)
    ap.add_argument("--size-gb", type=float, default=2.0)
    ap.add_argument("--skip-identity", action="store_true")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/reliability_figures.json")
    args = ap.parse_args()
    t0 = time.perf_counter()
    out: dict = {"machine": f"{os.cpu_count()} cores, shared"}
    with tempfile.TemporaryDirectory() as tmp:
        out["yaml_bomb"] = yaml_bomb(Path(tmp))
    out["fence"] = fence()
    out["watch"] = watch()
    if not args.skip_identity:
        out["identity"] = identity(args.identity_runs, args.size_gb)
    out["seconds"] = round(time.perf_counter() - t0, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    for k in ("yaml_bomb", "fence", "watch"):
        print(k, json.dumps(out[k]))
    if "identity" in out:
        print("identity", json.dumps(out["identity"]["range"]))
    print(f"wrote {args.out} in {out['seconds']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
