"""``rubricstree judge calibrate``: grade the labelled stress cases with a judge and measure how it
errs, what that predicts for the reward, and whether the judge gate would let a stage train on it.

Data flow: cases YAML (default: the bundled ones) -> the embedding router (the reward's) -> labelled
items -> the judge (the usual judge options; its durable verdict cache makes a rerun free and a
killed run resumable) -> :class:`reward.calibration.CalibrationRecord` -> stored by the judge's
identity for the launchers' gate (``--no-record``: not stored), printed (``--json``: one JSON
line), and ``--report DIR``: calibration.json, report.md, reliability.png. The prediction is for the
stage-3 recipe, which reads a failing verdict again; ``--no-confirm-failures`` predicts for a reward
that reads each item once (the row-items variant, ``configs/*/stage3_row_rubrics.yaml``), and the
gate tells the two apart. Progress goes to stderr (``--quiet`` silences it). Exit status: 0 done,
2 bad input or settings, 3 with ``--check`` when the gate (default thresholds) would refuse this
judge, 4/5 a stopped judge (deadline, unavailable).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import typer

from reward.errors import RubricsTreeError
from reward.judge.settings import JudgeSettings
from reward.settings import CALIBRATION_FIELDS, RewardSettings
from rubricstree.common_options import apply_quiet, folder_option, quiet_option
from rubricstree.errors import fail
from rubricstree.judge_options import judge_options
from rubricstree.reward_options import reward_options

EXIT_UNFIT = 3


@judge_options()
# every recipe field but those that read the judge through its calibration (posterior, a panel):
# --panel-judge/--panel-leaves here calibrate a second judge
@reward_options(only=tuple(k for k in RewardSettings.model_fields if k not in CALIBRATION_FIELDS))
def calibrate_command(
    cases: str = typer.Option("blind:dev", "--cases", help="the labelled cases: blind:dev (default: the blind set's "
                              "dev part, written by people who never saw the router or scorer), blind:test, "
                              "bundled (the 84 the reward was built with: 60 for the paper's perturbations and families, 24 gaming), or a case file or folder of your own"),
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
    report: Path | None = folder_option(None, "--report", "report folder: calibration.json, report.md, "
                                                          "reliability.png", name="report.md"),
    cache_dir: Path | None = typer.Option(None, "--cache-dir", help="verdict cache and calibration records folder"),
    no_cache: bool = typer.Option(False, "--no-cache", help="no durable verdict cache"),
    panel_judge: str | None = typer.Option(
        None, "--panel-judge", help="also calibrate a second judge (a server URL or a model path) on the same items, "
                                    "measure how often both misread the same item, and predict the panel's detection"),
    panel_leaves: str = typer.Option("critical", "--panel-leaves", help="what the second judge reads: critical, "
                                                                        "flagged or all"),
    as_json: bool = typer.Option(False, "--json", help="print the record as one JSON line"),
    quiet: bool = quiet_option(),
    judge: JudgeSettings = None,  # the judge options (rubricstree.judge_options)
    reward: RewardSettings = None,  # the recipe the prediction is for (rubricstree.reward_options)
) -> None:
    """Measure a judge against labelled items: error rates, correlation, systematic leaves, gate."""
    from reward.calibration.gate import JudgeGateSettings, RunFacts, check_judge
    from reward.calibration.record import record_path, save_calibration
    from reward.calibration.run import calibrate
    from reward.router.base import CachedRouter
    from reward.stages.build import build_router
    from reward.stress import load_cases
    from reward.stress.runner import route_cases
    from reward.stress.sets import resolve_cases
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
        if panel_leaves not in ("critical", "flagged", "all"):
            raise typer.BadParameter(f"--panel-leaves must be critical, flagged or all, got {panel_leaves!r}")
        tree = load_tree(reward.tree)
        parts = resolve_cases(cases)
        if len(parts) != 1:
            raise typer.BadParameter("calibrate on one part of the blind set: --cases blind:dev (the default) or "
                                     "blind:test")
        every = load_cases(parts[0][1], tree)
        rows = every[:limit_cases]
        from reward.judge import VerdictCache

        vcache = None if no_cache else VerdictCache(cache_dir / "verdicts.sqlite" if cache_dir else None)
        built = settings.build(cache=vcache if vcache is not None else False)
        second = None
        if panel_judge:
            from reward.stages.panel import build_panel_judge

            second = build_panel_judge(panel_judge, built)
        with step(f"loading the {router} router", enabled=not quiet and router != "static"):
            rt = CachedRouter(build_router(reward, tree, None), vcache)
    except (RubricsTreeError, ValueError, OSError) as exc:
        raise fail(exc, 2) from exc
    label = f"{cases} ({len(rows)}{f' of {len(every)}' if len(rows) < len(every) else ''})"
    info = {k: v for k, v in settings.model_dump(mode="json").items() if v not in (None, "", [], {})}

    async def go():
        try:
            routings = await route_cases(rt, rows)
            kw = dict(cases_label=label, recipe=reward, reread_share=reread_share, seed=seed, progress=not quiet,
                      predict=predict, judge_info=info)
            if second is None:
                rec = await calibrate(built, tree, rows, routings, **kw)
                await built.confirm_identity()  # who graded the last stretch (reward.judge.watch)
                return rec, None, None
            from reward.calibration.panel import calibrate_panel

            panel_rec, rec_a, rec_b = await calibrate_panel(built, second, tree, rows, routings, leaves=panel_leaves,
                                                            **kw)
            from reward.judge.watch import confirm_judges

            await confirm_judges(built, second)
            return rec_a, rec_b, panel_rec
        finally:
            try:
                await built.aclose()
            finally:
                if second is not None:
                    await second.aclose()

    try:
        rec, rec_b, panel_rec = asyncio.run(go())
    except RubricsTreeError as exc:
        raise fail(exc) from exc  # its own exit code: 4 deadline, 5 judge unavailable, 6 another judge
    if rec_b is not None and record:
        save_calibration(rec_b, record_path(rec_b.judge_id, cache_dir))
    if panel_rec is not None:
        _print_panel(panel_rec, as_json)
        if report is not None:
            report.mkdir(parents=True, exist_ok=True)
            (report / "panel.json").write_text(panel_rec.model_dump_json(indent=1) + "\n", encoding="utf-8")
            save_calibration(rec_b, report / "calibration-second-judge.json")
    gate_settings = JudgeGateSettings()
    stored = None
    if record:
        stored = save_calibration(rec, record_path(rec.judge_id, cache_dir))
    from reward.calibration.binding import judge_binding

    facts = RunFacts(judge_id=rec.judge_id, who=judge_binding(built))  # the calibration's own run: its figures
    verdict = (check_judge(facts, gate_settings, cache_dir=cache_dir) if stored
               else check_judge(facts, gate_settings, record=rec))
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
        p = rec.predicted
        flat["predicted detection [95% interval] (independent at this rate)"] = (
            f"{p.detection_rate:.3f} [{p.detection_low:.3f}, {p.detection_high:.3f}] "
            f"({p.independent_detection_rate:.3f})")
        flat["distinct cases"] = str(rec.distinct_cases)
        flat["predicted clean mean"] = f"{rec.predicted.clean_mean:.3f}"
    if rec.coverage or rec.unmeasured:
        few = sum(1 for c in rec.coverage.values() if c.fail_items < 10 or c.pass_items < 10)
        flat["leaves measured (with < 10 failing or passing items)"] = f"{len(rec.coverage)} ({few})"
        flat["leaves unmeasured (critical)"] = f"{len(rec.unmeasured)} ({len(rec.unmeasured_critical)})"
        flat["leaves the judge never fails / never passes"] = (
            f"{sum(v == 'never fails' for v in rec.one_sided().values())} / "
            f"{sum(v == 'never passes' for v in rec.one_sided().values())}")
    flat["gate"] = gate_line
    if stored:
        flat["stored"] = str(stored)
    print_summary(flat, title="Judge calibration")


def _print_panel(panel, as_json: bool) -> None:
    """The panel's figures (on stderr with --json: stdout keeps the first judge's record line)."""
    from reward.calibration.report import _r

    j = panel.joint
    lines = [f"panel: {panel.judge_a} + {panel.judge_b} on {panel.leaves} leaves",
             f"  both misread the same item: {_r(j.both_wrong)} (independence predicts {j.expected_both_if_independent:.4f}"
             + (f"; ratio {j.ratio:.2f}" if j.ratio is not None else "") + ")",
             f"  each: {_r(j.a_wrong)} / {_r(j.b_wrong)}; critical items both misread: {_r(j.both_wrong_critical)}",
             f"  predicted detection: {panel.predicted.detection_rate:.3f} with the panel, "
             f"{panel.predicted_without_panel.detection_rate:.3f} with the first judge's posterior alone"]
    typer.echo("\n".join(lines), err=as_json)
