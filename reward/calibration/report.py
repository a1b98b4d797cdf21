"""The calibration report: ``calibration.json`` (the record), ``report.md`` and ``reliability.png``
(p of "met" against the labels, for soft verdicts) in the report folder."""

from __future__ import annotations

from pathlib import Path

from reward.calibration.record import CalibrationRecord, save_calibration
from reward.calibration.stats import Rate


def _r(rate: Rate | None) -> str:
    if rate is None or rate.rate is None:
        return "— (0 items)"
    return f"{rate.rate:.3f} [{rate.low:.3f}, {rate.high:.3f}] ({rate.k}/{rate.n})"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *("| " + " | ".join(r) + " |" for r in rows), ""]


def markdown(rec: CalibrationRecord, gate_line: str | None = None) -> str:
    """The report's Markdown (every rate with its 95% interval and counts)."""
    out = [f"# Judge calibration: {rec.judge_id}", "",
           f"{rec.verdict_items} verdict items and {rec.applicability_items} applicability items from {rec.cases} "
           f"(router {rec.router}); {rec.failed_items} judge calls failed and are left out. Made {rec.created}.", ""]
    if gate_line:
        out += [f"**{gate_line}**", ""]
    if rec.predicted:
        p = rec.predicted
        out += ["## What this judge predicts for the reward", "",
                *_table(["", "value"], [
                    ["predicted detection rate (stress cases, failure confirmation "
                     f"{'on' if p.confirm_failures else 'off'})", f"{p.detection_rate:.3f}"],
                    ["its 95% interval (distinct cases and seeds; the gate reads the lower end)",
                     f"[{p.detection_low:.3f}, {p.detection_high:.3f}]"],
                    ["predicted clean-reply mean score", f"{p.clean_mean:.3f}"],
                    ["detection if the same error rate were independent", f"{p.independent_detection_rate:.3f}"],
                    ["draws", f"{p.cases} cases ({rec.distinct_cases} distinct) x {p.repeats} repeats x seeds "
                              f"{p.seeds}"]])]
    keys = [k for k in ("*", "critical", "major", "minor", "positive", "negative") if k in rec.false_fail
            or k in rec.false_pass]
    keys += sorted(k for k in {*rec.false_fail, *rec.false_pass} if "/" in k)
    out += ["## Verdicts (systematic leaves left out)", "",
            "False fail: a met leaf read as failed. False pass: a failed leaf read as met. 95% Wilson intervals.", "",
            *_table(["items", "false fail", "false pass"],
                    [[("all" if k == "*" else k), _r(rec.false_fail.get(k)), _r(rec.false_pass.get(k))] for k in keys]),
            f"Every item, systematic leaves included: false fail {_r(rec.false_fail_all)}, false pass "
            f"{_r(rec.false_pass_all)}; failing critical leaves read as passed {_r(rec.critical_false_pass)}.", ""]
    if rec.by_language:
        out += ["### By language", "", *_table(["language", "false fail", "false pass"], [
            [lang, _r(r["false_fail"]), _r(r["false_pass"])] for lang, r in rec.by_language.items()])]
    out += ["## Applicability", "", "Present read as absent drops a check (and any failure of it); absent read "
            "as present keeps a check the reply passes vacuously.", "",
            *_table(["leaves", "present read as absent", "absent read as present"],
                    [[k, _r(rec.app_false_absent.get(k)), _r(rec.app_false_present.get(k))]
                     for k in ("*", "critical", "other")])]
    if rec.rereads:
        rr = rec.rereads
        c = rr.correlation
        corr = "—" if c.estimate is None else f"{c.estimate:.3f} [{c.low:.3f}, {c.high:.3f}]"
        c3 = rr.third_correlation
        corr3 = "—" if c3.estimate is None else f"{c3.estimate:.3f} [{c3.low:.3f}, {c3.high:.3f}]"
        out += ["## Re-readings (the confirmation wordings)", "",
                f"{rr.sampled} items read twice more: every first-reading failure and a share of the rest.", "",
                *_table(["", "value"], [
                    ["second reading agrees with the first", _r(rr.agreement_second)],
                    ["third reading agrees with the first", _r(rr.agreement_third)],
                    ["second wrong when the first was wrong", _r(rr.second_error_after_error)],
                    ["second wrong when the first was right", _r(rr.second_error_after_right)],
                    ["re-read correlation (first, second)", corr],
                    ["re-read correlation (first, third)", corr3]])]
    out += ["## Leaves misread in most of their items", ""]
    if rec.systematic:
        out += _table(["leaf", "misread"], [[s.leaf_id, f"{s.errors}/{s.n}"] for s in rec.systematic])
    else:
        out += ["None (a leaf needs 3 items or more to be judged).", ""]
    out += coverage_section(rec)
    if rec.soft:
        out += ["## Soft verdicts", "", f"Brier score {rec.soft.brier:.4f}, expected calibration error "
                f"{rec.soft.ece:.4f} over {rec.soft.n} items (reliability.png).", ""]
    out += ["## What this cannot tell", "", "The labels are not physician-validated (docs/labels.md): the rates say "
            "how the judge agrees with them. A leaf with few items has a wide interval; a leaf with none is "
            "unmeasured.", ""]
    return "\n".join(out)


def coverage_section(rec: CalibrationRecord) -> list[str]:
    """Per leaf: how many labelled items it had (failing, passing) and how they were read; the
    leaves the judge never failed or never passed; the leaves with no item at all."""
    if not rec.coverage and not rec.unmeasured:
        return []
    one_sided = rec.one_sided()
    rows = [[lid, str(c.fail_items), f"{c.read_fail_on_fail}/{c.fail_items}", str(c.pass_items),
             f"{c.read_fail_on_pass}/{c.pass_items}", one_sided.get(lid, "")] for lid, c in rec.coverage.items()]
    out = ["## Coverage, per leaf", "",
           f"{len(rec.coverage)} leaves have labelled items here; {len(rec.unmeasured)} have none "
           f"({len(rec.unmeasured_critical)} critical). A leaf the judge never fails (or never passes), with items "
           f"to read, is blind on one side: {len(one_sided)} such leaves.", "",
           *_table(["leaf", "failing items", "read failed", "passing items", "read failed", "one-sided"], rows)]
    if rec.unmeasured_critical:
        out += ["Critical leaves with no item (unmeasured): " + ", ".join(rec.unmeasured_critical), ""]
    return out


def reliability_plot(rec: CalibrationRecord, path: Path) -> bool:
    """The reliability diagram of the soft verdicts; False (no file) when there are none."""
    if not rec.soft or not rec.soft.bins:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.8, 4.4))
    xs = [b["mean_p"] for b in rec.soft.bins]
    ys = [b["frequency"] for b in rec.soft.bins]
    ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="perfect calibration")
    ax.plot(xs, ys, marker="o", label="this judge")
    for b in rec.soft.bins:
        ax.annotate(str(int(b["n"])), (b["mean_p"], b["frequency"]), fontsize=7, xytext=(3, 3),
                    textcoords="offset points")
    ax.set_xlabel("p(met) the judge gave (bin mean)")
    ax.set_ylabel("share labelled met")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_title(f"Brier {rec.soft.brier:.3f}, ECE {rec.soft.ece:.3f}", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def write_report(rec: CalibrationRecord, out_dir: str | Path, gate_line: str | None = None) -> dict[str, Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": save_calibration(rec, out / "calibration.json"), "md": out / "report.md"}
    paths["md"].write_text(markdown(rec, gate_line), encoding="utf-8")
    if reliability_plot(rec, out / "reliability.png"):
        paths["png"] = out / "reliability.png"
    return paths
