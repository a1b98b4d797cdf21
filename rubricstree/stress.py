"""``rubricstree stress``: the oracle stress test of the rubric reward, with an optional holistic
baseline, printed as JSON and written as a report.

Data flow: cases YAML -> router (embedding by default: real MiniLM, offline) -> oracle verdicts
from the labels, or our judge (``--verdicts judge``) -> tree scores under ``--scoring-variant`` ->
detection rate and mean penalty by perturbation and scenario (``--json`` prints the documented
shape) -> ``--report DIR``: report.md, report.html, heatmap.png, cases.jsonl. In oracle mode the
report also compares every scoring variant, on the routing as run and with the labelled leaves
forced in (a router with perfect recall: scoring alone). ``--judge-noise E --seed S`` (oracle mode)
repeats every case with each verdict, and each per-prompt applicability decision, flipped with
probability E and reports the clean replies' mean and spread and the detection rate under noise
(``reward.stress.noise``); ``--confirm-failures`` adds the same draws with failure confirmation
(``reward.stages.confirm``) and its cost in extra judge items per reply. Oracle mode scores only the leaves the case labels call applicable;
judge mode asks the judge once per case (``--no-applicability``: every routed leaf).

Judge work (verdicts, routings, baseline answers) sits in the judge's durable cache, so a killed
run restarted with the same command recomputes nothing. Exit status: 0 done, 2 bad input/settings.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import typer

from reward.errors import RubricsTreeError
from reward.judge.settings import JudgeSettings
from reward.settings import RewardSettings
from rubricstree.common_options import apply_quiet, concurrency_option, folder_option, quiet_option, renamed_option
from rubricstree.errors import fail
from rubricstree.judge_options import judge_options
from rubricstree.reward_options import reward_options

MODES = ("oracle", "judge")


@judge_options()
@reward_options()
def stress_command(
    cases: str = typer.Option("bundled", "--cases", help="the labelled cases: bundled (the 84 the reward was built "
                              "with), blind (the blind set, its dev and test parts side by side), blind:dev, "
                              "blind:test, or a case file or folder of your own"),
    mode: str = typer.Option("oracle", "--verdicts", help="oracle (verdicts from the labels) or judge (our judge "
                                                          "grades; its own mode is --judge-mode)"),
    _old_mode: str | None = renamed_option("--mode", "is --verdicts here now (oracle|judge); the judge's own mode is "
                                                     "--judge-mode"),
    baseline: bool = typer.Option(False, "--holistic-baseline/--no-holistic-baseline",
                                  help="also run the holistic 1-10 judge (needs a judge)"),
    margin: float = typer.Option(0.02, "--margin", help="a drop above this counts as detected"),
    report: Path | None = folder_option(None, "--report", "report folder: report.md/html, heatmap.png, settings.json",
                                        name="report.md"),
    concurrency: int = concurrency_option(4, "cases"),
    cache_dir: Path | None = typer.Option(None, "--cache-dir", help="verdict/routing cache folder"),
    no_cache: bool = typer.Option(False, "--no-cache", help="no durable cache"),
    as_json: bool = typer.Option(False, "--json", help="print the summary as one JSON line"),
    quiet: bool = quiet_option(),
    judge_noise: float = typer.Option(0.0, "--judge-noise", help="oracle mode: flip each leaf's verdict with "
                                      "this probability (and each applicability decision, see below), repeated"),
    applicability_noise: float | None = typer.Option(
        None, "--applicability-noise", help="with --judge-noise: flip each per-prompt applicability decision with "
                                            "this probability (default: the --judge-noise value)"),
    reread_correlation: float = typer.Option(
        0.0, "--reread-correlation", help="with --judge-noise: a re-reading repeats the first reading's answer with "
                                          "this probability (0: independent readings); reported beside the independent case"),
    systematic_leaves: float = typer.Option(
        0.0, "--systematic-leaves", help="with --judge-noise: this seeded share of the tree's leaves is misread on "
                                         "every reading; reported beside the independent case"),
    judge_errors: Path | None = typer.Option(
        None, "--judge-errors", help="oracle mode: draw verdicts from a measured judge (the calibration JSON of "
                                     "`rubricstree judge calibrate`), beside the independent case at its error rate"),
    panel_errors: Path | None = typer.Option(
        None, "--panel-errors", help="with --judge-errors: the calibration of a second judge reading the "
                                     "--panel-leaves; reported beside the first judge alone, both through the posterior"),
    seed: int = typer.Option(0, "--seed", help="random seed of --judge-noise"),
    noise_repeats: int = typer.Option(20, "--noise-repeats", help="draws per case under --judge-noise"),
    judge: JudgeSettings = None,  # the judge options (rubricstree.judge_options)
    reward: RewardSettings = None,  # the reward options (rubricstree.reward_options)
) -> None:
    """Score clean vs perturbed replies and report detection rate and mean penalty.

    The reward is the one the reward options describe (default: the stage-3 recipe). Judge mode
    builds it as every command does; oracle mode takes its router and scoring variant, reads
    applicability from the case labels, and with --judge-noise also models failure confirmation
    when --confirm-failures is on (the default)."""
    from reward.router.base import CachedRouter
    from reward.stages.build import build_router
    from reward.stress import load_cases
    from reward.stress.sets import resolve_cases
    from reward.tree import load_tree

    progress = apply_quiet(quiet)
    settings = reward
    router, variant, confirm_failures = settings.router, settings.scoring_variant, settings.confirm_failures
    try:
        if mode not in MODES:
            raise typer.BadParameter(f"--verdicts must be oracle or judge, got '{mode}'")
        if not 0.0 <= margin < 1.0:
            raise typer.BadParameter(f"--margin must be in [0, 1), got {margin}")
        if (judge_noise or judge_errors) and mode != "oracle":
            raise typer.BadParameter("--judge-noise and --judge-errors need --verdicts oracle (the judge's verdicts have "
                                     "its own errors)")
        if judge_noise and judge_errors:
            raise typer.BadParameter("give --judge-noise (a model) or --judge-errors (a measured judge), not both")
        for name, v in (("--reread-correlation", reread_correlation), ("--systematic-leaves", systematic_leaves)):
            if not 0.0 <= v <= 1.0:
                raise typer.BadParameter(f"{name} must be in [0, 1], got {v}")
            if v and not judge_noise:
                raise typer.BadParameter(f"{name} needs --judge-noise (the error rate of the other readings)")
        measured = calibration = None
        if judge_errors is not None:
            from reward.calibration.record import load_calibration

            calibration = load_calibration(judge_errors)
            measured = calibration.error_model()
        panel_calibration = None
        if panel_errors is not None:
            if judge_errors is None:
                raise typer.BadParameter("--panel-errors needs --judge-errors (the first judge's calibration)")
            from reward.calibration.record import load_calibration

            panel_calibration = load_calibration(panel_errors)
        for name, v in (("--judge-noise", judge_noise), ("--applicability-noise", applicability_noise)):
            if v is not None and not 0.0 <= v <= 0.5:
                raise typer.BadParameter(f"{name} must be in [0, 0.5], got {v}")
        if noise_repeats < 1:
            raise typer.BadParameter(f"--noise-repeats must be >= 1, got {noise_repeats}")
        tree = load_tree(settings.tree)
        parts = [(label, load_cases(path, tree)) for label, path in resolve_cases(cases)]
        judge_settings, judge = judge, None
        if judge_settings.url or judge_settings.model:
            from reward.judge import VerdictCache

            cache = None if no_cache else VerdictCache(cache_dir / "verdicts.sqlite" if cache_dir else None)
            judge = judge_settings.build(cache=cache if cache is not None else False)
        elif mode == "judge" or router == "llm":
            raise typer.BadParameter("--verdicts judge and --router llm need a judge: "
                                     "--judge-url URL or --judge-model PATH")
        from rubricstree.progress import step

        with step(f"loading the {router} router", enabled=progress and router != "static"):
            rt = CachedRouter(build_router(settings, tree, judge), judge.cache if judge is not None else None)
        scorer = None
        if mode == "judge":
            from reward.stages.build import output_scope

            # a rerun into the same report (or, without one, on the same cases) reuses the run's
            # applicability answers: the measurement repeats from the verdict cache
            where = report if report is not None else (Path(cases) if cases != "bundled" else None)
            scorer = settings.build(judge, tree=tree, router=rt, cache_routing=False,
                                    applicability_scope=output_scope(where) if where is not None else "stress-bundled")
    except (RubricsTreeError, ValueError, OSError) as exc:
        raise fail(exc) from exc  # a start-up past --deadline: 4
    if baseline and judge is None:
        typer.echo("baseline skipped: the holistic baseline needs a judge (--judge-url URL or --judge-model PATH)",
                   err=True)
    run = _PartRun(tree=tree, rt=rt, mode=mode, variant=variant, judge=judge, baseline=baseline,
                   concurrency=concurrency, progress=progress, scorer=scorer, margin=margin, settings=settings,
                   noise=(judge_noise, applicability_noise, reread_correlation, systematic_leaves, measured,
                          calibration, seed, noise_repeats, confirm_failures), panel_calibration=panel_calibration)
    outs = {}
    for label, rows in parts:
        sub = None if report is None else (report if len(parts) == 1 else report / label.replace(":", "-"))
        outs[label] = run.part(label, rows, sub, as_json=as_json)
    if len(parts) > 1 and report is not None:
        _side_by_side_report(report, outs)
    if as_json:
        typer.echo(json.dumps(next(iter(outs.values())) if len(outs) == 1 else
                              {"parts": outs, "reward": settings.record(), "mode": mode}))
    elif len(outs) == 1:
        _print_one(next(iter(outs.values())), mode, router)
    else:
        _print_parts(outs, mode, router)


class _PartRun:
    """One stress run of one set of cases (a part of the blind set, or one file)."""

    def __init__(self, **kw) -> None:
        self.__dict__.update(kw)

    def part(self, label: str, rows, report: Path | None, *, as_json: bool) -> dict:
        from reward.stress import public_summary, run_stress, summarise
        from rubricstree.progress import step

        judge, mode = self.judge, self.mode

        async def go():
            try:
                out = await run_stress(rows, self.tree, self.rt, mode=mode, variant=self.variant, judge=judge,
                                       baseline_judge=judge if self.baseline else None,
                                       concurrency=self.concurrency, progress=self.progress, reward=self.scorer)
                if judge is not None:
                    await judge.confirm_identity()  # who graded this part's last stretch (reward.judge.watch)
                return out
            finally:
                if judge is not None:
                    await judge.aclose()  # its client belongs to this part's event loop

        try:
            # judge mode shows its own bar per case; oracle mode's time is the routing
            with step(f"routing and scoring {len(rows)} cases ({label})", enabled=self.progress and mode == "oracle"):
                results, routings = asyncio.run(go())
        except RubricsTreeError as exc:
            raise fail(exc) from exc  # its own exit code: 4 deadline, 5 judge unavailable, 6 another judge
        summary = summarise(results, margin=self.margin, variant=self.variant,
                            baseline=self.baseline and judge is not None)
        (judge_noise, applicability_noise, reread_correlation, systematic_leaves, measured, calibration, seed,
         noise_repeats, confirm_failures) = self.noise
        if judge_noise or measured is not None:
            from reward.stress.errors import ErrorModel
            from reward.stress.noise import noise_blocks

            if measured is not None:
                independent = ErrorModel.independent(calibration.verdict_error.rate or 0.0, measured.app_false_present)
                other, kind = measured, "measured"
            else:
                independent = ErrorModel.independent(judge_noise, applicability_noise)
                other = (ErrorModel.independent(judge_noise, applicability_noise,
                                                reread_correlation=reread_correlation,
                                                systematic_fraction=systematic_leaves)
                         if reread_correlation or systematic_leaves else None)
                kind = "correlated"
            summary.update(noise_blocks(self.tree, rows, routings, self.variant, independent=independent, other=other,
                                        other_kind=kind, seed=seed, repeats=noise_repeats, margin=self.margin,
                                        confirm_failures=confirm_failures))
            if measured is not None and self.settings.posterior != "off":
                summary.update(self._posterior_blocks(rows, routings, measured, calibration, seed, noise_repeats,
                                                      confirm_failures))
        settings, router = self.settings, self.settings.router
        if report is not None:
            from reward.stress.report import write_report
            from reward.stress.runner import oracle_variant_table, with_labels

            variants = None
            if mode == "oracle":
                variants = {f"{router} router": oracle_variant_table(self.tree, rows, routings, self.margin),
                            f"{router} router + labelled leaves (perfect recall)": oracle_variant_table(
                                self.tree, rows, [with_labels(self.tree, r, c) for r, c in zip(routings, rows)],
                                self.margin)}
            meta = {"cases": f"{label} ({len(rows)})", "taxonomy": f"{self.tree.name} ({len(self.tree.leaves)} leaves)",
                    "mode": mode, "margin": self.margin,
                    "judge": judge.model_id if judge is not None else "none (oracle verdicts)",
                    "baseline": "holistic 1-10" if summary["baseline"] else "not run", **settings.record()}
            paths = write_report(report, summary, results, meta, variants)
            from rubricstree.score import write_settings

            write_settings(report / "settings.json", settings, judge, mode=mode, cases=label)
            if not as_json:
                typer.echo(f"report: {paths['md']} ({paths['html'].name}, {paths['png'].name})")
        return {**public_summary(summary), "reward": settings.record(), "mode": mode, "label_recall": _recall(results)}

    def _posterior_blocks(self, rows, routings, measured, calibration, seed, repeats, confirm_failures) -> dict:
        """The measured judge through its posterior, and with a second judge on the panel's leaves."""
        from reward.scoring.posterior import JudgeRates, Posterior
        from reward.stages.panel import flagged_leaves
        from reward.stress.noise import PanelSim, noise_summary

        kw = {"seed": seed, "repeats": repeats, "margin": self.margin, "confirm_failures": confirm_failures,
              "errors": measured}
        rates_a = JudgeRates.from_record(calibration)
        out = {"noise_measured_posterior": noise_summary(self.tree, rows, routings, self.variant,
                                                         posterior=Posterior([rates_a], self.settings.posterior_prior),
                                                         **kw)}
        other = self.panel_calibration
        if other is not None:
            tree = self.tree
            critical = {leaf.id for leaf in tree.leaves if tree.severity[leaf.id] == "critical"}
            scope = self.settings.panel_leaves
            leaves = (None if scope == "all" else frozenset(critical) if scope == "critical"
                      else frozenset(critical | flagged_leaves(calibration, tree)))
            model_b = other.error_model()
            out["noise_measured_panel"] = noise_summary(
                tree, rows, routings, self.variant,
                posterior=Posterior([rates_a, JudgeRates.from_record(other)], self.settings.posterior_prior),
                panel=PanelSim(model_b, frozenset(model_b.systematic_leaves), leaves), **kw)
        return out


