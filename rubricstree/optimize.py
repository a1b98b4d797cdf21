"""``rubricstree optimize``: the rubric tree as a coach (handbook prompting, feedback-and-revise,
best-of-n) and a held-out report of what each gains.

Every command appends its records to ``--out`` as they arrive and resumes after a kill (rerun the
same command: nothing generated or graded twice; verdicts also sit in the judge's durable cache).
The work is done in ``training.optimize``; this module parses options (imports stay inside the
commands so ``rubricstree --help`` stays fast).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import typer

from reward.errors import RubricsTreeError
from reward.judge.settings import JudgeSettings
from reward.settings import RewardSettings
from rubricstree.common_options import (
    apply_quiet,
    concurrency_option,
    folder_option,
    generate_concurrency_option,
    quiet_option,
)
from rubricstree.errors import fail as _fail
from rubricstree.judge_options import judge_options
from rubricstree.reward_options import reward_options

app = typer.Typer(no_args_is_help=True)

CACHE_DIR = typer.Option(None, "--cache-dir", help="verdict/routing cache folder (default: $RUBRICSTREE_CACHE_DIR)")

HB_PROMPTS = typer.Option(..., "--prompts", help="prompts JSONL: id (or prompt_id), prompt, context?")
HANDBOOK_FILE, ROUNDS_FILE, SAMPLES_FILE = "handbook.jsonl", "rounds.jsonl", "samples.jsonl"  # in each --out folder
HB_OUT = folder_option(..., "--out", f"output folder: {HANDBOOK_FILE} (appended; rerun to resume)",
                       name=HANDBOOK_FILE)
RV_ROLLOUTS = typer.Option(..., "--rollouts", help="rollouts JSONL (id, prompt, completion, rubrics?) or a best-of-n output")
RV_OUT = folder_option(..., "--out", f"output folder: {ROUNDS_FILE} (appended; rerun to resume)", name=ROUNDS_FILE)
BN_PROMPTS = typer.Option(..., "--prompts", help="prompts JSONL: id (or prompt_id), prompt, rubrics?")
BN_OUT = folder_option(..., "--out", f"output folder: {SAMPLES_FILE}, samples and scores (appended; rerun to "
                       "resume)", name=SAMPLES_FILE)
BN_PAIRS = typer.Option(None, "--save-pairs", help="save chosen/rejected pairs here (HF save_to_disk)")
RP_DATA = typer.Option(..., "--data", help="HealthBench-format rows with rubrics (prompt_id, prompt, rubrics)")
RP_METHOD = typer.Option(..., "--method", help="NAME=FILE, repeated; the first is the baseline")
RP_OUT = folder_option(..., "--out", "report folder (graded.jsonl, report.md/html/png/json)", name="report.md")


def _judge(settings: JudgeSettings, cache_dir: Path | None):
    from reward.judge import VerdictCache

    if not settings.url and not settings.model:
        raise RubricsTreeError("give a judge: --judge-url URL (a vLLM server) or --judge-model PATH (in-process)")
    from rubricstree.progress import step

    cache = VerdictCache(cache_dir / "verdicts.sqlite" if cache_dir else None)
    with step("loading the judge", enabled=bool(settings.model and not settings.url)):
        return settings.build(cache=cache)


def _reward(settings: RewardSettings, judge, out: Path | None = None):
    """The reward of the settings on ``judge`` (the stage-3 recipe by default, as trained), its
    applicability answers scoped to the run's output (a rerun resumes with them)."""
    from reward.stages.build import output_scope
    from rubricstree.progress import step

    with step(f"loading the {settings.router} router", enabled=settings.router == "embedding"):
        return settings.build(judge, applicability_scope=output_scope(out) if out is not None else None)


def _generator(model: str | None, generate_url: str | None, max_new_tokens: int, temperature: float, seed: int,
               batch_size: int, generate_concurrency: int):
    from training.generation import GenerationSettings, make_generator

    if not model and not generate_url:
        raise RubricsTreeError("give a policy: --model PATH (in-process) or --generate-url URL [--model NAME]")
    settings = GenerationSettings(max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)
    return make_generator(model, settings, generate_url=generate_url, batch_size=batch_size,
                          concurrency=generate_concurrency), settings


def _identity(model: str | None, url: str | None) -> str:
    from training.eval.store import model_identity

    return f"{url or 'inprocess'}:{model_identity(model) if model else 'served'}"


