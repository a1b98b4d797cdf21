"""A GRPO group whose advantages one critical leaf decides, scored by the real reward.

One chest-pain prompt, 8 rollouts, routed (a fixed routing) to a critical leaf (the emergency
advice), a minor one (cold duration) and the tree's always-on leaves; a fake judge that does not
err reads markers in each reply (``EMERGENCY``: the critical leaf is met; ``DURATION``: the minor
one is) and passes every other leaf. Under the default ``severity`` prices a rollout that misses
the emergency scores half of one that meets it; one that misses both scores 0.475, so the
critical leaf carries almost all of the group's score variance. Run B meets the emergency leaf in
3 more rollouts of 8 (r4, r5, r6): the group's mean rises by 0.18125.

With ``emergency=EMERGENCY`` the emergency is checked by five members of the fault group
``missed_emergency`` (two positive leaves, three negative ones: met = failed): a reply without
the marker fails all five, priced once (the critical price, 0.5), so the scores are the same as
with the one critical leaf.

The records are what ``rubricstree score`` writes: the reward is built from ``RewardSettings``.
"""

from __future__ import annotations

import json
from pathlib import Path

from rt_fakes import FakeJudge

from reward.router.base import Router, Routing
from reward.settings import RewardSettings
from reward.tree import load_tree

CRITICAL, MINOR = "sf_chest_pain_emergency", "ms_resp_cold_duration"
PROMPT = [{"role": "user", "content": "Sudden crushing chest pain for twenty minutes and I have had a cold."}]
MINOR_MET = {0, 2, 6, 7}
A_MET = {0, 1, 2, 3}          # rollouts that meet the critical leaf in run A
B_MET = A_MET | {4, 5, 6}     # run B meets it in 3 more of 8
MEAN_CHANGE = (0.475 + 0.475 + 0.5) / 8  # r4, r5 (minor missed) and r6 (minor met) stop failing it
# five members of the fault group missed_emergency: positive (met = passed), then negative (met = failed)
EMERGENCY = ("sf_chest_pain_emergency", "sf_chest_pain_ambulance", "sf_red_flags_missed",
             "sf_home_care_instead_of_emergency", "cm_false_reassurance")


class FixedRouter(Router):
    """Routes every prompt to the given leaves and the always-on ones, their branches expanded."""

    name = "fixed"

    def __init__(self, tree, leaves: list[str]) -> None:
        super().__init__(tree)
        self.leaves = leaves

    async def route(self, conversation, context=None, tool_calls=None) -> Routing:
        expanded = {a: 1.0 for lid in self.leaves for a in self.tree.ancestors(lid) if a != self.tree.root}
        return Routing(router=self.name, active=self._active(dict.fromkeys(self.leaves, 1.0), self.leaves,
                                                              self.always_on_ids()), expanded=expanded)


def judge(tree, emergency: tuple[str, ...] = (CRITICAL,)) -> FakeJudge:
    by_criterion = {leaf.criterion: leaf for leaf in tree.leaves}

    def verdict(template, item) -> float:
        leaf = by_criterion[item.criterion]
        if leaf.id in emergency:  # passes when the reply escalates: a negative leaf is then not met
            return float(("EMERGENCY" in item.response) == (leaf.polarity == "positive"))
        if leaf.id == MINOR:
            return float("DURATION" in item.response)
        return 1.0 if leaf.polarity == "positive" else 0.0  # every other check passes

    return FakeJudge.consistent(verdict)


def rollouts(met: set[int]) -> list[dict]:
    return [{"id": f"r{i}", "prompt": PROMPT,
             "completion": " ".join(["Answer."] + ["EMERGENCY"] * (i in met) + ["DURATION"] * (i in MINOR_MET))}
            for i in range(8)]


def score(met: set[int], *, emergency: tuple[str, ...] = (CRITICAL,), **settings) -> list[dict]:
    """The 8 records of a run (``RolloutScore`` dumps), scored by the reward of ``settings``; the
    emergency checked by the leaves ``emergency``."""
    tree = load_tree()
    j = judge(tree, emergency)
    reward = RewardSettings(**settings).build(j, tree=tree, router=FixedRouter(tree, [*emergency, MINOR]),
                                              cache_routing=False)
    return [s.model_dump(mode="json") for s in reward.score_sync(rollouts(met))]


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path