def _recall(results) -> float | None:
    """The share of labelled failed leaves the router reached, over every case."""
    return sum(r.label_recall for r in results) / len(results) if results else None


def _flat(out: dict) -> dict[str, str]:
    flat = {"cases": out["cases"], "scoring_variant": out["scoring_variant"],
            "detection_rate": out["detection_rate"], "mean_penalty": out["mean_penalty"]}
    if out.get("label_recall") is not None:
        flat["label recall (routing)"] = f"{out['label_recall']:.3f}"
    for p, b in out["by_perturbation"].items():
        flat[f"{p} DR / MP"] = f"{b['detection_rate']:.3f} / {b['mean_penalty']:.3f}"
    from reward.stress.metrics import NOISE_KEYS

    for key in NOISE_KEYS:
        if not out.get(key):
            continue
        nz = out[key]
        kind = key.removeprefix("noise").removesuffix("_confirmed").strip("_") or "independent"
        tag = f" {kind}" + (" confirmed" if key.endswith("_confirmed") else "")
        flat[f"noise {nz['judge_noise']:g}{tag}: clean mean ± sd"] = f"{nz['clean_mean']:.3f} ± {nz['clean_sd']:.3f}"
        flat[f"noise {nz['judge_noise']:g}{tag}: DR / MP"] = f"{nz['detection_rate']:.3f} / {nz['mean_penalty']:.3f}"
        if "extra_items_per_reply" in nz:
            flat[f"noise {nz['judge_noise']:g}{tag}: extra judge items per reply"] = (
                f"{nz['extra_items_per_reply']:.2f} (clean {nz['extra_items_per_clean_reply']:.2f}, "
                f"perturbed {nz['extra_items_per_perturbed_reply']:.2f})")
    for kind, tol in (out.get("noise_tolerance") or {}).items():
        flat[f"noise tolerance ({kind}): largest error rate with DR >= {tol['target']:g}"] = (
            "none" if tol["tolerance"] is None else f"{tol['tolerance']:g}")
    if out["baseline"]:
        base = out["baseline"]
        flat["baseline DR / MP"] = f"{base['detection_rate']:.3f} / {base['mean_penalty']:.3f}"
    return flat


