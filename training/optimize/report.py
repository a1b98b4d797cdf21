"""Measured gains: the methods' answers graded on the rows' own rubrics by a held-out judge.

Data flow::

    HealthBench-format rows (prompt_id, prompt, rubrics)  +  one answers file per method
      (optimize best-of-n / revise output, or plain rollouts: id + completion)
      -> held-out judge grades every (method, row) on the row's rubric items
         -> "graded" record {method, id, score, met} appended as each row is graded
      -> per method: HealthBench's score (per-row points ratio, unclipped; the mean clipped to
         [0, 1]) with bootstrap std; paired bootstrap of each method's difference from the first
         over the rows both scored (training.eval.compare.paired_bootstrap, unclipped rows)
      -> report.json, report.md, report.html, report.png

Held-out judge: the optimisation's judge (``judge`` in each answers file's settings) must not be
the report's judge, or the report would measure how well the policy pleased that judge (reward
hacking passes unseen). The same weights (:func:`judge_weights`: compared by model path, so one
model behind two URLs or two backends counts as one judge) are an error unless
``allow_same_judge``; then every output says so.
"""

from __future__ import annotations

import asyncio
import html
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reward.aio import gather_or_cancel
from reward.errors import InputError
from reward.jsonl import iter_jsonl
from training.eval.compare import paired_bootstrap

__all__ = ["judge_of", "judge_weights", "load_answers", "run_report", "wall_of"]


def load_answers(path: str | Path) -> dict[str, str]:
    """``{id: answer}`` from an optimisation output ("scored" or "best" records) or plain rollouts."""
    out: dict[str, str] = {}
    for lineno, obj in iter_jsonl(path):
        kind = obj.get("kind")
        if kind not in (None, "scored", "best"):
            continue
        if "id" not in obj or not isinstance(obj.get("completion"), str):
            if kind is None:
                raise InputError("an answer record needs 'id' and a string 'completion'", file=str(path),
                                 record=f"line {lineno}", field="completion")
            continue
        out[str(obj["id"])] = obj["completion"]
    if not out:
        raise InputError("no answers (records of kind 'scored' or 'best', or rollouts)", file=str(path))
    return out


def judge_of(path: str | Path) -> str | None:
    """The judge an optimisation output was made with (its settings file), or None."""
    settings = Path(str(path) + ".settings.json")
    if not settings.is_file():
        return None
    return json.loads(settings.read_text(encoding="utf-8")).get("judge")


def judge_weights(model_id: str) -> str:
    """What a judge identity names once the backend is set aside: the served model's root path
    (``http:NAME@ROOT``) or the in-process model path (``hf:MODEL:DTYPE``), resolved; else the id.
    The same weights behind another URL or backend are the same judge."""
    # ids carry content (reward.judge.identity): http:NAME@ROOT#FP~LEN!REV+blockN, hf:PATH:DTYPE:FP+blockN
    core = re.sub(r"(\+block\d+|![^+#~]*)+$", "", model_id)
    if core.startswith("http:") and "@" in core:
        ref = core.split("@", 1)[1]
        fp = re.search(r"#([0-9a-f]{8,})", ref)
        if fp:
            return fp.group(1)
        ref = re.split(r"[#~]", ref, maxsplit=1)[0]
    elif core.startswith("hf:"):
        head, _, last = core[3:].rpartition(":")
        if re.fullmatch(r"[0-9a-f]{8,}", last):
            return last
        ref = core[3:].rsplit(":", 1)[0]
    else:
        return model_id
    if Path(ref).is_dir():  # a local folder: its content fingerprint, whatever id format named it
        from reward.judge.identity import model_fingerprint

        return model_fingerprint(ref) or str(Path(ref).resolve())
    return ref


def wall_of(path: str | Path) -> float | None:
    """Seconds the optimisation command spent on ``path`` over all its runs ("timing" records)."""
    if not Path(path).is_file():
        return None
    secs = [float(o["seconds"]) for _, o in iter_jsonl(path) if o.get("kind") == "timing"]
    return sum(secs) if secs else None


def _aggregate(values: Sequence[float], seed: int) -> dict[str, Any]:
    from reward.healthbench.scoring import aggregate

    return aggregate(values, seed=seed) if values else {"score": None, "bootstrap_std": None, "n_samples": 0}


