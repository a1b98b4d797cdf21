"""The verl failure policy: what an unscored rollout's score becomes (verl has no "unscored").

* ``on_failure: raise``: a failure raises :class:`reward.errors.JudgeError` with its reason.
* ``on_failure: neutral``: a failed rollout gets the mean score of its group's scored rollouts
  (zero GRPO/GSPO advantage), flagged ``unscored: true`` with the reason. Only a caller that sees
  the group (:func:`group_policy`, the streaming manager) can do that; :func:`single_policy`
  (plain ``compute_score``) falls back to ``fallback_score``, a flagged constant that must be set
  explicitly, else raises.
* ``on_failure: mask``: a failed rollout scores NaN, flagged; the ``rubricstree_grpo`` advantage
  estimator (``reward.integrations.verl.advantage``) leaves it out of its group's mean and std and
  of the loss. It needs no group in sight, so plain ``compute_score`` does it too.
* A group with no rollout scored gets ``all_failed_score`` (any constant gives zero advantage),
  flagged; ``all_failed_score: null`` raises.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from reward.errors import JudgeError
from reward.integrations.verl.settings import VerlRewardSettings
from reward.integrations.verl.sources import Sample, SampleScore, finalize

__all__ = ["failure_reason", "group_policy", "masked", "single_policy", "stand_in"]

log = logging.getLogger("rubricstree.verl")


def failure_reason(sample: Sample, raw: SampleScore) -> str:
    return f"{sample.where()}: {raw.failure or 'unscored'}"


def single_policy(sample: Sample, raw: SampleScore, settings: VerlRewardSettings) -> dict[str, Any]:
    """The policy when the group is out of sight (plain compute_score)."""
    if raw.score is not None:
        return finalize(raw)
    reason = failure_reason(sample, raw)
    if settings.on_failure == "raise":
        raise JudgeError(f"{reason} (on_failure: raise)")
    if settings.on_failure == "mask":
        return masked(raw, reason)
    if settings.fallback_score is None:
        raise JudgeError(f"{reason}. compute_score sees one rollout, not its group, so it cannot give the "
                         "group-mean (zero-advantage) score that on_failure 'neutral' asks for: use the "
                         "RubricsTreeRewardManager (reward.integrations.verl.manager), or set fallback_score to accept "
                         "a flagged constant")
    log.warning("unscored rollout given fallback_score=%s: %s", settings.fallback_score, reason)
    return finalize(raw, score=settings.fallback_score, reason=reason + " (fallback_score: no group in sight)")


def group_policy(samples: Sequence[Sample], raws: Sequence[SampleScore],
                 settings: VerlRewardSettings) -> list[dict[str, Any]]:
    """The policy over a whole batch: a failed rollout gets the mean of its group's (same ``uid``)
    scored rollouts; a group with none scored gets ``all_failed_score``; both flagged."""
    failed = [i for i, r in enumerate(raws) if r.score is None]
    if failed and settings.on_failure == "raise":
        raise JudgeError(f"{len(failed)} of {len(raws)} rollouts unscored; first: "
                         f"{failure_reason(samples[failed[0]], raws[failed[0]])} (on_failure: raise)")
    groups: dict[Any, list[int]] = {}
    for i, s in enumerate(samples):
        groups.setdefault(s.uid if s.uid is not None else ("#", i), []).append(i)
    out: list[dict[str, Any] | None] = [None] * len(raws)
    for members in groups.values():
        scored = [raws[i].score for i in members if raws[i].score is not None]
        for i in members:
            out[i] = stand_in(samples[i], raws[i], scored, settings, complete=True)
    return out  # type: ignore[return-value]


def masked(raw: SampleScore, reason: str) -> dict[str, Any]:
    """NaN for the ``rubricstree_grpo`` estimator to leave out (``on_failure: mask``), flagged."""
    log.warning("unscored rollout masked out of its group: %s", reason)
    return finalize(raw, score=float("nan"), reason=reason + " (masked: out of its group's statistics and the loss)")


def stand_in(sample: Sample, raw: SampleScore, scored: Sequence[float], settings: VerlRewardSettings, *,
              complete: bool) -> dict[str, Any]:
    if raw.score is not None:
        return finalize(raw)
    reason = failure_reason(sample, raw)
    if settings.on_failure == "mask":
        return masked(raw, reason)
    note = "" if complete else f" (group incomplete after {settings.group_timeout_s:g}s)"
    if scored:
        mean = sum(scored) / len(scored)
        log.warning("unscored rollout given its group's mean %.4f over %d scored%s: %s",
                    mean, len(scored), note, reason)
        return finalize(raw, score=mean, reason=reason + note, neutral_n=len(scored))
    if settings.all_failed_score is None:
        raise JudgeError(f"no rollout of the group was scored; first failure: {reason} (all_failed_score: null)")
    log.warning("no rollout of the group scored; all get all_failed_score=%s: %s", settings.all_failed_score, reason)
    return finalize(raw, score=settings.all_failed_score, reason=reason + " (no rollout of the group scored)" + note)
