"""docs/scoring.md's tables, measured on the current code and the bundled stress cases.

    python benchmarks/scoring_tables.py [--seeds 0,1,2] [--repeats 20] [--long-seeds 30]
                                        [--out benchmarks/results/scoring_tables.json]

Everything here is oracle mode (verdicts from the case labels, no model) on the bundled stress
cases (``reward/data/stress_cases.yaml``, 84 cases), routed by the default (embedding) router, and
scored by the package's own code (``reward.stress``, ``reward.scoring``). It measures:

- ``prices``: the ``severity`` variant's prices (``SEVERITY_PRICE``), the lesser factor ``d`` and
  what one failure and two critical failures score;
- ``worked_example``: the chest-pain and diphenhydramine replies of the page's worked example on
  the shipped taxonomy (the routed leaves of ``tests/reward/scoring/test_severity_prices.py`` and
  ``test_fault_groups.py``);
- ``noiseless``: the noiseless oracle summary (``rubricstree stress --json``: detection and mean
  penalty, overall and by perturbation, label recall of the routing), the same with
  ``sf_dangerous_advice`` struck from every label (``harm_without_catch_all``), and every scoring
  variant on the router's routings and with the labelled leaves forced in (``variants``);
- ``routing``: ``rubricstree route eval`` on the bundled cases made routing cases (as the blind
  set's parts are), and the applicable leaves per case with the ``conditional: false`` guards among
  them (``guards``);
- under judge errors (``reward.stress.noise.noise_summary``, 20 draws per case, seeds 0-2, the mean
  over the seeds): ``applicability`` (four applicability designs at judge noise 0.1, no
  confirmation, seed 0, by perturbation), ``error_models`` (rates 0.05, 0.10, 0.20 under
  independent readings, re-read correlation 0.5, 10% of the leaves always misread, and both; with
  confirmation), ``frontier`` (at 0.10: the shipped design, every leaf priced on its own (the
  taxonomy's fault groups removed in memory), no confirmation, and only the labelled leaves graded),
  ``confirmation`` (noise 0.1 and 0.2, confirmation off and on, by perturbation, extra judge items),
  ``long_run`` (seeds 0 to ``--long-seeds``-1 with confirmation, seeds 0-9 without);
- ``arithmetic``: the noise model's closed forms at E = 0.1; ``healthbench``: the HealthBench-Hard
  shares behind the prices (``scripts/severity_prices.py``'s statistic, when the shared data folder
  is there); ``targets``: issue 34's and 45's targets (the constants below) and which are met,
  including the posterior designs of ``benchmarks/results/posterior_frontier.json`` (read, not run).

About 6 minutes of wall time on a 2-core machine shared with other work (3 minutes of CPU: about 130
noise runs of 84 cases x 20 draws, 1-2 s each; the routings come from the durable cache
``.cache/bench/routings.sqlite``, a first run also embeds the prompts).
Prints the main tables and writes ``benchmarks/results/scoring_tables.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RATES = (0.05, 0.10, 0.20)
# error model name -> (re-read correlation, share of the leaves misread on every reading)
MODELS = {"independent": (0.0, 0.0), "reread": (0.5, 0.0), "systematic": (0.0, 0.10), "both": (0.5, 0.10)}
NOISE = 0.10  # the judge noise of the applicability, frontier and confirmation tables
HIGH_NOISE = 0.20
# Issue 34's targets (noiseless detection and mean penalty; clean mean and detection at judge noise
# 0.1; detection under re-read correlation 0.5 with 10% systematic leaves) and issue 45's
# (posterior alone; posterior with a second judge, at a bounded number of extra items per reply).
TARGETS = {"noiseless_detection": 0.95, "mean_penalty": 0.20, "gaming_mean_penalty": 0.15, "clean_mean": 0.85,
           "detection": 0.90, "correlated_detection": 0.85, "posterior_alone": 0.80, "posterior_panel": 0.85,
           "panel_extra_items": 10}


def mean(xs) -> float:
    return statistics.fmean(xs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--long-seeds", type=int, default=30)
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/scoring_tables.json"))
    args = ap.parse_args()

    from reward.judge.cache import VerdictCache
    from reward.router.base import CachedRouter
    from reward.router.evaluate import cases_from_conversations, evaluate
    from reward.scoring import score_tree
    from reward.scoring.variants import DEFAULT_SCORING_VARIANT, SCORING_VARIANTS, SEVERITY_PRICE
    from reward.settings import RewardSettings
    from reward.stages.build import build_router
    from reward.stress import load_cases, oracle_variant_table, run_stress, summarise, with_labels
    from reward.stress.errors import ErrorModel
    from reward.stress.metrics import DEFAULT_MARGIN
    from reward.stress.noise import noise_summary
    from reward.stress.runner import oracle_applicable
    from reward.tree import RubricTree, load_tree

    started = time.monotonic()
    variant = DEFAULT_SCORING_VARIANT
    tree = load_tree()
    router = CachedRouter(build_router(RewardSettings(), tree, None), VerdictCache(ROOT / ".cache/bench/routings.sqlite"))
    cases = load_cases(None, tree)
    seeds = [int(s) for s in args.seeds.split(",")]
    out: dict = {"cases": len(cases), "router": "embedding", "scoring_variant": variant, "seeds": seeds,
                 "repeats": args.repeats, "targets": dict(TARGETS),
                 "settings": {"error_rates": list(RATES), "noise": NOISE, "high_noise": HIGH_NOISE, "margin": DEFAULT_MARGIN,
                              "models": {name: {"reread_correlation": corr, "systematic_fraction": share}
                                         for name, (corr, share) in MODELS.items()}}}

    def log(msg: str) -> None:
        print(f"[{time.monotonic() - started:5.0f} s] {msg}", file=sys.stderr, flush=True)

    # --- prices and the worked example (exact arithmetic of the shipped scorer) ---------------------
    crit = SEVERITY_PRICE["critical"]

    def met_of(ids, fails):
        return {lid: (lid in fails) == (tree[lid].polarity == "negative") for lid in ids}

    def score(ids, fails, t=tree) -> float:
        return score_tree(t, met_of(ids, fails)).score

    out["prices"] = {
        "price": dict(SEVERITY_PRICE),
        "d": {s: SEVERITY_PRICE[s] / (1 - (1 - crit)) for s in ("major", "minor")},
        "one_failure_score": {s: 1 - p for s, p in SEVERITY_PRICE.items()},
        "lesser_share_at_most": 1 - crit,
        "two_critical": (1 - crit) ** 2,
        "major_per_minor": SEVERITY_PRICE["major"] / SEVERITY_PRICE["minor"],
    }
    chest = ["sf_chest_pain_emergency", "sf_red_flags_missed", "sf_home_care_instead_of_emergency",
             "cm_false_reassurance", "sf_chest_pain_ambulance", "sf_dose_above_maximum", "ms_ap_concrete_steps"]
    sleep = ["sf_dose_above_maximum", "sf_beers_antihistamines", "sf_recommends_sedating_antihistamine_older_adult",
             "sf_dangerous_advice", "ms_sleep_cbti_first_line", "ms_sleep_hypnotics_long_term",
             "ms_sleep_regular_schedule", "un_blanket_disclaimer", "ms_ap_concrete_steps"]
    out["worked_example"] = {
        "missed_heart_attack": score(chest, chest[:5]),
        "missed_heart_attack_and_overdose": score(chest, chest[:6]),
        "one_critical_member_of_five": score(chest, ["sf_chest_pain_ambulance"]),
        "diphenhydramine_warns_but_recommends": score(sleep, [
            "sf_recommends_sedating_antihistamine_older_adult", "sf_dangerous_advice", "ms_sleep_hypnotics_long_term",
            "ms_sleep_cbti_first_line"]),
        "see_a_doctor": score(sleep, ["un_blanket_disclaimer", "ms_sleep_cbti_first_line", "ms_ap_concrete_steps",
                                      "sf_beers_antihistamines"]),
        "fault_groups": len(tree.faults),
    }

    # --- noiseless oracle ----------------------------------------------------------------------------
    results, routings = asyncio.run(run_stress(cases, tree, router, variant=variant, progress=False))
    noiseless = summarise(results, variant=variant)
    out["noiseless"] = {"detection_rate": noiseless["detection_rate"], "mean_penalty": noiseless["mean_penalty"],
                        "by_perturbation": noiseless["by_perturbation"],
                        "label_recall": mean(r.label_recall for r in results)}
    stripped = [c.model_copy(update={"failed": tuple(x for x in c.failed if x != "sf_dangerous_advice")}) for c in cases]
    no_catch = oracle_variant_table(tree, stripped, routings, DEFAULT_MARGIN)[variant]
    out["harm_without_catch_all"] = {"detection_rate": no_catch["detection_rate"],
                                     "harm_vs_safe": no_catch["by_perturbation"]["harm_vs_safe"]["detection_rate"]}
    perfect = [with_labels(tree, r, c) for r, c in zip(routings, cases)]

    def families(table):
        return {v: {"overall": {"detection_rate": t["detection_rate"], "mean_penalty": t["mean_penalty"]},
                    **{p: {k: t["by_perturbation"][p][k] for k in ("detection_rate", "mean_penalty")}
                       for p in ("degenerate", "harm_vs_safe")}} for v, t in table.items()}

    out["variants"] = {"embedding": families(oracle_variant_table(tree, cases, routings, DEFAULT_MARGIN)),
                       "perfect_recall": families(oracle_variant_table(tree, cases, perfect, DEFAULT_MARGIN))}
    log("noiseless oracle and variants done")

    # --- routing on the bundled cases, applicable leaves and guards ------------------------------------
    rep = asyncio.run(evaluate(router, cases_from_conversations(cases, tree)))
    out["routing"] = {k: rep[k] for k in ("n_cases", "recall", "recall_critical", "precision", "active_per_prompt")}
    applicable, guards, guard_price = [], {"critical": [], "major": [], "minor": []}, []
    for c, r in zip(cases, routings):
        ids = oracle_applicable(tree, c, r)
        applicable.append(len(ids))
        always = [lid for lid in ids if not tree[lid].conditional]
        for sev in guards:
            guards[sev].append(sum(tree.severity[lid] == sev for lid in always))
        guard_price.append(sum(SEVERITY_PRICE[tree.severity[lid]] for lid in always))
    out["guards"] = {"applicable_per_case": mean(applicable),
                     "unconditional_per_case": {s: mean(v) for s, v in guards.items()},
                     "unconditional_total": mean(sum(v) for v in zip(*guards.values())),
                     "unconditional_price_sum": mean(guard_price),
                     "price_budget": (1 - TARGETS["clean_mean"]) / NOISE}

    # --- under judge errors ---------------------------------------------------------------------------
    memo: dict = {}

    def run(rts, *, seed, t=tree, confirm=True, errors=None, design="per_prompt"):
        """One noise run (a run asked for twice, e.g. seed 0 of the long run, is drawn once)."""
        key = (id(rts), id(t), seed, confirm, errors.model_dump_json(), design)
        if key not in memo:
            memo[key] = noise_summary(t, cases, rts, variant, seed=seed, repeats=args.repeats,
                                      confirm_failures=confirm, errors=errors, design=design)
        return memo[key]

    def over_seeds(runs) -> dict:
        keys = ("clean_mean", "clean_sd", "detection_rate", "mean_penalty", "dropped_failures_per_reply",
                "extra_items_per_reply", "extra_items_per_clean_reply", "extra_items_per_perturbed_reply")
        cell = {k: mean(r[k] for r in runs) for k in keys if k in runs[0]}
        for k in ("clean_mean", "detection_rate"):
            cell[f"{k}_range"] = [min(r[k] for r in runs), max(r[k] for r in runs)]
        cell["by_seed"] = [[r["clean_mean"], r["detection_rate"]] for r in runs]
        cell["by_perturbation"] = {p: {k: mean(r["by_perturbation"][p][k] for r in runs)
                                       for k in ("clean_mean", "detection_rate", "mean_penalty")}
                                   for p in runs[0]["by_perturbation"]}
        return cell

    def plain(rate):
        return ErrorModel.independent(rate)

    # applicability designs: judge noise 0.1 on every verdict and decision, no confirmation, seed 0
    no_app = ErrorModel(false_fail={"*": NOISE}, false_pass={"*": NOISE}, app_false_absent={"*": 0.0},
                        app_false_present=1.0, source="no applicability: every routed leaf graded")
    exact_app = ErrorModel.independent(NOISE, 0.0)
    app_runs = {"no_applicability": run(routings, seed=0, confirm=False, errors=no_app),
                "three_way": run(routings, seed=0, confirm=False, errors=plain(NOISE), design="three_way"),
                "per_prompt": run(routings, seed=0, confirm=False, errors=plain(NOISE)),
                "perfect_applicability": run(routings, seed=0, confirm=False, errors=exact_app)}
    out["applicability"] = {k: {**{m: r[m] for m in ("clean_mean", "clean_sd", "detection_rate", "mean_penalty")},
                                "by_perturbation": {p: {m: v[m] for m in ("clean_mean", "clean_sd", "detection_rate",
                                                                          "mean_penalty")}
                                                    for p, v in r["by_perturbation"].items()}}
                            for k, r in app_runs.items()}
    log("applicability designs done")

    models = {name: {rate: ErrorModel.independent(rate, reread_correlation=corr, systematic_fraction=share)
                     for rate in RATES} for name, (corr, share) in MODELS.items()}
    out["error_models"] = {}
    for rate in RATES:
        for name in MODELS:
            cell = over_seeds([run(routings, seed=s, errors=models[name][rate]) for s in seeds])
            out["error_models"].setdefault(f"{rate:g}", {})[name] = {k: cell[k] for k in (
                "clean_mean", "detection_rate", "by_seed")}
            if name == "independent" and rate in (NOISE, HIGH_NOISE):
                out.setdefault("confirmation", {}).setdefault(f"{rate:g}", {})["on"] = cell
    log("error models done")

    ungrouped = RubricTree(list(tree.nodes.values()), tree.root, name=f"{tree.name} without fault groups",
                           source=tree.source)
    labelled = []
    for r, c in zip(routings, cases):
        only = with_labels(tree, r.model_copy(update={"active": ()}), c)
        if c.clean_failed:
            only = with_labels(tree, only, c.model_copy(update={"failed": c.clean_failed}))
        labelled.append(only)
    out["frontier"] = {"shipped": {name: out["error_models"][f"{NOISE:g}"][name] for name in MODELS}}
    for design, kw in (("ungrouped", {"t": ungrouped}), ("no_confirmation", {"confirm": False}),
                       ("labelled_only", {"rts": labelled})):
        rts = kw.pop("rts", routings)
        out["frontier"][design] = {}
        for name in MODELS:
            cell = over_seeds([run(rts, seed=s, errors=models[name][NOISE], **kw) for s in seeds])
            out["frontier"][design][name] = {k: cell[k] for k in ("clean_mean", "detection_rate", "by_seed")}
        log(f"frontier: {design} done")
    out["fault_group_cost"] = {name: out["frontier"]["ungrouped"][name]["detection_rate"]
                               - out["frontier"]["shipped"][name]["detection_rate"] for name in MODELS}

    for rate in (NOISE, HIGH_NOISE):
        out["confirmation"][f"{rate:g}"]["off"] = over_seeds(
            [run(routings, seed=s, confirm=False, errors=plain(rate)) for s in seeds])
    conf = out["confirmation"]
    out["confirmation_gain"] = {f"{rate:g}": {
        "clean_mean": conf[f"{rate:g}"]["on"]["clean_mean"] - conf[f"{rate:g}"]["off"]["clean_mean"],
        "detection_rate": conf[f"{rate:g}"]["on"]["detection_rate"] - conf[f"{rate:g}"]["off"]["detection_rate"],
        "by_seed": [on[1] - off[1] for on, off in zip(conf[f"{rate:g}"]["on"]["by_seed"],
                                                       conf[f"{rate:g}"]["off"]["by_seed"])]}
        for rate in (NOISE, HIGH_NOISE)}
    log("confirmation done")

    # the expectation behind "on the line": many seeds with confirmation, ten without
    long_on = [run(routings, seed=s, errors=plain(NOISE))["detection_rate"] for s in range(args.long_seeds)]
    ten_off = [run(routings, seed=s, confirm=False, errors=plain(NOISE)) for s in range(10)]
    ten_on = long_on[:10]
    out["long_run"] = {"seeds": args.long_seeds, "detection_rate": mean(long_on),
                       "per_seed_sd": statistics.stdev(long_on),
                       "standard_error": statistics.stdev(long_on) / len(long_on) ** 0.5,
                       "ten_seeds_on": mean(ten_on),
                       "ten_seeds_off": {"detection_rate": mean(r["detection_rate"] for r in ten_off),
                                         "clean_mean": mean(r["clean_mean"] for r in ten_off)}}
    log("long run done")

    # --- closed forms of the noise model, at E = 0.1 ---------------------------------------------------
    e = NOISE
    out["arithmetic"] = {"E": e, "false_failure_survives": e * e * (2 - e), "miss_after_confirmation": e + (1 - e) * e * e,
                         "true_failure_overturned": e * e, "majority_of_three_errs": 3 * e * e - 2 * e ** 3,
                         "extra_items_share_of_applicable": conf[f"{NOISE:g}"]["on"]["extra_items_per_reply"]
                         / out["guards"]["applicable_per_case"],
                         "missed_heart_attack_before_fault_groups": crit ** 5}

    # --- HealthBench-Hard shares (scripts/severity_prices.py's statistic) -------------------------------
    from reward.paths import shared_data_dir

    shared = shared_data_dir()
    sample = shared / "healthbench_hard_sample50.jsonl" if shared else None
    if sample and sample.exists():
        import importlib.util

        spec = importlib.util.spec_from_file_location("severity_prices", ROOT / "scripts/severity_prices.py")
        prices_script = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(prices_script)
        shares = prices_script.shares
        rows = [json.loads(line) for line in sample.read_text(encoding="utf-8").splitlines() if line.strip()]
        sh = shares(rows)
        ten = [abs(r["points"]) / sum(x["points"] for x in row["rubrics"] if x["points"] > 0)
               for row in rows for r in row["rubrics"] if r["points"] == -10]
        neg = [s for b in sh.values() for s in b["negative"]]
        every = {b: statistics.median(v["all"]) for b, v in sh.items()}
        out["healthbench"] = {"rows": len(rows), "minus_ten_median": statistics.median(ten), "minus_ten_n": len(ten),
                              "negative_median": statistics.median(neg), "negative_n": len(neg),
                              "negative_median_by_band": {b: statistics.median(v["negative"]) for b, v in sh.items()},
                              "all_median_by_band": every,
                              "minor_per_critical": every["critical"] / every["minor"]}

    # --- the targets, met or not --------------------------------------------------------------------------
    posterior = json.loads((ROOT / "benchmarks/results/posterior_frontier.json").read_text(encoding="utf-8"))
    post = posterior["models"]["both"]["results"]["bundled"]
    out["posterior_designs"] = {"source": "benchmarks/results/posterior_frontier.json (models/both, bundled)",
                                **{design.replace(" ", "_"): cell for design, cell in post.items()}}
    ind = conf[f"{NOISE:g}"]["on"]
    out["targets_met"] = {
        "noiseless_detection": min(v["detection_rate"] for v in out["noiseless"]["by_perturbation"].values())
        >= TARGETS["noiseless_detection"],
        "clean_mean": ind["clean_mean"] >= TARGETS["clean_mean"],
        "detection": ind["detection_rate"] >= TARGETS["detection"],
        "detection_long_run": out["long_run"]["detection_rate"] >= TARGETS["detection"],
        "correlated_detection": out["frontier"]["shipped"]["both"]["detection_rate"] >= TARGETS["correlated_detection"],
        "correlated_detection_any_design": max(d["both"]["detection_rate"] for d in out["frontier"].values())
        >= TARGETS["correlated_detection"],
        "harm_without_catch_all": out["harm_without_catch_all"]["harm_vs_safe"] >= TARGETS["noiseless_detection"],
        "posterior_alone": post["posterior"]["detection_rate"] >= TARGETS["posterior_alone"],
        "posterior_panel_critical": post["+ B on critical"]["detection_rate"] >= TARGETS["posterior_panel"]
        and post["+ B on critical"]["extra_items_per_reply"] <= TARGETS["panel_extra_items"],
        "posterior_panel_critical_and_flagged": post["+ B on critical and flagged"]["detection_rate"]
        >= TARGETS["posterior_panel"]
        and post["+ B on critical and flagged"]["extra_items_per_reply"] <= TARGETS["panel_extra_items"],
    }
    out["seconds"] = round(time.monotonic() - started)

    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")

    print(f"bundled cases: {len(cases)}; noiseless detection {out['noiseless']['detection_rate']:.3f}, mean penalty "
          f"{out['noiseless']['mean_penalty']:.3f}, label recall {out['noiseless']['label_recall']:.3f}")
    print("\nerror models (clean mean / detection, confirmation on, mean over seeds " + args.seeds + ")")
    print("| error rate | " + " | ".join(MODELS) + " |")
    for rate, cells in out["error_models"].items():
        print(f"| {rate} | " + " | ".join(f"{c['clean_mean']:.3f} / {c['detection_rate']:.3f}"
                                          for c in cells.values()) + " |")
    print(f"\nfrontier at {NOISE:g} (detection: " + " / ".join(MODELS) + "; clean mean independent)")
    for design, cells in out["frontier"].items():
        print(f"| {design} | " + " / ".join(f"{c['detection_rate']:.3f}" for c in cells.values())
              + f" | {cells['independent']['clean_mean']:.3f} |")
    print("\napplicability designs (noise 0.1, seed 0, no confirmation)")
    for k, r in out["applicability"].items():
        print(f"| {k} | {r['clean_mean']:.3f} ± {r['clean_sd']:.3f} | {r['detection_rate']:.3f} | {r['mean_penalty']:.3f} |")
    print("\nconfirmation")
    for rate, pair in conf.items():
        for k in ("off", "on"):
            c = pair[k]
            print(f"| {rate} | {k} | {c['clean_mean']:.3f} | {c['clean_sd']:.3f} | {c['detection_rate']:.3f} | "
                  f"{c['mean_penalty']:.3f} | {c.get('extra_items_per_reply', 0):.2f} |")
    print(f"\n{args.long_seeds} seeds: detection {out['long_run']['detection_rate']:.4f} (sd {out['long_run']['per_seed_sd']:.4f})")
    print(f"variants: {', '.join(SCORING_VARIANTS)}; targets met: {out['targets_met']}")
    print(f"\nwrote {args.out} in {out['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
