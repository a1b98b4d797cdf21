"""HealthBench evaluation of a checkpoint: generate -> grade every rubric item -> score -> report.

One call of :func:`run_healthbench` does the whole evaluation and can be repeated: it reads what
the output folder already holds and does only what is missing.

- ``generations.jsonl``: one line per response, appended as soon as it exists.
- ``verdicts.jsonl``: one line per graded rubric item (``prompt_id``, ``rubric_index``,
  ``criteria_met``, ...), appended as soon as its batch returns; the format
  ``rubricstree healthbench score --verdicts`` reads. Only successful verdicts are written.
- ``generation_failures.jsonl`` / ``judge_failures.jsonl``: failures, for the record; a failed
  item is tried again by the next run, and one that still fails leaves its example unscored
  (excluded from the score and counted), never scored as "not met".
- ``config.json``: the settings that decide generations and verdicts; a resume must match them.
- ``metrics.json``, ``example_scores.jsonl``, ``report.md``/``report.html`` and plots: derived,
  rewritten at the end of every run, identical for an interrupted-and-resumed run and an
  uninterrupted one (timings and judge counters go to ``runs.jsonl`` instead).

Scoring is the exact HealthBench scoring of :mod:`reward.healthbench.scoring`: per example
achieved/possible (unclipped), mean per tag and overall, clipped after averaging, bootstrap std.
Examples are scored in data-file order so the bootstrap sees the same sequence on every run.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from reward.aio import gather_or_cancel
from reward.errors import InputError, JudgeStopped
from reward.healthbench.schema import HealthBenchRow, load_healthbench
from reward.healthbench.scoring import example_score, length_adjusted, score_healthbench
from reward.healthbench.variants import LENGTH_ADJUST
from reward.jsonl import JsonlLog
from reward.settings import JudgeSettings
from training.eval.data import HealthBenchData, resolve_healthbench
from training.eval.records import (
    Failure,
    Generation,
    RunRecord,
    VerdictLine,
    now,
    read_generations,
    read_verdicts,
)
from training.eval.steps import generate_step
from training.eval.store import CrashHook, check_settings, model_identity
from training.generation import GenerationSettings, GenRequest, make_generator
from training.system_prompt import apply_system_prompt, system_prompt_id

log = logging.getLogger(__name__)


class HealthBenchEvalConfig(BaseModel):
    """Everything ``rubricstree eval healthbench`` takes (see its ``--help`` for each option)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(description="checkpoint path or name; with generate_url, the served model name")
    data: str = Field(description="HealthBench file: local path, http(s) URL, or full/hard/consensus")
    out: Path = Field(description="output folder; rerunning with the same one resumes")
    generate_url: str | None = None
    judge: JudgeSettings = Field(default_factory=lambda: JudgeSettings(mode="explain"),
                                 description="the judge (reward.settings.JudgeSettings); mode defaults to explain "
                                             "here, the official-comparable grading")
    grader: Literal["ours", "official"] = Field("ours", description="official: the reference grader template, "
                                                "fetched and hash-checked (reward.judge.official)")

    @field_validator("judge", mode="before")
    @classmethod
    def _explain_by_default(cls, v: Any) -> Any:
        return {"mode": "explain", **v} if isinstance(v, dict) else v
    system_prompt: str = "none"
    length_adjust: bool = False
    limit: int | None = Field(None, ge=1)
    generation: GenerationSettings = GenerationSettings()
    concurrency: int = Field(32, ge=1, description="generation requests in flight (server)")
    batch_size: int = Field(8, ge=1, description="in-process generation batch size")
    judge_passes: int = Field(2, ge=1, description="grading passes per run: later ones retry failed items")
    n_bootstrap: int = Field(1000, ge=1)
    seed: int = 0
    worst: int = Field(10, ge=0, description="worst examples shown in the report")
    baseline: str | None = Field(None, description="an earlier evaluation folder: the difference and its interval")
    wandb: bool = False


@dataclass
class ExampleResult:
    """One scored example, for the report."""

    row: HealthBenchRow
    response: str
    met: list[bool]
    score: float
    score_adjusted: float | None


