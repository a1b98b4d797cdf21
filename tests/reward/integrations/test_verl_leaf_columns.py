"""verl's per-rollout extra info carries the leaf verdicts behind a clinical score (verl writes
them to its rollout dumps, ``trainer.rollout_data_dir``), and every result has the same keys."""

from __future__ import annotations

import asyncio
import json

from rt_fakes import FakeJudge

from reward.integrations.verl import EXTRA_DEFAULTS, RewardContext, VerlRewardSettings
from reward.integrations.verl.sources import Sample, finalize, score_samples
from reward.router import StaticRouter
from reward.tree import Node, RubricTree

CONV = [{"role": "user", "content": "Crushing chest pain. What now?"}]
RUBRICS = [{"criterion": "emergency services", "points": 6}]


def judge() -> FakeJudge:
    return FakeJudge.consistent(lambda template, item: 1.0 if item.criterion.lower() in item.response.lower() else 0.0)


def test_clinical_extra_names_the_failed_leaves() -> None:
    tree = RubricTree([
        Node(id="root", title="root", children=("ems", "home")),
        Node(id="ems", title="Emergency", criterion="emergency services"),
        Node(id="home", title="Home care", criterion="wait at home", polarity="negative"),
    ], root="root", name="toy")
    c = RewardContext(VerlRewardSettings(rubric_source="both", combine="mean"), judge=judge(), tree=tree,
                      router=StaticRouter(tree))
    samples = [Sample("healthbench", text, json.dumps(RUBRICS), {"judge_prompt": CONV, "prompt_id": "p1"})
               for text in ("Call emergency services now.", "Probably nothing: wait at home.")]
    good, poor = asyncio.run(score_samples(samples, c))
    assert good.extra["failed_leaves"] == "" and set(poor.extra["failed_leaves"].split()) == {"ems", "home"}
    assert "ems=1" in good.extra["leaf_verdicts"] and "home=" in good.extra["leaf_verdicts"]
    assert set(finalize(poor)) == set(EXTRA_DEFAULTS) | {"score"}


def test_verl_rollout_dumps_open_in_the_inspector(tmp_path) -> None:
    """With log_records the extra info carries the full record; a dump written the way verl 0.9.1's
    RayPPOTrainer._write_generations writes it ({input, output, gts, score, step, **extra} per line)
    loads as a scores file, grouped by prompt, with its leaves."""
    from training.inspector.data import load_run

    tree = RubricTree([
        Node(id="root", title="root", children=("ems", "home")),
        Node(id="ems", title="Emergency", criterion="emergency services"),
        Node(id="home", title="Home care", criterion="wait at home", polarity="negative"),
    ], root="root", name="toy")
    # the paper variant: the scores below are its weighted means (a missed leaf of two scores 0.5)
    c = RewardContext(VerlRewardSettings(rubric_source="tree", log_records=True, scoring_variant="paper"), judge=judge(), tree=tree,
                      router=StaticRouter(tree))
    texts = ("Call emergency services now.", "Probably nothing: wait at home.")
    samples = [Sample("healthbench", t, "", {"judge_prompt": CONV, "prompt_id": "p1"}) for t in texts]
    results = [finalize(r) for r in asyncio.run(score_samples(samples, c))]
    results.append(finalize(asyncio.run(score_samples(samples[:1], c))[0], score=0.5, reason="judge down"))
    dump = tmp_path / "7.jsonl"
    with dump.open("w") as fh:
        for text, res in zip(texts + texts[:1], results):
            entry = {"input": "user\nCrushing chest pain. What now?", "output": text, "gts": "", "score": res["score"],
                     "step": 7, **res}
            fh.write(json.dumps(entry, default=str) + "\n")
    run = load_run(dump)
    good, poor, stand_in = run.rollouts
    assert good.group == poor.group and good.rank == 1 and poor.rank == 2
    assert {lf["leaf_id"] for lf in poor.leaves} == {"ems", "home"} and poor.score == 0.0
    assert good.id == "step7-1" and good.completion == texts[0]
    assert stand_in.score is None and stand_in.rec["failures"][0] == "judge down"
