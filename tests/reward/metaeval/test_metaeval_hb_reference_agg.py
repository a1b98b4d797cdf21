"""The HealthBench meta-eval figures equal the reference aggregation on synthetic data, to 1e-9.

The oracle below is written here from the reference harness's definitions (its metric keys as
strings, lists of agreement flags per key, F1 with n = precision n + recall n - TP, balanced F1
with the summed n) and the reference analysis's aggregation (per theme: subclusters found by
the ``cluster:<theme>`` prefix, each physician n-weighted over subclusters, the physician
baseline n-weighted over physicians, the grader n-weighted over subclusters, percentile among
physicians with more than 50 weighted pairs). The data are random, seeded, and shaped like the
real file: 7 themes with 2-3 subclusters, 2-4 physicians per row out of a pool of 12."""

from __future__ import annotations

import random
from collections import defaultdict

import pytest

from reward.metaeval.hb_aggregate import physician_baseline, theme_table
from reward.metaeval.hb_grader import MetaRow, summarise

THEMES = ["emergency_referrals", "communication", "hedging", "complex_responses", "health_data_tasks",
          "global_health", "context_seeking"]


def synthetic_rows(seed: int, n: int = 1400) -> tuple[list[MetaRow], list[bool]]:
    rng = random.Random(seed)
    cats = [f"cluster:{t}_{s}" for t in THEMES for s in ("alpha", "beta", "gamma")[:rng.randint(2, 3)]]
    pool = [f"phys{i:02d}" for i in range(12)]
    rows, grader = [], []
    for i in range(n):
        truth = rng.random() < 0.55
        k = rng.randint(2, 4)
        ids = rng.sample(pool, k)
        bias = {p: (int(p[-2:]) % 5) * 0.04 for p in ids}  # physicians differ in how noisy they are
        labels = [truth if rng.random() > 0.1 + bias[p] else not truth for p in ids]
        rows.append(MetaRow(prompt=[{"role": "user", "content": f"q{i}"}], completion="c", rubric="r",
                            category=rng.choice(cats), binary_labels=labels, anonymized_physician_ids=ids))
        grader.append(truth if rng.random() > 0.2 else not truth)
    return rows, grader


# ------------------------------------------------------------------ the reference's way, as an oracle
def rater_metrics(selves, others, clusters, who):
    lists = defaultdict(list)
    for s, os_, c in zip(selves, others, clusters):
        for o in os_:
            agree = s == o
            for key in (f"pairwise_{who}_precision_{'pos' if s else 'neg'}",
                        f"pairwise_{who}_recall_{'pos' if o else 'neg'}"):
                lists[key].append(agree)
                lists[f"{c}: {key}"].append(agree)
    m = {k: {"n": len(v), "value": sum(v) / len(v)} for k, v in lists.items()}
    for k in [k for k in m if "precision" in k]:
        rk = k.replace("precision", "recall")
        if rk in m:
            p, r = m[k], m[rk]
            val = 0.0 if p["value"] == 0 and r["value"] == 0 else \
                2 * p["value"] * r["value"] / (p["value"] + r["value"])
            m[k.replace("precision", "f1")] = {"n": p["n"] + r["n"] - p["value"] * p["n"], "value": val}
    for k in [k for k in m if "pos" in k]:
        nk = k.replace("pos", "neg")
        if nk in m:
            m[k.replace("pos", "balanced")] = {"n": m[k]["n"] + m[nk]["n"],
                                               "value": (m[k]["value"] + m[nk]["value"]) / 2}
    return m


def reference(rows, grader):
    model = rater_metrics(grader, [r.binary_labels for r in rows], [r.category for r in rows], "model")
    per = defaultdict(lambda: ([], [], []))
    for r in rows:
        for i, pid in enumerate(r.anonymized_physician_ids):
            per[pid][0].append(r.binary_labels[i])
            per[pid][1].append(r.binary_labels[:i] + r.binary_labels[i + 1:])
            per[pid][2].append(r.category)
    phys = defaultdict(dict)
    for pid, (s, o, c) in per.items():
        for k, v in rater_metrics(s, o, c, "physician").items():
            phys[k][pid] = v
    return model, phys


