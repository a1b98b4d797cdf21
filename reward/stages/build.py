"""Build the reward from its settings: the one place a ``RubricReward`` (or, for ``rubric_source:
rows``, a ``RowRubricReward``) is made from ``reward.settings.RewardSettings``.

Every command that scores, both trainer adapters, stress, meta-evaluation, optimisation and the
benchmarks call :func:`build_reward` (through ``RewardSettings.build``), so the reward that is
trained is the reward that is measured. Data flow: settings -> tree (``load_tree(settings.tree)``
unless given) -> router (:func:`build_router`, the llm router on the judge) -> the reward, its
keyword arguments the settings' recipe fields by name (``RewardSettings.engine_kwargs``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["build_reward", "build_router", "output_scope"]


def output_scope(path) -> str:
    """The applicability scope of a command's run: its output path. A rerun into the same output
    (a resume after a kill) reuses the run's applicability answers from the verdict cache; a run
    into another output asks afresh, so a wrong "absent" is not carried into every later run
    (``reward.router.applicability``)."""
    import hashlib
    from pathlib import Path

    return "out-" + hashlib.sha256(str(Path(path).expanduser().resolve()).encode()).hexdigest()[:16]


def build_router(settings, tree, judge: Any = None):
    """The router of ``settings`` on ``tree`` (the llm router asks ``judge``)."""
    from reward.errors import InputError
    from reward.router import make_router

    opts = dict(settings.router_options)
    if settings.router == "llm":
        if judge is None:
            raise InputError("the llm router needs a judge (--judge-url URL or --judge-model PATH)", field="router")
        opts.setdefault("judge", judge)
    elif settings.router == "static":
        opts = {k: v for k, v in opts.items() if k not in ("threshold", "emergency_threshold")}
    try:
        return make_router(settings.router, tree, **opts)
    except TypeError as exc:  # an option the router does not take: say which
        raise InputError(f"router '{settings.router}' does not take these options: {exc}",
                         field="router_options") from exc


def build_reward(settings, judge: Any, *, tree: Any = None, router: Any = None, on_failure: str = "skip",
                 cache_routing: bool = True, applicability_scope: str | None = None):
    """The reward of ``settings`` (see the module docstring).

    Args:
        settings: a ``reward.settings.RewardSettings`` (or a subclass: only the recipe counts).
        judge: a live judge.
        tree: the rubric tree (default: ``settings.tree``, else the packaged one).
        router: a router already built on ``tree`` (default: :func:`build_router`).
        on_failure: ``skip`` (an unscored rollout, with reasons) or ``raise``.
        cache_routing: route each prompt once through the judge's durable cache.
        applicability_scope: the run the applicability answers belong to (a training run's id:
            its resume reuses them, another run asks afresh); None: the reward's own.
    """
    from reward.stages.row_rubrics import RowRubricReward
    from reward.stages.rubric_reward import RubricReward

    recipe = settings.recipe()
    if recipe.rubric_source == "rows":
        rows = RowRubricReward(judge, on_failure=on_failure, **recipe.engine_kwargs())
        rows.settings = recipe
        return rows
    if tree is None:
        from reward.tree import load_tree

        tree = load_tree(recipe.tree)
    if router is None:
        router = build_router(recipe, tree, judge)
    from reward.stages.panel import resolve

    calibrated = resolve(recipe, judge, tree)  # posterior verdicts and a second judge, from their calibrations
    reward = RubricReward(tree, router, judge, on_failure=on_failure, cache_routing=cache_routing,  # type: ignore[arg-type]
                          use_rubric_items=recipe.rubric_source != "tree", applicability_scope=applicability_scope,
                          posterior=calibrated.posterior, panel_judge=calibrated.panel_judge,
                          panel_leaves=calibrated.panel_leaves, **recipe.engine_kwargs())
    reward.settings = recipe
    return reward
