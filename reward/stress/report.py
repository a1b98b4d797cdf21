"""The stress-test report: markdown, HTML and a PNG heatmap of the scenario x perturbation cells.

Data flow: summary (``metrics.summarise``), per-case results and, in oracle mode, the table of
every scoring variant -> ``report.md``, ``report.html``, ``heatmap.png`` and ``cases.jsonl`` in
the report folder. The heatmap colours each cell by its mean penalty (a diverging scale around 0)
and prints the mean penalty, detection rate and n; with the baseline it has a second panel for
the holistic judge. The HTML embeds the heatmap, so it is one self-contained file.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from reward.stress.cases import PERTURBATIONS, SCENARIOS


def _f(x: float | None, nd: int = 3) -> str:
    return "—" if x is None else f"{x:.{nd}f}"


def _penalty_scale(panels: Sequence[tuple[str, dict[str, Any]]]) -> float:
    """The colour range of the mean penalty, symmetric around 0 and shared by the panels, so a
    cell's colour says how far the score dropped (not whether it dropped at all, which is
    detection 1.00 almost everywhere on a good reward)."""
    vals = [abs(c["mean_penalty"]) for _, b in panels for c in (b.get("by_cell") or {}).values()
            if c.get("n") and c.get("mean_penalty") is not None]
    return max([0.05, *vals])


def heatmap(summary: dict[str, Any], path: Path) -> None:
    """Mean penalty per cell (rows: scenarios, columns: perturbations), ours and the baseline;
    each cell also prints its detection rate and n."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    panels = [("RubricsTree (" + summary["scoring_variant"] + ")", summary)]
    if summary.get("baseline"):
        panels.append(("Holistic principle baseline", summary["baseline"]))
    fig, axes = plt.subplots(1, len(panels), figsize=(6.2 * len(panels), 4.6), squeeze=False)
    top = _penalty_scale(panels)
    for ax, (title, block) in zip(axes[0], panels):
        grid = np.full((len(SCENARIOS), len(PERTURBATIONS)), np.nan)
        for i, s in enumerate(SCENARIOS):
            for j, p in enumerate(PERTURBATIONS):
                cell = block.get("by_cell", {}).get(f"{s}|{p}")
                if cell and cell["n"]:
                    grid[i, j] = cell["mean_penalty"]
                    ax.text(j, i, f"MP {cell['mean_penalty']:+.2f}\nDR {cell['detection_rate']:.2f}\nn={cell['n']}",
                            ha="center", va="center", fontsize=8,
                            color="white" if abs(cell["mean_penalty"]) > 0.6 * top else "black")
        im = ax.imshow(grid, vmin=-top, vmax=top, cmap="RdBu")
        ax.set_xticks(range(len(PERTURBATIONS)), [p.replace("_", "\n") for p in PERTURBATIONS], fontsize=8)
        first = ax is axes[0][0]  # scenario names once, on the left: the panels share rows
        ax.set_yticks(range(len(SCENARIOS)), [s.replace("_", " ") for s in SCENARIOS] if first else [], fontsize=8)
        ax.set_title(title, fontsize=10)
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8,
                 label="mean penalty (clean - perturbed score; blue: the reward dropped)")
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def _metric_rows(block: dict[str, Any], key: str, names: Sequence[str]) -> list[list[str]]:
    rows = []
    for n in names:
        b = block[key].get(n)
        if b:
            rows.append([n, _f(b["detection_rate"]), _f(b["mean_penalty"]), str(b["n"])])
    return rows


Table = tuple[str, list[str], list[list[str]]]


def _tables(summary: dict[str, Any], variants: dict[str, dict[str, dict[str, Any]]] | None) -> list[Table]:
    """(title, header, rows) of every table in the report."""
    out = []
    head = ["", "detection rate", "mean penalty", "n"]
    for label, block in (("ours", summary), ("baseline", summary.get("baseline"))):
        if not block:
            continue
        rows = [["overall", _f(block["detection_rate"]), _f(block["mean_penalty"]),
                 str(summary["cases"] - block["unscored"])]]
        rows += _metric_rows(block, "by_perturbation", PERTURBATIONS)
        rows += _metric_rows(block, "by_scenario", SCENARIOS)
        name = f"RubricsTree, {summary['scoring_variant']}" if label == "ours" else "Holistic baseline"
        out.append((f"{name} (unscored: {block['unscored']})", head, rows))
    from reward.stress.metrics import NOISE_KEYS

    for key in NOISE_KEYS:
        nz = summary.get(key)
        if not nz:
            continue
        confirmed = nz.get("confirm_failures")
        rows = [[name, f"{b['clean_mean']:.3f} ± {b['clean_sd']:.3f}", _f(b["detection_rate"]),
                 _f(b["mean_penalty"]), str(b["n"])] + ([_f(b["extra_items_per_reply"], 2)] if confirmed else [])
                for name, b in [("overall", nz), *nz["by_perturbation"].items()]]
        if not confirmed:
            how = "no failure confirmation"
        elif nz.get("reread_correlation") or nz.get("systematic_leaves"):
            how = "with failure confirmation, re-readings correlated as the model says"
        else:
            how = "with failure confirmation: each extra reading an independent draw, the optimistic case"
        out.append((f"Under judge noise {nz['judge_noise']} ({nz.get('errors', 'independent')}; applicability noise "
                    f"{nz['applicability_noise']}, seed {nz['seed']}, {nz['repeats']} draws per case; {how})",
                    ["", "clean mean ± sd", "detection rate", "mean penalty", "draws"]
                    + (["extra judge items per reply"] if confirmed else []), rows))
    for name, tol in (summary.get("noise_tolerance") or {}).items():
        rows = [[f"{p['error_rate']:g}", _f(p["detection_rate"]), _f(p["clean_mean"])] for p in tol["curve"]]
        best = "none" if tol["tolerance"] is None else f"{tol['tolerance']:g}"
        out.append((f"Noise tolerance, {name} model: the largest error rate with detection >= {tol['target']:g} is "
                    f"{best} (re-read correlation {tol['reread_correlation']:g}, systematic share "
                    f"{tol['systematic_fraction']:g}, {tol['systematic_leaves']} measured systematic leaves)",
                    ["error rate", "detection rate", "clean mean"], rows))
    for setting, table in (variants or {}).items():
        header = ["variant", "overall DR / MP"] + [p for p in PERTURBATIONS]
        rows = []
        for v, s in table.items():
            bp = s["by_perturbation"]
            cells = [f"{_f(bp[p]['detection_rate'], 2)} / {_f(bp[p]['mean_penalty'], 2)}" if p in bp else "—"
                     for p in PERTURBATIONS]
            rows.append([v, f"{_f(s['detection_rate'], 2)} / {_f(s['mean_penalty'], 2)}"] + cells)
        out.append((f"Oracle, every scoring variant: {setting} (detection rate / mean penalty)", header, rows))
    return out


