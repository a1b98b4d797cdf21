"""``rubricstree meta-eval``: agreement statistics, agreement with experts, the HealthBench grader
meta-eval and stability across temperatures and judges (engines in ``reward.metaeval``).

Exit status: 0 done, 2 invalid input or settings (the message names the file, line and field).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import typer

from reward.errors import RubricsTreeError
from reward.judge.settings import JudgeSettings
from reward.settings import RewardSettings
from rubricstree.common_options import apply_quiet, folder_option, quiet_option
from rubricstree.errors import fail as _fail
from rubricstree.judge_options import judge_options
from rubricstree.reward_options import reward_options

app = typer.Typer(no_args_is_help=True, add_completion=False,
                  help="Meta-evaluation: agreement with experts and physicians, stability.")


def _num(v: float) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


@app.command("agreement")
def agreement_command(
    scores: Path = typer.Option(..., "--scores", help='JSONL rows {"item": ID, "<rater>": score, ...}'),
    raters: str = typer.Option(..., "--raters", help="comma-separated rater fields (kappa: the first two)"),
    bins: int = typer.Option(5, "--bins", help="kappa bins: min(floor(score*bins), bins-1)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
) -> None:
    """ICC(3,1), ICC(3,k) with its 95% interval, and Cohen's kappa of the first two raters."""
    from reward.metaeval import agreement as ag
    from reward.metaeval.formats import load_scores

    try:
        names = [r.strip() for r in raters.split(",") if r.strip()]
        _, rows = load_scores(scores, names)
        icc = ag.icc3(rows)
        kap = ag.kappa_binned([r[0] for r in rows], [r[1] for r in rows], bins=bins)
    except (RubricsTreeError, ValueError) as exc:
        raise _fail(exc) from exc
    out = {"n": icc.n, "icc3": _num(icc.icc3), "icc3k": _num(icc.icc3k),
           "icc3_ci95": [_num(v) for v in icc.ci95], "kappa": {k: _num(v) for k, v in kap.as_dict().items()}}
    notes = [n for n in [icc.reason, *kap.reasons.values()] if n]
    if notes:
        out["notes"] = list(dict.fromkeys(notes))
    if as_json:
        typer.echo(json.dumps(out))
        return
    for k, v in out.items():
        typer.echo(f"{k}: {v}")


def _judge_factory(settings: JudgeSettings, cache_dir: Path | None, no_cache: bool, configs: dict | None = None):
    """``(mode, temperature, use_cache) -> Judge`` for one backbone; ``configs`` maps a mode to
    the full :class:`JudgeConfig` to use for it (the grader settings of ``meta-eval healthbench``)."""
    from reward.judge import VerdictCache

    def make(mode: str = "choice", temperature: float = 0.0, use_cache: bool = True):
        cache = None if (no_cache or not use_cache) else VerdictCache(cache_dir / "verdicts.sqlite" if cache_dir else None)
        return settings.model_copy(update={"mode": mode, "temperature": temperature}).build(
            cache=cache if cache is not None else False, config=(configs or {}).get(mode))
    return make


def _reward_factory(settings: RewardSettings, tree, out: Path | None = None):
    """``judge -> reward``: the reward of the settings on that judge (the one the trainers train on),
    its applicability answers scoped to the run's output folder (a rerun resumes with them)."""
    from reward.stages.build import output_scope

    scope = output_scope(out) if out is not None else None

    def make(judge):
        return settings.build(judge, tree=tree, applicability_scope=scope)
    return make


