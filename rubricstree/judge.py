"""``rubricstree judge check``: grade one example with a judge backend and print the verdict."""

from __future__ import annotations

import json

import typer

from reward.judge.settings import JudgeSettings
from rubricstree.calibrate import calibrate_command
from rubricstree.common_options import apply_quiet, quiet_option
from rubricstree.errors import fail
from rubricstree.judge_options import judge_options

app = typer.Typer(no_args_is_help=True)


@app.command()
@judge_options()
def check(
    criterion: str = typer.Option("Advises the user to call emergency services now.", help="criterion to check"),
    prompt: str = typer.Option("I have crushing chest pain spreading to my left arm and I'm sweating.", help="user message"),
    response: str = typer.Option("This could be a heart attack. Call emergency services (911) now and chew an aspirin if you are not allergic.", help="response to grade"),
    as_json: bool = typer.Option(False, "--json", help="print the verdict as one JSON line"),
    quiet: bool = quiet_option(),
    judge: JudgeSettings = None,  # the judge options (rubricstree.judge_options)
) -> None:
    """Grade one (prompt, response, criterion) example; exits 1 if the judge call failed, 2 for
    bad settings (no judge given, an unknown mode, a server that lists no model)."""
    from reward.errors import RubricsTreeError
    from reward.judge import JudgeItem, Message

    apply_quiet(quiet)
    mode = judge.mode
    try:
        judge = judge.build(cache=False)
    # pydantic's ValidationError is a ValueError; OSError: a judge model/tokenizer not found
    except (RubricsTreeError, ValueError, OSError) as exc:
        raise fail(exc) from exc  # a start-up past --deadline: 4
    item = JudgeItem(conversation=(Message(role="user", content=prompt),), response=response, criterion=criterion)

    async def run():
        try:
            return await judge.grade([item])
        finally:
            await judge.aclose()

    import asyncio

    from rubricstree.progress import step

    with step(f"grading one example ({mode} mode)"):
        verdict = asyncio.run(run())[0]
    out = {"met": verdict.met, "p_yes": verdict.p_yes, "explanation": verdict.explanation,
           "failure": verdict.failure, "mode": verdict.mode, "stats": judge.stats.as_dict()}
    typer.echo(json.dumps(out) if as_json else "\n".join(f"{k}: {v}" for k, v in out.items()))
    if not verdict.ok:
        raise typer.Exit(1)


app.command("calibrate")(calibrate_command)  # rubricstree.calibrate: its heavy imports are inside
