"""What does a full-content judge identity cost? (issue 26, N1)

    python benchmarks/judge_identity.py [--size-gb 1] [--shards 4] [--dir /tmp] [--json]

Writes a stand-in model folder of ``--size-gb`` GiB in ``--shards`` weight files (pseudo-random
bytes: SHA-256 runs at the same speed on any content) plus a config and a tokenizer, then times
:func:`reward.judge.identity.model_fingerprint` three ways:

- ``first``: nothing remembered, every byte read and hashed (the files were just written, so they
  come from the page cache: this is the hashing speed, not the disk's; a cold read of a model on
  disk is bounded by the disk as well, whichever is slower);
- ``memo``: a new process's view, the per-file digests read back from ``file-hashes.sqlite``
  (one ``stat`` per file and one SQLite lookup);
- ``sha256_one_thread``: one file hashed on one thread, for the per-core rate.

and extrapolates the first to a 16 GB judge (16 x 10^9 bytes; e.g. an 8B model in bf16), in
wall-clock seconds here and in CPU seconds (what an idle machine's core would take: on a shared,
loaded machine the wall clock mostly measures the other processes). The
defaults are small for a shared 2-core machine; pass a bigger ``--size-gb`` where there is room.
The folder and a private cache directory are removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

JUDGE_BYTES = 16 * 10**9


def write_model(folder: Path, size: int, shards: int) -> None:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "qwen3"}', encoding="utf-8")
    (folder / "tokenizer.json").write_bytes(os.urandom(11 << 20))  # a Qwen tokenizer.json is ~11 MB
    block = os.urandom(8 << 20)
    per = size // shards
    for k in range(shards):
        with (folder / f"model-{k + 1:05d}-of-{shards:05d}.safetensors").open("wb") as fh:
            left = per
            while left > 0:
                n = min(left, len(block))
                fh.write(block[:n])
                left -= n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-gb", type=float, default=1.0, help="GiB of weights to hash (default 1)")
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--dir", default=None, help="where to write the stand-in model (default: the temp dir)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="judge-identity-", dir=args.dir))
    os.environ["RUBRICSTREE_CACHE_DIR"] = str(work / "cache")
    from reward.judge import identity

    try:
        size = int(args.size_gb * (1 << 30))
        model = work / "model"
        write_model(model, size, args.shards)
        total = sum(f.stat().st_size for f in model.iterdir())
        t0, c0 = time.perf_counter(), time.process_time()
        fp = identity.model_fingerprint(model, progress=False)
        first, first_cpu = time.perf_counter() - t0, time.process_time() - c0
        identity._memo_local.clear()  # what a new process sees: only the memo file
        t0 = time.perf_counter()
        again = identity.model_fingerprint(model, progress=False)
        memo = time.perf_counter() - t0
        assert again == fp
        one = next(model.glob("*.safetensors"))
        t0, c0 = time.perf_counter(), time.process_time()
        identity.file_sha256(one)
        single, single_cpu = time.perf_counter() - t0, time.process_time() - c0
        rate = total / first
        out = {
            "bytes": total, "files": len(list(model.iterdir())), "threads": min(4, os.cpu_count() or 1),
            "cpus": os.cpu_count(),
            "first_s": round(first, 3), "first_gb_per_s": round(rate / 1e9, 3),
            "memo_s": round(memo, 4),
            "first_cpu_s": round(first_cpu, 3),
            "sha256_one_thread_gb_per_s": round(one.stat().st_size / single / 1e9, 3),
            "sha256_per_cpu_second_gb": round(one.stat().st_size / single_cpu / 1e9, 3),
            "extrapolated_16gb_first_s": round(JUDGE_BYTES / rate, 1),
            "extrapolated_16gb_cpu_s": round(JUDGE_BYTES / (total / first_cpu), 1),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:30s} {v}")
        print("(page-cache reads: hashing speed; a cold read from disk is also bounded by the disk)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
