"""The difficulty filter under the issue's fault model (docs/stages.md): 30% of sample requests time out.

    python benchmarks/stages_filter_faults.py [--prompts 200] [--rate 0.3] [--out benchmarks/results/stages_filter_faults.json]

Runs ``training.difficulty.run_filter`` on ``--prompts`` two-option MCQ rows against a fake
OpenAI-compatible policy server (an httpx transport, no network) on which every request times
out with probability ``--rate``; the draw is a hash of the request's seed and how often it was
asked, so the faults do not depend on the order the concurrent requests arrive in (the server of
``tests/training/test_filter_faults.py``). Two settings:

- ``shipped``: the difficulty settings of ``configs/trl/stage1_mcq.yaml`` (n 8, 3 retries, one more
  round for a lost sample, a prompt kept with half its samples, ``max_failed_fraction`` 0.05);
- ``every_sample_needed``: the rule before, the same but every sample needed
  (``min_samples = n``) and no second round (``lost_sample_rounds = 0``).

Each setting runs twice on a fresh server: once as configured (``refused``: whether the filter
stopped with ``FilterRefused``) and once with ``max_failed_fraction = 1`` to count the prompts
it loses. Only the retry wait is set to 0 (the faults here do not depend on time). The JSON also
holds the closed-form loss probabilities the doc quotes (a sample lost after its 1 + retries
attempts, after a second round, a prompt needing all n samples or half of them). Takes about
5 s on one CPU core. Writes ``benchmarks/results/stages_filter_faults.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import tempfile
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing


class TimeoutServer:
    """A policy server on which each request times out with probability ``rate``."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.tries: dict[int, int] = {}
        self.requests = self.timeouts = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json={"object": "list", "data": [{"id": "policy", "root": "policy"}]})
        seed = json.loads(request.content)["seed"]
        k = self.tries[seed] = self.tries.get(seed, 0) + 1
        self.requests += 1
        if int(hashlib.sha256(f"{seed}:{k}".encode()).hexdigest()[:8], 16) / 16**8 < self.rate:
            self.timeouts += 1
            raise httpx.ReadTimeout("injected timeout", request=request)
        text = f"answer {seed % 97}" + "!" * (seed % 5)
        return httpx.Response(200, json={"choices": [{"index": 0, "message": {"content": text},
                                                      "finish_reason": "stop"}], "usage": {"completion_tokens": 3}})


def text_reward(prompts, completions, completion_ids=None, **kw):
    """A fixed function of the sample's text (the filter's sampling is measured, not a reward)."""
    return [(len(c[0]["content"]) % 5) / 4 for c in completions]


def run(cfg, data: Path, rate: float) -> dict:
    """One filter run through a fresh fault server: what it kept, lost and whether it refused."""
    from training.difficulty import FilterRefused, run_filter
    from training.generation import http

    server = TimeoutServer(rate)
    real_init = http.HTTPGenerator.__init__

    def through_the_fault_server(self, *args, **kwargs):
        real_init(self, *args, **{**kwargs, "transport": httpx.MockTransport(server)})

    http.HTTPGenerator.__init__ = through_the_fault_server
    try:
        with tempfile.TemporaryDirectory() as out:
            try:
                _, stats = run_filter(data, model="policy", served_model="policy", generate_url="http://policy.test",
                                      out_dir=Path(out) / "out", kind="mcq", cfg=cfg, reward_fn=text_reward)
            except FilterRefused as exc:
                return {"refused": True, "message": str(exc), "requests": server.requests,
                        "timeouts": server.timeouts}
    finally:
        http.HTTPGenerator.__init__ = real_init
    return {"refused": False, "prompts_lost": stats.counts.get("skipped", 0), "prompts": sum(stats.counts.values()),
            "lost_fraction": stats.counts.get("skipped", 0) / sum(stats.counts.values()),
            "partial": stats.partial, "samples_lost": stats.samples_lost, "requests": server.requests,
            "timeouts": server.timeouts, "timeout_share": server.timeouts / max(1, server.requests)}


def closed_form(rate: float, n: int, retries: int, needed: int) -> dict:
    """The loss probabilities under independent timeouts of probability ``rate``."""
    attempts = 1 + retries
    p1 = rate ** attempts                  # a sample lost after its attempts
    p2 = rate ** (2 * attempts)            # ... and after one more round
    all_needed = 1 - (1 - p1) ** n         # a prompt that needs all n samples (one round)
    lost_over = n - needed                 # a prompt needing `needed` of n is lost when more than n - needed are
    half_needed = sum(math.comb(n, k) * p2**k * (1 - p2) ** (n - k) for k in range(lost_over + 1, n + 1))
    return {"attempts": attempts, "sample_lost_one_round": p1, "sample_lost_two_rounds": p2,
            "prompt_lost_every_sample_needed": all_needed, "prompt_lost_half_needed_two_rounds": half_needed}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prompts", type=int, default=200)
    ap.add_argument("--rate", type=float, default=0.3)
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/stages_filter_faults.json"))
    args = ap.parse_args()

    from training.trl_launcher import load_config

    for var in ("RUBRICSTREE_RUN_ROOT", "FV_DATA", "RANK"):
        os.environ.pop(var, None)
    shipped = load_config(ROOT / "configs/trl/stage1_mcq.yaml").difficulty.config("split")
    shipped = shipped.model_copy(update={"retry_backoff_s": 0.0, "max_new_tokens": 8})
    before = shipped.model_copy(update={"min_samples": shipped.n, "lost_sample_rounds": 0})
    out: dict = {"prompts": args.prompts, "timeout_rate": args.rate, "settings": {}}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "mcq.jsonl"
        data.write_text("".join(json.dumps({"question": f"Question {i}?", "options": {"A": "a", "B": "b"},
                                            "answer_idx": "A"}) + "\n" for i in range(args.prompts)),
                        encoding="utf-8")
        for name, cfg in (("shipped", shipped), ("every_sample_needed", before)):
            configured = run(cfg, data, args.rate)
            counted = run(cfg.model_copy(update={"max_failed_fraction": 1.0}), data, args.rate)
            out["settings"][name] = {
                "n": cfg.n, "max_retries": cfg.max_retries, "lost_sample_rounds": cfg.lost_sample_rounds,
                "samples_needed": cfg.samples_needed, "max_failed_fraction": cfg.max_failed_fraction,
                "refused": configured["refused"], "counted": counted}
            print(f"{name}: {counted['prompts_lost']} of {args.prompts} prompts lost "
                  f"({counted['lost_fraction']:.1%}), {counted['partial']} kept short, "
                  f"{counted['requests']} requests ({counted['timeout_share']:.1%} timed out); "
                  f"refused as configured: {configured['refused']}")
    out["closed_form"] = closed_form(args.rate, shipped.n, shipped.max_retries, shipped.samples_needed)
    print("closed form:", json.dumps(out["closed_form"]))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
