"""``rubricstree route``: measure a router on labelled prompts."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import typer

from reward.errors import RubricsTreeError
from reward.judge.settings import JudgeSettings
from rubricstree.common_options import apply_quiet, quiet_option
from rubricstree.judge_options import judge_options

app = typer.Typer(no_args_is_help=True)


@app.command("eval")
@judge_options()
def eval_command(
        labels: Path | None = typer.Option(None, "--labels", help="labelled routing cases (JSONL); default: the "
                                                                   "bundled reward/data/routing_labels.jsonl"),
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
    from reward.router.evaluate import evaluate, load_cases
    from reward.tree import load_tree

    try:
        tree = load_tree(taxonomy)
        data = load_cases(labels, tree=tree)[:limit]
        kwargs = {}
        if router == "llm":
            if not (judge.url or judge.model):
                raise typer.BadParameter("the llm router needs --judge-url or --judge-model")
            kwargs["judge"] = judge.build()
        rt = make_router(router, tree, **kwargs)
        report = asyncio.run(evaluate(rt, data, progress=apply_quiet(quiet)))
    except (RubricsTreeError, ValueError, OSError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(getattr(exc, "exit_code", 2)) from exc  # a start-up past --deadline: 4
    if not cases:
        report.pop("cases")
    if as_json:
        typer.echo(json.dumps(report))
        return

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