@app.command("run")
@judge_options()
@reward_options()
def run_command(
    pairs: Path = typer.Option(..., "--pairs", help="pairs JSONL (see reward/metaeval/formats.py)"),
    labels: Path = typer.Option(..., "--labels", help="expert labels JSONL, one per pair id"),
    out: Path = folder_option(..., "--out", "output folder (results.jsonl, summary.json, reports)", name="summary.json"),
    baseline: bool = typer.Option(False, "--holistic-baseline/--no-holistic-baseline",
                                  help="also score the holistic principle baseline"),
    bins: int = typer.Option(5, "--bins", help="kappa bins: min(floor(score*bins), bins-1)"),
    resamples: int = typer.Option(1000, "--resamples", help="bootstrap resamples"),
    seed: int = typer.Option(0, "--seed", help="bootstrap seed"),
    cache_dir: Path | None = typer.Option(None, "--cache-dir", help="verdict/routing cache folder "
                                          "(default: $RUBRICSTREE_CACHE_DIR or the user cache)"),
    no_cache: bool = typer.Option(False, "--no-cache", help="no durable cache"),
    as_json: bool = typer.Option(False, "--json", help="print the overall rows as one JSON line"),
    quiet: bool = quiet_option(),
    judge: JudgeSettings = None,  # the judge options (rubricstree.judge_options)
    reward: RewardSettings = None,  # the reward options (rubricstree.reward_options)
) -> None:
    """Score expert-labelled pairs with our reward (and the baseline); agreement with the experts.
    The reward is the one the reward options describe: by default the stage-3 recipe the trainers use."""
    from reward.metaeval.experts import run_experts
    from reward.metaeval.formats import load_pairs_and_labels
    from reward.tree import load_tree

    progress = apply_quiet(quiet)
    try:
        prs, labs = load_pairs_and_labels(pairs, labels)
        settings = reward
        tree = load_tree(settings.tree)
        judge = _judge_factory(judge, cache_dir, no_cache)()
        scorer = _reward_factory(settings, tree, out)(judge)
        meta = {"pairs": str(pairs), "labels": str(labels), "judge": judge.model_id, "taxonomy": tree.name,
                "reward": settings.record()}
        summary = run_experts(prs, labs, reward=scorer, judge=judge, out_dir=out, baseline=baseline, bins=bins,
                              resamples=resamples, seed=seed, progress=progress, meta=meta)
    except (RubricsTreeError, ValueError, OSError) as exc:
        raise _fail(exc) from exc
    overall = {m: per["all"] for m, per in summary["table"].items()}
    if as_json:
        typer.echo(json.dumps(overall))
        return
    for m, r in overall.items():
        typer.echo(f"{m}: n={r['n']} ICC3={r.get('icc3')} kappa={r.get('kappa')}")
    typer.echo(f"report: {out / 'report.md'}")