@dataclass
class EvalRun:
    """What the steps of one invocation share: the inputs, the folder, and what it has done."""

    cfg: HealthBenchEvalConfig
    data: HealthBenchData
    all_rows: list[HealthBenchRow]
    rows: list[HealthBenchRow]
    settings: dict[str, Any]
    out: Path
    crash: CrashHook
    record: RunRecord
    generator: Any = None
    judge: Any = None
    generation_errors: dict[str, str] = field(default_factory=dict)
    judge_errors: dict[tuple[str, int], str] = field(default_factory=dict)

    @property
    def n_items(self) -> dict[str, int]:
        return {row.prompt_id: len(row.rubrics) for row in self.rows}


GradeTask = tuple[HealthBenchRow, str, list[int]]  # a row, its response, the rubric items to grade


# ---------------------------------------------------------------------------------------------
# settings and records
# ---------------------------------------------------------------------------------------------


def _template_file(cfg: HealthBenchEvalConfig) -> str | None:
    from training.eval.grader import template_file

    return template_file(cfg.grader, cfg.judge.template, cfg.judge.mode)


def _judge_config(cfg: HealthBenchEvalConfig):
    from training.eval.grader import judge_config

    return judge_config(cfg.judge, _template_file(cfg))


def _judge_identity(cfg: HealthBenchEvalConfig, judge) -> dict[str, Any]:
    """Who grades, without loading the judge (a finished run re-scores without it): by content
    (reward.judge.identity) and endpoint (training.eval.judge_record), so a resume against swapped
    weights or another server differs here and check_settings refuses it."""
    from training.eval.judge_record import object_judge_record, served_judge_record

    if judge is not None:
        return object_judge_record(judge)
    j = cfg.judge.resolved()
    if j.url:
        return served_judge_record(j.url, j.api, j.served_model, j.api_key_env)
    if j.model:
        from reward.judge.identity import model_fingerprint

        return {"backend": "inprocess", "model": model_identity(j.model), "fingerprint": model_fingerprint(j.model)}
    raise InputError("give a judge: --judge-url URL (a vLLM server) or --judge-model PATH (in-process)")


def run_settings(cfg: HealthBenchEvalConfig, data: HealthBenchData, judge=None, generator=None) -> dict[str, Any]:
    """The settings that decide generations and verdicts (``config.json``)."""
    from training.eval.grader import grading_record, load_grader_template

    config = _judge_config(cfg)
    template = load_grader_template(config.template_file, cfg.judge.mode)
    gen_backend = getattr(generator, "backend", None) or ("http" if cfg.generate_url else "inprocess")
    return {
        "benchmark": "healthbench",
        "model": model_identity(cfg.model),
        "generate_backend": gen_backend,
        "data_sha256": data.sha256,
        "system_prompt": system_prompt_id(cfg.system_prompt),
        "generation": cfg.generation.model_dump(),
        "judge": _judge_identity(cfg, judge),
        "grading": grading_record(config, template),
    }


def _check_rows(rows: Sequence[HealthBenchRow], src: str) -> None:
    for row in rows:
        if not any(item.points > 0 for item in row.rubrics):
            raise InputError("no rubric item has positive points: the example cannot be scored",
                             file=src, record=f"prompt_id {row.prompt_id}", field="rubrics")


# ---------------------------------------------------------------------------------------------
# generation and grading
# ---------------------------------------------------------------------------------------------


def _generate(run: EvalRun, missing: Sequence[HealthBenchRow]) -> dict[str, Generation]:
    """Generate the missing responses; returns the new ones (failures go to ``run``)."""
    cfg = run.cfg
    requests = [GenRequest(row.prompt_id, apply_system_prompt(row.prompt, cfg.system_prompt)) for row in missing]
    result = generate_step(requests, run.out, key_field="prompt_id", crash=run.crash, generator=run.generator,
                           make_generator=lambda: make_generator(cfg.model, cfg.generation,
                                                                 generate_url=cfg.generate_url,
                                                                 concurrency=cfg.concurrency,
                                                                 batch_size=cfg.batch_size))
    run.record.generated = len(result.new)
    run.record.generation_failures = len(result.errors)
    run.generation_errors = result.errors
    return result.new


def _make_judge(cfg: HealthBenchEvalConfig):
    return cfg.judge.build(config=_judge_config(cfg))


