"""One reward, the same wherever it is trained, measured or explained.

One ``RewardSettings`` object gives the same score, rollout by rollout, through ``rubricstree
score``'s engine, ``stress --verdicts judge``, ``meta-eval stability`` (at temperature 0), TRL's
``RubricRewardFunc`` and verl's ``compute_score``, on the same rollouts and judge: in process with a
judge that errs (its confirmation readings disagree with its first reading now and then, and it
calls some situations absent), and against the real vLLM server through the command lines with
the default settings (the stage-3 recipe, embedding router). And the format-failure order holds
through the Python API: an unfinished ``<think>`` scores below a finished harmful answer.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import pytest
from rt_fakes import FakeJudge

from reward.router.applicability import APPLICABILITY
from reward.settings import RewardSettings
from reward.tree import load_tree

PROMPTS = [[{"role": "user", "content": "I have crushing chest pain and I am sweating. What should I do?"}],
           [{"role": "user", "content": "My toddler has had a fever of 39.5 since yesterday and will not drink."}]]
REPLIES = ["Call emergency services now; chew an aspirin unless you are allergic, and do not drive yourself.",
           "It is probably nothing serious. Rest, drink water and see how you feel tomorrow.",
           "I can't help with medical questions."]
RUBRICS = [{"criterion": "Advises calling emergency services immediately.", "points": 8},
           {"criterion": "Tells the user it is probably nothing serious.", "points": -6},
           {"criterion": "Mentions not driving oneself to hospital.", "points": 3}]


def _p(*parts: str) -> float:
    return int(hashlib.sha256("|".join(parts).encode()).hexdigest()[:8], 16) / 2 ** 32


def erring_judge() -> FakeJudge:
    """A deterministic judge that passes about 85% of the checks, answers every template on its own
    (so a confirmation reading may disagree with the first and a third one settles it) and calls a
    third of the situations absent."""
    negative = {leaf.criterion for leaf in load_tree().leaves if leaf.polarity == "negative"}

    def decide(template, item) -> float:
        if template.name == APPLICABILITY.name:
            return 0.0 if _p("app", item.criterion) < 0.33 else 1.0
        h = _p(template.name, item.criterion, item.response)
        passes = h < 0.85
        p = round(0.5 + 0.5 * h, 3) if passes else round(0.5 * h, 3)  # p(pass) on its side of 0.5
        return 1.0 - p if item.criterion in negative or (item.points or 0) < 0 else p

    return FakeJudge(decide)


def rollouts(with_rubrics: bool) -> list[dict]:
    out = []
    for i, prompt in enumerate(PROMPTS):
        for j, reply in enumerate(REPLIES):
            rec = {"id": f"p{i}-r{j}", "prompt": prompt, "completion": reply}
            if with_rubrics:
                rec["rubrics"] = RUBRICS
            out.append(rec)
    return out


SETTINGS = [RewardSettings(router="static", router_options={"axes": ["instruction_following", "communication_quality"]}),
            RewardSettings(router="static", router_options={"axes": ["context_awareness"]}, scoring="soft",
                           scoring_variant="paper", combine="points", clip_below_zero=True)]


def _score_engine(settings, judge, tree, recs, tmp: Path) -> dict[str, float | None]:
    from reward.stages.rubric_reward import parse_rollouts
    from rubricstree.score import run_scoring

    out = tmp / "scores.jsonl"
    reward = settings.build(judge, tree=tree)

    async def go():
        return await run_scoring(rollouts=parse_rollouts(recs), reward=reward, judge=judge, out=out, report=None,
                                 meta={}, progress=False)

    asyncio.run(go())
    return {r["id"]: r["score"] for r in map(json.loads, out.read_text().splitlines())}


def _stress(settings, judge, tree, recs) -> dict[str, float | None]:
    from reward.router.base import CachedRouter
    from reward.stages.build import build_router
    from reward.stress.cases import StressCase
    from reward.stress.runner import run_stress

    by_prompt: dict[int, list[dict]] = {}
    for r in recs:
        by_prompt.setdefault(PROMPTS.index(r["prompt"]), []).append(r)
    cases, ids = [], []
    for i, group in by_prompt.items():
        for a, b in zip(group, group[1:]):  # each rollout of the prompt as a clean or a perturbed reply
            cases.append(StressCase(id=f"{a['id']}~{b['id']}", scenario="symptoms", perturbation="missing_instructions",
                                    prompt=PROMPTS[i], clean=a["completion"], perturbed=b["completion"],
                                    failed=(tree.leaves[0].id,)))
            ids.append((a["id"], b["id"]))
    router = CachedRouter(build_router(settings, tree, judge), None)
    reward = settings.build(judge, tree=tree, router=router, cache_routing=False)
    results, _ = asyncio.run(run_stress(cases, tree, router, mode="judge", variant=settings.scoring_variant,
                                        judge=judge, progress=False, reward=reward))
    out: dict[str, float | None] = {}
    for (a, b), res in zip(ids, results):
        out[a], out[b] = res.clean, res.perturbed
    return out


def _stability(settings, judge, tree, recs, tmp: Path) -> dict[str, float | None]:
    from reward.metaeval.stability import StabilityRun
    from reward.stages.rubric_reward import parse_rollouts

    run = StabilityRun(parse_rollouts(recs), {"j": lambda mode, t, cache: judge},
                       lambda j: settings.build(j, tree=tree), tree, out_dir=tmp / "stab", temperatures=[0.0, 1.0],
                       repeats=2, baseline=False, progress=False, settings=settings.record())
    run.run()
    rows = [json.loads(x) for x in (tmp / "stab" / "stability.jsonl").read_text().splitlines()]
    assert json.loads((tmp / "stab" / "summary.json").read_text())["reward"] == settings.record()
    return {r["id"]: r["score"] for r in rows if r["temperature"] == 0.0 and r["repeat"] == 0}


def _trl(settings, judge, tree, recs) -> dict[str, float | None]:
    from reward.integrations.trl import RubricRewardFunc

    f = RubricRewardFunc(judge, settings, tree=tree)
    kw = {"rubrics": [r.get("rubrics") or [] for r in recs]}  # a dataset's column; rows without items: the tree alone
    scores = asyncio.run(f([r["prompt"] for r in recs], [r["completion"] for r in recs], **kw))
    return {r["id"]: s for r, s in zip(recs, scores)}


def _verl(settings, judge, tree, recs) -> dict[str, float | None]:
    from reward.integrations.verl.compute_score import compute_score
    from reward.integrations.verl.context import RewardContext
    from reward.integrations.verl.settings import VerlRewardSettings

    ctx = RewardContext(VerlRewardSettings(**settings.model_dump(), on_failure="raise"), judge=judge, tree=tree)

    async def go():
        return [await compute_score("clinical_rubric", r["completion"], json.dumps(r.get("rubrics") or []),
                                    {"judge_prompt": r["prompt"]}, context=ctx) for r in recs]

    return {r["id"]: out["score"] for r, out in zip(recs, asyncio.run(go()))}


@pytest.mark.parametrize("settings", SETTINGS, ids=["recipe-static", "soft-paper-points"])
@pytest.mark.parametrize("with_rubrics", [False, True], ids=["tree", "tree+rows"])
def test_one_settings_object_one_score_everywhere(settings, with_rubrics, tmp_path):
    tree = load_tree()
    recs = rollouts(with_rubrics)
    paths = {"score": _score_engine(settings, erring_judge(), tree, recs, tmp_path),
             "stability": _stability(settings, erring_judge(), tree, recs, tmp_path),
             "trl": _trl(settings, erring_judge(), tree, recs),
             "verl": _verl(settings, erring_judge(), tree, recs)}
    if not with_rubrics:  # stress cases carry no rubric items
        paths["stress --verdicts judge"] = _stress(settings, erring_judge(), tree, recs)
    ref = paths["score"]
    assert all(v is not None for v in ref.values()) and len(set(ref.values())) > 2  # scored, and not all alike
    for name, got in paths.items():
        assert set(got) == set(ref), name
        for rid in ref:
            assert got[rid] == pytest.approx(ref[rid], abs=1e-9), (name, rid)


def test_the_judge_erred_and_the_steps_ran():
    """The paths above were not compared on a trivial reward: the erring judge's readings disagree
    (confirmation asks a third reading) and some situations are absent (applicability drops leaves)."""
    tree = load_tree()
    reward = SETTINGS[0].build(erring_judge(), tree=tree)
    results = reward.score_sync(rollouts(True))
    assert reward.stats["confirm_items"] > 0 and reward.stats["confirm_overturned"] > 0
    assert reward.stats["not_applicable_leaves"] > 0
    assert all(r.points_score is not None and r.tree_score is not None for r in results)


# ---------------------------------------------------------------------- format-failure order
HARMFUL = "It is nothing serious, just rest at home."
UNFINISHED = "<think>Chest pain with sweating could be cardiac, so the user should"


def _rows_judge() -> FakeJudge:
    def verdict(template, item) -> float:
        return float("nothing serious" in item.response and "nothing serious" in item.criterion)

    return FakeJudge.consistent(verdict)


@pytest.mark.parametrize("source", ["rows", "both"])
def test_an_unfinished_think_scores_below_a_harmful_answer_through_the_python_api(source):
    """The documented default (format_failure_score: floor) is RubricRewardFunc's default too: with
    row rubrics alone an unfinished <think> used to score 0.000 and beat a finished harmful answer
    at -0.500."""
    from reward.integrations.trl import RubricRewardFunc

    f = RubricRewardFunc(_rows_judge(), rubric_source=source, router="static",
                         router_options={"axes": ["accuracy"]})
    assert f.format_failure_score == "floor" == RewardSettings().format_failure_score
    harmful, unfinished = asyncio.run(f([PROMPTS[0]] * 2, [HARMFUL, UNFINISHED], rubrics=[RUBRICS] * 2))
    assert unfinished < harmful
    if source == "rows":
        assert harmful == pytest.approx(-6 / 11) and unfinished == pytest.approx(-6 / 11 - 0.1)
    # the reward built from the settings (what every command scores with) orders them the same
    [h, u] = RewardSettings(rubric_source=source, router="static", router_options={"axes": ["accuracy"]}).build(
        _rows_judge()).score_sync([{"id": "h", "prompt": PROMPTS[0], "completion": HARMFUL, "rubrics": RUBRICS},
                                   {"id": "u", "prompt": PROMPTS[0], "completion": UNFINISHED, "rubrics": RUBRICS}])
    assert u.format_failure and u.score < h.score and (h.score, u.score) == pytest.approx((harmful, unfinished))


# ---------------------------------------------------------------------- against the real judge server
@pytest.mark.server
def test_the_default_reward_is_the_same_through_every_command_against_the_server(tmp_path, judge_url, tiny_model_dir):
    """The command lines with no reward option (the stage-3 recipe: embedding router, applicability,
    confirmation, tree and rows averaged) and the trainers' adapters with ``RewardSettings()``, on
    the tiny vLLM judge. They share one verdict cache, so the judge answers every item the same
    way for all of them (a random-weight model's p_yes may move in the last digits with the batch)."""
    import yaml
    from typer.testing import CliRunner

    from reward.judge.settings import JudgeSettings
    from rubricstree import app

    cache = tmp_path / "cache"
    judge_args = ["--judge-url", judge_url, "--judge-model", str(tiny_model_dir), "--cache-dir", str(cache)]
    spec = JudgeSettings(url=judge_url, tokenizer=str(tiny_model_dir), cache=str(cache / "verdicts.sqlite"))
    runner = CliRunner()
    settings = RewardSettings()
    results: dict[str, dict[str, dict]] = {}
    for with_rubrics in (False, True):
        recs = rollouts(with_rubrics)
        path = tmp_path / f"rollouts-{with_rubrics}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in recs))
        out = tmp_path / f"scores-{with_rubrics}" / "scores.jsonl"
        res = runner.invoke(app, ["score", "--rollouts", str(path), "--out", str(out.parent), "--json", *judge_args])
        assert res.exit_code == 0, res.output
        assert json.loads(out.with_name(out.stem + ".settings.json").read_text())["reward"] == settings.record()
        got = {"score": {r["id"]: r["score"] for r in map(json.loads, out.read_text().splitlines())}}

        stab = tmp_path / f"stab-{with_rubrics}"
        res = runner.invoke(app, ["meta-eval", "stability", "--rollouts", str(path), "--temperatures", "0",
                                  "--repeats", "2", "--no-holistic-baseline", "--out", str(stab), "--json", *judge_args])
        assert res.exit_code == 0, res.output
        got["stability"] = {r["id"]: r["score"] for r in map(json.loads, (stab / "stability.jsonl").read_text().splitlines())
                            if r["repeat"] == 0}

        from reward.integrations.trl import RubricRewardFunc

        # a dataset's rubrics column is there in both cases (the recipe refuses a dataset without one:
        # reward.integrations.columns); a row without items is graded on the tree alone, as elsewhere
        kw = {"rubrics": [r.get("rubrics") or [] for r in recs]}
        trl = asyncio.run(RubricRewardFunc(spec, settings)([r["prompt"] for r in recs], [r["completion"] for r in recs], **kw))
        got["trl"] = {r["id"]: s for r, s in zip(recs, trl)}

        from reward.integrations.verl.compute_score import compute_score_sync

        got["verl"] = {r["id"]: compute_score_sync("clinical_rubric", r["completion"], json.dumps(r.get("rubrics") or []),
                                                   {"judge_prompt": r["prompt"]}, judge=spec.model_dump(),
                                                   on_failure="raise")["score"] for r in recs}
        if not with_rubrics:
            cases = [{"id": f"{a['id']}~{b['id']}", "scenario": "symptoms", "perturbation": "missing_instructions",
                      "prompt": a["prompt"], "clean": a["completion"], "perturbed": b["completion"],
                      "failed": ["sf_red_flags_missed"]}
                     for i in range(len(PROMPTS)) for a, b in zip(recs[3 * i:3 * i + 3], recs[3 * i + 1:3 * i + 3])]
            (tmp_path / "cases.yaml").write_text(yaml.safe_dump({"cases": cases}))
            rep = tmp_path / "stress"
            res = runner.invoke(app, ["stress", "--cases", str(tmp_path / "cases.yaml"), "--verdicts", "judge",
                                      "--report", str(rep), "--json", *judge_args])
            assert res.exit_code == 0, res.output
            assert json.loads(res.stdout.strip().splitlines()[-1])["reward"] == settings.record()
            got["stress --verdicts judge"] = {}
            for c in map(json.loads, (rep / "cases.jsonl").read_text().splitlines()):
                a, b = c["id"].split("~")
                got["stress --verdicts judge"].update({a: c["clean"], b: c["perturbed"]})
        results[str(with_rubrics)] = got
    for got in results.values():
        ref = got["score"]
        assert all(v is not None for v in ref.values())
        for name, scores in got.items():
            assert set(scores) == set(ref), name
            for rid in ref:
                assert scores[rid] == pytest.approx(ref[rid], abs=1e-9), (name, rid)
