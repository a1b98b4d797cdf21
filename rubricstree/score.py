"""``rubricstree score``: score a rollouts file with the routed rubric tree, end to end.

Rows are ``{"id", "prompt": [messages], "completion", "rubrics"?: [...], "context"?}``. Prompts are
scored concurrently (each one routed once, its rollouts graded in one judge call), and each
rollout's result is appended to ``--out DIR``'s ``scores.jsonl`` (the settings beside it in
``scores.settings.json``; ``--report DIR``: ``report.md``) and flushed as soon as its prompt is
done, so lines come in completion order (each carries its ``id``). ``scores.jsonl`` is rewritten
on every run; resuming is the
durable cache's job: a rerun sends no judge request for what was graded and routes nothing it
routed, and ends with the same numbers. The summary (rich table, or one JSON line with ``--json``)
counts judge requests, cache hits, routings served from the cache and failures.

:func:`run_scoring` is the engine; ``rubricstree demo`` reuses it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer

from reward.aio import gather_or_cancel
from reward.errors import JudgeError, JudgeStopped, RubricsTreeError
from reward.judge.settings import JudgeSettings
from reward.settings import RewardSettings
from rubricstree.common_options import apply_quiet, concurrency_option, folder_option, quiet_option
from rubricstree.errors import fail
from rubricstree.guards import check_distinct_paths, check_scored
from rubricstree.judge_options import judge_options
from rubricstree.reward_options import reward_options


# ---------------------------------------------------------------------- engine
async def score_rollouts(reward, rollouts: Sequence, out: Path, *, concurrency: int = 8,
                         progress: bool = True) -> dict[str, Any]:
    """Score ``rollouts`` prompt by prompt (``concurrency`` prompts at a time), appending each
    result to ``out`` as it is produced. Returns ``{rollout id: RolloutScore}``."""
    from reward.jsonl import append_jsonl
    from reward.progress import bar as progress_bar

    groups: dict[tuple, list] = {}
    for r in rollouts:
        groups.setdefault(r.prompt_key, []).append(r)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("", encoding="utf-8")
    results: dict[str, Any] = {}
    sem = asyncio.Semaphore(max(1, concurrency))
    bar = progress_bar(len(groups), unit="prompt", desc="scoring prompts", enabled=progress)

    async def one(group: list) -> None:
        async with sem:
            scores = await reward.score(group)
        for s in scores:
            append_jsonl(out, s)
            results[s.id] = s
        bar.update(1)

    try:
        await gather_or_cancel(one(g) for g in groups.values())
    finally:
        bar.close()
    return results


def summarise(reward, judge, rollouts: Sequence, results: dict[str, Any], seconds: float) -> dict[str, Any]:
    """The run's numbers: scores, routing and judge cost."""
    from reward.stages.cost import judge_cost

    scored = [results[r.id].score for r in rollouts if r.id in results and results[r.id].score is not None]
    st = reward.stats
    prompts = int(st["prompts"])
    done = [r for r in rollouts if r.id in results]
    cost = judge_cost([results[r.id] for r in done], [r.prompt_key for r in done])
    return {
        "rollouts": len(rollouts),
        "prompts": prompts,
        "scored": len(scored),
        "unscored": len(rollouts) - len(scored),
        "format_failures": int(st.get("format_failures", 0)),
        "mean_score": (sum(scored) / len(scored)) if scored else None,
        "active_leaves_per_prompt": (st["active_leaves"] / prompts) if prompts else 0.0,
        "judge_items": int(st["judge_items"]),
        "judge_items_per_rollout": cost["judge_items_per_rollout"],
        "judge_items_per_prompt": cost["judge_items_per_prompt"],
        "confirm_items": int(st.get("confirm_items", 0)),
        "confirm_overturned": int(st.get("confirm_overturned", 0)),
        # judge_items counts graded items (leaves, rubric items, confirmations); the applicability
        # questions are asked once per prompt: counted here, once per prompt in
        # judge_items_per_prompt, and spread over the prompt's rollouts in judge_items_per_rollout
        "applicability_judge_calls": int(st.get("applicability_judge_calls", 0)),
        "applicability_items_per_prompt": cost["applicability_items_per_prompt"],
        "judge_requests": judge.stats.requests,
        # the identity watch's probe requests (reward.judge.watch; the end-of-run probe included),
        # and what they add to the grading requests
        **_probe_cost(judge),
        "cache_hits": judge.stats.cache_hits,
        "cache_misses": judge.stats.cache_misses,
        "judge_failures": judge.stats.failures,
        "prompts_routed": int(st["prompts_routed"]),
        "routing_from_cache": prompts - int(st["prompts_routed"]),
        "routing_judge_calls": int(st["routing_judge_calls"]),
        "routing_failures": int(st["routing_failures"]),
        "prompt_tokens": judge.stats.prompt_tokens,
        "cached_tokens": judge.stats.cached_tokens,
        "seconds": round(seconds, 3),
    }


