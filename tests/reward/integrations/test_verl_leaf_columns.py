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
    return FakeJudge(lambda template, item: 1.0 if item.criterion.lower() in item.response.lower() else 0.0)


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