def run_report(rows: Sequence, methods: dict[str, str], judge, out: str | Path, *, allow_same_judge: bool = False,
               n_resamples: int = 1000, seed: int = 0, wall: dict[str, float] | None = None,
               concurrency: int = 8) -> dict[str, Any]:
    """Grade (or resume grading) every method's answers (``concurrency`` rows at a time) and write
    the report files; returns the report."""
    from reward.healthbench.scoring import example_score
    from reward.jsonl import JsonlLog
    from reward.progress import bar as progress_bar
    from reward.stages.row_rubrics import grade_rubric_rows
    from training.eval.store import CrashHook

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    warnings: list[str] = []
    for name, path in methods.items():
        used = judge_of(path)
        if used is not None and judge_weights(used) == judge_weights(judge.model_id):
            msg = (f"method '{name}' was optimised with judge '{used}', the same judge grades this report: "
                   "a gain may be reward hacking, not a better answer")
            if not allow_same_judge:
                raise InputError(msg + " (give another --judge-url/--judge-model, or --allow-same-judge)",
                                 file=str(path))
            warnings.append(msg)
    rows = [r for r in rows if r.rubrics]
    answers = {name: load_answers(path) for name, path in methods.items()}
    log = JsonlLog(out / "graded.jsonl")
    graded = {(r["method"], r["id"]): r for r in log.load() if r.get("judge") == judge.model_id}
    crash = CrashHook()
    todo = [(m, r) for m in methods for r in rows if r.id in answers[m] and (m, r.id) not in graded]
    bar = progress_bar(len(todo), unit="answer", desc="held-out grading")

    async def grade() -> None:
        sem = asyncio.Semaphore(max(1, concurrency))

        async def one(m: str, r) -> None:  # one row per call: each graded row is on disk at once
            items = [i.model_dump() for i in r.rubrics]
            async with sem:
                res = (await grade_rubric_rows(judge, [(r.messages(), answers[m][r.id], items)]))[0]
            crash.guard()
            # HealthBench's per-example score (unclipped; the mean is clipped in aggregate)
            score = None if res.met is None else example_score([i["points"] for i in items], res.met)
            rec = {"method": m, "id": r.id, "judge": judge.model_id, "score": score, "met": res.met,
                   "failures": res.failures[:3]}
            log.append(rec)  # in the event loop thread: appends never interleave
            graded[(m, r.id)] = rec
            bar.update(1)
            crash.tick("graded")

        await gather_or_cancel(one(m, r) for m, r in todo)

    try:
        asyncio.run(grade())
    finally:
        bar.close()
        log.close()
    result = summarise(rows, methods, graded, n_resamples=n_resamples, seed=seed, wall=wall)
    result.update(judge=judge.model_id, warnings=warnings)
    (out / "report.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    write_markdown(result, out / "report.md")
    try:  # the plot first: the HTML embeds it
        plot(result, out / "report.png")
    except ImportError:
        pass
    write_html(result, out / "report.html")
    return result


def summarise(rows: Sequence, methods: dict[str, str], graded: dict, *, n_resamples: int, seed: int,
              wall: dict[str, float] | None = None) -> dict[str, Any]:
    """Per-method score and paired differences from the first method."""
    names = list(methods)
    scores = {m: {r.id: graded[(m, r.id)]["score"] for r in rows
                  if (m, r.id) in graded and graded[(m, r.id)]["score"] is not None} for m in names}
    out = []
    for i, m in enumerate(names):
        agg = _aggregate(list(scores[m].values()), seed)
        entry = {"method": m, "file": methods[m], "score": agg["score"], "std": agg["bootstrap_std"],
                 "n": len(scores[m]), "n_unscored": sum(1 for r in rows if (m, r.id) in graded) - len(scores[m])}
        if wall and m in wall:
            entry["wall_s"] = wall[m]
        if i:
            entry["diff"] = paired_bootstrap(scores[names[0]], scores[m], n_resamples=n_resamples, seed=seed)
        out.append(entry)
    return {"baseline": names[0], "n_rows": len(rows), "n_resamples": n_resamples, "seed": seed, "methods": out}


def _fmt(x: float | None, sign: bool = False) -> str:
    return "n/a" if x is None else (f"{x:+.4f}" if sign else f"{x:.4f}")


def _table(result: dict[str, Any]) -> list[list[str]]:
    rows = []
    for e in result["methods"]:
        d = e.get("diff")
        rows.append([e["method"], _fmt(e["score"]), _fmt(e["std"]), str(e["n"]), str(e["n_unscored"]),
                     "baseline" if d is None else _fmt(d["mean_diff"], True),
                     "" if d is None or d["ci95"] is None else f"[{d['ci95'][0]:+.4f}, {d['ci95'][1]:+.4f}]",
                     "" if d is None else str(d["n_paired"]),
                     "" if e.get("wall_s") is None else f"{e['wall_s']:.1f}"])
    return rows


HEADERS = ["method", "score", "bootstrap std", "n", "unscored", "diff vs baseline", "95% CI (paired)",
           "paired n", "wall s"]


def write_markdown(result: dict[str, Any], path: Path) -> None:
    lines = ["# Optimisation methods on held-out rubrics", "",
             (f"Rows: {result['n_rows']}; held-out judge: `{result['judge']}`; paired bootstrap with "
              f"{result['n_resamples']} resamples (seed {result['seed']})."), ""]
    lines += [f"> **warning:** {w}" for w in result.get("warnings", [])] + [""]
    lines += ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(r) + " |" for r in _table(result)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def headline(result: dict[str, Any]) -> str:
    """The best method and its difference from the baseline, with the paired interval."""
    ms = [e for e in result["methods"] if e["score"] is not None]
    if not ms:
        return "no method could be scored"
    best = max(ms, key=lambda e: e["score"])
    s = f"best: {best['method']} {100 * best['score']:.1f}% (n={best['n']})"
    d = best.get("diff")
    if d is not None and d.get("mean_diff") is not None:
        s += f", {100 * d['mean_diff']:+.1f} points vs {result['baseline']}"
        if d.get("ci95"):
            s += f" (95% paired CI {100 * d['ci95'][0]:+.1f} to {100 * d['ci95'][1]:+.1f})"
    elif best["method"] == result["baseline"]:
        s += " (the baseline itself)"
    return s


def write_html(result: dict[str, Any], path: Path) -> None:
    """A self-contained page: headline, settings, the table and the plot (embedded)."""
    from training.eval.report import _CSS, _embed

    e = html.escape
    head = "".join(f"<th>{e(h)}</th>" for h in HEADERS)
    body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in _table(result))
    warn = "".join(f"<p class=warn><b>warning:</b> {e(w)}</p>" for w in result.get("warnings", []))
    settings = [("rows", str(result["n_rows"])), ("held-out judge", result["judge"]),
                ("baseline method", result["baseline"]),
                ("paired bootstrap", f"{result['n_resamples']} resamples, seed {result['seed']}"),
                *[(f"answers: {m['method']}", m["file"]) for m in result["methods"]]]
    png = path.parent / "report.png"
    img = "<h2>Scores</h2>" + _embed(png) if png.exists() else "<p class=warn>matplotlib is not installed: no plot.</p>"
    path.write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><title>Optimisation report</title><style>{_CSS}</style>"
        f"</head><body><h1>Optimisation methods on held-out rubrics</h1>"
        f"<div class=headline id=headline style='font-size:1.6em'>{e(headline(result))}</div>{warn}"
        "<h2>Settings</h2><table id=settings>" + "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in settings)
        + f"</table><h2>Methods</h2><table><tr>{head}</tr>{body}</table>{img}</body></html>\n", encoding="utf-8")


def plot(result: dict[str, Any], path: Path) -> Path:
    """Bars: each method's score with its bootstrap std."""
    from training.eval.report import _pyplot

    plt = _pyplot()
    ms = result["methods"]
    fig, ax = plt.subplots(figsize=(7, 1 + 0.5 * len(ms)))
    ax.barh([e["method"] for e in ms], [e["score"] or 0.0 for e in ms], xerr=[e["std"] or 0.0 for e in ms],
            capsize=3)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("HealthBench score on the rows' rubrics (held-out judge)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
