"""The in-process judge figures of docs/benchmarks.md: judge_inprocess.py's CPU run, written to JSON.

    python benchmarks/benchmarks_inprocess.py [--threads 1] [--out benchmarks/results/benchmarks_inprocess.json]

Runs ``benchmarks/judge_inprocess.py --threads 1 --json``: the demo's tiny random-weight Qwen3 in
float32 on the CPU, grading every item ``rubricstree demo`` grades (the bundled demo rollouts,
routed by the embedding router) in ``choice`` mode (each rollout's shared prefix encoded once,
its criteria scored against that KV cache) and ``choice_per_item`` (one full forward per item),
twice each, interleaved, keeping each mode's best wall time. Adds what the doc quotes from it:
the tokens choice mode computes (prompt - reused + decoded), the prompt tokens per item, and
the ratio of prompt tokens to computed ones (what a real-size, MLP-bound model's speed-up is
expected to approach). The random weights make the verdicts meaningless: this measures cost and
that the two layouts agree, nothing else. Wall times depend on the machine and its load.

Takes about 1 minute of CPU (3 minutes of wall time on a shared 2-core machine). Writes
``benchmarks/results/benchmarks_inprocess.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/benchmarks_inprocess.json"))
    args = ap.parse_args()

    from benchmarks import judge_inprocess

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = judge_inprocess.main(["--threads", str(args.threads), "--json"])
    if rc:
        raise SystemExit(f"judge_inprocess.py exited {rc}")
    res = json.loads(buf.getvalue().strip().splitlines()[-1])
    choice = res["modes"]["choice"]
    computed = choice["prompt_tokens"] - choice["cached_tokens"] + choice["completion_tokens"]
    res["derived"] = {
        "choice_computed_tokens": computed,
        "prompt_tokens": choice["prompt_tokens"],
        "prompt_tokens_per_item": choice["prompt_tokens"] / choice["items"],
        "choice_computed_tokens_per_item": computed / choice["items"],
        "prompt_over_computed": choice["prompt_tokens"] / computed,
        "per_item_over_choice_wall": res["modes"]["choice_per_item"]["wall_s"] / choice["wall_s"],
    }
    print(json.dumps(res, indent=1))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
