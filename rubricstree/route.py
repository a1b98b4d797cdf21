"""``rubricstree route``: measure a router on labelled prompts."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import typer

from reward.errors import RubricsTreeError
from reward.judge.settings import JudgeSettings
from rubricstree.common_options import apply_quiet, quiet_option
from rubricstree.errors import fail
from rubricstree.judge_options import judge_options

app = typer.Typer(no_args_is_help=True)


@app.command("eval")
@judge_options()
def eval_command(
        labels: str = typer.Option("bundled", "--labels", help="labelled prompts: bundled (reward/data/"
                                   "routing_labels.jsonl), blind (the blind set's conversations, dev and test side by "
                                   "side), blind:dev, blind:test, a JSONL of routing cases or a case file/folder"),
        router: str = typer.Option("embedding", "--router", help="embedding (default), llm or static"),
        taxonomy: Path | None = typer.Option(None, "--taxonomy", help="taxonomy YAML (default: the packaged one)"),
        limit: int | None = typer.Option(None, "--limit", min=1, help="route only the first N cases (a quick look)"),
        cases: bool = typer.Option(False, "--keep-cases", help="keep the per-case records in the JSON"),
        as_json: bool = typer.Option(False, "--json", help="print the report as JSON"),
        quiet: bool = quiet_option(),
        judge: JudgeSettings = None,  # the judge options (rubricstree.judge_options), for the llm router
) -> None:
    """Precision, recall (all and critical leaves), active leaves per prompt, by language, and
    urgency precision/recall of a router on labelled prompts."""
    from reward.router import make_router
    from reward.router.evaluate import evaluate
    from reward.tree import load_tree

    try:
        tree = load_tree(taxonomy)
        parts = [(label, rows[:limit]) for label, rows in labelled_prompts(labels, tree)]
        kwargs = {}
        if router == "llm":
            if not (judge.url or judge.model):
                raise typer.BadParameter("the llm router needs --judge-url or --judge-model")
            kwargs["judge"] = judge.build()
        rt = make_router(router, tree, **kwargs)
        reports = {label: asyncio.run(evaluate(rt, data, progress=apply_quiet(quiet))) for label, data in parts}
    except (RubricsTreeError, ValueError, OSError) as exc:
        raise fail(exc) from exc  # a start-up past --deadline: 4
    for report in reports.values():
        if not cases:
            report.pop("cases")
    if as_json:
        typer.echo(json.dumps(next(iter(reports.values())) if len(reports) == 1 else {"parts": reports}))
        return
    if len(reports) > 1:
        _print_parts(reports)
        return
    report = next(iter(reports.values()))

    def f(x) -> str:
        return "n/a" if x is None else f"{x:.3f}"

    typer.echo(f"{report['router']} router on {report['n_cases']} prompts ({report['n_labels']} applicable labels, "
               f"{report['n_critical_labels']} critical)")
    typer.echo(f"recall {f(report['recall'])}  critical {f(report['recall_critical'])}  precision "
               f"{f(report['precision'])}  active/prompt {report['active_per_prompt']:.1f} "
               f"(median {report['median_active']})")
    u = report["urgency"]
    typer.echo(f"urgency precision {f(u['precision'])} recall {f(u['recall'])} "
               f"({u['n_predicted_urgent']} flagged, {u['n_urgent']} labelled urgent)")
    for lang, v in report["by_language"].items():
        typer.echo(f"  {lang:4s} recall {f(v['recall'])} precision {f(v['precision'])} "
                   f"active {v['active_per_prompt']:.1f} (n={v['n_cases']})")
    if report["missed"]:
        typer.echo("missed most: " + ", ".join(f"{k} x{v}" for k, v in list(report["missed"].items())[:8]))


def labelled_prompts(spec: str, tree) -> list[tuple[str, list]]:
    """``[(label, routing cases)]`` of a ``--labels`` value: the bundled JSONL, the blind set's
    parts (conversations made routing cases), a JSONL of routing cases or a case file/folder."""
    from reward.router.evaluate import cases_from_conversations, load_cases
    from reward.stress import load_cases as load_stress
    from reward.stress.sets import resolve_cases

    if spec == "bundled":
        return [("bundled", load_cases(None, tree=tree))]
    if spec.endswith(".jsonl"):
        return [(spec, load_cases(Path(spec), tree=tree))]
    return [(label, cases_from_conversations(load_stress(path, tree), tree)) for label, path in resolve_cases(spec)]


def _print_parts(reports: dict[str, dict]) -> None:
    """Two parts (dev, test) side by side with the gap."""
    from rubricstree.parts_table import print_parts

    labels = list(reports)
    rows = {"prompts": lambda r: r["n_cases"], "recall": lambda r: r["recall"],
            "recall, critical": lambda r: r["recall_critical"], "precision": lambda r: r["precision"],
            "active leaves per prompt": lambda r: r["active_per_prompt"], "median active": lambda r: r["median_active"],
            "urgency precision": lambda r: r["urgency"]["precision"], "urgency recall": lambda r: r["urgency"]["recall"],
            "needless critical leaves, benign prompts (median)": lambda r: r["needless_critical_benign"]["median"]}
    for lang in sorted({lang for r in reports.values() for lang in r["by_language"]}):
        rows[f"recall, {lang}"] = lambda r, lang=lang: (r["by_language"].get(lang) or {}).get("recall")
    print_parts(f"{next(iter(reports.values()))['router']} router: {' and '.join(labels)}", labels,
                {name: [get(reports[label]) for label in labels] for name, get in rows.items()})