def _probe_cost(judge) -> dict[str, Any]:
    watch = getattr(judge, "watch", None)
    items = watch.stats.probe_items if watch is not None else 0
    return {"probe_items": items,
            "probe_items_per_judge_request": round(items / judge.stats.requests, 4) if judge.stats.requests else None}


def _reasons(out: Path) -> list[tuple[str, int]]:
    """The most common failure reasons of the unscored rollouts in the scores file."""
    from reward.jsonl import iter_jsonl
    from rubricstree.guards import failure_reasons

    try:
        last = {row.get("id"): row for _, row in iter_jsonl(out)}  # a rerun appends: the latest row counts
    except (OSError, ValueError):
        return []
    return failure_reasons(f for row in last.values() if row.get("score") is None for f in row.get("failures") or ())


def _short(text: str, n: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def write_report(path: Path, rollouts: Sequence, results: dict[str, Any], summary: dict[str, Any],
                 meta: dict[str, Any], note: str | None = None) -> None:
    """A readable markdown report: settings, summary, then each prompt with its routing and the
    scores and feedback of its rollouts (input order)."""
    lines = ["# RubricsTree scores", ""]
    if note:
        lines += [f"> {note}", ""]
    lines += ["## Settings", ""] + [f"- **{k}**: {v}" for k, v in meta.items()] + [""]
    lines += ["## Summary", "", "| metric | value |", "|---|---|"]
    for k, v in summary.items():
        lines.append(f"| {k} | {_fmt(v) if isinstance(v, float) else v} |")
    lines.append("")
    groups: dict[tuple, list] = {}
    for r in rollouts:
        groups.setdefault(r.prompt_key, []).append(r)
    lines += ["## Prompts", ""]
    for n, group in enumerate(groups.values(), start=1):
        first = group[0]
        user = [m.content for m in first.prompt if m.role == "user"] or [first.prompt[-1].content]
        turns = f" ({len(first.prompt)} turns)" if len(first.prompt) > 1 else ""
        lines += [f"### {n}. {_short(user[0], 100)}{turns}", ""]
        res0 = results.get(first.id)
        if res0 is not None:
            ro = res0.routing
            urg = "—" if ro.get("urgency") is None else f"{ro['urgency']:.2f}"
            thr = "—" if ro.get("threshold") is None else f"{ro['threshold']:.2f}"
            src = "cache" if ro.get("cached") else "routed now"
            lines.append(f"Routing ({src}): urgency {urg}, threshold {thr}, {ro.get('n_active')} active leaves"
                         + (f", {ro['n_failures']} routing failures" if ro.get("n_failures") else "") + ".")
            titles = [f"{lr.title}{' (always on)' if lr.reason == 'always_on' else ''}" for lr in res0.leaves]
            if titles:
                shown = ", ".join(titles[:15]) + (f", … (+{len(titles) - 15})" if len(titles) > 15 else "")
                lines.append(f"Active: {shown}.")
            lines.append("")
        lines += ["| rollout | score | tree | points | completion |", "|---|---|---|---|---|"]
        for r in group:
            res = results.get(r.id)
            if res is None:
                lines.append(f"| {r.id} | not scored | | | {_short(r.completion, 80)} |")
                continue
            lines.append(f"| {r.id} | {_fmt(res.score)} | {_fmt(res.tree_score)} | {_fmt(res.points_score)} "
                         f"| {_short(r.completion, 80).replace('|', '/')} |")
        lines.append("")
        for r in group:
            res = results.get(r.id)
            if res is None:
                continue
            if res.failures:
                lines += [f"**{r.id}** unscored:", ""] + [f"- {f}" for f in res.failures[:10]] + [""]
            if res.feedback:
                lines += [f"**{r.id}** feedback:", "", res.feedback, ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def print_summary(summary: dict[str, Any], title: str = "RubricsTree scoring") -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for k, v in summary.items():
        table.add_row(k, _fmt(v) if isinstance(v, float) else str(v))
    Console().print(table)


async def run_scoring(*, rollouts: Sequence, reward, judge, out: Path, report: Path | None,
                      meta: dict[str, Any], concurrency: int = 8, progress: bool = True,
                      note: str | None = None) -> dict[str, Any]:
    """Score, write ``out`` (and ``report``), close the judge; return the summary."""
    t0 = time.perf_counter()
    try:
        results = await score_rollouts(reward, rollouts, out, concurrency=concurrency, progress=progress)
        # the run succeeded: who graded its last stretch (reward.judge.watch), the panel's judge too
        from reward.judge.watch import confirm_judges

        await confirm_judges(judge, getattr(reward, "panel_judge", None))
    finally:
        await judge.aclose()
        if getattr(reward, "panel_judge", None) is not None:
            await reward.panel_judge.aclose()
    summary = summarise(reward, judge, rollouts, results, time.perf_counter() - t0)
    if report is not None:
        write_report(report, rollouts, results, summary, meta, note=note)
    return summary


def settings_meta(reward_settings, judge) -> dict:
    """What a run records about its reward and judge: the reward's recipe (every field) and the
    judge's identity; written into reports and beside results (``settings.json``)."""
    return {"reward": reward_settings.record(), "judge": getattr(judge, "model_id", None)}


def write_settings(path: Path, reward_settings, judge, **extra) -> Path:
    """Write ``settings_meta`` (and ``extra``) as JSON to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**settings_meta(reward_settings, judge), **extra}, indent=1, default=str),
                    encoding="utf-8")
    return path


SCORES_FILE = "scores.jsonl"  # in score's --out folder (and the demo's)
REPORT_FILE = "report.md"  # in score's --report folder


def settings_path(out: Path) -> Path:
    """Where ``score`` records its settings: beside the scores file (``scores.jsonl`` ->
    ``scores.settings.json``); ``rubricstree inspect`` reads it."""
    return out.with_name(out.stem + ".settings.json")


# ---------------------------------------------------------------------- command
@judge_options()
@reward_options()
def score_command(
    rollouts: Path = typer.Option(..., "--rollouts", help="rollouts JSONL: id, prompt, completion, rubrics?"),
    out: Path = folder_option(..., "--out", "output folder: scores.jsonl, one line per rollout (rewritten), and "
                                            "the settings beside it (scores.settings.json)",
                              name=SCORES_FILE),
    on_failure: str = typer.Option("skip", "--on-failure", help="skip (unscored, with reasons) or raise"),
    report: Path | None = folder_option(None, "--report", "report folder: report.md", name=REPORT_FILE),
    concurrency: int = concurrency_option(8),
    cache_dir: Path | None = typer.Option(None, "--cache-dir",
                                             help="verdict/routing cache folder (default: $RUBRICSTREE_CACHE_DIR or the user cache)"),
    no_cache: bool = typer.Option(False, "--no-cache", help="no durable cache (routings kept in memory only)"),
    as_json: bool = typer.Option(False, "--json", help="print the summary as one JSON line"),
    quiet: bool = quiet_option(),
    min_scored: float = typer.Option(0.0, "--min-scored", min=0.0, max=1.0,
                                     help="exit 3 when a smaller fraction of rollouts is scored (always when none is)"),
    judge: JudgeSettings = None,  # the judge options (rubricstree.judge_options)
    reward: RewardSettings = None,  # the reward options (rubricstree.reward_options)
) -> None:
    """Route each prompt once, grade the active leaves and the row rubrics, write scores.

    The reward is the stage-3 recipe unless the reward options say otherwise (the same defaults
    as the trainers). Exit status: 0 when the run finished (unscored rollouts are counted, not
    fatal), 1 when a judge failure stopped it (--on-failure raise), 2 for invalid input or
    settings, 3 when no rollout (or less than --min-scored of them) was scored, 4 when the run's
    judge --deadline passed, 5 when the judge stopped answering (circuit breaker); in both last
    cases what was scored is kept.
    """
    from reward.judge import VerdictCache
    from reward.stages.rubric_reward import load_rollouts
    from reward.tree import load_tree

    progress = apply_quiet(quiet)
    settings = reward
    out, report = out / SCORES_FILE, report / REPORT_FILE if report is not None else None
    try:
        if on_failure not in ("skip", "raise"):
            raise typer.BadParameter(f"--on-failure must be skip or raise, got '{on_failure}'")
        check_distinct_paths({"--rollouts": rollouts, "--taxonomy": Path(settings.tree) if settings.tree else None},
                             {"--out": out, "--report": report})
        rows = load_rollouts(rollouts)
        tree = load_tree(settings.tree)
        cache = None if no_cache else VerdictCache(cache_dir / "verdicts.sqlite" if cache_dir else None)
        judge = judge.build(cache=cache if cache is not None else False)
        from reward.stages.build import output_scope

        reward = settings.build(judge, tree=tree, on_failure=on_failure, applicability_scope=output_scope(out))
    except (RubricsTreeError, ValueError, OSError) as exc:  # OSError: a judge model/tokenizer not found
        raise fail(exc) from exc  # a start-up past --deadline: 4
    write_settings(settings_path(out), settings, judge, rollouts=str(rollouts))
    meta = {"rollouts": str(rollouts), "taxonomy": f"{tree.name} ({len(tree.leaves)} leaves, {tree.source})",
            "judge": judge.model_id, **settings.record()}
    try:
        summary = asyncio.run(run_scoring(rollouts=rows, reward=reward, judge=judge, out=out, report=report,
                                          meta=meta, concurrency=concurrency, progress=progress))
    except JudgeStopped as exc:
        done = sum(1 for line in out.open(encoding="utf-8")) if out.exists() else 0
        if exc.exit_code == 6 and out.exists():  # another judge graded some of them: not scores to keep
            aside = out.with_name(f"{out.stem}.rejected-{time.strftime('%Y%m%d-%H%M%S')}{out.suffix}")
            out.replace(aside)
            kept = f"{done} of {len(rows)} rollouts scored, set aside in {aside}: not this judge's scores"
        else:
            kept = f"{done} of {len(rows)} rollouts scored and kept in {out}"
        typer.secho(f"error: {exc} ({kept})", err=True, fg="red", bold=True)
        raise typer.Exit(exc.exit_code) from exc
    except JudgeError as exc:
        typer.echo(f"error: {exc} (partial results in {out})", err=True)
        raise typer.Exit(1) from exc
    except RubricsTreeError as exc:  # found once running, e.g. the embedding router's missing package
        raise fail(exc, 2) from exc
    if as_json:
        typer.echo(json.dumps(summary))
    else:
        print_summary(summary)
        typer.echo(f"scores: {out}" + (f"\nreport: {report}" if report else ""))
    check_scored(summary["scored"], summary["rollouts"], min_scored, reasons=_reasons(out))