def _floats(text: str, what: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise typer.BadParameter(f"{what}: comma-separated numbers, got '{text}'") from exc


@app.command("stability")
@judge_options()
@reward_options()
def stability_command(
    rollouts: Path = typer.Option(..., "--rollouts", help="rollouts JSONL (id, prompt, completion, rubrics?)"),
    backbone: list[str] = typer.Option(None, "--backbone", help="another judge backbone, compared with the judge "
                                       "options' one: a URL (served) or a model path (in process); repeat it"),
    temperatures: str = typer.Option("0,0.5,1.0", "--temperatures",
                                     help="judge sampling temperatures, comma-separated (0: the reward as scored)"),
    repeats: int = typer.Option(3, "--repeats", help="scorings per configuration (at least 2)"),
    modes: str = typer.Option("choice", "--modes", help="choice and/or explain, comma-separated"),
    baseline: bool = typer.Option(True, "--holistic-baseline/--no-holistic-baseline",
                                  help="the holistic principle baseline beside ours"),
    seed: int = typer.Option(0, "--seed", help="seed of the resampled verdicts"),
    out: Path = folder_option(..., "--out", "output folder (stability.jsonl, summary.json, reports); a rerun resumes",
                              name="summary.json"),
    cache_dir: Path | None = typer.Option(None, "--cache-dir", help="verdict/routing cache folder "
                                          "(default: $RUBRICSTREE_CACHE_DIR or the user cache)"),
    as_json: bool = typer.Option(False, "--json", help="print the configurations and pairwise rows as one JSON line"),
    quiet: bool = quiet_option(),
    judge: JudgeSettings = None,  # the judge options (rubricstree.judge_options)
    reward: RewardSettings = None,  # the reward options (rubricstree.reward_options)
) -> None:
    """Score rollouts repeatedly per backbone, temperature and mode; ICC3, flip rate, score std,
    routing Jaccard, backbones pairwise."""
    from reward.metaeval.stability import StabilityRun
    from reward.stages.rubric_reward import load_rollouts
    from reward.tree import load_tree

    progress = apply_quiet(quiet)
    try:
        if not (judge.url or judge.model):
            raise ValueError("give a judge: --judge-url URL or --judge-model PATH (and --backbone for more)")
        each = [judge, *(judge.model_copy(update={"url": b} if "://" in b else {"url": None, "model": b,
                                                                                  "in_process": True})
                         for b in backbone or [])]
        backbones = {f"judge{i + 1}:{s.url or Path(str(s.model)).name}": _judge_factory(s, cache_dir, False)
                     for i, s in enumerate(each)}
        tree = load_tree(reward.tree)
        run = StabilityRun(load_rollouts(rollouts), backbones, _reward_factory(reward, tree, out), tree, out_dir=out,
                           temperatures=_floats(temperatures, "--temperatures"), repeats=repeats,
                           modes=[m.strip() for m in modes.split(",") if m.strip()], baseline=baseline, seed=seed,
                           progress=progress, settings=reward.record())
        summary = run.run()
    except (RubricsTreeError, ValueError, OSError) as exc:
        raise _fail(exc) from exc
    if as_json:
        typer.echo(json.dumps({"configs": summary["configs"], "pairwise": summary["pairwise"]}))
        return
    for c in summary["configs"]:
        typer.echo(f"{c['backbone']} {c['method']} {c['mode']} T={c['temperature']}: ICC3={c.get('icc3')} "
                   f"std={c.get('mean_std')} flips={c.get('flip_rate')}")
    typer.echo(f"report: {out / 'report.md'}")


@app.command("healthbench")
@judge_options()
def healthbench_command(
    data: str = typer.Option("official", "--data", help="meta-eval JSONL: a path, a URL or 'official'"),
    sha256: str | None = typer.Option(None, "--sha256", help="expected SHA-256 of the file"),
    out: Path = folder_option(..., "--out", "output folder (results, summary.json, report.md)", name="summary.json"),
    modes: str = typer.Option("choice,explain", "--modes", help="grader modes, side by side"),
    grader: str = typer.Option("ours", "--grader", help="ours | official (explain mode: the reference grader "
                               "template, system message and sampling, as for eval healthbench)"),
    limit: int | None = typer.Option(None, "--limit", help="grade only the first N rows"),
    cache_dir: Path | None = typer.Option(None, "--cache-dir", help="verdict cache folder and where the official "
                                          "file is kept (default: $RUBRICSTREE_CACHE_DIR or the user cache)"),
    as_json: bool = typer.Option(False, "--json", help="print the per-category results as one JSON line"),
    quiet: bool = quiet_option(),
    judge: JudgeSettings = None,  # the judge options (rubricstree.judge_options)
) -> None:
    """Our judge vs physicians on HealthBench's grader meta-eval: pairwise balanced F1 (the
    reference score), macro F1 against the majority, the physician baseline (n-weighted), per
    category and theme, per mode. Prints the data file's SHA-256 and the template used."""
    from reward.judge import JudgeConfig
    from reward.metaeval.hb_grader import load_rows, resolve, run_hb_grader
    from training.eval.grader import grading_record, judge_config, load_grader_template, template_file

    progress = apply_quiet(quiet)
    try:
        if grader not in ("ours", "official"):
            raise ValueError(f"--grader: ours or official, got '{grader}'")
        path, digest = resolve(data, sha256=sha256, cache_dir=cache_dir)
        rows = load_rows(path)[:limit] if limit else load_rows(path)
        mode_list = [m.strip() for m in modes.split(",") if m.strip()]
        bad = [m for m in mode_list if m not in ("choice", "explain")]
        if bad:
            raise ValueError(f"--modes: choice and/or explain, got {bad}")
        configs = {"choice": JudgeConfig(mode="choice")}
        if "explain" in mode_list:
            explain = judge.model_copy(update={"mode": "explain"})
            configs["explain"] = judge_config(explain, template_file(grader, judge.template, "explain"))
        make = _judge_factory(judge, cache_dir, False, configs)
        judges = {m: make(m) for m in mode_list}
        meta = {"data": str(path), "sha256": digest, "sha256_checked": bool(sha256), "rows": len(rows),
                "judge": next(iter(judges.values())).model_id}
        for m, j in judges.items():
            rec = grading_record(j.config, load_grader_template(j.config.template_file, m))
            meta[f"{m} template"] = f"{rec['template']} (SHA-256 {rec['template_sha256'][:16]}...)"
            if m == "explain":
                meta["explain template is the reference grader's"] = rec["reference_template"]
                meta["grader_settings"] = rec["sampling"]
        typer.echo(f"data: {path} (SHA-256 {digest})", err=as_json)
        for m in judges:
            typer.echo(f"{m} template: {meta[f'{m} template']}", err=as_json)
        if "grader_settings" in meta:
            typer.echo("explain grader: " + ", ".join(f"{k} {v}" for k, v in meta["grader_settings"].items()),
                       err=as_json)
        summary = run_hb_grader(rows, judges, out, meta=meta, progress=progress)
    except (RubricsTreeError, ValueError, OSError) as exc:
        raise _fail(exc) from exc
    if as_json:
        typer.echo(json.dumps({c: {k: v for k, v in d.items() if k != "detail"}
                               for c, d in summary["categories"].items()}))
        return
    for c, d in summary["categories"].items():
        typer.echo(f"{c}: n={d['n']} pairwise balanced F1 {d['modes']}, macro F1 vs majority {d['majority']}; "
                   f"physicians (n-weighted) {d['physician_f1_weighted']}")
    typer.echo(f"report: {out / 'report.md'}")