def _chunks(todo: list[GradeTask], judge) -> list[list[GradeTask]]:
    """Server judges take one example per call, many calls in flight (each example's items share
    a prefix); an in-process judge gets several examples per call, so its batches fill up."""
    if getattr(judge, "concurrency", 1) > 1:
        return [[t] for t in todo]
    size = 4 * getattr(judge, "batch_size", 16)
    out: list[list] = []
    cur: list = []
    n = 0
    for t in todo:
        if cur and n + len(t[2]) > size:
            out.append(cur)
            cur, n = [], 0
        cur.append(t)
        n += len(t[2])
    if cur:
        out.append(cur)
    return out


async def _grade(judge, todo: list[GradeTask], run: EvalRun) -> None:
    from reward.judge import JudgeItem, Message
    from reward.progress import bar as progress_bar

    crash, system_prompt = run.crash, run.cfg.system_prompt
    verdicts, fails = JsonlLog(run.out / "verdicts.jsonl"), JsonlLog(run.out / "judge_failures.jsonl")
    failures: dict[tuple[str, int], str] = {}
    chunks = _chunks(todo, judge)
    in_flight = asyncio.Semaphore(16 if getattr(judge, "concurrency", 1) > 1 else 1)
    bar = progress_bar(sum(len(t[2]) for t in todo), desc="grade", unit="item")

    async def grade_chunk(chunk) -> None:
        items, where = [], []
        for row, response, indices in chunk:
            # the grader sees the conversation the policy was sent, system turn included, as the
            # reference harness shows it (its "actual queried" messages)
            conv = tuple(Message(role=m["role"], content=m["content"])
                         for m in apply_system_prompt(row.prompt, system_prompt))
            for i in indices:
                r = row.rubrics[i]
                items.append(JudgeItem(conversation=conv, response=response, criterion=r.criterion, points=r.points))
                where.append((row.prompt_id, i))
        async with in_flight:
            result = await judge.grade(items)
        for (pid, i), v in zip(where, result):
            crash.guard()
            if v.ok:
                verdicts.append(VerdictLine(prompt_id=pid, rubric_index=i, criteria_met=bool(v.met), p_yes=v.p_yes,
                                            explanation=v.explanation or None).to_json())
                run.record.graded_items += 1
                crash.tick("verdicts")
            else:
                why = v.failure or "unknown failure"
                fails.append(Failure(key=pid, rubric_index=i, error=why).to_json("prompt_id"))
                failures[(pid, i)] = why
        bar.update(len(items))

    try:
        await gather_or_cancel(grade_chunk(c) for c in chunks)
    finally:
        bar.close()
        verdicts.close()
        fails.close()
        run.record.judge_failures = len(failures)
        run.judge_errors = failures


# ---------------------------------------------------------------------------------------------
# scoring
# ---------------------------------------------------------------------------------------------