def _out_file(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


def _timed(log, t0: float) -> None:
    log.append("timing", {"seconds": round(time.perf_counter() - t0, 3)})
    log.close()


@app.command()
@judge_options()
@reward_options(only=("tree", "router", "router_options"))
def handbook(
    prompts: Path = HB_PROMPTS,
    out: Path = HB_OUT,
    max_tokens: int = typer.Option(400, "--max-tokens", help="token budget of one handbook section"),
    tokenizer: str | None = typer.Option(None, "--tokenizer", help="count tokens with this tokenizer "
                                         "(default: 4 tokens per 3 words)"),
    cache_dir: Path | None = CACHE_DIR,
    concurrency: int = concurrency_option(8),
    quiet: bool = quiet_option(),
    judge: JudgeSettings = None,  # the judge options (rubricstree.judge_options)
    reward: RewardSettings = None,  # the router options (rubricstree.reward_options)
) -> None:
    """Route each prompt and write its active checks as a system-prompt section.

    Use the file with ``--system-prompt handbook:OUT/handbook.jsonl`` (eval, train, optimize best-of-n)."""
    from training.optimize.handbook import build_handbooks, tokenizer_counter
    from training.optimize.store import OptimizeLog, load_prompts

    try:
        apply_quiet(quiet)
        out = _out_file(out, HANDBOOK_FILE)
        rows = load_prompts(prompts)
        settings = reward
        judge = _judge(judge, cache_dir)  # routes (llm router) and caches
        reward = _reward(settings, judge, out)
        log = OptimizeLog(out, {"prompts": str(prompts), "max_tokens": max_tokens, "tokenizer": tokenizer,
                                "judge": judge.model_id, "reward": settings.record()})
        t0 = time.perf_counter()
        n = build_handbooks(reward, rows, log, max_tokens=max_tokens,
                            count_tokens=tokenizer_counter(tokenizer) if tokenizer else None, concurrency=concurrency)
        _timed(log, t0)
    except (RubricsTreeError, ValueError, OSError) as exc:
        raise _fail(exc) from exc
    typer.echo(f"{n} new handbook(s), {len(rows)} in {out}")


GEN_URL = typer.Option(None, "--generate-url", help="policy server (OpenAI-compatible); default: in-process")
MODEL = typer.Option(None, "--model", help="policy checkpoint (in-process) or served name (with --generate-url)")


@app.command()
@judge_options()
@reward_options()
def revise(
    rollouts: Path = RV_ROLLOUTS,
    out: Path = RV_OUT,
    rounds: int = typer.Option(2, "--rounds", min=1, help="revision rounds after scoring the original"),
    model: str | None = MODEL, generate_url: str | None = GEN_URL,
    cache_dir: Path | None = CACHE_DIR,
    max_new_tokens: int = typer.Option(1024, "--max-new-tokens", help="token budget of one revision"),
    temperature: float = typer.Option(0.0, "--temperature", help="0 = greedy"),
    seed: int = typer.Option(0, "--seed", help="generation seed"),
    batch_size: int = typer.Option(8, "--batch-size", help="in-process generation batch size"),
    concurrency: int = concurrency_option(8),
    generate_concurrency: int = generate_concurrency_option(8),
    quiet: bool = quiet_option(),
    judge: JudgeSettings = None,  # the judge options (rubricstree.judge_options)
    reward: RewardSettings = None,  # the reward options (rubricstree.reward_options)
) -> None:
    """Score, feed the failed checks back (most important first), revise, re-score; keep the best."""
    from training.optimize.revise import load_revise_rollouts, revise_rollouts
    from training.optimize.store import OptimizeLog

    try:
        apply_quiet(quiet)
        out = _out_file(out, ROUNDS_FILE)
        rows = load_revise_rollouts(rollouts)
        recipe = reward
        judge = _judge(judge, cache_dir)
        reward = _reward(recipe, judge, out)
        gen, settings = _generator(model, generate_url, max_new_tokens, temperature, seed, batch_size,
                                   generate_concurrency)
        log = OptimizeLog(out, {"rollouts": str(rollouts), "rounds": rounds, "policy": _identity(model, generate_url),
                                "generation": settings.model_dump(), "judge": judge.model_id,
                                "reward": recipe.record()})
        t0 = time.perf_counter()
        best = revise_rollouts(rows, reward, gen, log, rounds=rounds, concurrency=concurrency)
        _timed(log, t0)
    except (RubricsTreeError, ValueError, OSError) as exc:
        raise _fail(exc) from exc
    _summary("revise", best, out)


def _summary(name: str, records: list[dict[str, Any]], out: Path) -> None:
    vals = [r["score"] for r in records if r.get("score") is not None]
    mean = sum(vals) / len(vals) if vals else None
    typer.echo(json.dumps({"command": name, "rows": len(records), "scored": len(vals), "mean_best_score": mean,
                           "out": str(out)}))


@app.command("best-of-n")
@judge_options()
@reward_options()
def best_of_n(
    prompts: Path = BN_PROMPTS,
    out: Path = BN_OUT,
    n: int = typer.Option(8, "--n", min=1, help="samples per prompt (1 = plain generation, scored)"),
    pairs: Path | None = BN_PAIRS,
    system_prompt: str = typer.Option("none", "--system-prompt", help="ours | none | handbook:FILE | FILE"),
    model: str | None = MODEL, generate_url: str | None = GEN_URL,
    cache_dir: Path | None = CACHE_DIR,
    max_new_tokens: int = typer.Option(1024, "--max-new-tokens", help="token budget of one sample"),
    temperature: float = typer.Option(1.0, "--temperature", help="sampling temperature (0 = greedy; n must be 1)"),
    seed: int = typer.Option(0, "--seed", help="generation seed"),
    batch_size: int = typer.Option(8, "--batch-size", help="in-process generation batch size"),
    concurrency: int = concurrency_option(8),
    generate_concurrency: int = generate_concurrency_option(8),
    quiet: bool = quiet_option(),
    judge: JudgeSettings = None,  # the judge options (rubricstree.judge_options)
    reward: RewardSettings = None,  # the reward options (rubricstree.reward_options)
) -> None:
    """Sample n answers per prompt, score each with the rubric reward, keep the best."""
    from training.optimize.best_of_n import run_best_of_n, save_pairs
    from training.optimize.store import OptimizeLog, load_prompts
    from training.system_prompt import system_prompt_id

    try:
        if n > 1 and temperature == 0:
            raise RubricsTreeError("--n > 1 needs --temperature > 0 (greedy samples are identical)")
        apply_quiet(quiet)
        out = _out_file(out, SAMPLES_FILE)
        rows = load_prompts(prompts)
        recipe = reward
        judge = _judge(judge, cache_dir)
        reward = _reward(recipe, judge, out)
        gen, settings = _generator(model, generate_url, max_new_tokens, temperature, seed, batch_size,
                                   generate_concurrency)
        log = OptimizeLog(out, {"prompts": str(prompts), "n": n, "policy": _identity(model, generate_url),
                                "system_prompt": system_prompt_id(system_prompt), "generation": settings.model_dump(),
                                "judge": judge.model_id, "reward": recipe.record()})
        t0 = time.perf_counter()
        records = run_best_of_n(rows, reward, gen, log, n=n, system_prompt=system_prompt, concurrency=concurrency)
        _timed(log, t0)
        if pairs is not None:
            typer.echo(f"{save_pairs(records, pairs)} preference pair(s) saved to {pairs}")
    except (RubricsTreeError, ValueError, OSError, KeyError) as exc:
        raise _fail(exc) from exc
    _summary("best-of-n", records, out)


@app.command()
@judge_options()
def report(
    data: Path = RP_DATA,
    method: list[str] = RP_METHOD,
    out: Path = RP_OUT,
    cache_dir: Path | None = CACHE_DIR,
    allow_same_judge: bool = typer.Option(False, "--allow-same-judge", help="grade with the optimisation's own "
                                          "judge anyway (the report then warns: not a held-out measurement)"),
    resamples: int = typer.Option(1000, "--resamples", help="paired bootstrap resamples"),
    seed: int = typer.Option(0, "--seed", help="paired bootstrap seed"),
    concurrency: int = concurrency_option(8, "rows"),
    quiet: bool = quiet_option(),
    judge: JudgeSettings = None,  # the judge options (rubricstree.judge_options)
) -> None:
    """Compare the methods' answers on the rows' own rubrics with a held-out judge (paired bootstrap)."""
    from training.optimize.report import run_report, wall_of
    from training.optimize.store import load_prompts

    apply_quiet(quiet)
    try:
        methods: dict[str, str] = {}
        for m in method:
            name, sep, path = m.partition("=")
            if not sep or not name or not path:
                raise RubricsTreeError(f"--method must be NAME=FILE, got '{m}'")
            if name in methods:
                raise RubricsTreeError(f"--method: '{name}' given twice")
            methods[name] = path
        if len(methods) < 2:
            raise RubricsTreeError("give at least two --method NAME=FILE (the first is the baseline)")
        rows = load_prompts(data)
        judge = _judge(judge, cache_dir)
        result = run_report(rows, methods, judge, out, allow_same_judge=allow_same_judge, n_resamples=resamples,
                            seed=seed, wall={m: w for m, p in methods.items() if (w := wall_of(p)) is not None},
                            concurrency=concurrency)
    except (RubricsTreeError, ValueError, OSError) as exc:
        raise _fail(exc) from exc
    for w in result["warnings"]:
        typer.echo(f"warning: {w}", err=True)
    typer.echo(json.dumps({e["method"]: {"score": e["score"], "diff": (e.get("diff") or {}).get("mean_diff")}
                           for e in result["methods"]}))
    typer.echo(f"report: {out / 'report.html'}")
