"""Multiple-choice evaluation of a checkpoint (MedQA, MedBullets, MedXpertQA), resumable.

generate (appended to ``generations.jsonl`` as each exists; a rerun generates only what is
missing) -> extract the chosen letter with ``reward.stages.mcq``'s rule extraction -> accuracy, format
failures (no readable answer: counted as wrong, and counted) and a per-category breakdown where
the data carries categories. A generation that failed is unscored: excluded and counted, and
retried by the next run.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from reward.healthbench.variants import sha256_file
from reward.jsonl import JsonlLog
from reward.stages.mcq import grade_mcq
from training.eval.mcq_formats import PROMPT_VERSION, EvalMCQ, load_mcq_eval, mcq_prompt
from training.eval.records import RunRecord, now, read_generations
from training.eval.steps import generate_step
from training.eval.store import CrashHook, check_settings, model_identity
from training.generation import GenerationSettings, GenRequest, make_generator
from training.system_prompt import apply_system_prompt, system_prompt_id


class MCQEvalConfig(BaseModel):
    """Everything ``rubricstree eval mcq`` takes (see its ``--help``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    data: Path
    out: Path
    format: str | None = None
    generate_url: str | None = None
    system_prompt: str = "none"
    limit: int | None = Field(None, ge=1)
    generation: GenerationSettings = GenerationSettings(max_new_tokens=1024)
    concurrency: int = Field(32, ge=1)
    batch_size: int = Field(8, ge=1)
    wandb: bool = False


def _accuracy(rewards: list[float], failures: int) -> dict[str, Any]:
    n = len(rewards)
    acc = sum(rewards) / n if n else None
    return {"accuracy": acc, "n": n, "correct": int(sum(rewards)), "format_failures": failures,
            "std_error": math.sqrt(acc * (1 - acc) / n) if n else None}


def run_mcq(cfg: MCQEvalConfig, *, generator=None) -> dict[str, Any]:
    """Evaluate ``cfg.model`` on a multiple-choice file, resuming from ``cfg.out``.

    Args:
        cfg: the evaluation settings.
        generator: an object with ``generate(requests, on_done, desc)`` to use instead of
            building one from ``cfg``.

    Returns:
        The metrics also written to ``cfg.out / "metrics.json"``.
    """
    t0 = time.time()
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    all_rows = load_mcq_eval(cfg.data, cfg.format)
    rows = all_rows[:cfg.limit] if cfg.limit else all_rows
    fmt = rows[0].format
    backend = getattr(generator, "backend", None) or ("http" if cfg.generate_url else "inprocess")
    settings = {"benchmark": "mcq", "model": model_identity(cfg.model), "generate_backend": backend,
                "data_sha256": sha256_file(cfg.data), "format": fmt, "prompt": PROMPT_VERSION,
                "system_prompt": system_prompt_id(cfg.system_prompt), "generation": cfg.generation.model_dump()}
    check_settings(out / "config.json", settings)
    wanted = {r.id for r in rows}
    gens = {k: g.response for k, g in read_generations(out / "generations.jsonl", "id", wanted).items()}
    run = RunRecord(argv=sys.argv[1:], generations_found=len(gens))
    errors: dict[str, str] = {}
    missing = [r for r in rows if r.id not in gens]
    if missing:
        requests = [GenRequest(r.id, apply_system_prompt([{"role": "user", "content": mcq_prompt(r)}],
                                                         cfg.system_prompt)) for r in missing]
        result = generate_step(requests, out, key_field="id", crash=CrashHook(), generator=generator,
                               make_generator=lambda: make_generator(cfg.model, cfg.generation,
                                                                     generate_url=cfg.generate_url,
                                                                     concurrency=cfg.concurrency,
                                                                     batch_size=cfg.batch_size))
        gens.update({k: g.response for k, g in result.new.items()})
        run.generated, errors = len(result.new), result.errors

    metrics = _score(cfg, rows, all_rows, gens, errors, settings)
    _write(out, metrics, rows, gens)
    run.finished, run.wall_s, run.generation_failures = now(), round(time.time() - t0, 2), len(errors)
    run.n_scored, run.n_unscored = metrics["n_scored"], metrics["n_unscored"]
    JsonlLog(out / "runs.jsonl").append(run.to_json())
    if cfg.wandb:
        from training.eval.tracking import log_to_wandb

        log_to_wandb(metrics, out)
    return metrics


def _score(cfg: MCQEvalConfig, rows: list[EvalMCQ], all_rows: list[EvalMCQ], gens: dict[str, str],
           errors: dict[str, str], settings: dict[str, Any]) -> dict[str, Any]:
    rewards: list[float] = []
    failures = 0
    by_cat: dict[str, dict[str, tuple[list[float], list[bool]]]] = {}
    unscored = []
    for r in rows:
        if r.id not in gens:
            unscored.append({"id": r.id, "reason": f"no response: {errors.get(r.id, 'not generated')}"})
            continue
        g = grade_mcq(gens[r.id], r.answer, r.options)
        rewards.append(g.reward)
        failures += g.format_failure
        for field, value in r.categories.items():
            rs, fs = by_cat.setdefault(field, {}).setdefault(value, ([], []))
            rs.append(g.reward)
            fs.append(g.format_failure)
    overall = _accuracy(rewards, failures)
    return {
        "benchmark": "mcq", "model": cfg.model, "generate_backend": settings["generate_backend"],
        "data": {"file": Path(cfg.data).name, "sha256": settings["data_sha256"], "format": settings["format"],
                 "rows_in_file": len(all_rows), "limit": cfg.limit},
        "prompt": PROMPT_VERSION, "system_prompt": settings["system_prompt"], "generation": settings["generation"],
        "n_rows": len(rows), "n_scored": overall["n"], "n_unscored": len(unscored), "unscored": unscored,
        "accuracy": overall["accuracy"], "score": overall["accuracy"], "correct": overall["correct"],
        "format_failures": failures, "std_error": overall["std_error"],
        "categories": {field: {value: _accuracy(rs, sum(fs)) for value, (rs, fs) in sorted(values.items())}
                       for field, values in sorted(by_cat.items())},
    }


def _write(out: Path, metrics: dict[str, Any], rows: list[EvalMCQ], gens: dict[str, str]) -> None:
    from training.eval.report import write_mcq_report

    (out / "metrics.json").write_text(json.dumps(metrics, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    with (out / "example_scores.jsonl").open("w", encoding="utf-8") as fh:
        for r in rows:
            if r.id in gens:
                g = grade_mcq(gens[r.id], r.answer, r.options)
                fh.write(json.dumps({"id": r.id, "score": g.reward, "choice": g.choice, "answer": r.answer,
                                     "format_failure": g.format_failure, "categories": r.categories}) + "\n")
    write_mcq_report(out, metrics)
