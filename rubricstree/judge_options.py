"""The judge options of every command that grades, generated from :class:`JudgeSettings`.

``@judge_options()`` adds one option per field of :class:`reward.judge.settings.JudgeSettings`
that names a ``flag`` (``--judge-url``, ``--served-model``, ``--item-timeout``, ``--deadline``,
...), in a "Judge" help panel, plus each field's old spellings as hidden aliases; the command
receives the validated settings as its ``judge`` argument. So every judge command takes the same
options with the same defaults, and a new field is an option everywhere at once.

The decorator also bounds the whole command by the run deadline (``--deadline``) and turns a
stopped run (:class:`~reward.errors.JudgeStopped`: deadline passed, circuit breaker open) into
one ``error:`` line and its exit status (:data:`EXIT_JUDGE_DEADLINE`, :data:`EXIT_JUDGE_UNAVAILABLE`).
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any

import typer
from pydantic import ValidationError

from reward.errors import JudgeDeadlineError, JudgeStopped, JudgeUnavailableError
from reward.judge.budget import run_deadline
from reward.judge.settings import judge_flags, settings_from_values

EXIT_JUDGE_DEADLINE = JudgeDeadlineError.exit_code  # 4
EXIT_JUDGE_UNAVAILABLE = JudgeUnavailableError.exit_code  # 5
PANEL = "Judge"
_PREFIX = "judge__"
_CTX = "judge_options_context"


flags = judge_flags  # the generated options, by field


def judge_options(*, defaults: dict[str, Any] | None = None) -> Callable[[Callable], Callable]:
    """Decorate a Typer command that takes ``judge: JudgeSettings`` (see the module docstring).
    ``defaults`` overrides a field's default for this command (e.g. ``{"mode": "explain"}``)."""
    defaults = defaults or {}

    def decorate(fn: Callable) -> Callable:
        sig = inspect.signature(fn, eval_str=True)
        if "judge" not in sig.parameters:
            raise TypeError(f"{fn.__name__} must take a 'judge' argument to get the judge options")
        params = [p for p in sig.parameters.values() if p.name != "judge"]
        own = {d for p in params for d in (getattr(p.default, "param_decls", None) or ())}
        added: list[inspect.Parameter] = []
        for name, f in flags().items():
            default = defaults.get(name, f["default"])
            added.append(inspect.Parameter(
                f"{_PREFIX}{name}", inspect.Parameter.KEYWORD_ONLY, annotation=f["type"],
                default=typer.Option(default, f["flag"], help=f["help"], rich_help_panel=PANEL)))
            for i, alias in enumerate(a for a in f["aliases"] if a not in own):  # the command's own flag wins
                kind = f["type"] if type(None) in typing.get_args(f["type"]) else f["type"] | None
                added.append(inspect.Parameter(
                    f"{_PREFIX}{name}__{i}", inspect.Parameter.KEYWORD_ONLY, annotation=kind,
                    default=typer.Option(None, alias, hidden=True, help=f"deprecated: use {f['flag']}")))

        # the command's context, to tell a flag given at its default from one not given
        added.append(inspect.Parameter(_CTX, inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context))

        @functools.wraps(fn)
        def command(**kwargs: Any) -> Any:
            given = {k[len(_PREFIX):]: kwargs.pop(k) for k in list(kwargs) if k.startswith(_PREFIX)}
            values = {k: v for k, v in given.items() if "__" not in k}
            ctx = kwargs.pop(_CTX, None)
            older: dict[str, int] = {}
            for key, v in given.items():  # a deprecated spelling counts when the new one was not given
                field = key.split("__")[0]
                if "__" not in key or v is None:
                    continue
                older[field] = older.get(field, 0) + 1
                source = ctx.get_parameter_source(f"{_PREFIX}{field}") if ctx is not None else None
                if older[field] > 1 or (source is not None and source.name == "COMMANDLINE"):
                    flag = flags()[field]["flag"]
                    typer.secho(f"error: {flag} was given more than once, in its older spellings: give {flag} alone",
                                err=True, fg="red")
                    raise typer.Exit(2)
                values[field] = v
            try:
                settings = settings_from_values(values)
            except ValidationError as exc:
                problems = "; ".join(f"{flags().get(str(e['loc'][0]), {}).get('flag', e['loc'][0])}: {e['msg']}"
                                     for e in exc.errors())
                typer.secho(f"error: invalid judge option: {problems}", err=True, fg="red")
                raise typer.Exit(2) from exc
            try:
                with run_deadline(settings.deadline_s if settings.served else None):
                    return fn(**kwargs, judge=settings)
            except JudgeStopped as exc:
                typer.secho(f"error: {exc}", err=True, fg="red", bold=True)
                raise typer.Exit(exc.exit_code) from exc

        command.__signature__ = sig.replace(parameters=[*params, *added])  # type: ignore[attr-defined]
        command.__annotations__ = {**{p.name: p.annotation for p in params},
                                   **{p.name: p.annotation for p in added}}
        return command

    return decorate
