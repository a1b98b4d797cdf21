"""``rubricstree judge calibrate``: grade the labelled stress cases with a judge and measure how it
errs, what that predicts for the reward, and whether the judge gate would let a stage train on it.

Data flow: cases YAML (default: the bundled ones) -> the embedding router (the reward's) -> labelled
items -> the judge (the usual judge options; its durable verdict cache makes a rerun free and a
killed run resumable) -> :class:`reward.calibration.CalibrationRecord` -> stored by the judge's
identity for the launchers' gate (``--no-record``: not stored), printed (``--json``: one JSON
line), and ``--report DIR``: calibration.json, report.md, reliability.png. Progress goes to stderr
(``--quiet`` silences it). Exit status: 0 done, 2 bad input or settings, 3 with ``--check`` when the
gate (default thresholds) would refuse this judge, 4/5 a stopped judge (deadline, unavailable).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import typer

from reward.errors import RubricsTreeError
from reward.judge.settings import JudgeSettings
from reward.settings import RewardSettings
from rubricstree.common_options import apply_quiet, quiet_option
from rubricstree.judge_options import judge_options
from rubricstree.reward_options import reward_options

EXIT_UNFIT = 3


@judge_options()
@reward_options(only=("router", "router_options", "tree"))
def calibrate_command(
    cases: Path | None = typer.Option(None, "--cases", help="labelled stress cases YAML (default: the bundled ones)"),
    reread_share: float = typer.Option(0.25, "--reread-share", help="share of first-reading passes read twice more "
                                                                    "(every first-reading failure is)"),
    seed: int = typer.Option(0, "--seed", help="seed of the re-read sample"),
    limit_cases: int | None = typer.Option(None, "--limit-cases", help="calibrate on the first N cases only "
                                                                       "(a quick look; the gate wants all)"),
    predict: bool = typer.Option(True, "--predict/--no-predict", help="predict the reward's detection rate "
                                                                      "under this judge (the stress noise model)"),
    record: bool = typer.Option(True, "--record/--no-record", help="keep the result for the launchers' judge gate "
                                                                   "(by the judge's identity, in the cache folder)"),
    check: bool = typer.Option(False, "--check", help="exit 3 when the judge gate (default thresholds) would "
                                                      "refuse this judge"),
    report: Path | None = typer.Option(None, "--report", help="write calibration.json, report.md, reliability.png"),
    cache_dir: Path | None = typer.Option(None, "--cache-dir", help="verdict cache and calibration records folder"),
    no_cache: bool = typer.Option(False, "--no-cache", help="no durable verdict cache"),
    as_json: bool = typer.Option(False, "--json", help="print the record as one JSON line"),
    quiet: bool = quiet_option(),
    judge: JudgeSettings = None,  # the judge options (rubricstree.judge_options)
    reward: RewardSettings = None,  # the router and tree of the reward options (rubricstree.reward_options)
) -> None:
    """Measure a judge against labelled items: error rates, correlation, systematic leaves, gate."""
    from reward.calibration.gate import JudgeGateSettings, check_judge
    from reward.calibration.record import record_path, save_calibration
    from reward.calibration.run import calibrate
    from reward.router.base import CachedRouter
    from reward.stages.build import build_router
    from reward.stress import load_cases
    from reward.stress.runner import route_cases
    from reward.tree import load_tree
    from rubricstree.progress import step

    settings = judge
    quiet = not apply_quiet(quiet)
    router = reward.router
    try:
        if router == "llm":
            raise typer.BadParameter("calibration grades the leaves a router without a judge picks: --router "
                                     "embedding (the reward's default) or static (every leaf)")
        if not 0.0 <= reread_share <= 1.0:
            raise typer.BadParameter(f"--reread-share must be in [0, 1], got {reread_share}")
        if limit_cases is not None and limit_cases < 1:
            raise typer.BadParameter(f"--limit-cases must be >= 1, got {limit_cases}")
        if not (settings.url or settings.model):
            raise typer.BadParameter("calibration needs a judge: --judge-url URL or --judge-model PATH")
        tree = load_tree(reward.tree)
        rows = load_cases(cases, tree)[:limit_cases]
        from reward.judge import VerdictCache

        vcache = None if no_cache else VerdictCache(cache_dir / "verdicts.sqlite" if cache_dir else None)
        built = settings.build(cache=vcache if vcache is not None else False)
        with step(f"loading the {router} router", enabled=not quiet and router != "static"):
            rt = CachedRouter(build_router(reward, tree, None), vcache)
    except (RubricsTreeError, ValueError, OSError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    label = f"{cases or 'bundled cases'} ({len(rows)}{' of ' + str(limit_cases) if limit_cases else ''})"
    info = {k: v for k, v in settings.model_dump(mode="json").items() if v not in (None, "", [], {})}

    async def go():
        try:
            routings = await route_cases(rt, rows)
            return await calibrate(built, tree, rows, routings, cases_label=label, router=router,
                                   reread_share=reread_share, seed=seed, progress=not quiet, predict=predict,
                                   judge_info=info)
        finally:
            await built.aclose()

    try:
        rec = asyncio.run(go())
    except RubricsTreeError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    gate_settings = JudgeGateSettings()
    stored = None
    if record:
        stored = save_calibration(rec, record_path(rec.judge_id, cache_dir))
    verdict = (check_judge(rec.judge_id, gate_settings, cache_dir=cache_dir) if stored
               else check_judge(rec.judge_id, gate_settings, record=rec))
    gate_line = verdict.message(gate_settings)
    if report is not None:
        from reward.calibration.report import write_report

        paths = write_report(rec, report, gate_line)
        if not quiet:
            typer.echo(f"report: {paths['md']}", err=True)
    if as_json:
        typer.echo(json.dumps({**rec.model_dump(mode="json"), "gate": {"ok": verdict.ok, "problems": verdict.problems},
                               "stored": str(stored) if stored else None}))
    else:
        _print(rec, gate_line, stored)
    if check and not verdict.ok:
        raise typer.Exit(EXIT_UNFIT)


def _print(rec, gate_line: str, stored: Path | None) -> None:
    from reward.calibration.report import _r
    from rubricstree.score import print_summary

    flat = {"judge": rec.judge_id, "items": f"{rec.verdict_items} verdicts, {rec.applicability_items} applicability, "
                                           f"{rec.failed_items} failed calls",
            "false fail (all)": _r(rec.false_fail.get("*")), "false pass (all)": _r(rec.false_pass.get("*")),
            "false fail (critical)": _r(rec.false_fail.get("critical")),
            "critical false pass (incl. systematic)": _r(rec.critical_false_pass),
            "applicability: present read absent": _r(rec.app_false_absent.get("*")),
            "applicability: absent read present": _r(rec.app_false_present.get("*")),
            "systematic leaves": ", ".join(s.leaf_id for s in rec.systematic) or "none"}
    if rec.rereads and rec.rereads.correlation.estimate is not None:
        c = rec.rereads.correlation
        flat["re-read correlation"] = f"{c.estimate:.3f} [{c.low:.3f}, {c.high:.3f}]"
    if rec.soft:
        flat["soft: Brier / ECE"] = f"{rec.soft.brier:.4f} / {rec.soft.ece:.4f}"
    if rec.predicted:
        flat["predicted detection (independent at this rate)"] = (
            f"{rec.predicted.detection_rate:.3f} ({rec.predicted.independent_detection_rate:.3f})")
        flat["predicted clean mean"] = f"{rec.predicted.clean_mean:.3f}"
    flat["gate"] = gate_line
    if stored:
        flat["stored"] = str(stored)
    print_summary(flat, title="Judge calibration")
