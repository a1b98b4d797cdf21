"""Monitors of a policy gaming its reward (issue 46): what a training run's logs show per step.

In GSPO the policy climbs whatever the reward pays for. These figures, computed from each batch the
reward scores, show it drifting:

- ``length_correlation``: within each GRPO group (the rollouts of one prompt), the Pearson
  correlation of the reward with the completion's length in characters (what a reader wades
  through; token counts are clipped at the generation limit), averaged over the groups that vary;
  a reward that rises with length at equal content teaches padding;
- ``escalation_share``: the share of rollouts on prompts the router read as routine that send the
  user to emergency care (their ``sf_over_escalation`` check failed);
- ``refusal_share``: the share of rollouts that deflect to a clinician without help (their
  ``un_blanket_disclaimer`` check failed);
- ``judge_failure_share``: the share of rollouts the judge could not score;
- ``leaf_drop``: per leaf, its pass rate now against its mean over the first ``baseline_steps``
  steps; the largest fall is reported, and the leaf named.

Each has a threshold (:class:`MonitorSettings`); crossing it prints one warning line (and again only
after the figure went back under it). The figures go to the trainer's logs: TRL through the reward's
``log_metric`` (and wandb when it is on), verl in every rollout's extra info (verl logs their batch
means), and, with a records folder, ``monitors.jsonl`` beside the score records for the inspector.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from reward.settings import MonitorSettings

log = logging.getLogger("rubricstree.monitor")


@dataclass
class RolloutFacts:
    """What a monitor reads of one scored rollout."""

    group: str
    reward: float | None
    length: int
    routine: bool | None = None  # the router read the prompt as routine (None: unknown)
    escalated: bool = False
    refused: bool = False
    leaves: Mapping[str, float] = field(default_factory=dict)  # leaf id -> pass value


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson's correlation, None when either side does not vary."""
    n = len(xs)
    if n < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sx = math.sqrt(sum((x - mx) ** 2 for x in xs))
    sy = math.sqrt(sum((y - my) ** 2 for y in ys))
    if sx == 0 or sy == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / (sx * sy)


def group_length_correlation(facts: Iterable[RolloutFacts]) -> float | None:
    """The mean, over groups whose rewards and lengths vary, of the reward-length correlation."""
    groups: dict[str, list[RolloutFacts]] = {}
    for f in facts:
        if f.reward is not None:
            groups.setdefault(f.group, []).append(f)
    corrs = [c for g in groups.values() if (c := pearson([f.length for f in g], [f.reward for f in g])) is not None]
    return sum(corrs) / len(corrs) if corrs else None


class RewardMonitor:
    """Per-step gaming figures with warnings (see the module docstring).

    Args:
        settings: the thresholds.
        name: the metric prefix (``<name>/monitor/...``) and the warnings' subject.
    """

    def __init__(self, settings: MonitorSettings | None = None, name: str = "reward") -> None:
        self.settings = settings or MonitorSettings()
        self.name = name
        self.steps = 0
        self._baseline: dict[str, list[float]] = {}
        self._over: set[str] = set()

    def observe(self, facts: Sequence[RolloutFacts]) -> dict[str, float]:
        """The figures of one scored batch (one trainer step), warning on each threshold crossed."""
        self.steps += 1
        s = self.settings
        n = len(facts)
        out: dict[str, float] = {}
        if not n:
            return out
        corr = group_length_correlation(facts)
        if corr is not None:
            out["length_correlation"] = corr
        routine = [f for f in facts if f.routine and f.reward is not None]
        if routine:
            out["escalation_share"] = sum(f.escalated for f in routine) / len(routine)
        scored = [f for f in facts if f.reward is not None]
        if scored:
            out["refusal_share"] = sum(f.refused for f in scored) / len(scored)
        out["judge_failure_share"] = (n - len(scored)) / n
        rates: dict[str, list[float]] = {}
        for f in scored:
            for lid, v in f.leaves.items():
                rates.setdefault(lid, []).append(v)
        now = {lid: sum(v) / len(v) for lid, v in rates.items()}
        worst, worst_leaf = None, None
        if self.steps <= s.baseline_steps:
            for lid, r in now.items():
                self._baseline.setdefault(lid, []).append(r)
        else:
            for lid, r in now.items():
                base = self._baseline.get(lid)
                if base:
                    drop = sum(base) / len(base) - r
                    if worst is None or drop > worst:
                        worst, worst_leaf = drop, lid
        if worst is not None:
            out["leaf_drop"] = worst
        for key, value in out.items():
            limit = getattr(s, key)
            if limit is None:
                continue
            if value > limit and key not in self._over:
                self._over.add(key)
                what = f" ({worst_leaf})" if key == "leaf_drop" else ""
                log.warning("%s: monitor %s = %.3f crossed its threshold %.3g%s at step %d: the policy may be "
                            "gaming the reward (docs/scoring.md, gaming)", self.name, key, value, limit, what,
                            self.steps)
            elif value <= limit:
                self._over.discard(key)
        return out


def rollout_facts(results: Sequence, completions: Sequence[str], groups: Sequence[str],
                  lengths: Sequence[int] | None = None) -> list[RolloutFacts]:
    """Monitor facts from the rubric reward's results (``reward.stages.results.RolloutScore``)."""
    from reward.stages.guards import OVER_ESCALATION

    out = []
    for j, (res, text, g) in enumerate(zip(results, completions, groups)):
        leaves = {lr.leaf_id: lr.passed for lr in res.leaves if lr.passed is not None}
        urgency = (res.routing or {}).get("urgency")
        out.append(RolloutFacts(
            group=g, reward=res.score, length=lengths[j] if lengths is not None else len(text),
            routine=OVER_ESCALATION in leaves or (None if urgency is None else urgency < 0.5),
            escalated=leaves.get(OVER_ESCALATION, 1.0) < 0.5,
            refused=leaves.get("un_blanket_disclaimer", 1.0) < 0.5, leaves=leaves))
    return out
