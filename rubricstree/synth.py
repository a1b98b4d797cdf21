"""``rubricstree synth``: synthetic stage-3 data (conversations, rubrics) and the rubric-generation
evaluation. The work is in ``training.synth``; this module parses options, wires the generator
(``--generate-url`` server or ``--model`` in process; the critic defaults to the same one) and
reports. Every command resumes: rerun it with the same output path after a kill.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from reward.errors import RubricsTreeError
from reward.judge.settings import JudgeSettings
from rubricstree.common_options import apply_quiet, folder_option, generate_concurrency_option, quiet_option
from rubricstree.errors import fail as _fail
from rubricstree.judge_options import judge_options

app = typer.Typer(no_args_is_help=True)
CONVERSATIONS_FILE, RUBRICS_FILE = "conversations.jsonl", "rubrics.jsonl"  # in each --out folder

MODEL = typer.Option(None, "--model", help="generator model: served name with --generate-url, else a path (in-process)")
URL = typer.Option(None, "--generate-url", help="OpenAI-compatible server of the actor (vLLM)")
CRITIC_MODEL = typer.Option(None, "--critic-model", help="critic model (default: the actor's)")
CRITIC_URL = typer.Option(None, "--critic-url", help="critic server (default: the actor's)")
MAX_NEW = typer.Option(1024, "--max-new-tokens", min=1, help="token budget of one generation")
TEMP = typer.Option(0.7, "--temperature", min=0.0, help="generator sampling temperature (0 = greedy)")
SEED = typer.Option(0, "--seed", help="generation seed")
CONC = generate_concurrency_option(8)
ITERS = typer.Option(3, "--max-iters", min=1, help="actor-critic rounds at most")
QUIET = quiet_option()
STRUCT = typer.Option(True, "--structured/--no-structured",
                      help="send JSON schemas to a vLLM server (structured_outputs); answers are validated either way")


def _roles(out: Path, model, url, critic_model, critic_url, max_new_tokens, temperature, seed, concurrency,
           structured=True):
    from training.generation import GenerationSettings
    from training.synth.llm import build_roles
    from training.synth.store import CallCache, RunFiles

    out.parent.mkdir(parents=True, exist_ok=True)
    files = RunFiles(out)
    settings = GenerationSettings(max_new_tokens=max_new_tokens, temperature=temperature, seed=seed, thinking=False)
    cache = CallCache(files.calls_path)
    actor, critic = build_roles(model=model, generate_url=url, critic_model=critic_model, critic_url=critic_url,
                                settings=settings, cache=cache, concurrency=concurrency, structured=structured)
    return files, cache, actor, critic


@app.command("conversations")
def conversations_command(
    out: Path = folder_option(..., "--out", f"output folder: {CONVERSATIONS_FILE} (appended; failures in "
                                            f"{CONVERSATIONS_FILE}.failures.jsonl)", name=CONVERSATIONS_FILE),
    questions: Annotated[Path | None, typer.Option("--questions", help="seed questions: JSONL rows with question (+ answer)")] = None,
    easy: Annotated[Path | None, typer.Option("--easy", help="HealthBench-format rows used as same-theme examples")] = None,
    n: int = typer.Option(7, "--count", min=1, help="conversations to attempt"),
    themes: str = typer.Option("", "--themes", help="comma-separated theme tags (default: all seven)"),
    model: str = MODEL, generate_url: str = URL, critic_model: str = CRITIC_MODEL, critic_url: str = CRITIC_URL,
    max_new_tokens: int = MAX_NEW, temperature: float = TEMP, seed: int = SEED, concurrency: int = CONC,
    max_iters: int = ITERS, structured: bool = STRUCT, quiet: bool = QUIET,
) -> None:
    """Write themed, persona-driven conversations checked by critics."""
    apply_quiet(quiet)
    out = out / CONVERSATIONS_FILE
    try:
        from reward.healthbench.schema import load_healthbench
        from training.synth.conversations import (
            THEMES,
            build_items,
            load_questions,
            synth_conversations,
        )

        chosen = [t.strip() for t in themes.split(",") if t.strip()] or list(THEMES)
        bad = [t for t in chosen if t not in THEMES]
        if bad:
            raise ValueError(f"--themes: unknown {bad}; known: {sorted(THEMES)}")
        items = build_items(questions=load_questions(questions) if questions else None,
                            easy=load_healthbench(easy) if easy else None, themes=chosen, n=n, seed=seed)
        files, cache, actor, critic = _roles(out, model, generate_url, critic_model, critic_url, max_new_tokens,
                                             temperature, seed, concurrency, structured)
        try:
            counts = synth_conversations(items, actor=actor, critic=critic, files=files, max_iters=max_iters)
        finally:
            files.close()
            cache.close()
    except (RubricsTreeError, ValueError, OSError) as exc:
        raise _fail(exc) from None
    typer.echo(json.dumps({**counts, "out": str(out), "failures": str(files.failures_path),
                           "generator_calls": actor.calls + (critic.calls if critic is not actor else 0)}))


@app.command("rubrics")
def rubrics_command(
    conversations: Annotated[Path, typer.Option("--conversations", help="output of `synth conversations`")],
    easy: Annotated[Path, typer.Option("--easy", help="HealthBench-format rows with rubrics: the anchors")],
    out: Path = folder_option(..., "--out", f"output folder: {RUBRICS_FILE}, HealthBench-format rows (appended), "
                                            "and datasheet.json", name=RUBRICS_FILE),
    dataset_dir: Annotated[Path | None, typer.Option("--dataset-dir", help="also save an HF datasets copy here")] = None,
    datasheet: Annotated[Path | None, typer.Option("--datasheet", help="datasheet JSON (default OUT/datasheet.json)")] = None,
    max_items: int = typer.Option(6, "--max-items", min=1, help="most rubric items the actor writes per conversation and axis"),
    invert_rate: float = typer.Option(0.1, "--invert-rate", min=0.0, max=1.0,
                                      help="probability that a positive item is inverted into a negative (harm) check"),
    model: str = MODEL, generate_url: str = URL, critic_model: str = CRITIC_MODEL, critic_url: str = CRITIC_URL,
    max_new_tokens: int = MAX_NEW, temperature: float = TEMP, seed: int = SEED, concurrency: int = CONC,
    max_iters: int = ITERS, structured: bool = STRUCT, quiet: bool = QUIET,
) -> None:
    """Write per-axis rubrics for each conversation as HealthBench-format rows, plus a datasheet."""
    apply_quiet(quiet)
    out = out / RUBRICS_FILE
    try:
        from reward.healthbench.schema import load_healthbench
        from reward.jsonl import JsonlLog
        from training.synth.conversations import Conversation
        from training.synth.datasheet import write_datasheet
        from training.synth.rubrics import synth_rubrics

        convs = []
        for lineno, obj in JsonlLog(conversations).load_numbered():
            try:
                convs.append(Conversation.model_validate(obj).model_dump())
            except ValueError as exc:
                raise ValueError(f"{conversations}: line {lineno}: not a conversation record: {exc}") from None
        anchors = load_healthbench(easy)
        files, cache, actor, critic = _roles(out, model, generate_url, critic_model, critic_url, max_new_tokens,
                                             temperature, seed, concurrency, structured)
        try:
            counts = synth_rubrics(convs, anchors, actor=actor, critic=critic, files=files, max_items=max_items,
                                   max_iters=max_iters, invert_rate=invert_rate, seed=seed)
        finally:
            files.close()
            cache.close()
        sheet_path = datasheet or out.with_name("datasheet.json")
        sheet = write_datasheet(sheet_path, conversations, out)
        if dataset_dir is not None:
            from training.synth.store import save_dataset

            save_dataset(out, dataset_dir)
    except (RubricsTreeError, ValueError, OSError) as exc:
        raise _fail(exc) from None
    typer.echo(json.dumps({**counts, "out": str(out), "datasheet": str(sheet_path),
                           "inversion_rate": sheet["rubrics"]["inversion_rate"]}))


@app.command("eval-rubrics")
@judge_options()
def eval_rubrics_command(
    generated: Annotated[Path, typer.Option("--generated", help="generated rubrics (HealthBench-format JSONL); "
                                   "written first when --model/--generate-url is given")],
    reference: Annotated[Path, typer.Option("--reference", help="reference rows (e.g. HealthBench-Hard)")],
    matcher: str = typer.Option("embedding", "--matcher", help="embedding (offline MiniLM) or llm (the judge)"),
    threshold: float = typer.Option(0.7, "--match-threshold", help="embedding matcher: cosine from which a "
                                                                   "generated item matches a reference item"),
    easy: Annotated[Path | None, typer.Option("--easy", help="anchors for generation (HealthBench-format rows)")] = None,
    model: str = MODEL, generate_url: str = URL, max_new_tokens: int = MAX_NEW,
    temperature: float = typer.Option(0.0, "--temperature", min=0.0, help="generator sampling temperature "
                                      "(0 = greedy)"), seed: int = SEED, concurrency: int = CONC,
    structured: bool = STRUCT,
    as_json: bool = typer.Option(False, "--json", help="print the report as JSON"),
    quiet: bool = quiet_option(),
    judge: JudgeSettings = None,  # the judge options (rubricstree.judge_options): the llm matcher's judge
) -> None:
    """Score generated rubric items against reference items, per (prompt, axis)."""
    try:
        from reward.healthbench.schema import load_healthbench
        from training.synth.eval_rubrics import evaluate, generate_rubrics

        if matcher not in ("embedding", "llm"):
            raise ValueError(f"--matcher must be embedding or llm, not {matcher!r}")
        ref = load_healthbench(reference)
        if model or generate_url:
            if easy is None:
                raise ValueError("--easy is needed to generate rubrics (the same-theme anchors)")
            files, cache, actor, _ = _roles(generated, model, generate_url, None, None, max_new_tokens,
                                            temperature, seed, concurrency, structured)
            try:
                generate_rubrics(ref, load_healthbench(easy), actor, files, seed=seed)
            finally:
                files.close()
                cache.close()
        gen = load_healthbench(generated) if generated.exists() and generated.stat().st_size else []
        if matcher == "embedding":
            from training.synth.matchers import EmbeddingMatcher

            m = EmbeddingMatcher(threshold=threshold)
        else:
            from training.synth.matchers import LLMMatcher

            m = LLMMatcher(judge.build())
        from rubricstree.progress import step

        with step(f"matching generated rubrics to {len(ref)} reference rows ({matcher} matcher)", enabled=apply_quiet(quiet)):
            report = evaluate(gen, ref, m)
    except (RubricsTreeError, ValueError, OSError) as exc:
        raise _fail(exc) from None
    if as_json:
        typer.echo(json.dumps(report))
        return
    typer.echo(f"rubric-generation score {report['score']} over {report['n']} (prompt, axis) datapoints")
    for name in ("by_axis", "by_theme"):
        for k, v in report[name].items():
            typer.echo(f"  {name[3:]} {k}: {v['score']:.3f} (n={v['n']})")