def _score(run: EvalRun, gens: dict[str, Generation], verdicts: dict[tuple[str, int], bool]
           ) -> tuple[dict[str, Any], list[ExampleResult]]:
    cfg, data, rows, settings = run.cfg, run.data, run.rows, run.settings
    from training.eval.judge_record import grading_fields

    gen_errors, judge_errors = run.generation_errors, run.judge_errors
    scored: list[HealthBenchRow] = []
    results: list[ExampleResult] = []
    unscored: list[dict[str, str]] = []
    p = LENGTH_ADJUST[data.length_adjust_variant] if cfg.length_adjust else None
    for row in rows:
        pid = row.prompt_id
        if pid not in gens:
            unscored.append({"prompt_id": pid, "reason": f"no response: {gen_errors.get(pid, 'not generated')}"})
            continue
        missing = [i for i in range(len(row.rubrics)) if (pid, i) not in verdicts]
        if missing:
            why = judge_errors.get((pid, missing[0]), "not graded")
            unscored.append({"prompt_id": pid, "reason": f"{len(missing)} of {len(row.rubrics)} rubric items "
                                                         f"without a verdict; first (item {missing[0]}): {why}"})
            continue
        met = [verdicts[(pid, i)] for i in range(len(row.rubrics))]
        response = gens[pid].response
        value = example_score([r.points for r in row.rubrics], met)
        adjusted = length_adjusted(value, response, p) if p is not None else None
        scored.append(row)
        results.append(ExampleResult(row, response, met, value, adjusted))

    metrics: dict[str, Any] = {
        "benchmark": "healthbench",
        "model": cfg.model,
        "generate_backend": settings["generate_backend"],
        "data": {"source": cfg.data, "file": data.path.name, "sha256": data.sha256, "variant": data.variant,
                 "variant_source": data.variant_source, "rows_in_file": len(run.all_rows), "limit": cfg.limit},
        "system_prompt": settings["system_prompt"],
        "generation": settings["generation"],
        "grading": {**settings["grading"], **grading_fields(settings["judge"]), "grader": cfg.grader},
        "n_rows": len(rows), "n_scored": len(scored), "n_unscored": len(unscored), "unscored": unscored,
        "score": None, "bootstrap_std": None, "n_samples": 0, "tags": {},
        "length_adjusted": None,
        "n_bootstrap": cfg.n_bootstrap, "bootstrap_seed": cfg.seed,
    }
    if scored:
        verdict_map = {r.row.prompt_id: r.met for r in results}
        responses = {r.row.prompt_id: r.response for r in results}
        metrics.update(score_healthbench(scored, verdict_map, n_bootstrap=cfg.n_bootstrap, seed=cfg.seed))
        if p is not None:
            adj = score_healthbench(scored, verdict_map, responses, p, n_bootstrap=cfg.n_bootstrap, seed=cfg.seed)
            metrics["length_adjusted"] = {"p": p, "variant": data.length_adjust_variant, **adj}
        chars = [len(r.response) for r in results]
        finish: dict[str, int] = {}
        for r in results:
            reason = str(gens[r.row.prompt_id].finish_reason)
            finish[reason] = finish.get(reason, 0) + 1
        # an answer cut off while thinking is graded as what follows </think>: often nothing
        metrics["responses"] = {"mean_chars": sum(chars) / len(chars), "finish_reasons": dict(sorted(finish.items())),
                                "empty": sum(1 for r in results if not r.response.strip())}
        from training.eval.headline import add_headline

        add_headline(metrics, {r.row.prompt_id: r.score for r in results}, baseline=cfg.baseline,
                     n_bootstrap=cfg.n_bootstrap, seed=cfg.seed)
    from training.eval.comparability import comparability

    metrics.update(comparability(metrics))
    return metrics, results


# ---------------------------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------------------------


def run_healthbench(cfg: HealthBenchEvalConfig, *, generator=None, judge=None) -> dict[str, Any]:
    """Evaluate ``cfg.model`` on HealthBench, resuming from whatever ``cfg.out`` holds.

    Args:
        cfg: the evaluation settings.
        generator: an object with ``generate(requests, on_done, desc)`` (and ``backend``) to use
            instead of building one from ``cfg`` (tests pass fakes here).
        judge: a :class:`reward.judge.Judge` to use instead of building one from ``cfg``.

    Returns:
        The metrics also written to ``cfg.out / "metrics.json"``.

    Raises:
        InputError: bad data, a data file whose published hash does not match, or an output
            folder holding a run with other settings.
    """
    t0 = time.time()
    out = Path(cfg.out)
    if out.exists() and not out.is_dir():
        raise InputError("--out must be a folder; this is a file", file=str(out))
    data = resolve_healthbench(cfg.data)
    all_rows = load_healthbench(data.path)
    rows = all_rows[:cfg.limit] if cfg.limit else all_rows
    _check_rows(rows, str(data.path))
    settings = run_settings(cfg, data, judge, generator)
    if cfg.baseline:  # before any work: a baseline of another grader is refused, both named
        from training.eval.judge_record import check_baseline_grader

        check_baseline_grader(cfg.baseline, settings)
    out.mkdir(parents=True, exist_ok=True)  # only once the input is known to be good
    check_settings(out / "config.json", settings)
    record = RunRecord(argv=sys.argv[1:], graded_items=0)
    run = EvalRun(cfg, data, all_rows, rows, settings, out, CrashHook(), record,
                  generator=generator, judge=judge)
    try:
        metrics = _run_steps(run)
    except BaseException as exc:
        # the crashed run is on record too, with what it did (judge requests included)
        run.record.finished, run.record.wall_s = now(), round(time.time() - t0, 2)
        run.record.error = f"{type(exc).__name__}: {exc}"
        JsonlLog(out / "runs.jsonl").append(run.record.to_json())
        raise
    run.record.finished, run.record.wall_s = now(), round(time.time() - t0, 2)
    run.record.n_scored, run.record.n_unscored = metrics["n_scored"], metrics["n_unscored"]
    JsonlLog(out / "runs.jsonl").append(run.record.to_json())
    if cfg.wandb:
        from training.eval.tracking import log_to_wandb

        log_to_wandb(metrics, out)
    return metrics


