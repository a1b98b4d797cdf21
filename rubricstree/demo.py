"""``rubricstree demo``: the whole pipeline on this machine, with nothing to download.

It builds the tiny random-weight Qwen3 (cached in ``DIR/tiny-model``), loads the packaged
taxonomy and our own demo rollouts (``reward/data/demo_rollouts.jsonl``: invented conversations,
a good and a poor completion each, with HealthBench-style rubric items), routes each prompt with
the embedding router, grades with the in-process judge on the tiny model, and writes
``DIR/scores.jsonl`` and ``DIR/report.md``. The judge is random, so those scores mean nothing: that
part checks the wiring (every step they pass through is the real one). Then it shows the reward
working without a model (``rubricstree.demo_reward``): the oracle stress table on the bundled
labelled cases and one case's per-leaf breakdown of a good and a harmful reply (``DIR/reward.md``).
With ``--json`` it prints ``{"wiring": ..., "reward": ...}``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import typer

from reward.demo import DEMO_ROLLOUTS, demo_rollouts_path
from reward.errors import RubricsTreeError
from reward.settings import RewardSettings
from rubricstree.common_options import apply_quiet, folder_option, quiet_option
from rubricstree.errors import fail
from rubricstree.reward_options import reward_options

NOTE = ("The judge here is a tiny model with random weights, built on this machine: its verdicts, "
        "and so these scores, are meaningless. The pipeline is the real one (routing, judge prompts, "
        "caching, scoring, report); point --judge-url at a served judge model for real scores.")


def run_demo(out: Path, *, settings=None, progress: bool = True) -> dict:
    """Build (or reuse) the tiny model, score the demo rollouts into ``out`` with the reward of
    ``settings`` (``reward.settings.RewardSettings``; default: the stage-3 recipe); return the summary."""
    from reward._optional import require
    from reward.judge import VerdictCache
    from reward.judge.settings import JudgeSettings
    from reward.settings import RewardSettings
    from reward.stages.build import build_router
    from reward.stages.rubric_reward import load_rollouts
    from reward.tree import load_tree
    from rubricstree.score import run_scoring, settings_path, write_settings

    settings = settings or RewardSettings()
    router = settings.router

    for module in ("torch", "transformers", "tokenizers"):
        require(module, "the demo's in-process judge")
    if router == "embedding":
        require("sentence_transformers", "the demo's embedding router")
    out.mkdir(parents=True, exist_ok=True)
    model_dir = out / "tiny-model"
    if not (model_dir / "config.json").exists():
        from training.tiny_model import build_tiny_qwen3

        build_tiny_qwen3(model_dir)
    rows = load_rollouts(demo_rollouts_path())
    tree = load_tree(settings.tree)
    # The demo keeps its cache next to its outputs: a rerun is free and the user's cache is untouched.
    judge = JudgeSettings(model=str(model_dir)).build(cache=VerdictCache(out / "cache" / "verdicts.sqlite"))
    rt = build_router(settings, tree, judge)
    from reward.stages.build import output_scope

    reward = settings.build(judge, tree=tree, router=rt, applicability_scope=output_scope(out))
    write_settings(settings_path(out / "scores.jsonl"), settings, judge, rollouts=DEMO_ROLLOUTS)
    meta = {"rollouts": f"{DEMO_ROLLOUTS} (bundled, our own invented conversations)",
            "taxonomy": f"{tree.name} ({len(tree.leaves)} leaves)",
            "judge": f"{judge.model_id} (tiny random-weight Qwen3, in-process)", **settings.record()}
    summary = asyncio.run(run_scoring(rollouts=rows, reward=reward, judge=judge, out=out / "scores.jsonl",
                                      report=out / "report.md", meta=meta, progress=progress, note=NOTE))
    # the reward itself, on labelled cases with oracle verdicts (no model): embedding routing
    from rubricstree.demo_reward import run_oracle_demo, write_oracle_demo

    oracle = run_oracle_demo(tree, rt if router == "embedding" else
                             build_router(settings.model_copy(update={"router": "embedding"}), tree, None))
    write_oracle_demo(oracle, out)
    return {"wiring": summary, "reward": oracle}


@reward_options()
def demo_command(
    out: Path = folder_option(Path("rubricstree-demo"), "--out", "output folder", name="scores.jsonl"),
    as_json: bool = typer.Option(False, "--json", help="print the summary as one JSON line"),
    quiet: bool = quiet_option(),
    reward: RewardSettings = None,  # the reward options (rubricstree.reward_options)
) -> None:
    """The tiny local judge on bundled rollouts (wiring), then the reward on labelled cases; no download.
    The reward is the stage-3 recipe unless the reward options say otherwise."""
    from rubricstree.score import print_summary

    progress = apply_quiet(quiet)
    try:
        summary = run_demo(out, settings=reward, progress=progress)
        from training.inspector import write_inspector  # the page that shows why each rollout scored what it did

        page = write_inspector(out / "scores.jsonl", out, rollouts=demo_rollouts_path(), note=NOTE)
    except RubricsTreeError as exc:
        raise fail(exc, 2) from exc
    if as_json:
        typer.echo(json.dumps(summary))
        return
    from rubricstree.demo_reward import print_oracle_demo

    print_summary(summary["wiring"], title="1. Wiring: the whole pipeline on the tiny random judge "
                                           "(its verdicts, so these scores, are meaningless)")
    typer.echo(f"scores: {out / 'scores.jsonl'}\nreport: {out / 'report.md'}\n")
    typer.echo("2. The reward: labelled stress cases scored with oracle verdicts (no model)")
    print_oracle_demo(summary["reward"])
    typer.echo(f"reward report: {out / 'reward.md'}")
    typer.echo(f"inspector: {page} (open it in a browser: why each rollout got its reward)")
