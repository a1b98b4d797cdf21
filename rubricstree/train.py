"""``rubricstree train``: difficulty filtering and TRL training runs (Fathom-Vaidya stages).

``filter`` samples n completions per row with a policy and routes/keeps rows by mean reward;
``run`` launches a stage from a YAML config (``configs/trl/*.yaml``, ``configs/smoke/*.yaml``);
``plan`` estimates its memory per GPU (``rubricstree/train_plan.py``).
Heavy packages (torch, transformers, trl) are imported inside the commands.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import typer

from reward.errors import RubricsTreeError
from reward.judge.settings import JudgeSettings
from rubricstree.common_options import apply_quiet, folder_option, quiet_option
from rubricstree.errors import fail
from rubricstree.judge_options import judge_options
from rubricstree.train_data import app as data_app
from rubricstree.train_plan import plan_command

app = typer.Typer(no_args_is_help=True)
app.command("plan")(plan_command)
app.add_typer(data_app, name="data")


def _log_to_stderr() -> None:
    """INFO logs of our packages (filter counts, resume notices) to the current stderr; the
    handler of an earlier call is replaced, so repeated calls in one process do not stack."""
    for name in ("training", "reward"):
        logger = logging.getLogger(name)
        logger.handlers = [h for h in logger.handlers if not getattr(h, "_rubricstree_cli", False)]
        handler = logging.StreamHandler(sys.stderr)
        handler._rubricstree_cli = True  # type: ignore[attr-defined]
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)


def _window(text: str, name: str) -> tuple[float, float]:
    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        raise typer.BadParameter(f"{name}: expected LO,HI (e.g. 0.1,0.4), got {text!r}") from None
    return lo, hi


def filter_reward_settings(config: Path | None, rubric_source: str | None):
    """The stage-3 reward settings ``train filter --kind healthbench`` scores with: those of
    ``config``, the training YAML of the run the filter prepares, or the defaults; ``rubric_source``
    on top (default without a config: ``rows``, the paper's filter on the rows' own rubrics).

    A TRL config's ``reward:`` block (``reward.settings.StageRewardSettings``; the config must train
    ``stage: clinical_rubric``) or a verl config's ``reward.custom_reward_function.reward_kwargs``,
    read as verl's reward reads them (``reward.integrations.verl.settings.load_settings``: a
    ``config`` key or ``$RUBRICSTREE_VERL_CONFIG`` names a settings file under the inline keys) is
    read, its scoring keys kept; nothing else in the file, so a config whose ``model`` names an
    earlier stage's export need not resolve here. The judge is the command's own.

    Raises:
        InputError: the file is missing, not a YAML mapping, trains another stage, or its reward
            settings are invalid (the error names the file and the field).
    """
    from pydantic import ValidationError

    from reward.envvars import expand_env
    from reward.errors import InputError
    from reward.jsonl import validation_error
    from reward.settings import RubricRewardSettings, RubricScoringSettings, StageRewardSettings

    if rubric_source is not None and rubric_source not in ("rows", "tree", "both"):
        raise InputError(f"expected rows, tree or both, got {rubric_source!r}", field="--rubric-source")
    if config is None:
        return RubricRewardSettings(rubric_source=rubric_source or "rows")
    if not config.is_file():
        raise InputError("config file not found", file=str(config))
    from reward.textio import load_yaml

    try:
        raw = load_yaml(config) or {}
    except Exception as exc:  # yaml.YAMLError and friends: say which file
        raise InputError(f"not valid YAML: {exc}", file=str(config)) from exc
    if not isinstance(raw, dict):
        raise InputError("not a training config (a YAML mapping)", file=str(config))
    block = raw.get("reward") or {}
    if not isinstance(block, dict):
        raise InputError("not a mapping", file=str(config), field="reward")
    crf = block.get("custom_reward_function")
    verl_kwargs = crf.get("reward_kwargs") if isinstance(crf, dict) else None
    prefix = "reward.custom_reward_function.reward_kwargs" if verl_kwargs is not None else "reward"
    if verl_kwargs is None and raw.get("stage", "clinical_rubric") != "clinical_rubric":
        raise InputError(f"this config trains stage {raw.get('stage')!r}; the healthbench filter scores the "
                         "stage-3 reward (stage: clinical_rubric)", file=str(config), field="stage")
    try:
        if verl_kwargs is not None:
            from reward.integrations.verl.settings import load_settings

            kwargs = expand_env(dict(verl_kwargs))
            settings = load_settings(kwargs.pop("config", None), **kwargs).model_dump(
                include=set(RubricScoringSettings.model_fields))
        else:
            settings = StageRewardSettings.model_validate(expand_env(dict(block))).rubric().model_dump()
    except ValidationError as exc:
        err = validation_error(exc, file=str(config), record="reward")
        raise InputError(err.reason, file=err.file, field=f"{prefix}.{err.field}" if err.field else prefix) from exc
    except InputError as exc:  # ${oc.env:VAR} unset, a bad inline key, a bad key in verl's settings file
        if exc.file not in (None, "reward_kwargs"):  # verl's settings file: it names itself
            raise
        raise InputError(exc.reason, file=str(config), field=f"{prefix}.{exc.field}" if exc.field else prefix
                         ) from exc
    if rubric_source is not None:
        settings["rubric_source"] = rubric_source
    return RubricRewardSettings.model_validate(settings)


@app.command("filter")
@judge_options()
def filter_command(
    data: Path = typer.Option(..., "--data", help="rows: MCQ JSONL (question, options, answer_idx) or HealthBench JSONL"),
    model: str = typer.Option(..., "--model", help="the policy: a model name/path (served name with --generate-url)"),
    out: Path = folder_option(..., "--out", "output folder: scores.jsonl, one JSONL per split, stats.json",
                              name="stats.json"),
    generate_url: str | None = typer.Option(None, "--generate-url", help="sample from this vLLM/OpenAI server"),
    kind: str = typer.Option("mcq", "--kind", help="mcq (stages 1-2: split rubric/rule) or healthbench (stage 3: keep)"),
    n: int = typer.Option(8, "--n", min=1, help="completions per row"),
    temperature: float = typer.Option(1.0, "--temperature", min=0.0, help="policy sampling temperature"),
    max_new_tokens: int = typer.Option(..., "--max-new-tokens", min=1,
                                       help="the stage's completion budget (10000 for stages 1-2, 16000 for stage 3 "
                                            "in the paper; a short one cuts Qwen3's thinking)"),
    sample_timeout: float = typer.Option(1800.0, "--sample-timeout", min=1.0,
                                         help="--generate-url: seconds one sample request may take"),
    sample_retries: int = typer.Option(3, "--sample-retries", min=0, help="--generate-url: retries of a sample"),
    sample_concurrency: int = typer.Option(256, "--sample-concurrency", min=1,
                                           help="--generate-url: sample requests in flight"),
    lost_sample_rounds: int = typer.Option(1, "--lost-sample-rounds", min=0,
                                           help="--generate-url: times a sample lost after its retries is asked "
                                                "for again, once the others are drawn"),
    min_samples: int | None = typer.Option(None, "--min-samples", min=1,
                                           help="fewest samples a prompt keeps when some are lost for good "
                                                "(default: half of --n, at least 2)"),
    max_failed_fraction: float = typer.Option(0.05, "--max-failed-fraction", min=0.0, max=1.0,
                                              help="share of prompts that may be left with fewer than --min-samples "
                                                   "samples (skipped, counted); above it the filter stops"),
    rubric_window: str = typer.Option("0.1,0.4", "--rubric-window", help="[lo, hi] routed to the rubric stage"),
    rule_window: str = typer.Option("0.4,0.7", "--rule-window", help="(lo, hi] routed to the rule stage"),
    keep_window: str = typer.Option("0.15,0.7", "--keep-window", help="[lo, hi] kept (healthbench)"),
    system_prompt: str | None = typer.Option(None, "--system-prompt", help="ours | none | handbook:FILE | FILE"),
    limit: int | None = typer.Option(None, "--limit", min=1, help="filter the first N rows only"),
    rubric_source: str | None = typer.Option(None, "--rubric-source",
                                             help="healthbench: rows | tree | both (default: the --config's, else rows)"),
    config: Path | None = typer.Option(None, "--config", help="healthbench: a training YAML whose reward: block "
                                                              "(router, scoring variant, applicability, ...) the "
                                                              "filter scores with, as its stage-3 run will"),
    as_json: bool = typer.Option(False, "--json", help="print the stats as JSON"),
    quiet: bool = quiet_option(),
    judge: JudgeSettings = None,  # the judge options (rubricstree.judge_options): healthbench's rubric judge
) -> None:
    """Difficulty filtering: route MCQ rows by mean correctness, or keep HealthBench rows in a window."""
    from training.difficulty import DifficultyConfig, Window, run_filter

    apply_quiet(quiet)
    _log_to_stderr()
    if kind not in ("mcq", "healthbench"):
        raise typer.BadParameter("--kind must be mcq or healthbench")
    r, u, k = _window(rubric_window, "--rubric-window"), _window(rule_window, "--rule-window"), \
        _window(keep_window, "--keep-window")
    try:
        cfg = DifficultyConfig(n=n, temperature=temperature, max_new_tokens=max_new_tokens,
                               mode="split" if kind == "mcq" else "keep", timeout_s=sample_timeout,
                               max_retries=sample_retries, concurrency=sample_concurrency,
                               lost_sample_rounds=lost_sample_rounds, min_samples=min_samples,
                               max_failed_fraction=max_failed_fraction,
                               rubric=Window(lo=r[0], hi=r[1]), rule=Window(lo=u[0], hi=u[1], lo_inclusive=False),
                               keep=Window(lo=k[0], hi=k[1]))
        reward_fn = None
        if config is not None and kind != "healthbench":
            raise typer.BadParameter("--config names the stage-3 reward settings: it goes with --kind healthbench")
        if kind == "healthbench":
            if not judge.url:
                raise typer.BadParameter("--kind healthbench needs --judge-url for the rubric reward")
            from reward.integrations.trl import RubricRewardFunc

            # a pass rate in 0..1 (a truncated answer 0), as the stage-3 launcher filters
            reward_fn = RubricRewardFunc.from_settings(judge, filter_reward_settings(config, rubric_source)
                                                       ).as_pass_rate()
        _, stats = run_filter(data, model=model, out_dir=out, kind=kind, cfg=cfg, generate_url=generate_url,
                              served_model=model if generate_url else None, reward_fn=reward_fn,
                              system_prompt=system_prompt, limit=limit)
    except (RubricsTreeError, ValueError) as exc:
        raise fail(exc, 2) from exc
    if as_json:
        typer.echo(stats.model_dump_json())
        return
    typer.echo(f"rows: {stats.rows}; " + ", ".join(f"{s}: {c}" for s, c in stats.counts.items()))
    typer.echo(f"windows: {stats.windows}; results in {out}")


@app.command("run")
def run_command(
    config: Path = typer.Option(..., "--config", help="a training YAML (configs/trl/*.yaml, configs/smoke/*.yaml)"),
    set_: list[str] = typer.Option([], "--set", help="override a config key: grpo.max_steps=10 (repeatable)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="validate and print the config, do not train"),
) -> None:
    """Train a stage with TRL (GSPO); resumes from the last checkpoint in output_dir."""
    from training.trl_config import load_config

    _log_to_stderr()
    try:
        cfg = load_config(config, set_)
    except RubricsTreeError as exc:
        raise fail(exc, 2) from exc
    if dry_run:
        typer.echo(cfg.model_dump_json(indent=2))
        return
    from training.hf_export import require_start_model

    try:
        require_start_model(cfg.model, f"model: in {config}")
    except RubricsTreeError as exc:
        raise fail(exc, 2) from exc
    from training.trl_launcher import train

    try:
        result = train(cfg)
    except RubricsTreeError as exc:
        raise fail(exc, 2) from exc
    typer.echo(json.dumps({"output_dir": result.output_dir, "global_step": result.global_step,
                           "start_step": result.start_step, "resumed_from": result.resumed_from,
                           "epochs": result.epochs}))
