"""The half of ``rubricstree demo`` that shows the reward working, with no model at all.

The tiny-judge run beside it checks the wiring (its judge is random). This part takes the verdicts
from the labels of the bundled stress cases (``reward/data/stress_cases.yaml``: a clean reply and a
reply degraded by one of four perturbations, with the leaves it fails written down before any run),
routes each case with the embedding router and scores both replies with the default scoring
variant, through the stress runner's own functions (``reward.stress``), so what it prints is what
``rubricstree stress`` measures:

- the oracle stress table: detection rate and mean penalty per perturbation;
- one case's per-leaf breakdown: a good reply and a harmful one (the diazepam case: "stop this
  weekend, no need to involve your doctor"), the leaves that separate them with their weights,
  and each macro capability's score.

It writes ``DIR/reward.md`` and returns a JSON-able summary.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

# The case shown leaf by leaf: a harmful reply (abrupt benzodiazepine stop, no clinician). When a
# cases file lacks it, the case with the most labelled failures is shown instead.
SHOWCASE = "ap-ii-2"


def oracle_breakdown(tree, case, routing, variant: str) -> dict[str, Any]:
    """Per-leaf and per-capability scores of a case's clean and perturbed replies under oracle
    verdicts (the same inputs as ``reward.stress.oracle_scores``)."""
    from reward.scoring.tree_score import score_tree
    from reward.scoring.variants import RULE_REASONS
    from reward.stress import oracle_met

    active = routing.leaf_ids
    kw = {"variant": variant, "activated": set(routing.expanded),
          "rule_active": [a.leaf_id for a in routing.active if a.reason in RULE_REASONS]}
    good = score_tree(tree, oracle_met(tree, active, ()), **kw)
    bad = score_tree(tree, oracle_met(tree, active, case.failed), **kw)
    severity = getattr(tree, "severity", {})
    leaves = [{"leaf": lid, "title": tree[lid].title, "polarity": tree[lid].polarity, "severity": severity.get(lid),
               "weight": round(float(bad.weights.get(lid, 0.0)), 4),
               "good": good.leaves.get(lid), "harmful": bad.leaves.get(lid), "routed": lid in active}
              for lid in case.failed]
    macros = [{"capability": m, "good": good.nodes[m]["score"] if m in good.nodes else None,
               "harmful": bad.nodes[m]["score"] if m in bad.nodes else None}
              for m in tree.macro_capabilities if m in good.nodes or m in bad.nodes]
    return {"case": case.id, "scenario": case.scenario, "perturbation": case.perturbation,
            "prompt": case.prompt[-1].content, "good_reply": case.clean.strip(),
            "harmful_reply": case.perturbed.strip(), "n_active": len(active),
            "good": round(good.score, 4), "harmful": round(bad.score, 4), "leaves": leaves, "capabilities": macros}


def run_oracle_demo(tree, router, *, variant: str | None = None) -> dict[str, Any]:
    """Route the bundled stress cases with ``router``, score them with oracle verdicts and return
    ``{"variant", "cases", "detection_rate", "mean_penalty", "by_perturbation", "showcase"}``."""
    from reward.scoring.variants import DEFAULT_SCORING_VARIANT
    from reward.stress import DEFAULT_MARGIN, load_cases, oracle_scores, public_summary, run_stress, summarise

    variant = variant or DEFAULT_SCORING_VARIANT
    cases = load_cases(None, tree)
    results, routings = asyncio.run(run_stress(cases, tree, router, mode="oracle", variant=variant,
                                               progress=False))
    summary = public_summary(summarise(results, margin=DEFAULT_MARGIN, variant=variant))
    k = next((i for i, c in enumerate(cases) if c.id == SHOWCASE),
             max(range(len(cases)), key=lambda i: len(cases[i].failed)))
    show = oracle_breakdown(tree, cases[k], routings[k], variant)
    show["matches_stress_runner"] = (show["good"], show["harmful"]) == tuple(
        round(x, 4) for x in oracle_scores(tree, cases[k], routings[k], variant))
    return {"variant": variant, "margin": DEFAULT_MARGIN, "cases": summary["cases"],
            "detection_rate": summary["detection_rate"], "mean_penalty": summary["mean_penalty"],
            "by_perturbation": summary["by_perturbation"], "showcase": show}


def _f(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def reward_markdown(r: dict[str, Any]) -> str:
    """``reward.md``: the stress table and the showcase breakdown."""
    s = r["showcase"]
    lines = [
        "# The reward on labelled cases (oracle verdicts, no model)", "",
        f"{r['cases']} bundled stress cases, embedding router, scoring variant `{r['variant']}`. Verdicts come "
        "from the labels written with each case (a perfect judge), so this measures routing and scoring; "
        "`rubricstree stress --verdicts judge` runs a real judge on the same cases.", "",
        f"A perturbed reply counts as detected when it scores more than {r['margin']} below the clean one.", "",
        "| perturbation | cases | detection rate | mean penalty |", "|---|---:|---:|---:|",
        *(f"| {p.replace('_', ' ')} | {b['n']} | {_f(b['detection_rate'])} | {_f(b['mean_penalty'])} |"
          for p, b in r["by_perturbation"].items()),
        f"| **overall** | {r['cases']} | {_f(r['detection_rate'])} | {_f(r['mean_penalty'])} |", "",
        f"## One case, leaf by leaf: `{s['case']}` ({s['perturbation'].replace('_', ' ')})", "",
        f"> **User:** {s['prompt']}", "", f"**Good reply** (tree score {s['good']:.2f}): {s['good_reply']}", "",
        f"**Harmful reply** (tree score {s['harmful']:.2f}): {s['harmful_reply']}", "",
        f"{s['n_active']} leaves routed. The leaves the harmful reply fails (pass value after polarity; weight "
        "under the variant; a failed leaf costs at least its severity's share of the score):", "",
        "| leaf | check | severity | weight | good | harmful |", "|---|---|---|---:|---:|---:|",
        *(f"| `{x['leaf']}` | {x['title']} | {x['severity']} | {x['weight']:.3f} | {_f(x['good'])} | {_f(x['harmful'])} |"
          + ("" if x["routed"] else " (not routed)") for x in s["leaves"]), "",
        "| capability | good | harmful |", "|---|---:|---:|",
        *(f"| {m['capability']} | {_f(m['good'])} | {_f(m['harmful'])} |" for m in s["capabilities"]), "",
    ]
    return "\n".join(lines)


def print_oracle_demo(r: dict[str, Any]) -> None:
    """The stress table and the showcase, as rich tables on stdout."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    t = Table(title=f"The reward on {r['cases']} labelled stress cases (oracle verdicts, embedding router, "
                    f"{r['variant']})")
    for col in ("perturbation", "cases", "detection rate", "mean penalty"):
        t.add_column(col, justify="left" if col == "perturbation" else "right")
    for p, b in r["by_perturbation"].items():
        t.add_row(p.replace("_", " "), str(b["n"]), _f(b["detection_rate"]), _f(b["mean_penalty"]))
    t.add_row("[bold]overall[/]", str(r["cases"]), _f(r["detection_rate"]), _f(r["mean_penalty"]))
    console.print(t)
    s = r["showcase"]
    b = Table(title=f"Case {s['case']}: good reply {s['good']:.2f} vs harmful reply {s['harmful']:.2f} "
                    f"(the leaves the harmful one fails)")
    for col in ("leaf", "check", "severity", "weight", "good", "harmful"):
        b.add_column(col, justify="left" if col in ("leaf", "check", "severity") else "right", overflow="fold")
    for x in s["leaves"]:
        b.add_row(x["leaf"], x["title"], str(x["severity"]), f"{x['weight']:.3f}", _f(x["good"]), _f(x["harmful"]))
    console.print(b)


def write_oracle_demo(r: dict[str, Any], out: Path) -> Path:
    path = out / "reward.md"
    path.write_text(reward_markdown(r), encoding="utf-8")
    return path
