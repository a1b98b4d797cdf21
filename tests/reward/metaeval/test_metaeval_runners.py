"""Meta-eval runners with an oracle fake judge (verdicts written down): the comparison table,
resume, the principle baseline, stability (temperature sampling, cache bypass, backbones) and
the agreement command's input errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from rt_fakes import FakeJudge
from typer.testing import CliRunner

from reward.judge import JudgeConfig, VerdictCache
from reward.judge.templates import RELEVANCE, URGENCY
from reward.metaeval import agreement as ag
from reward.metaeval.experts import run_experts
from reward.metaeval.formats import load_pairs_and_labels
from reward.metaeval.stability import StabilityRun, tempered
from reward.router import StaticRouter
from reward.stages.rubric_reward import RubricReward, parse_rollouts
from reward.tree import Node, RubricTree
from rubricstree import app

KEYS = {"Advises calling emergency services.": "emergency", "Acknowledges the user's worry.": "understand",
        "Suggests waiting at home.": "wait"}
# leaf weights: ems 1/4, home 1/4 (negative), empathy 1/2
W = {"ems": 0.25, "home": 0.25, "empathy": 0.5}


def _tree() -> RubricTree:
    c = list(KEYS)
    return RubricTree([
        Node(id="root", title="root", children=("safety", "comm")),
        Node(id="safety", title="Safety", children=("ems", "home")),
        Node(id="comm", title="Communication", children=("empathy",)),
        Node(id="ems", title="EMS", criterion=c[0]),
        Node(id="home", title="Home", criterion=c[2], polarity="negative"),
        Node(id="empathy", title="Empathy", criterion=c[1]),
    ], root="root", name="mini")


def oracle(p_met=1.0, p_unmet=0.0, likert=None, **kw) -> FakeJudge:
    def decide(template, item):
        if template.name in (RELEVANCE.name, URGENCY.name):
            return 1.0
        return p_met if KEYS[item.criterion] in item.response.lower() else p_unmet

    def generate(template, item):
        return {"score": likert(item.response)}

    return FakeJudge(decide, generate=generate if likert else None, **kw)


RESPONSES = {  # response -> expected tree score with the oracle (hard)
    "I understand. Call emergency services now.": 1.0,
    "I understand. Wait and see.": 0.5,
    "Call emergency services.": 0.5,
    "Just wait.": 0.0,
    "I understand your worry.": 0.75,
    "Emergency: call now, do not wait.": 0.25,
}
PROMPT = [{"role": "user", "content": "Chest pain and sweating, what now?"}]


def _write_pairs(tmp_path, expert_noise):
    pairs, labels = tmp_path / "pairs.jsonl", tmp_path / "labels.jsonl"
    with pairs.open("w") as fp, labels.open("w") as fl:
        for i, (resp, score) in enumerate(RESPONSES.items()):
            fp.write(json.dumps({"id": f"p{i}", "prompt": PROMPT, "response": resp,
                                 "scenario": "symptoms" if i % 2 else "action"}) + "\n")
            leaves = {"ems": "emergency" in resp.lower(), "empathy": "understand" in resp.lower()}
            if i == 0:
                leaves["ems"] = False  # one expert disagreement on a leaf
            fl.write(json.dumps({"id": f"p{i}", "score": min(1.0, max(0.0, score + expert_noise[i])),
                                 "leaves": leaves}) + "\n")
    return pairs, labels


def _likert(resp: str) -> int:
    return 1 + len(resp) % 10


def test_experts_table_equals_direct_computation_and_resumes(tmp_path):
    noise = [0.05, -0.1, 0.0, 0.1, -0.05, 0.2]
    pairs_f, labels_f = _write_pairs(tmp_path, noise)
    pairs, labels = load_pairs_and_labels(pairs_f, labels_f)
    tree = _tree()
    judge = oracle(likert=_likert)
    reward = RubricReward(tree, StaticRouter(tree), judge, scoring_variant="paper")
    out = tmp_path / "out"
    s = run_experts(pairs, labels, reward=reward, judge=judge, out_dir=out, baseline=True, resamples=200, chunk=4,
                    progress=False)
    ours = [RESPONSES[p.response] for p in pairs]
    base = [(_likert(p.response) - 1) / 9 for p in pairs]
    expert = [labels[p.id].score for p in pairs]
    row = s["table"]["rubricstree"]["all"]
    assert row["n"] == 6 and row["icc3"] == pytest.approx(ag.icc3(np.column_stack([ours, expert])).icc3, abs=1e-12)
    assert row["kappa"]["quadratic"] == pytest.approx(ag.kappa_binned(ours, expert).quadratic, abs=1e-12)
    assert row["icc3_boot95"][0] <= row["icc3_boot95"][1]
    brow = s["table"]["principle"]["all"]
    assert brow["icc3"] == pytest.approx(ag.icc3(np.column_stack([base, expert])).icc3, abs=1e-12)
    sym = [i for i, p in enumerate(pairs) if p.scenario == "symptoms"]
    assert s["table"]["rubricstree"]["symptoms"]["icc3"] == pytest.approx(
        ag.icc3(np.column_stack([[ours[i] for i in sym], [expert[i] for i in sym]])).icc3, abs=1e-12)
    # leaves: 12 labelled (ems, empathy per pair), one disagreement
    assert s["leaf_agreement"]["n"] == 12 and s["leaf_agreement"]["accuracy"] == pytest.approx(11 / 12)
    for f in ("report.md", "report.html", "summary.json", "agreement_scatter.png", "scenario_icc3.png"):
        assert (out / f).exists(), f
    # a kill after the first chunk (and a torn line): the rerun grades only what is missing
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 12
    (out / "results.jsonl").write_text("\n".join(lines[:4]) + "\n" + lines[4][:20])
    judge2 = oracle(likert=_likert)
    s2 = run_experts(pairs, labels, reward=RubricReward(tree, StaticRouter(tree), judge2, scoring_variant="paper"), judge=judge2,
                     out_dir=out, baseline=True, resamples=200, chunk=4, progress=False)
    graded = [c for c in judge2.calls if c[0] != "rubricstree-principle-likert-v1"]
    assert len(graded) == 2 * 3  # two pairs x three leaves
    assert sum(c[0] == "rubricstree-principle-likert-v1" for c in judge2.calls) == 6
    assert s2["table"]["rubricstree"]["all"]["icc3"] == pytest.approx(row["icc3"])
    # and the log is whole again: a third run grades nothing
    judge3 = oracle(likert=_likert)
    run_experts(pairs, labels, reward=RubricReward(tree, StaticRouter(tree), judge3, scoring_variant="paper"), judge=judge3,
                out_dir=out, baseline=True, resamples=50, chunk=4, progress=False)
    assert judge3.calls == []


def test_result_log_ends_a_torn_line_before_appending(tmp_path):
    from reward.metaeval.resultlog import append_rows, read_rows

    path = tmp_path / "log.jsonl"
    append_rows(path, [{"a": 1}])
    with path.open("a") as fh:
        fh.write('{"a": 2, "b"')  # killed mid-write
    append_rows(path, [{"a": 3}])
    assert [r["a"] for r in read_rows(path)] == [1, 3]


def test_labels_must_match_pairs(tmp_path):
    pairs_f, labels_f = _write_pairs(tmp_path, [0.0] * 6)
    lines = labels_f.read_text().splitlines()
    labels_f.write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(ValueError, match="pair 'p5' has no expert label"):
        load_pairs_and_labels(pairs_f, labels_f)
    labels_f.write_text("\n".join(lines[:-1] + ['{"id": "p5", "score": 1.5}']) + "\n")
    with pytest.raises(ValueError, match="line 6.*score"):
        load_pairs_and_labels(pairs_f, labels_f)


def test_tempered_sampling_probability():
    assert tempered(0.7, 0) == 1.0 and tempered(0.3, 0) == 0.0
    assert tempered(0.7, 1.0) == pytest.approx(0.7)
    assert tempered(0.7, 0.5) == pytest.approx(0.49 / (0.49 + 0.09))
    assert 0.5 < tempered(0.7, 10) < 0.55


def _stability(tmp_path, backbones, **kw):
    tree = _tree()
    rollouts = parse_rollouts([{"id": f"r{i}", "prompt": PROMPT, "completion": resp}
                               for i, resp in enumerate(RESPONSES)])
    return StabilityRun(rollouts, backbones, lambda j: RubricReward(tree, StaticRouter(tree), j, scoring_variant="paper"), tree,
                        out_dir=tmp_path / "stab", progress=False, **kw)


def test_stability_choice_sampling_explain_cache_bypass_and_backbones(tmp_path):
    made = []

    def backbone(p_met):
        def make(mode, temperature, use_cache):
            j = oracle(p_met=p_met, p_unmet=1 - p_met, likert=_likert, config=JudgeConfig(mode=mode),
                       cache=VerdictCache(tmp_path / "v.sqlite") if use_cache else None)
            made.append((mode, temperature, use_cache, j))
            return j
        return make

    run = _stability(tmp_path, {"a": backbone(0.8), "b": backbone(0.9)}, temperatures=[0.0, 1.0], repeats=3,
                     modes=["choice", "explain"], baseline=True, seed=1)
    s = run.run()
    cfg = {(c["backbone"], c["method"], c["mode"], c["temperature"]): c for c in s["configs"]}
    t0 = cfg[("a", "rubricstree", "choice", 0.0)]
    assert t0["flip_rate"] == 0 and t0["mean_std"] == 0 and t0["routing_jaccard"] == 1.0
    t1 = cfg[("a", "rubricstree", "choice", 1.0)]
    assert t1["flip_rate"] > 0 and t1["mean_std"] > 0  # p = 0.8 / 0.2 at T = 1 flips some verdicts
    # choice mode is graded once per backbone (cached, T=0); explain and the baseline never use the cache
    assert [(m, t, c) for m, t, c, _ in made if m == "choice"] == [("choice", 0.0, True)] * 2
    assert all(not c for m, t, c, _ in made if m == "explain")
    explain_judges = [j for m, t, c, j in made if m == "explain" and j.calls
                      and j.calls[0][0] != "rubricstree-principle-likert-v1"]
    assert len(explain_judges) == 2 * 2 * 3  # backbones x temperatures x repeats, each grading afresh
    assert {("a", "b")} == {(p["a"], p["b"]) for p in s["pairwise"]}
    assert all(p["routing_jaccard"] == 1.0 for p in s["pairwise"] if p["method"] == "rubricstree")
    for f in ("report.md", "report.html", "stability_icc3.png", "stability_flips.png"):
        assert (tmp_path / "stab" / f).exists()
    # reproducible: the same seed gives the same sampled scores; a rerun grades nothing
    n_lines = len((tmp_path / "stab" / "stability.jsonl").read_text().splitlines())
    made.clear()
    s2 = _stability(tmp_path, {"a": backbone(0.8), "b": backbone(0.9)}, temperatures=[0.0, 1.0], repeats=3,
                    modes=["choice", "explain"], baseline=True, seed=1).run()
    assert made == [] and len((tmp_path / "stab" / "stability.jsonl").read_text().splitlines()) == n_lines
    assert s2["configs"][1]["mean_std"] == s["configs"][1]["mean_std"]
    # a kill mid-run (half the lines kept, the last one torn): the rerun grades only what is
    # missing and ends with the same numbers
    path = tmp_path / "stab" / "stability.jsonl"
    lines = path.read_text().splitlines()
    kept = lines[: len(lines) // 2]
    path.write_text("\n".join(kept) + "\n" + lines[len(kept)][:30])
    made.clear()
    s3 = _stability(tmp_path, {"a": backbone(0.8), "b": backbone(0.9)}, temperatures=[0.0, 1.0], repeats=3,
                    modes=["choice", "explain"], baseline=True, seed=1).run()
    rows = [json.loads(x) for x in path.read_text().splitlines()[len(kept) + 1:]]
    assert len(rows) == n_lines - len(kept)  # every missing row once, nothing twice
    assert {(r["backbone"], r["method"], r["mode"], r["temperature"], r["repeat"], r["id"]) for r in rows} == {
        (r["backbone"], r["method"], r["mode"], r["temperature"], r["repeat"], r["id"])
        for r in map(json.loads, lines[len(kept):])}
    strip = ("seconds",)
    assert [{k: v for k, v in c.items() if k not in strip} for c in s3["configs"]] == \
        [{k: v for k, v in c.items() if k not in strip} for c in s["configs"]]


def test_stability_sampling_matches_p_yes(tmp_path):
    """At T=1 each verdict is "yes" with probability p_yes: over many rollouts x repeats the
    share of met verdicts on a p=0.8 leaf is near 0.8."""
    def make(mode, temperature, use_cache):
        return oracle(p_met=0.8, p_unmet=0.8)
    run = _stability(tmp_path, {"a": make}, temperatures=[1.0], repeats=40, modes=["choice"], baseline=False)
    run.run()
    rows = [json.loads(x) for x in (tmp_path / "stab" / "stability.jsonl").read_text().splitlines()]
    met = [v for r in rows for v in r["leaves"].values()]
    assert len(met) == 6 * 40 * 3 and abs(np.mean(met) - 0.8) < 0.05


def test_agreement_command_json_and_missing_rater(tmp_path):
    f = tmp_path / "s.jsonl"
    rng = np.random.default_rng(5)
    a = rng.uniform(size=20)
    b = np.clip(a + rng.normal(scale=0.2, size=20), 0, 1)
    c = np.clip(a + rng.normal(scale=0.2, size=20), 0, 1)
    f.write_text("".join(json.dumps({"item": i, "x": a[i], "y": b[i], "z": c[i]}) + "\n" for i in range(20)))
    res = CliRunner().invoke(app, ["meta-eval", "agreement", "--scores", str(f), "--raters", "x,y,z", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)  # progress goes to stderr
    ref = ag.icc3(np.column_stack([a, b, c]))
    assert out["n"] == 20 and out["icc3"] == pytest.approx(ref.icc3, abs=1e-12)
    assert out["icc3k"] == pytest.approx(ref.icc3k) and out["icc3_ci95"] == pytest.approx(list(ref.ci95))
    assert out["kappa"]["linear"] == pytest.approx(ag.kappa_binned(a, b).linear)
    lines = f.read_text().splitlines()
    lines[2] = json.dumps({"item": 2, "x": 0.1, "z": 0.3})
    f.write_text("\n".join(lines) + "\n")
    res = CliRunner().invoke(app, ["meta-eval", "agreement", "--scores", str(f), "--raters", "x,y"])
    assert res.exit_code == 2 and "line 3" in res.output and "'y'" in res.output
    assert "Traceback" not in res.output


def test_agreement_command_constant_raters_explain_nan(tmp_path):
    f = tmp_path / "s.jsonl"
    f.write_text("".join(json.dumps({"item": i, "x": 0.5, "y": 0.5}) + "\n" for i in range(5)))
    res = CliRunner().invoke(app, ["meta-eval", "agreement", "--scores", str(f), "--raters", "x,y", "--json"])
    out = json.loads(res.stdout)  # progress goes to stderr
    assert res.exit_code == 0 and out["icc3"] is None and out["kappa"]["unweighted"] is None
    assert any("same score" in n for n in out["notes"]) and not math.isnan(out["n"])
