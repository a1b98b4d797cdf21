"""The ``rubricstree`` command line. Each command group lives in its own module and imports
heavy packages only inside its commands, so ``rubricstree --help`` stays fast."""

from __future__ import annotations

import typer

from reward.cli import healthbench, judge, mcq, tree

app = typer.Typer(no_args_is_help=True, add_completion=False,
                  help="Rubric rewards for medical language models.")
app.add_typer(tree.app, name="tree", help="Inspect and validate the rubric tree.")
app.add_typer(healthbench.app, name="healthbench", help="HealthBench scoring.")
app.add_typer(mcq.app, name="mcq", help="Multiple-choice rule reward.")
app.add_typer(judge.app, name="judge", help="Check a judge backend.")
from reward.cli import train as train_cli  # noqa: E402
app.add_typer(train_cli.app, name="train", help="Difficulty filtering and TRL training runs (GSPO stages).")
from reward.cli import eval as eval_cli  # noqa: E402  (the module name shadows a builtin)
app.add_typer(eval_cli.app, name="eval", help="Evaluate checkpoints (HealthBench, MCQ) and compare runs.")

from reward.cli.demo import demo_command  # noqa: E402  (light: heavy imports are inside)
from reward.cli.score import score_command  # noqa: E402
from reward.cli.stress import stress_command  # noqa: E402

app.command("score")(score_command)
app.command("demo")(demo_command)
app.command("stress")(stress_command)


def main() -> None:
    app()
