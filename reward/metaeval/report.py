"""Reports of a meta-evaluation folder: ``report.md``, a self-contained ``report.html`` (plots
embedded as base64) and PNG plots beside them.

Plots: ``agreement_scatter.png`` (each method's score vs the experts'), ``scenario_icc3.png``
(ICC3 per scenario and method, bootstrap intervals as error bars), ``stability_icc3.png`` and
``stability_flips.png`` (curves over temperature, one per backbone and method) and
``healthbench_f1.png`` (macro F1 per category and mode against the physician ceiling).
matplotlib is imported lazily; without it the reports are written without plots and say so.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

from reward._optional import is_available


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _f(x: Any, d: int = 3) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float):
        return f"{x:.{d}f}"
    if isinstance(x, (list, tuple)) and len(x) == 2:
        return f"[{_f(x[0], d)}, {_f(x[1], d)}]"
    return str(x)


def _write(out: Path, title: str, note: str, sections: list[tuple[str, list[str], list[list[Any]]]],
           plots: list[Path], headline: str = "") -> dict[str, Path]:
    """Render the headline, sections ``(heading, header, rows)`` as markdown and HTML, plus the plots."""
    md = [f"# {title}", "", *([f"**{headline}**", ""] if headline else []), f"> {note}", ""]
    body = [f"<h1>{html.escape(title)}</h1>",
            f"<div class=headline id=headline>{html.escape(headline)}</div>" if headline else "",
            f"<p class='warn'>{html.escape(note)}</p>"]
    for heading, header, rows in sections:
        md += [f"## {heading}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        md += ["| " + " | ".join(_f(c) for c in r) + " |" for r in rows] + [""]
        body.append(f"<h2>{html.escape(heading)}</h2><table><tr>"
                    + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>"
                    + "".join("<tr>" + "".join(f"<td>{html.escape(_f(c))}</td>" for c in r) + "</tr>" for r in rows)
                    + "</table>")
    if not is_available("matplotlib"):
        md.append("_matplotlib is not installed: no plots._")
        body.append("<p><i>matplotlib is not installed: no plots.</i></p>")
    for p in plots:
        md += [f"![{p.stem}]({p.name})", ""]
        data = base64.b64encode(p.read_bytes()).decode()
        body.append(f"<img alt='{p.stem}' src='data:image/png;base64,{data}'>")
    css = ("body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
           "table{border-collapse:collapse}th,td{border:1px solid #ddd;padding:.3em .6em}th{background:#f4f4f4}"
           "img{max-width:100%}.warn{background:#fff4e5;padding:.5em 1em;border-left:4px solid #f0a000}"
           ".headline{font-size:1.5em;font-weight:600;margin:.4em 0}")
    (out / "report.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    (out / "report.html").write_text(f"<!doctype html><meta charset='utf-8'><title>{html.escape(title)}</title>"
                                     f"<style>{css}</style>" + "\n".join(body), encoding="utf-8")
    return {"md": out / "report.md", "html": out / "report.html", **{p.stem: p for p in plots}}


NOTE = ("Agreement numbers are only as meaningful as the judge and the labels behind them; a tiny or "
        "random-weight judge measures the wiring, not the reward.")


# ---------------------------------------------------------------------- experts
def write_experts_report(out: Path, s: dict[str, Any]) -> dict[str, Path]:
    rows = []
    for method, per in s["table"].items():
        for sc, r in per.items():
            rows.append([method, sc, r["n"], r.get("unscored"), r.get("icc3"), r.get("icc3_ci95"),
                         r.get("icc3_boot95"), (r.get("kappa") or {}).get("quadratic"),
                         (r.get("kappa_boot95") or {}).get("quadratic"), (r.get("kappa") or {}).get("unweighted"),
                         r.get("note", "")])
    header = ["method", "scenario", "n", "unscored", "ICC3", "ICC3 95% (F)", "ICC3 95% (bootstrap)",
              "kappa (quadratic)", "kappa 95% (bootstrap)", "kappa (unweighted)", "note"]
    sections = [(f"Agreement with experts ({s['bins']} bins, {s['resamples']} bootstrap resamples, seed {s['seed']})",
                 header, rows)]
    for name in ("leaf_agreement", "rubric_item_agreement"):
        a = s.get(name) or {}
        if a.get("n"):
            sections.append((name.replace("_", " "), ["n", "macro F1", "kappa", "accuracy"],
                             [[a["n"], a["macro_f1"], a["kappa"], a["accuracy"]]]))
    plots = []
    if is_available("matplotlib"):
        plots = [p for p in (_scatter(out, s), _scenario_bars(out, s)) if p]
    head = "; ".join(f"{m}: ICC3 vs experts {_f(per.get('all', {}).get('icc3'))} (n={per.get('all', {}).get('n')})"
                     for m, per in s["table"].items())
    return _write(out, "Meta-evaluation: agreement with experts", NOTE, sections, plots, head)


def _scatter(out: Path, s: dict[str, Any]) -> Path | None:
    plt = _pyplot()
    methods = [m for m, pts in s["points"].items() if pts]
    if not methods:
        return None
    fig, axes = plt.subplots(1, len(methods), figsize=(5 * len(methods), 4.5), squeeze=False)
    for ax, m in zip(axes[0], methods):
        pts = s["points"][m]
        ax.scatter([p[3] for p in pts], [p[2] for p in pts], alpha=0.7)
        ax.plot([0, 1], [0, 1], "--", color="grey", linewidth=1)
        icc = s["table"][m]["all"].get("icc3")
        ax.set(xlim=(-0.05, 1.05), ylim=(-0.05, 1.05), xlabel="expert score", ylabel=f"{m} score",
               title=f"{m}: ICC3 {_f(icc)} (n={len(pts)})")
    fig.tight_layout()
    path = out / "agreement_scatter.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _scenario_bars(out: Path, s: dict[str, Any]) -> Path | None:
    plt = _pyplot()
    scen = s["scenarios"]
    methods = list(s["table"])
    fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(scen) * len(methods)), 4))
    width = 0.8 / max(1, len(methods))
    for j, m in enumerate(methods):
        vals, lo, hi = [], [], []
        for sc in scen:
            r = s["table"][m][sc]
            v = r.get("icc3")
            b = r.get("icc3_boot95") or [None, None]
            vals.append(v if v is not None else 0.0)
            lo.append(max(0.0, v - b[0]) if v is not None and b[0] is not None else 0.0)
            hi.append(max(0.0, b[1] - v) if v is not None and b[1] is not None else 0.0)
        xs = [i + j * width for i in range(len(scen))]
        ax.bar(xs, vals, width, yerr=[lo, hi], capsize=3, label=m)
    ax.set_xticks([i + width * (len(methods) - 1) / 2 for i in range(len(scen))],
                  [f"{sc} (n={s['table'][methods[0]][sc]['n']})" for sc in scen])
    # ICC3 lives in [-1, 1]: a fixed scale keeps a value of 1e-15 (float noise around 0) from
    # filling the plot as if it were a result
    ax.set(ylabel="ICC3 vs experts", title="ICC3 per scenario (bootstrap 95%)", ylim=(-1.05, 1.05))
    ax.axhline(0, color="black", linewidth=0.6)
    ax.legend()
    fig.tight_layout()
    path = out / "scenario_icc3.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ---------------------------------------------------------------------- stability
def write_stability_report(out: Path, s: dict[str, Any]) -> dict[str, Path]:
    header = ["backbone", "method", "mode", "temperature", "repeats", "n", "ICC3 across repeats",
              "verdict flip rate", "mean score std", "routing Jaccard", "unscored", "seconds", "note"]
    rows = [[c["backbone"], c["method"], c["mode"], c["temperature"], c["repeats"], c["n"], c.get("icc3"),
             c.get("flip_rate"), c.get("mean_std"), c.get("routing_jaccard"), c.get("unscored"), c.get("seconds"),
             c.get("note", "")]
            for c in s["configs"]]
    sections = [("Stability per configuration", header, rows)]
    if s.get("pairwise"):
        sections.append(("Backbones compared (mean score over repeats)",
                         ["method", "mode", "temperature", "backbone A", "backbone B", "n", "ICC3", "routing Jaccard"],
                         [[p["method"], p["mode"], p["temperature"], p["a"], p["b"], p["n"], p.get("icc3"),
                           p.get("routing_jaccard")] for p in s["pairwise"]]))
    plots = []
    if is_available("matplotlib"):
        plots = [p for p in (_curve(out, s, "icc3", "ICC3 across repeats", "stability_icc3.png"),
                             _curve(out, s, "mean_std", "mean per-rollout score std", "stability_std.png"),
                             _curve(out, s, "flip_rate", "verdict flip rate", "stability_flips.png")) if p]
    note = NOTE + (" Choice mode grades each backbone once at temperature 0 (its first row carries that time) and"
                   " samples every repeat from the judge's p_yes; explain mode and the baseline ask the server"
                   " afresh for every repeat. Seconds count only work done in the latest run (not resumed work).")
    worst = [c for c in s["configs"] if c.get("mean_std") is not None]
    head = (f"{len(s['configs'])} configurations, {s['repeats']} repeats each; largest mean score std "
            f"{_f(max(c['mean_std'] for c in worst))}, largest verdict flip rate "
            f"{_f(max((c['flip_rate'] for c in worst if c.get('flip_rate') is not None), default=None))}"
            if worst else f"{len(s['configs'])} configurations: too few scored rollouts for a spread")
    return _write(out, "Meta-evaluation: stability across temperatures and judges", note, sections, plots, head)


def _curve(out: Path, s: dict[str, Any], key: str, label: str, name: str) -> Path | None:
    plt = _pyplot()
    series: dict[str, list[tuple[float, float]]] = {}
    for c in s["configs"]:
        if c.get(key) is not None:
            series.setdefault(f"{c['backbone']} / {c['method']} / {c['mode']}", []).append((c["temperature"], c[key]))
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for lab, pts in series.items():
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=lab)
    ax.set(xlabel="judge temperature", ylabel=label, title=f"{label} over temperature")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = out / name
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ---------------------------------------------------------------------- HealthBench grader
def write_healthbench_report(out: Path, s: dict[str, Any]) -> dict[str, Path]:
    cats = list(s["categories"])
    modes = list(s["modes"])
    meta = s.get("meta") or {}
    header = ["category", "n", *[f"{m}: pairwise balanced F1" for m in modes],
              *[f"{m}: macro F1 vs majority" for m in modes], "physicians: pairwise balanced F1 (n-weighted)",
              "physicians: unweighted mean", "physicians"]
    rows = [[c, d["n"], *[d["modes"].get(m) for m in modes], *[(d.get("majority") or {}).get(m) for m in modes],
             d.get("physician_f1_weighted"), d.get("physician_f1_unweighted_mean"), d.get("n_physicians")]
            for c, d in s["categories"].items()]
    sections = [("Run", ["setting", "value"], [[k, v] for k, v in meta.items() if k != "grader_settings"]
                 + [[f"grader {k}", v] for k, v in (meta.get("grader_settings") or {}).items()]),
                ("Grader vs physicians per category: pairwise balanced F1 (the reference meta-eval score: every "
                 "grader-physician label pair one observation) and macro F1 against the physicians' majority "
                 "(ties left out)", header, rows)]
    themes = s.get("themes") or {}
    if themes:
        sections.append(("Per theme, aggregated as the reference analysis does (n-weighted over subclusters and "
                         "physicians; percentile among physicians with more than 50 weighted pairs)",
                         ["theme", *[f"{m}: pairwise balanced F1" for m in modes],
                          *[f"{m}: percentile among physicians" for m in modes],
                          "physicians: pairwise balanced F1 (n-weighted)", "physicians counted"],
                         [[t["name"], *[t["modes"].get(m) for m in modes], *[t["percentile"].get(m) for m in modes],
                           t["physician_f1_weighted"], t["n_physicians"]] for t in themes.values()]))
    plots = []
    if is_available("matplotlib") and cats:
        plt = _pyplot()
        groups = {c: d["modes"] for c, d in s["categories"].items()}
        base = {c: d.get("physician_f1_weighted") for c, d in s["categories"].items()}
        if themes:  # the themes are what the reference plots; categories are too many to read
            groups = {t["name"]: t["modes"] for t in themes.values()}
            base = {t["name"]: t["physician_f1_weighted"] for t in themes.values()}
        names = list(groups)
        fig, ax = plt.subplots(figsize=(max(6.5, 1.3 * len(names) * (len(modes) + 1)), 4.2))
        width = 0.8 / (len(modes) + 1)
        for j, name in enumerate([*modes, "physicians (n-weighted)"]):
            vals = [(groups[c].get(name) if j < len(modes) else base[c]) or 0.0 for c in names]
            ax.bar([i + j * width for i in range(len(names))], vals, width, label=name)
        ax.set_xticks([i + width * len(modes) / 2 for i in range(len(names))], names, rotation=20, ha="right")
        ax.set(ylabel="pairwise balanced F1", ylim=(0, 1.15))
        ax.set_title("Grader vs physicians, and physicians vs each other", fontsize=10)
        ax.legend(loc="upper center", ncol=len(modes) + 1, fontsize=8, frameon=False)
        fig.tight_layout()
        path = out / "healthbench_f1.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        plots.append(path)
    a = s["categories"].get("all") or {}
    head = "; ".join(f"{m}: pairwise balanced F1 {_f(a.get('modes', {}).get(m))}" for m in modes)
    head += f" (physicians, n-weighted: {_f(a.get('physician_f1_weighted'))}; n={a.get('n')} rows)"
    return _write(out, "Meta-evaluation: HealthBench grader agreement with physicians", NOTE, sections, plots, head)
