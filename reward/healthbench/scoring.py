"""HealthBench scoring, as the reference grader computes it, in pure functions.

Data flow: verdicts (one boolean per rubric item) -> per-example score ``achieved / possible``
(unclipped, may be negative) -> per-example tag scores -> for the overall score and every tag,
mean over the examples that carry it, then clip to [0, 1], with a bootstrap standard deviation.

Ports that clip per example, drop negative items or count every item in the denominator do not
produce HealthBench scores. :func:`rl_reward` is the one place that clips per example, and it is a
training reward, not an evaluation score.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from reward.errors import ScoringError
from reward.healthbench.schema import HealthBenchRow

DEFAULT_N_BOOTSTRAP = 1000
DEFAULT_SEED = 0
_BOOTSTRAP_CHUNK = 100  # resamples drawn at once, to bound memory on 5,000-example tags


class MissingVerdictError(ScoringError):
    """A rubric item has no verdict; HealthBench cannot be scored with a hole in it."""

    def __init__(self, prompt_id: str, rubric_index: int, reason: str = "no verdict") -> None:
        self.prompt_id, self.rubric_index = prompt_id, rubric_index
        super().__init__(f"prompt_id '{prompt_id}': rubric_index {rubric_index}: {reason}")


def _is_bool(v: Any) -> bool:
    return isinstance(v, (bool, np.bool_))


def _check_points(points: Sequence[float], met: Sequence[Any]) -> None:
    if len(points) != len(met):
        raise ScoringError(f"{len(points)} rubric items but {len(met)} verdicts")
    for i, p in enumerate(points):
        if not isinstance(p, (int, float, np.integer, np.floating)) or _is_bool(p) or not math.isfinite(p):
            raise ScoringError(f"rubric_index {i}: points must be a finite number, got {p!r}")


def _possible(points: Sequence[float]) -> float:
    return float(sum(p for p in points if p > 0))


def _formula(points: Sequence[float], met: Sequence[bool]) -> float | None:
    """achieved / possible, or None when the items have no positive points."""
    possible = _possible(points)
    if possible <= 0:
        return None
    return float(sum(p for p, m in zip(points, met) if m)) / possible


def example_score(points: Sequence[float], met: Sequence[bool]) -> float:
    """The HealthBench score of one example: sum of the points of met items (negative items
    included) over the sum of positive points. Not clipped: it can be negative.

    Args:
        points: rubric item points, in rubric order.
        met: the grader's ``criteria_met`` for each item (booleans), same order.

    Raises:
        ScoringError: lengths differ, a verdict is not a boolean, a point value is not finite, or
            no item has positive points (the ratio is undefined).
    """
    _check_points(points, met)
    for i, m in enumerate(met):
        if not _is_bool(m):
            raise ScoringError(f"rubric_index {i}: criteria_met must be a boolean, got {m!r}")
    score = _formula(points, met)
    if score is None:
        raise ScoringError("no rubric item has positive points: the example score is undefined")
    return score


def _tag_scores(row: HealthBenchRow, met: Sequence[bool], example_value: float) -> dict[str, float]:
    out = {tag: example_value for tag in row.example_tags}
    by_tag: dict[str, list[int]] = {}
    for i, item in enumerate(row.rubrics):
        # dict.fromkeys: a tag repeated on one item still counts that item once
        for tag in dict.fromkeys(item.tags):
            by_tag.setdefault(tag, []).append(i)
    for tag, idx in by_tag.items():
        value = _formula([row.rubrics[i].points for i in idx], [met[i] for i in idx])
        if value is not None:  # tags whose items carry no positive points are left out
            out[tag] = value
    return out


def example_tag_scores(row: HealthBenchRow, met_list: Sequence[bool]) -> dict[str, float]:
    """Per-tag scores of one example.

    Each example tag (``theme:*``, ``physician_agreed_category:*``) gets the example's score; each
    rubric tag (``axis:*``, ``level:*``, ``cluster:*``) gets achieved/possible over only the items
    that carry it, and is left out when those items have no positive points.

    Args:
        row: the example.
        met_list: one boolean verdict per rubric item, in rubric order.
    """
    return _tag_scores(row, met_list, example_score([r.points for r in row.rubrics], met_list))


def length_adjusted(score: float, response_chars: int | str, p: float) -> float:
    """``score - p * ((response_chars - 2000) / 500)``: the per-example length adjustment of
    later HealthBench revisions (clipping still happens only after averaging).

    Args:
        score: the unclipped example score.
        response_chars: number of characters of the response (a string is measured with len).
        p: the variant's coefficient (see ``reward.healthbench.variants.LENGTH_ADJUST``).
    """
    n = len(response_chars) if isinstance(response_chars, str) else int(response_chars)
    return score - p * ((n - 2000) / 500)


def _clipped_mean(values: np.ndarray) -> float:
    return float(np.clip(values.mean(), 0.0, 1.0))


def aggregate(values: Iterable[float], *, n_bootstrap: int = DEFAULT_N_BOOTSTRAP,
              seed: int = DEFAULT_SEED) -> dict[str, float | int]:
    """Mean of per-example values, then clipped to [0, 1], with a bootstrap standard deviation.

    Args:
        values: per-example (unclipped) scores.
        n_bootstrap: number of resamples with replacement; each gets the clipped mean and the
            standard deviation of those means is reported.
        seed: seed of the numpy Generator, so a report is reproducible.

    Returns:
        ``{"score", "bootstrap_std", "n_samples"}``.

    Raises:
        ScoringError: no values, a non-finite value, or ``n_bootstrap < 1``.
    """
    arr = np.asarray(list(values), dtype=float)
    if arr.size == 0:
        raise ScoringError("no values to aggregate")
    if not np.all(np.isfinite(arr)):
        raise ScoringError("a per-example value is NaN or infinite")
    if n_bootstrap < 1:
        raise ScoringError(f"n_bootstrap must be at least 1, got {n_bootstrap}")
    rng = np.random.default_rng(seed)
    means: list[np.ndarray] = []
    for start in range(0, n_bootstrap, _BOOTSTRAP_CHUNK):
        k = min(_BOOTSTRAP_CHUNK, n_bootstrap - start)
        idx = rng.integers(0, arr.size, size=(k, arr.size))
        means.append(np.clip(arr[idx].mean(axis=1), 0.0, 1.0))
    return {
        "score": _clipped_mean(arr),
        "bootstrap_std": float(np.std(np.concatenate(means))),
        "n_samples": int(arr.size),
    }


def _row_verdicts(row: HealthBenchRow, verdicts: Mapping[str, Sequence[bool | None]]) -> list[bool]:
    n = len(row.rubrics)
    if row.prompt_id not in verdicts:
        raise MissingVerdictError(row.prompt_id, 0, "no verdicts for this prompt")
    given = list(verdicts[row.prompt_id])
    if len(given) > n:
        raise ScoringError(f"prompt_id '{row.prompt_id}': {len(given)} verdicts but {n} rubric items")
    for i in range(n):
        if i >= len(given) or given[i] is None:
            raise MissingVerdictError(row.prompt_id, i)
        if not _is_bool(given[i]):
            raise MissingVerdictError(row.prompt_id, i, f"criteria_met must be a boolean, got {given[i]!r}")
    return [bool(v) for v in given]


def score_healthbench(rows: Sequence[HealthBenchRow], verdicts: Mapping[str, Sequence[bool | None]],
                      responses: Mapping[str, str] | None = None, length_adjust: float | None = None,
                      *, n_bootstrap: int = DEFAULT_N_BOOTSTRAP, seed: int = DEFAULT_SEED
                      ) -> dict[str, Any]:
    """Score a set of graded examples the way HealthBench reports them.

    Args:
        rows: the examples scored (every one must have verdicts).
        verdicts: prompt id -> one ``criteria_met`` boolean per rubric item, in rubric order;
            ``None`` marks an item without a verdict (an error).
        responses: prompt id -> the graded response; needed only for the length adjustment.
        length_adjust: coefficient ``p`` of the per-example length adjustment, or ``None`` for
            none. It applies to the example score, hence to the example tags that carry it; rubric
            tags (axis, level, cluster) are item-level and stay unadjusted.
        n_bootstrap, seed: see :func:`aggregate`.

    Returns:
        ``{"score", "bootstrap_std", "n_samples", "tags": {tag: {"score", "bootstrap_std",
        "n_samples"}}}`` with tags sorted by name.

    Raises:
        MissingVerdictError: an item has no verdict (names the prompt id and rubric index).
        ScoringError: verdicts for unknown prompts, a missing response with a length adjustment,
            no rows, or an example without positive points.
    """
    known = {row.prompt_id for row in rows}
    extra = [pid for pid in verdicts if pid not in known]
    if extra:
        raise ScoringError(f"verdicts for prompt_id '{extra[0]}' which is not among the rows"
                           + (f" (and {len(extra) - 1} more)" if len(extra) > 1 else ""))
    if length_adjust is not None and not math.isfinite(length_adjust):
        raise ScoringError("length_adjust must be a finite number")
    overall: list[float] = []
    per_tag: dict[str, list[float]] = {}
    for row in rows:
        met = _row_verdicts(row, verdicts)
        try:
            value = example_score([r.points for r in row.rubrics], met)
        except ScoringError as exc:
            raise ScoringError(f"prompt_id '{row.prompt_id}': {exc}") from exc
        if length_adjust is not None:
            if responses is None or row.prompt_id not in responses:
                raise ScoringError(f"prompt_id '{row.prompt_id}': no response, "
                                   "needed for the length adjustment")
            value = length_adjusted(value, responses[row.prompt_id], length_adjust)
        overall.append(value)
        for tag, v in _tag_scores(row, met, value).items():
            per_tag.setdefault(tag, []).append(v)
    result: dict[str, Any] = dict(aggregate(overall, n_bootstrap=n_bootstrap, seed=seed))
    result["tags"] = {tag: aggregate(per_tag[tag], n_bootstrap=n_bootstrap, seed=seed)
                      for tag in sorted(per_tag)}
    return result


def rl_reward(points: Sequence[float], met: Sequence[bool | float], clip: bool = True) -> float:
    """A training reward from HealthBench-style rubric items: expected achieved points over
    positive points, clipped per example to [0, 1] by default.

    This is NOT a HealthBench score (HealthBench clips only after averaging over examples); it
    is meant for RL, where a bounded per-rollout reward is wanted.

    Args:
        points: rubric item points.
        met: per item, a boolean or the judge's probability in [0, 1] that the criterion is met;
            a probability contributes ``probability * points`` (expected points).
        clip: clip the result to [0, 1].

    Raises:
        ScoringError: lengths differ, a met value is outside [0, 1] or NaN, or no positive points.
    """
    _check_points(points, met)
    probs: list[float] = []
    for i, m in enumerate(met):
        if _is_bool(m):
            probs.append(1.0 if m else 0.0)
        elif isinstance(m, (int, float, np.integer, np.floating)) and 0.0 <= float(m) <= 1.0:
            probs.append(float(m))  # NaN fails the range test too
        else:
            raise ScoringError(f"rubric_index {i}: met must be a boolean or a probability in [0, 1], "
                               f"got {m!r}")
    possible = _possible(points)
    if possible <= 0:
        raise ScoringError("no rubric item has positive points: the reward is undefined")
    value = sum(p * q for p, q in zip(points, probs)) / possible
    return min(1.0, max(0.0, value)) if clip else value
