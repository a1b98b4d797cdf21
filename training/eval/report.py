"""Reports of an evaluation folder: ``report.md``, a self-contained ``report.html`` and PNG plots.

The plots (matplotlib, Agg backend, no display needed) are written beside the reports and
embedded into the HTML as base64, so the HTML alone can be mailed or attached to a ticket:

- ``theme_scores.png`` / ``axis_scores.png``: score per theme and per axis, bootstrap std as
  error bars, n in the labels;
- ``score_distribution.png``: histogram of per-example (unclipped) scores;
- for MCQ, ``category_accuracy.png``.

The worst examples are listed with their failed rubric items: positive items not met ("missed")
and negative items met ("triggered"), with points. Without matplotlib the reports are written
without plots and say so.
"""

from __future__ import annotations

import base64
import html
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reward._optional import is_available

log = logging.getLogger(__name__)

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1{margin-bottom:.2em} .headline{font-size:2.6em;font-weight:700;margin:.2em 0} .sub{color:#666}
table{border-collapse:collapse;margin:1em 0} th,td{border:1px solid #ddd;padding:.3em .7em;text-align:left;vertical-align:top}
th{background:#f4f4f4} td.num{text-align:right;font-variant-numeric:tabular-nums}
img{max-width:100%;border:1px solid #eee;margin:.5em 0} .ex{border:1px solid #ddd;border-radius:6px;padding:.8em 1em;margin:1em 0}
pre{white-space:pre-wrap;background:#f8f8f8;padding:.6em;border-radius:4px;max-height:22em;overflow:auto}
.miss{color:#a15c00} .trig{color:#b00020} .warn{background:#fff4e5;padding:.5em 1em;border-left:4px solid #f0a000}
.ok{background:#e9f7ef;padding:.5em 1em;border-left:4px solid #2e9e5b}
"""


def _fmt(x: float | None, digits: int = 4) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def _group(tags: dict[str, dict[str, Any]], prefix: str) -> dict[str, dict[str, Any]]:
    return {t[len(prefix):]: m for t, m in tags.items() if t.startswith(prefix)}


# ---------------------------------------------------------------------------------------------
# plots
# ---------------------------------------------------------------------------------------------


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a training node
    import matplotlib.pyplot as plt

    return plt


def bar_plot(path: Path, values: dict[str, dict[str, Any]], title: str, xlabel: str = "score") -> Path | None:
    """Horizontal bars of ``{label: {"score", "bootstrap_std", "n_samples"}}`` with error bars."""
    if not values:
        return None
    plt = _pyplot()
    labels = list(values)
    scores = [values[k]["score"] for k in labels]
    errs = [values[k].get("bootstrap_std") or 0.0 for k in labels]
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(labels) + 1.4))
    y = range(len(labels))
    ax.barh(list(y), scores, xerr=errs, color="#4c78a8", ecolor="#333", capsize=3)
    ax.set_yticks(list(y), [f"{k} (n={values[k].get('n_samples', '?')})" for k in labels])
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    for i, s in enumerate(scores):
        ax.text(min(s + 0.01, 0.93), i, f"{s:.3f}", va="center", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def histogram_plot(path: Path, values: Sequence[float], overall: float | None, title: str) -> Path | None:
    """Histogram of per-example scores with the (clipped) overall score marked."""
    if not values:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 3.6))
    lo = min(-0.1, min(values))
    ax.hist(values, bins=20, range=(lo, max(1.0, max(values))), color="#72b7b2", edgecolor="#333")
    if overall is not None:
        ax.axvline(overall, color="#e45756", linestyle="--", label=f"overall {overall:.3f}")
        ax.legend()
    ax.set_xlabel("per-example score (unclipped: negative items can push it below 0)")
    ax.set_ylabel("examples")
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _embed(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}">'


# ---------------------------------------------------------------------------------------------
# HealthBench
# ---------------------------------------------------------------------------------------------


def _failed_items(result) -> list[tuple[str, float, str]]:
    """(kind, points, criterion) of the items that cost points, largest first."""
    out = []
    for item, met in zip(result.row.rubrics, result.met):
        if item.points > 0 and not met:
            out.append(("missed", item.points, item.criterion))
        elif item.points < 0 and met:
            out.append(("triggered", item.points, item.criterion))
    return sorted(out, key=lambda t: -abs(t[1]))


def _last_user(row) -> str:
    users = [m.content for m in row.prompt if m.role == "user"]
    return users[-1] if users else row.prompt[-1].content


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n] + f" ... [{len(text) - n} more characters]"


def _settings_rows(m: dict[str, Any]) -> list[tuple[str, str]]:
    g, d = m["grading"], m["data"]
    variant = f"{d['variant']} (by {d['variant_source']})" if d.get("variant") else "unknown"
    gen = m["generation"]
    decoding = "greedy" if not gen["temperature"] else f"temperature {gen['temperature']}, top_p {gen['top_p']}"
    decoding += f", top_k {gen['top_k']}" if gen.get("top_k") and gen["temperature"] else ""
    decoding += {True: ", thinking on", False: ", thinking off"}.get(gen.get("thinking"), ", thinking: template default")
    return [
        ("model", f"{m['model']} ({m['generate_backend']})"),
        ("data", f"{d['file']}: {m['n_rows']} of {d['rows_in_file']} rows; variant {variant}; sha256 {d['sha256'][:16]}"),
        ("system prompt", f"{m['system_prompt']['mode']}"),
        ("decoding", f"{decoding}, max_new_tokens {gen['max_new_tokens']}"),
        ("grading", f"{g['mode']} mode, template {g['template']} (version {g['template_version']})"),
        ("grader sampling", ", ".join(f"{k} {v}" for k, v in (g.get("sampling") or {}).items()) or "n/a"),
        ("judge", f"{g['judge_model']} ({g['judge_backend']}"
                  + (f" at {', '.join(g['judge_endpoints'])}" if g.get("judge_endpoints") else "") + ")"
                  + (f"; identity {g['judge_identity']}" if g.get("judge_identity") else "")),
        ("scored", f"{m['n_scored']} of {m['n_rows']} examples ({m['n_unscored']} unscored)"),
    ] + ([("responses", _responses_line(m["responses"]))] if m.get("responses") else [])


def _responses_line(r: dict[str, Any]) -> str:
    reasons = ", ".join(f"{k} {v}" for k, v in (r.get("finish_reasons") or {}).items())
    line = f"mean {r['mean_chars']:.0f} characters; finish reasons: {reasons}"
    if (r.get("finish_reasons") or {}).get("length"):
        line += (f"; {r['finish_reasons']['length']} stopped at max_new_tokens, {r.get('empty', 0)} with no "
                 "answer left to grade (cut off while thinking?)")
    return line


def write_healthbench_report(out: str | Path, metrics: dict[str, Any], results: Sequence, *,
                             worst: int = 10) -> dict[str, Path]:
    """Write ``report.md``, ``report.html`` and the plots into ``out``.

    Args:
        out: the evaluation folder.
        metrics: what ``metrics.json`` holds.
        results: per-example results (``training.eval.healthbench.ExampleResult``), data order.
        worst: how many of the lowest-scoring examples to show with their failed items.

    Returns:
        The files written, by name.
    """
    out = Path(out)
    tags = metrics.get("tags") or {}
    themes, axes = _group(tags, "theme:"), _group(tags, "axis:")
    other = {t: v for t, v in tags.items() if not t.startswith(("theme:", "axis:"))}
    plots: dict[str, Path] = {}
    have_mpl = is_available("matplotlib")
    if have_mpl:
        for name, fn in (
            ("theme_scores", lambda p: bar_plot(p, themes, "HealthBench score by theme (error bars: bootstrap std)")),
            ("axis_scores", lambda p: bar_plot(p, axes, "HealthBench score by axis (error bars: bootstrap std)")),
            ("score_distribution", lambda p: histogram_plot(p, [r.score for r in results], metrics.get("score"),
                                                            "Per-example scores")),
        ):
            made = fn(out / f"{name}.png")
            if made is not None:
                plots[name] = made
    else:
        log.warning("matplotlib is not installed: the report has no plots (pip install 'rubricstree[train]')")
    ordered = sorted(results, key=lambda r: (r.score, r.row.prompt_id))[:worst]
    files = {"report.md": out / "report.md", "report.html": out / "report.html"}
    files["report.md"].write_text(_hb_markdown(metrics, themes, axes, other, plots, ordered, have_mpl), encoding="utf-8")
    files["report.html"].write_text(_hb_html(metrics, themes, axes, other, plots, ordered, have_mpl), encoding="utf-8")
    return {**files, **{f"{k}.png": v for k, v in plots.items()}}


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_table(values: dict[str, dict[str, Any]], label: str) -> list[str]:
    lines = [f"| {label} | score | bootstrap std | n |", "|---|---:|---:|---:|"]
    for k, v in values.items():
        lines.append(f"| {_md_cell(k)} | {_fmt(v['score'])} | {_fmt(v['bootstrap_std'])} | {v['n_samples']} |")
    return lines


def _headline(m: dict[str, Any]) -> str:
    from training.eval.headline import headline_text

    return headline_text(m)


def _beside(m: dict[str, Any]) -> list[str]:
    """The baseline difference and the published figures, each one line."""
    from training.eval.headline import baseline_text, published_lines

    b = baseline_text(m)
    return ([b] if b else []) + published_lines(m)


def _hb_markdown(m, themes, axes, other, plots, worst, have_mpl) -> str:
    from training.eval.comparability import markdown_lines

    L = [f"# HealthBench evaluation: {m['model']}", "", *markdown_lines(m), f"**Overall score: {_headline(m)}**", "",
         *[f"- {x}" for x in _beside(m)], *([""] if _beside(m) else []),
         "Score = mean over examples of achieved/possible points, clipped to [0, 1] after averaging "
         "(the official HealthBench scoring).", "", "| setting | value |", "|---|---|"]
    L += [f"| {k} | {_md_cell(v)} |" for k, v in _settings_rows(m)]
    if not have_mpl:
        L += ["", "_matplotlib is not installed: no plots._"]
    for title, label, values, plot in (("Themes", "theme", themes, "theme_scores"), ("Axes", "axis", axes, "axis_scores")):
        L += ["", f"## {title}", ""] + (_md_table(values, label) if values else ["(none)"])
        if plot in plots:
            L += ["", f"![{title}]({plots[plot].name})"]
    if "score_distribution" in plots:
        L += ["", "## Score distribution", "", f"![distribution]({plots['score_distribution'].name})"]
    if other:
        L += ["", "## Other tags", ""] + _md_table(other, "tag")
    if m["unscored"]:
        L += ["", f"## Unscored examples ({m['n_unscored']})", "",
              "Excluded from every score above; a rerun with the same command retries them.", ""]
        L += [f"- `{u['prompt_id']}`: {u['reason']}" for u in m["unscored"]]
    if worst:
        L += ["", f"## The {len(worst)} lowest-scoring examples", ""]
        for r in worst:
            theme = ", ".join(t for t in r.row.example_tags if t.startswith("theme:"))
            L += [f"### `{r.row.prompt_id}`: {r.score:.3f} {f'({theme})' if theme else ''}", "",
                  "**Last user message**", ""] + [f"> {ln}" for ln in _clip(_last_user(r.row), 600).splitlines()]
            L += ["", "**Response**", ""] + [f"> {ln}" for ln in (_clip(r.response, 1200) or "(empty)").splitlines()]
            failed = _failed_items(r)
            L += ["", "**Failed items**" if failed else "**No failed items**", ""]
            L += [f"- {kind} ({pts:+g}): {_md_cell(crit)}" for kind, pts, crit in failed]
            L.append("")
    return "\n".join(L) + "\n"


def _html_table(values: dict[str, dict[str, Any]], label: str) -> str:
    rows = "".join(f"<tr><td>{html.escape(k)}</td><td class=num>{_fmt(v['score'])}</td>"
                   f"<td class=num>{_fmt(v['bootstrap_std'])}</td><td class=num>{v['n_samples']}</td></tr>"
                   for k, v in values.items())
    return (f"<table><tr><th>{html.escape(label)}</th><th>score</th><th>bootstrap std</th><th>n</th></tr>"
            f"{rows}</table>")


def _comparability_html(m: dict[str, Any]) -> str:
    from training.eval.comparability import html_block

    return html_block(m)


def _hb_html(m, themes, axes, other, plots, worst, have_mpl) -> str:
    e = html.escape
    from training.eval.headline import pct

    score = pct(m.get("score"))
    parts = [f"<!doctype html><html><head><meta charset=utf-8><title>HealthBench: {e(m['model'])}</title>"
             f"<style>{_CSS}</style></head><body>",
             f"<h1>HealthBench evaluation</h1><div class=sub>{e(m['model'])}</div>",
             f"<div class=headline id=headline>{score}</div><div>{e(_headline(m))}</div>",
             "".join(f"<p class=beside>{e(x)}</p>" for x in _beside(m)), _comparability_html(m),
             "<p class=sub>Mean over examples of achieved/possible points, clipped to [0, 1] after averaging "
             "(the official HealthBench scoring).</p>",
             "<h2>Settings</h2><table id=settings>"
             + "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in _settings_rows(m)) + "</table>"]
    if not have_mpl:
        parts.append("<p class=warn>matplotlib is not installed: no plots.</p>")
    for title, label, values, plot in (("Themes", "theme", themes, "theme_scores"), ("Axes", "axis", axes, "axis_scores")):
        parts.append(f"<h2>{title}</h2>")
        parts.append(_html_table(values, label) if values else "<p>(none)</p>")
        if plot in plots:
            parts.append(_embed(plots[plot]))
    if "score_distribution" in plots:
        parts.append("<h2>Score distribution</h2>" + _embed(plots["score_distribution"]))
    if other:
        parts.append("<h2>Other tags</h2>" + _html_table(other, "tag"))
    if m["unscored"]:
        parts.append(f"<h2>Unscored examples ({m['n_unscored']})</h2><p class=warn>Excluded from every score "
                     "above; a rerun with the same command retries them.</p><ul>"
                     + "".join(f"<li><code>{e(u['prompt_id'])}</code>: {e(u['reason'])}</li>" for u in m["unscored"])
                     + "</ul>")
    if worst:
        parts.append(f"<h2>The {len(worst)} lowest-scoring examples</h2>")
        for r in worst:
            theme = ", ".join(t for t in r.row.example_tags if t.startswith("theme:"))
            items = "".join(f"<li class={'miss' if k == 'missed' else 'trig'}>{k} ({p:+g}): {e(c)}</li>"
                            for k, p, c in _failed_items(r)) or "<li>none</li>"
            parts.append(f"<div class=ex><h3><code>{e(r.row.prompt_id)}</code>: {r.score:.3f} "
                         f"<span class=sub>{e(theme)}</span></h3>"
                         f"<b>Last user message</b><pre>{e(_clip(_last_user(r.row), 600))}</pre>"
                         f"<b>Response</b><pre>{e(_clip(r.response, 1200) or '(empty)')}</pre>"
                         f"<b>Failed items</b><ul>{items}</ul></div>")
    parts.append("</body></html>")
    return "\n".join(parts)


# ---------------------------------------------------------------------------------------------
# MCQ
# ---------------------------------------------------------------------------------------------


def _mcq_examples(out: Path) -> list[dict[str, Any]]:
    import json

    path = out / "example_scores.jsonl"
    if not path.is_file():
        return []
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _mcq_outcomes_plot(path: Path, examples: list[dict[str, Any]]) -> Path | None:
    """Left: outcomes (correct, wrong answer, no answer found); right: the letter chosen vs the
    right letter (a model that always answers "A" shows as one column)."""
    if not examples:
        return None
    plt = _pyplot()
    import numpy as np

    correct = sum(1 for e in examples if e.get("score", 0) >= 1)
    fails = sum(1 for e in examples if e.get("format_failure"))
    wrong = len(examples) - correct - fails
    letters = sorted({str(e["answer"]) for e in examples} | {str(e["choice"]) for e in examples if e.get("choice")})
    grid = np.zeros((len(letters), len(letters) + 1))
    for e in examples:
        col = letters.index(str(e["choice"])) if e.get("choice") else len(letters)
        grid[letters.index(str(e["answer"])), col] += 1
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8), gridspec_kw={"width_ratios": [1, 1.4]})
    bars = a1.bar(["correct", "wrong answer", "no answer found"], [correct, wrong, fails],
                  color=["#54a24b", "#e45756", "#9d9d9d"])
    a1.bar_label(bars)
    a1.set(ylabel="questions", title=f"Outcomes (n={len(examples)})")
    im = a2.imshow(grid, cmap="Blues")
    a2.set_xticks(range(len(letters) + 1), [*letters, "none"])
    a2.set_yticks(range(len(letters)), letters)
    a2.set(xlabel="letter chosen", ylabel="right letter", title="Chosen vs right letter")
    for i in range(grid.shape[0]):
        for j in range(grid.shape[1]):
            if grid[i, j]:
                a2.text(j, i, int(grid[i, j]), ha="center", va="center", fontsize=8,
                        color="white" if grid[i, j] > grid.max() / 2 else "black")
    fig.colorbar(im, ax=a2, shrink=0.8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _mcq_settings(m: dict[str, Any]) -> list[tuple[str, str]]:
    from training.eval.comparability import decoding_line

    d = m["data"]
    return [("model", f"{m['model']} ({m.get('generate_backend')})"),
            ("data", f"{d['file']} ({d['format']}): {m['n_rows']} of {d.get('rows_in_file')} rows; "
                     f"sha256 {str(d.get('sha256'))[:16]}"),
            ("prompt", f"{m.get('prompt')}; system prompt {m['system_prompt']['mode']}"),
            ("decoding", decoding_line(m).removeprefix("policy decoding: ")),
            ("scored", f"{m['n_scored']} of {m['n_rows']} ({m['n_unscored']} unscored, "
                       f"{m['format_failures']} with no answer found, counted wrong)")]


def write_mcq_report(out: str | Path, metrics: dict[str, Any]) -> dict[str, Path]:
    """Write ``report.md`` and ``report.html`` (and ``mcq_outcomes.png``, ``category_accuracy.png``)
    for an MCQ run: the accuracy as a percentage with its 95% interval, the settings, the
    outcomes and chosen-vs-right letters, per category, and a published figure for the same set.

    Args:
        out: the evaluation folder (its ``example_scores.jsonl`` gives the per-question plot).
        metrics: what the MCQ ``metrics.json`` holds.
    """
    from training.eval.headline import pct
    from training.eval.published import benchmark_key, figures_for, load_published

    out = Path(out)
    plots: dict[str, Path] = {}
    cats = metrics.get("categories") or {}
    if is_available("matplotlib"):
        made = _mcq_outcomes_plot(out / "mcq_outcomes.png", _mcq_examples(out))
        if made:
            plots["mcq_outcomes"] = made
        if cats:
            flat = {f"{field}={value}": {"score": v["accuracy"], "bootstrap_std": v.get("std_error"),
                                         "n_samples": v["n"]}
                    for field, values in cats.items() for value, v in values.items()}
            made = bar_plot(out / "category_accuracy.png", flat, "Accuracy by category (error bars: standard error)",
                            xlabel="accuracy")
            if made:
                plots["category_accuracy"] = made
    acc, se = metrics.get("accuracy"), metrics.get("std_error")
    ci = f" (95% CI {pct(max(0.0, acc - 1.96 * se))} to {pct(min(1.0, acc + 1.96 * se))})" if acc is not None and se else ""
    head = (f"accuracy {pct(acc)}{ci}: {metrics['correct']}/{metrics['n_scored']} correct; no answer found "
            f"{metrics['format_failures']}; unscored {metrics['n_unscored']}")
    published = [f"published (copied): {f.model}: {pct(f.score)}; setting: {f.setting}; source: {f.source}"
                 for f in figures_for(benchmark_key(metrics), load_published())]
    settings = _mcq_settings(metrics)
    md = [f"# MCQ evaluation: {metrics['model']}", "", f"**{head}**", "", *[f"- {p}" for p in published], "",
          "| setting | value |", "|---|---|", *[f"| {k} | {_md_cell(v)} |" for k, v in settings], ""]
    e = html.escape
    body = ["".join(f"<p class=beside>{e(p)}</p>" for p in published),
            "<h2>Settings</h2><table id=settings>" + "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>"
                                                             for k, v in settings) + "</table>"]
    if "mcq_outcomes" in plots:
        md += ["## Outcomes", "", f"![outcomes]({plots['mcq_outcomes'].name})", ""]
        body.append("<h2>Outcomes</h2>" + _embed(plots["mcq_outcomes"]))
    for field, values in cats.items():
        md += [f"## By {field}", "", "| value | accuracy | n | no answer found |", "|---|---:|---:|---:|"]
        md += [f"| {_md_cell(k)} | {_fmt(v['accuracy'])} | {v['n']} | {v['format_failures']} |" for k, v in values.items()]
        md.append("")
        rows = "".join(f"<tr><td>{e(k)}</td><td class=num>{_fmt(v['accuracy'])}</td>"
                       f"<td class=num>{v['n']}</td><td class=num>{v['format_failures']}</td></tr>" for k, v in values.items())
        body.append(f"<h2>By {e(field)}</h2><table><tr><th>value</th><th>accuracy</th><th>n</th>"
                    f"<th>no answer found</th></tr>{rows}</table>")
    if "category_accuracy" in plots:
        md.append(f"![categories]({plots['category_accuracy'].name})")
        body.append(_embed(plots["category_accuracy"]))
    (out / "report.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    (out / "report.html").write_text(
        f"<!doctype html><html><head><meta charset=utf-8><title>MCQ: {e(metrics['model'])}</title>"
        f"<style>{_CSS}</style></head><body><h1>MCQ evaluation</h1><div class=sub>{e(metrics['model'])}</div>"
        f"<div class=headline id=headline>{pct(acc)}</div><div>{e(head)}</div>{''.join(body)}</body></html>\n",
        encoding="utf-8")
    return {"report.md": out / "report.md", "report.html": out / "report.html",
            **{f"{k}.png": v for k, v in plots.items()}}