def write_report(out_dir: str | Path, summary: dict[str, Any], results: Sequence[Any], meta: dict[str, Any],
                 variants: dict[str, dict[str, dict[str, Any]]] | None = None) -> dict[str, Path]:
    """Write the report files; returns their paths by kind."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"md": out / "report.md", "html": out / "report.html", "png": out / "heatmap.png",
             "cases": out / "cases.jsonl"}
    heatmap(summary, paths["png"])
    with paths["cases"].open("w", encoding="utf-8") as fh:
        for r in results:
            fh.write(json.dumps({**r.model_dump(), "delta": r.delta, "baseline_delta": r.baseline_delta}) + "\n")
    tables = _tables(summary, variants)
    missed = [r for r in results if r.missed_labels]
    recall = sum(r.label_recall for r in results) / len(results) if results else 0.0
    weak = [r for r in results if r.delta is not None and r.delta <= meta.get("margin", 0.02)]

    md = ["# Oracle stress test", "", "## Settings", ""] + [f"- **{k}**: {v}" for k, v in meta.items()]
    recall_line = (f"Routing recall of the labelled failed leaves: {recall:.3f} (mean over cases); "
                   f"{len(missed)} of {len(results)} cases have a labelled leaf the router did not activate.")
    headline = (f"Detection rate {_f(summary.get('detection_rate'))}, mean penalty {_f(summary.get('mean_penalty'))} "
                f"over {summary.get('cases')} cases ({summary.get('scoring_variant')} scoring)")
    md[1:1] = ["", f"**{headline}**"]
    md += ["", recall_line, "", "![mean penalty per cell](heatmap.png)", ""]
    for title, header, rows in tables:
        md += [f"## {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        md += ["| " + " | ".join(r) + " |" for r in rows] + [""]
    md += ["## Cases not detected (drop at or below the margin)", ""]
    md += [f"- `{r.id}`: clean {_f(r.clean)}, perturbed {_f(r.perturbed)}; labelled leaves not routed: "
           f"{', '.join(r.missed_labels) or 'none'}" for r in weak] or ["- none"]
    paths["md"].write_text("\n".join(md) + "\n", encoding="utf-8")

    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto}table{border-collapse:collapse;"
             "margin-bottom:1.5em}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}"
             "td:first-child,th:first-child{text-align:left}.headline{font-size:1.5em;font-weight:600;margin:.4em 0}")
    import base64

    png = base64.b64encode(paths["png"].read_bytes()).decode()
    h = ["<!doctype html><html><head><meta charset='utf-8'><title>Oracle stress test</title>",
         f"<style>{style}</style></head><body><h1>Oracle stress test</h1>",
         f"<div class=headline id=headline>{html.escape(headline)}</div><h2>Settings</h2><ul id=settings>"]
    h += [f"<li><b>{html.escape(str(k))}</b>: {html.escape(str(v))}</li>" for k, v in meta.items()]
    h += [f"</ul><p>{html.escape(recall_line)}</p>",
          f"<img src='data:image/png;base64,{png}' alt='mean penalty per cell' style='max-width:100%'>"]
    for title, header, rows in tables:
        h += [f"<h2>{html.escape(title)}</h2><table><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in header)
              + "</tr>"]
        h += ["<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows]
        h += ["</table>"]
    h += ["<h2>Cases not detected</h2><ul>"]
    h += [f"<li><code>{html.escape(r.id)}</code>: clean {_f(r.clean)}, perturbed {_f(r.perturbed)}; labelled leaves "
          f"not routed: {html.escape(', '.join(r.missed_labels) or 'none')}</li>" for r in weak] or ["<li>none</li>"]
    h += ["</ul></body></html>"]
    paths["html"].write_text("\n".join(h), encoding="utf-8")
    return paths
