"""Where should the identity probe's tolerance sit? (issue 48, part 3)

    python benchmarks/probe_tolerance.py [--model DIR] [--scales 0.01,0.003,0.001] [--out FILE] [--json]

The probe (:mod:`reward.judge.signature`) compares a served judge's logprobs for a fixed text and
a few fixed judge items with what the same identity answered before. Its tolerance must sit above
what the SAME weights give across batch shapes and restarts, and below what OTHER weights give.
This measures both on real vLLM CPU servers of the tiny model (``scripts/serve_judge.sh``):

- same weights: the probe asked alone, asked 3 times while 32 other grading requests are in
  flight (other batch shapes), and asked again after the server is restarted;
- other weights: one tensor of a copy of the model changed by a relative amount (``--scales``:
  Gaussian noise of that relative size on ``model.layers.0.mlp.down_proj.weight``), served and
  probed.

For each, the mean and the largest |difference| of the probe's logprobs against the first
reading, per part (text, answers). Prints a table and writes JSON (``--out``). The tiny model has
random weights: these figures say what a one-tensor change does to its numbers on this CPU, in
float32, and nothing about a real judge's verdicts; on GPUs in bfloat16 the same-weights noise is
larger (``docs/reliability.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TENSOR = "model.layers.0.mlp.down_proj.weight"


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, model: Path, work: Path, name: str) -> None:
        self.model, self.work, self.name = model, work, name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> Server:
        pid, log = self.work / f"{self.name}.pid", self.work / f"{self.name}.log"
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
        subprocess.run([str(ROOT / "scripts/serve_judge.sh"), "--model", str(self.model), "--served-name", "tiny",
                        "--port", str(self.port), "--pid-file", str(pid), "--log", str(log)], check=True, env=env,
                       stdout=subprocess.DEVNULL, timeout=1800)
        return self

    def stop(self) -> None:
        subprocess.run([str(ROOT / "scripts/serve_judge.sh"), "--stop", "--pid-file", str(self.work / f"{self.name}.pid"),
                        "--port", str(self.port)], check=False, timeout=120)


def probe(url: str):
    """The probe's numbers at ``url`` (text and answers), asked as the judge asks them."""
    from reward.judge.http import HTTPJudge
    from reward.judge.signature import ask_probes
    from reward.judge.startup import StartupClock

    judge = HTTPJudge(url, "tiny", cache=None, probe_every_items=0, probe_every_s=0)
    return ask_probes(f"{url}/v1", "tiny", judge._headers, judge._probe_answers, StartupClock(120.0))


def diff(a, b) -> dict:
    out = {}
    for part in ("text", "answers"):
        x, y = getattr(a, part), getattr(b, part)
        if x and y and len(x) == len(y):
            d = [abs(p - q) for p, q in zip(x, y)]
            out[part] = {"mean": sum(d) / len(d), "max": max(d)}
    return out


def load(url: str, stop: threading.Event) -> None:
    """Grading requests in flight (other batch shapes) until ``stop``."""
    import httpx

    rng = random.Random(0)
    with httpx.Client(timeout=120) as client:
        while not stop.is_set():
            words = " ".join(rng.choice(["fever", "cough", "chest", "pain", "rash", "sleep", "dose"]) for _ in range(
                rng.randint(20, 300)))
            try:
                client.post(f"{url}/v1/completions", json={"model": "tiny", "prompt": words, "max_tokens": 4})
            except httpx.HTTPError:
                pass


def changed_copy(src: Path, dest: Path, scale: float) -> Path:
    import numpy as np
    from safetensors.numpy import load_file, save_file

    shutil.copytree(src, dest)
    f = next(dest.glob("*.safetensors"))
    tensors = load_file(str(f))
    w = tensors[TENSOR]
    noise = np.random.default_rng(1).standard_normal(w.shape).astype(w.dtype)
    tensors[TENSOR] = (w + scale * float(np.abs(w).mean()) * noise).astype(w.dtype)
    save_file(tensors, str(f), metadata={"format": "pt"})
    return dest


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=str(ROOT / ".cache/test-server/tiny-model"))
    ap.add_argument("--scales", default="0.01,0.003,0.001")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/probe_tolerance.json"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    model = Path(args.model)
    if not (model / "config.json").is_file():
        subprocess.run([sys.executable, str(ROOT / "scripts/make_tiny_model.py"), str(model)], check=True)
    work = Path(tempfile.mkdtemp(prefix="probe-tolerance-"))
    rows: dict[str, dict] = {}
    try:
        a = Server(model, work, "a").start()
        first = probe(a.url)
        rows["same weights, asked again alone"] = diff(first, probe(a.url))
        stop = threading.Event()
        threads = [threading.Thread(target=load, args=(a.url, stop), daemon=True) for _ in range(32)]
        for t in threads:
            t.start()
        time.sleep(2.0)
        batched = [diff(first, probe(a.url)) for _ in range(3)]
        stop.set()
        for t in threads:
            t.join(timeout=300)
        rows["same weights, 32 requests in flight (worst of 3)"] = {
            part: {k: max(b[part][k] for b in batched if part in b) for k in ("mean", "max")}
            for part in ("text", "answers") if any(part in b for b in batched)}
        a.stop()
        a.start()
        rows["same weights, after a restart"] = diff(first, probe(a.url))
        a.stop()
        for scale in [float(x) for x in args.scales.split(",") if x]:
            b = Server(changed_copy(model, work / f"changed-{scale:g}", scale), work, f"b{scale:g}").start()
            try:
                rows[f"one tensor changed by {scale:g} (relative noise)"] = diff(first, probe(b.url))
            finally:
                b.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    from reward.judge.signature import NOISE_CEILING, TOLERANCE

    # the probe tells two judges apart when any part (text or answers) differs by more than the
    # tolerance: a change is seen at the larger of its two parts' mean differences
    same = max(v[p]["mean"] for k, v in rows.items() if k.startswith("same") for p in v)
    seen = {k: max(v[p]["mean"] for p in v) for k, v in rows.items() if not k.startswith("same")}
    result = {"machine": f"{os.cpu_count()} cores, vLLM CPU, float32, the tiny random model",
              "rows": rows, "same_weights_mean_max": same, "other_weights_seen_at": seen,
              "detected": {k: x > TOLERANCE for k, x in seen.items()},
              "tolerance": TOLERANCE, "noise_ceiling": NOISE_CEILING,
              "tolerance_above_same_weights": same < TOLERANCE}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"{'reading':55s} {'text mean':>10s} {'text max':>10s} {'ans mean':>10s} {'ans max':>10s}")
    for k, v in rows.items():
        t, a_ = v.get("text", {}), v.get("answers", {})
        print(f"{k:55s} {t.get('mean', float('nan')):10.2e} {t.get('max', float('nan')):10.2e} "
              f"{a_.get('mean', float('nan')):10.2e} {a_.get('max', float('nan')):10.2e}")
    print(f"same weights: mean |difference| at most {same:.2e} (tolerance {TOLERANCE:g} "
          f"{'above' if result['tolerance_above_same_weights'] else 'NOT above'} it)")
    for k, x in seen.items():
        print(f"{k}: seen at {x:.2e}: {'detected' if x > TOLERANCE else 'NOT detected'}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
