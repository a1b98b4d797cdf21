"""What does establishing who grades cost a served judge at start-up? (issue 39)

    python benchmarks/judge_startup.py --judge-url http://127.0.0.1:8765 [--endpoints 2] [--repeat 5] [--json]

Times, against a running vLLM judge server, each part of the start-up identity work that a
served judge does once (``reward.judge.startup``), over ``--repeat`` runs (median and max, in
milliseconds), with the pool given ``--endpoints`` times (the same server: each endpoint is asked
on its own):

- ``survey``: ``/v1/models``, ``/version``, ``/metrics`` and ``/server_info`` of every endpoint,
  the root's fingerprint (its per-file digests remembered after the first run) and the probe;
- ``probe``: one endpoint's answer to the fixed probe (a ~60-token ``prompt_logprobs`` request);
- ``tokenizer_check``: each endpoint's ``/tokenize`` of the probe texts, answer words and a
  conversation, compared with ours;
- ``tokenizer_fingerprint``: the tokenizer's vocabulary, template and probe ids hashed.

Grading itself is untouched: no part runs per request. Loading the tokenizer (transformers'
import, several seconds on a small machine) is not part of this work and not timed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--judge-url", required=True)
    ap.add_argument("--endpoints", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from reward.judge.render import PromptRenderer, load_tokenizer
    from reward.judge.signature import probe_signature
    from reward.judge.startup import StartupClock, establish
    from reward.judge.tokenizer_check import check_against_servers, tokenizer_fingerprint
    from reward.serving import first_served_model, normalise_url

    url = normalise_url(args.judge_url)
    model = first_served_model(url)
    urls = [url] * args.endpoints
    known = establish(urls, model, {}, deadline_s=600)  # the first run fills the digest memo
    renderer = PromptRenderer(load_tokenizer(known.root or model), block_size=32)
    parts = {
        "survey": lambda: establish(urls, model, {}, deadline_s=600),
        "probe": lambda: probe_signature(url, model, {}, StartupClock(600)),
        "tokenizer_check": lambda: check_against_servers(renderer, urls, model, {}, StartupClock(600),
                                                         tokenizer_name="bench"),
        "tokenizer_fingerprint": lambda: tokenizer_fingerprint(renderer),
    }
    out = {"judge_url": url, "model": model, "endpoints": args.endpoints, "ms": {}}
    for name, fn in parts.items():
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1000)
        out["ms"][name] = {"median": round(statistics.median(times), 1), "max": round(max(times), 1)}
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"start-up identity work against {url} ({model}), {args.endpoints} endpoint(s), {args.repeat} runs:")
    for name, t in out["ms"].items():
        print(f"  {name:<22} median {t['median']:8.1f} ms   max {t['max']:8.1f} ms")


if __name__ == "__main__":
    main()