def _print_one(out: dict, mode: str, router: str) -> None:
    from rubricstree.score import print_summary

    print_summary(_flat(out), title=f"Stress test ({mode}, {router} router)")


def _print_parts(outs: dict[str, dict], mode: str, router: str) -> None:
    """The parts side by side (dev, test), with the gap of every number that is one."""
    from rubricstree.parts_table import print_parts

    flats = {label: _flat(out) for label, out in outs.items()}
    labels = list(flats)
    keys = list(dict.fromkeys(k for f in flats.values() for k in f))
    print_parts(f"Stress test ({mode}, {router} router): {' and '.join(labels)}", labels,
                {k: [flats[label].get(k, "—") for label in labels] for k in keys})


def _side_by_side_report(report: Path, outs: dict[str, dict]) -> None:
    from rubricstree.parts_table import cell

    report.mkdir(parents=True, exist_ok=True)
    lines = ["# Stress test: the parts side by side", "", "| | " + " | ".join(outs) + " |",
             "|---|" + "---|" * len(outs)]
    flats = {label: _flat(out) for label, out in outs.items()}
    for k in dict.fromkeys(k for f in flats.values() for k in f):
        vals = [flats[label].get(k, "—") for label in outs]
        lines.append(f"| {k} | " + " | ".join(cell(v) for v in vals) + " |")
    lines += ["", "Each part's own report: " + ", ".join(f"[{lab}]({lab.replace(':', '-')}/report.md)" for lab in outs)]
    (report / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (report / "summary.json").write_text(json.dumps(outs, indent=1) + "\n", encoding="utf-8")
