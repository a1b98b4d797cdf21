"""The reward options of every command that scores, generated from :class:`RewardSettings`.

``@reward_options()`` adds one option per field of :class:`reward.settings.RewardSettings` that
names a ``flag`` (``--router``, ``--rubric-source``, ``--scoring``, ``--combine``,
``--scoring-variant``, ``--grade``, ``--format-failure-score``, ``--applicability/--no-...``,
``--confirm-failures/--no-...``, ...), in a "Reward" help panel, with the settings' defaults (the
stage-3 recipe), plus ``--router-option KEY=VALUE`` (repeatable) and its two shortcuts
``--router-threshold`` and ``--router-emergency-threshold``; the command receives the validated
settings as its ``reward`` argument. So ``score``, ``stress``, ``meta-eval``, ``optimize`` and
``demo`` take the same options with the same defaults as the trainers' YAML, and a new field of
the settings is an option everywhere at once. ``only=`` keeps a subset (the router's options for
commands that only route).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Collection
from typing import Any

import typer
from pydantic import ValidationError

from reward.settings import RewardSettings, reward_flags

PANEL = "Reward"
_PREFIX = "reward__"
ROUTER_FIELDS = ("tree", "router", "router_options")


def _parse_option(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with the value read as YAML (``0.4``, ``[a, b]``, ``true``)."""
    from reward.textio import parse_yaml

    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise typer.BadParameter(f"--router-option expects KEY=VALUE, got {text!r}")
    return key.strip(), parse_yaml(value, where=f"--router-option {key}") if value.strip() else None


def _help(f: dict[str, Any]) -> str:
    return f["help"] + (f" ({' | '.join(f['choices'])})" if f["choices"] else "")


def reward_options(*, defaults: dict[str, Any] | None = None, only: Collection[str] | None = None
                   ) -> Callable[[Callable], Callable]:
    """Decorate a Typer command that takes ``reward: RewardSettings`` (see the module docstring).
    ``defaults`` overrides a field's default for this command; ``only`` keeps those fields."""
    defaults = defaults or {}
    fields = {k: v for k, v in reward_flags().items() if only is None or k in only}

    def decorate(fn: Callable) -> Callable:
        sig = inspect.signature(fn, eval_str=True)
        if "reward" not in sig.parameters:
            raise TypeError(f"{fn.__name__} must take a 'reward' argument to get the reward options")
        params = [p for p in sig.parameters.values() if p.name != "reward"]
        added: list[inspect.Parameter] = []
        for name, f in fields.items():
            default = defaults.get(name, f["default"])
            if name == "router_options":
                for extra, flag, help_ in (
                        ("threshold", "--router-threshold", "router relevance threshold (--router-option threshold=X)"),
                        ("emergency_threshold", "--router-emergency-threshold",
                         "router threshold for urgent prompts (--router-option emergency_threshold=X)")):
                    added.append(inspect.Parameter(f"{_PREFIX}ro__{extra}", inspect.Parameter.KEYWORD_ONLY,
                                                   annotation=float | None,
                                                   default=typer.Option(None, flag, help=help_, rich_help_panel=PANEL)))
                option = typer.Option([f"{k}={v}" for k, v in (default or {}).items()], f["flag"],
                                      help=f["help"] + " (KEY=VALUE, repeatable; values read as YAML)",
                                      rich_help_panel=PANEL)
                annotation: Any = list[str]
            elif f["type"] is bool:
                flag = f["flag"]
                option = typer.Option(default, f"{flag}/--no-{flag[2:]}", help=_help(f), rich_help_panel=PANEL)
                annotation = bool
            else:
                option = typer.Option(None if default is None else str(default) if name == "format_failure_score"
                                      else default, f["flag"], help=_help(f), rich_help_panel=PANEL)
                annotation = f["type"]
            added.append(inspect.Parameter(f"{_PREFIX}{name}", inspect.Parameter.KEYWORD_ONLY,
                                           annotation=annotation, default=option))

        @functools.wraps(fn)
        def command(**kwargs: Any) -> Any:
            given = {k[len(_PREFIX):]: kwargs.pop(k) for k in list(kwargs) if k.startswith(_PREFIX)}
            values: dict[str, Any] = {k: v for k, v in given.items() if not k.startswith("ro__")}
            if "router_options" in values:
                opts = dict(_parse_option(x) for x in values["router_options"] or [])
                for k, v in given.items():
                    if k.startswith("ro__") and v is not None:
                        opts[k[len("ro__"):]] = v
                values["router_options"] = opts
            if values.get("tree") is not None:
                values["tree"] = str(values["tree"])
            try:
                settings = RewardSettings.model_validate({k: v for k, v in values.items()
                                                          if v is not None or k == "format_failure_score"})
            except ValidationError as exc:
                problems = "; ".join(f"{fields.get(str(e['loc'][0]), {}).get('flag', e['loc'][0])}: {e['msg']}"
                                     for e in exc.errors())
                typer.secho(f"error: invalid reward option: {problems}", err=True, fg="red")
                raise typer.Exit(2) from exc
            return fn(**kwargs, reward=settings)

        command.__signature__ = sig.replace(parameters=[*params, *added])  # type: ignore[attr-defined]
        command.__annotations__ = {**{p.name: p.annotation for p in params},
                                   **{p.name: p.annotation for p in added}}
        return command

    return decorate
