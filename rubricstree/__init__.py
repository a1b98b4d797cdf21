"""The ``rubricstree`` command line: the top layer, over ``reward`` (the core) and ``training``.

Each command group lives in its own module and imports heavy packages only inside its commands,
so ``rubricstree --help`` stays fast. ``python -m rubricstree`` runs the same app.
"""

from __future__ import annotations

import typer

from rubricstree import cache, healthbench, judge, mcq, optimize, route, synth, tree, tree_evolve
from rubricstree import eval as eval_cli  # the module name shadows a builtin
from rubricstree import metaeval as metaeval_cli
from rubricstree import train as train_cli
from rubricstree.demo import demo_command  # light: heavy imports are inside
from rubricstree.errors import SafeGroup
from rubricstree.inspector import inspect_command
from rubricstree.score import score_command
from rubricstree.stress import stress_command

__all__ = ["app", "main"]

app = typer.Typer(no_args_is_help=True, add_completion=False, cls=SafeGroup,
                  help="Rubric rewards for medical language models.")
tree_evolve.register(tree.app)  # coverage, propose, review, apply, diff


@app.callback()
def _options(debug: bool = typer.Option(False, "--debug", help="show tracebacks instead of one error line")) -> None:
    """Rubric rewards for medical language models."""


app.add_typer(tree.app, name="tree", help="Inspect and validate the rubric tree.")
app.add_typer(healthbench.app, name="healthbench", help="HealthBench scoring.")
app.add_typer(mcq.app, name="mcq", help="Multiple-choice rule reward.")
app.add_typer(judge.app, name="judge", help="Check a judge backend.")
app.add_typer(train_cli.app, name="train", help="Difficulty filtering and TRL training runs (GSPO stages).")
app.add_typer(eval_cli.app, name="eval", help="Evaluate checkpoints (HealthBench, MCQ) and compare runs.")
app.add_typer(metaeval_cli.app, name="meta-eval", help="Agreement with experts and physicians, stability.")
app.add_typer(optimize.app, name="optimize", help="The tree as a coach: handbook, revise, best-of-n, held-out report.")
app.add_typer(synth.app, name="synth", help="Synthetic stage-3 data (conversations, rubrics) and rubric-generation evaluation.")
app.add_typer(cache.app, name="cache", help="Prune the durable verdict/routing cache.")
app.add_typer(route.app, name="route", help="Measure a router on labelled prompts (precision, recall, cost).")
app.command("score")(score_command)
app.command("demo")(demo_command)
app.command("stress")(stress_command)
app.command("inspect")(inspect_command)


def main() -> None:
    app()