def _set_aside_tail(path: Path, start: int) -> None:
    """Move what this pass appended to the verdicts file (from byte ``start``) out of the resume's
    way, into ``verdicts.rejected-<time>.jsonl``: graded since this pass began, some by a judge that
    proved to be another. What earlier passes and runs wrote (confirmed at their end) stays."""
    if not path.exists() or path.stat().st_size <= start:
        return
    aside = path.with_name(f"{path.stem}.rejected-{time.strftime('%Y%m%d-%H%M%S')}{path.suffix}")
    with path.open("rb+") as fh:
        fh.seek(start)
        aside.write_bytes(fh.read())
        fh.truncate(start)
    log.warning("the judge proved to be another: this pass's verdicts moved from %s to %s; a rerun grades them again",
                path, aside)


def _grading_todo(run: EvalRun, gens: dict[str, Generation], verdicts: dict[tuple[str, int], bool]) -> list[GradeTask]:
    todo = []
    for row in run.rows:
        if row.prompt_id in gens:
            idx = [i for i in range(len(row.rubrics)) if (row.prompt_id, i) not in verdicts]
            if idx:
                todo.append((row, gens[row.prompt_id].response, idx))
    return todo


def _run_steps(run: EvalRun) -> dict[str, Any]:
    n_items = run.n_items
    gens = read_generations(run.out / "generations.jsonl", "prompt_id", set(n_items))
    run.record.generations_found = len(gens)
    missing = [row for row in run.rows if row.prompt_id not in gens]
    if missing:
        gens.update(_generate(run, missing))

    verdicts = read_verdicts(run.out / "verdicts.jsonl", n_items, exact=False)
    run.record.verdicts_found = len(verdicts)
    judge_obj, own = run.judge, run.judge is None
    # a second pass retries what failed in the first (a server restart, a busy replica);
    # what still fails stays unscored and the next run tries it again
    for _ in range(run.cfg.judge_passes):
        todo = _grading_todo(run, gens, verdicts)
        if not todo:
            break
        if judge_obj is None:
            judge_obj = _make_judge(run.cfg)

        async def grade_pass(j=judge_obj, todo=todo) -> None:
            path = run.out / "verdicts.jsonl"
            start = path.stat().st_size if path.exists() else 0  # what earlier (confirmed) passes and runs wrote
            try:
                await _grade(j, todo, run)
                await j.confirm_identity()  # who graded this pass's last stretch (reward.judge.watch)
            except JudgeStopped as exc:
                if exc.exit_code == 6:  # another judge graded some of them: a resume must not read them back
                    _set_aside_tail(path, start)
                raise
            finally:
                run.record.judge_stats = j.stats.as_dict()
                if own:
                    await j.aclose()  # the HTTP client belongs to this pass's event loop

        asyncio.run(grade_pass())
        verdicts = read_verdicts(run.out / "verdicts.jsonl", n_items, exact=False)

    metrics, results = _score(run, gens, verdicts)
    _write_outputs(run.cfg, run.out, metrics, results)
    return metrics


def _write_outputs(cfg: HealthBenchEvalConfig, out: Path, metrics: dict[str, Any],
                   results: list[ExampleResult]) -> None:
    from training.eval.report import write_healthbench_report

    (out / "metrics.json").write_text(json.dumps(metrics, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    with (out / "example_scores.jsonl").open("w", encoding="utf-8") as fh:
        for r in results:
            fh.write(json.dumps({"id": r.row.prompt_id, "score": r.score, "score_length_adjusted": r.score_adjusted,
                                 "response_chars": len(r.response), "example_tags": r.row.example_tags}) + "\n")
    write_healthbench_report(out, metrics, results, worst=cfg.worst)
