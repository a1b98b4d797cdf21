"""HealthBench grader meta-eval figures, aggregated the way the reference analysis aggregates them.

Each rater (the grader, or one physician) is scored *pairwise*: every (its label, another
physician's label) pair on a row is one observation. From those pairs, per class ("met" = pos,
"not met" = neg):

- precision: share of agreeing pairs among the pairs where the rater said the class, n = those pairs;
- recall: share of agreeing pairs among the pairs where the other physician said it, n = those pairs;
- F1 from the two, with n = TP + FP + FN (precision n + recall n - TP); 0 when both are 0;
  undefined when the rater never said the class or no other physician did;
- balanced F1 = the mean of the two class F1s, with n = the sum of their n (this counts pairs
  twice; the reference does the same, and the n is only ever used as a weight).

Physician baseline: each physician scored against the OTHER physicians on the rows they
labelled; the baseline is the n-weighted mean over physicians (``physician_f1_weighted``). The
plain mean over physicians, which weighs a physician with 3 pairs like one with 3,000, is kept
only under its own name (``physician_f1_unweighted_mean``).

Themes: categories are ``cluster:<theme>_<subcluster>``; the 7 themes group their subclusters. Per
theme, a physician's balanced F1 is the n-weighted mean over its subclusters, the physician
baseline the n-weighted mean over physicians, the grader's F1 the n-weighted mean over the
subclusters, and the grader's percentile is taken among the physicians with more than 50
weighted pairs in the theme (a theme with none is not reported, as the reference leaves it out).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

NV = tuple[float, float]  # (n, value)
MIN_PAIRS = 50  # a physician counts toward a theme's percentile with more weighted pairs than this
THEMES = {
    "emergency": "Emergency referrals", "communication": "Expertise-tailored communication",
    "hedging": "Responding under uncertainty", "complex": "Response depth", "health": "Health data tasks",
    "global": "Global health", "context": "Context seeking",
}


def _share(xs: list[bool]) -> NV | None:
    return (len(xs), sum(xs) / len(xs)) if xs else None


def _f1(prec: NV | None, rec: NV | None) -> NV | None:
    if prec is None or rec is None:
        return None
    (pn, p), (rn, r) = prec, rec
    value = 0.0 if p == 0 and r == 0 else 2 * p * r / (p + r)
    return (pn + rn - p * pn, value)


def pairwise_scores(selves: Sequence[bool], others: Sequence[Sequence[bool]]) -> dict[str, NV | None]:
    """``{"f1_pos", "f1_neg", "f1_balanced"}`` as ``(n, value)`` (None when undefined) of a rater."""
    prec: dict[bool, list[bool]] = {True: [], False: []}
    rec: dict[bool, list[bool]] = {True: [], False: []}
    for s, os_ in zip(selves, others, strict=True):
        for o in os_:
            prec[bool(s)].append(bool(s) == bool(o))
            rec[bool(o)].append(bool(s) == bool(o))
    pos, neg = _f1(_share(prec[True]), _share(rec[True])), _f1(_share(prec[False]), _share(rec[False]))
    bal = None if pos is None or neg is None else (pos[0] + neg[0], (pos[1] + neg[1]) / 2)
    return {"f1_pos": pos, "f1_neg": neg, "f1_balanced": bal}


def weighted(parts: Sequence[NV]) -> NV | None:
    """The n-weighted mean of ``(n, value)`` parts, with the summed n."""
    n = sum(p[0] for p in parts)
    return (n, sum(p[0] * p[1] for p in parts) / n) if parts and n else None


def physician_scores(rows: Sequence, scope=None) -> dict[str, NV]:
    """Each physician's balanced F1 ``(n, value)`` against the other physicians, over the rows
    ``scope(row)`` admits (all by default); physicians whose F1 is undefined are left out."""
    per: dict[str, tuple[list[bool], list[list[bool]]]] = defaultdict(lambda: ([], []))
    for row in rows:
        if scope is not None and not scope(row):
            continue
        for i, pid in enumerate(row.anonymized_physician_ids):
            per[pid][0].append(row.binary_labels[i])
            per[pid][1].append(row.binary_labels[:i] + row.binary_labels[i + 1:])
    out = {}
    for pid, (s, o) in per.items():
        bal = pairwise_scores(s, o)["f1_balanced"]
        if bal is not None:
            out[pid] = bal
    return out


def physician_baseline(rows: Sequence, scope=None) -> dict[str, Any]:
    """The n-weighted physician baseline and, under its own name, the unweighted mean."""
    scores = physician_scores(rows, scope)
    w = weighted(list(scores.values()))
    vals = [v for _, v in scores.values()]
    return {"physician_f1_weighted": w[1] if w else None,
            "physician_f1_unweighted_mean": sum(vals) / len(vals) if vals else None,
            "n_physicians": len(scores)}


def theme_of(category: str) -> str:
    return category.replace("cluster:", "").split("_", 1)[0]


def theme_table(rows: Sequence, verdicts: dict[str, Sequence[bool | None]]) -> dict[str, dict[str, Any]]:
    """Per theme (see the module docstring): the physician baseline, each grader mode's F1 and its
    percentile among the physicians with more than ``MIN_PAIRS`` weighted pairs."""
    cats = sorted({r.category for r in rows if r.category.startswith("cluster:")})
    out: dict[str, dict[str, Any]] = {}
    for theme in sorted({theme_of(c) for c in cats}):
        subs = [c for c in cats if c.startswith("cluster:" + theme)]
        per_phys: dict[str, list[NV]] = defaultdict(list)
        grader: dict[str, list[NV]] = defaultdict(list)
        for sub in subs:
            for pid, nv in physician_scores(rows, lambda r, sub=sub: r.category == sub).items():
                per_phys[pid].append(nv)
            idx = [i for i, r in enumerate(rows) if r.category == sub]
            for mode, v in verdicts.items():
                graded = [i for i in idx if v[i] is not None]
                bal = pairwise_scores([v[i] for i in graded], [rows[i].binary_labels for i in graded])["f1_balanced"]
                if bal is not None:
                    grader[mode].append(bal)
        phys = [w for w in (weighted(p) for p in per_phys.values()) if w is not None]
        counted = [v for n, v in phys if n > MIN_PAIRS]
        if not counted:
            continue
        base = weighted(phys)
        entry: dict[str, Any] = {"name": THEMES.get(theme, theme), "subclusters": subs,
                                 "physician_f1_weighted": base[1] if base else None,
                                 "n_physicians": len(counted), "modes": {}, "percentile": {}}
        for mode in verdicts:
            g = weighted(grader.get(mode, []))
            entry["modes"][mode] = g[1] if g else None
            if g:
                below = sum(v < g[1] for v in counted) + 0.5 * sum(v == g[1] for v in counted)
                entry["percentile"][mode] = below / len(counted) * 100
        out[theme] = entry
    return out