def agg(nvs):
    return {"value": sum(d["value"] * d["n"] for d in nvs) / sum(d["n"] for d in nvs), "n": sum(d["n"] for d in nvs)}


def reference_themes(rows, model, phys):
    clusters = {r.category for r in rows}
    out = {}
    for theme in sorted({c.replace("cluster:", "").split("_", 1)[0] for c in clusters}):
        subs = {c for c in clusters if c.startswith("cluster:" + theme)}
        by_phys, model_nvs = defaultdict(list), []
        for sub in subs:
            for pid, nv in phys[f"{sub}: pairwise_physician_f1_balanced"].items():
                by_phys[pid].append(nv)
            if f"{sub}: pairwise_model_f1_balanced" in model:  # (the reference would stop with a KeyError)
                model_nvs.append(model[f"{sub}: pairwise_model_f1_balanced"])
        aggs = [agg(v) for v in by_phys.values()]
        kept = [d["value"] for d in aggs if d["n"] > 50]
        if not kept:
            continue
        mv = agg(model_nvs)["value"]
        pct = (sum(v < mv for v in kept) + 0.5 * sum(v == mv for v in kept)) / len(kept) * 100
        out[theme] = {"physicians": agg(aggs)["value"], "model": mv, "n_physicians": len(kept), "percentile": pct}
    return out


# ------------------------------------------------------------------ the tests
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_themes_and_physician_baseline_equal_the_reference_aggregation(seed):
    rows, grader = synthetic_rows(seed)
    model, phys = reference(rows, grader)
    want = reference_themes(rows, model, phys)
    got = theme_table(rows, {"explain": grader})
    assert set(got) == set(want) and len(want) >= 5
    for theme, w in want.items():
        g = got[theme]
        assert g["physician_f1_weighted"] == pytest.approx(w["physicians"], abs=1e-9)
        assert g["modes"]["explain"] == pytest.approx(w["model"], abs=1e-9)
        assert g["n_physicians"] == w["n_physicians"]
        assert g["percentile"]["explain"] == pytest.approx(w["percentile"], abs=1e-9)
    # overall and per category: the physician baseline weighted by each physician's n
    overall = agg(list(phys["pairwise_physician_f1_balanced"].values()))["value"]
    assert physician_baseline(rows)["physician_f1_weighted"] == pytest.approx(overall, abs=1e-9)
    s = summarise(rows, {"explain": grader})
    assert s["categories"]["all"]["physician_f1_weighted"] == pytest.approx(overall, abs=1e-9)
    assert s["categories"]["all"]["modes"]["explain"] == pytest.approx(
        model["pairwise_model_f1_balanced"]["value"], abs=1e-9)
    some = sorted({r.category for r in rows})[0]
    per_cat = agg(list(phys[f"{some}: pairwise_physician_f1_balanced"].values()))["value"]
    assert s["categories"][some]["physician_f1_weighted"] == pytest.approx(per_cat, abs=1e-9)
    assert s["categories"][some]["modes"]["explain"] == pytest.approx(
        model[f"{some}: pairwise_model_f1_balanced"]["value"], abs=1e-9)
    # the unweighted mean stays under its own name, and differs here
    vals = [d["value"] for d in phys["pairwise_physician_f1_balanced"].values()]
    unweighted = sum(vals) / len(vals)
    assert s["categories"]["all"]["physician_f1_unweighted_mean"] == pytest.approx(unweighted, abs=1e-9)
    assert abs(unweighted - overall) > 1e-6


def test_a_theme_without_a_physician_over_50_pairs_is_left_out_as_the_reference_does():
    rows, grader = synthetic_rows(3, n=60)
    model, phys = reference(rows, grader)
    want = reference_themes(rows, model, phys)
    assert set(theme_table(rows, {"choice": grader})) == set(want)
    assert len(want) < len(THEMES)
