"""The urgency rule on its own, with hand-made unit vectors (no encoder): which turns count."""

from __future__ import annotations

import numpy as np
import pytest

from reward.router.urgency import urgency_of


def _unit(*xs):
    v = np.asarray(xs, dtype=float)
    return v / np.linalg.norm(v)


EM = np.stack([_unit(1, 0, 0, 0)])   # one emergency description
RT = np.stack([_unit(0, 1, 0, 0)])   # one routine request
SAME = lambda x: x  # noqa: E731
BAR = 0.31


def test_a_later_turn_near_nothing_does_not_count_even_with_a_positive_contrast():
    follow_up = _unit(0.2, 0.1, 0, 0.97)  # cos 0.2 to the emergency, 0.1 to the routine: contrast +0.1
    routine = _unit(0.2, 0.6, 0.77, 0)
    assert urgency_of(np.stack([routine, follow_up]), EM, RT, SAME, BAR) < 0.01


def test_the_opening_turn_always_counts():
    # a short or cross-language emergency matches weakly, under the bar: said first, it still counts
    short = _unit(0.25, 0.05, 0.97, 0)
    assert urgency_of(np.stack([short]), EM, RT, SAME, BAR) > 0.95
    routine = _unit(0.2, 0.6, 0.77, 0)
    assert urgency_of(np.stack([routine, short]), EM, RT, SAME, BAR) < 0.01  # as a follow-up it does not


def test_an_emergency_in_any_turn_decides():
    emergency = _unit(0.7, 0.1, 0.7, 0)
    follow_up = _unit(0.2, 0.1, 0, 0.97)
    assert urgency_of(np.stack([follow_up, emergency]), EM, RT, SAME, BAR) > 0.99


def test_no_turns_is_routine_and_the_scale_map_applies_to_the_bar():
    assert urgency_of(np.zeros((0, 4)), EM, RT, SAME, BAR) < 0.01
    routine = _unit(0.2, 0.6, 0.77, 0)
    turn = _unit(0.4, 0.1, 0.91, 0)  # cos 0.4: over the bar on MiniLM's scale, under it once mapped down
    assert urgency_of(np.stack([routine, turn]), EM, RT, SAME, BAR) > 0.99
    assert urgency_of(np.stack([routine, turn]), EM, RT, lambda x: x - 0.2, BAR) < 0.01


@pytest.mark.parametrize("temperature", [0.05, 0.1])
def test_the_contrast_goes_through_a_logistic(temperature):
    turn = _unit(0.5, 0.4, 0.768, 0)
    diff = float(turn @ EM[0] - turn @ RT[0])
    assert urgency_of(np.stack([turn]), EM, RT, SAME, BAR, temperature) == pytest.approx(
        1 / (1 + np.exp(-diff / temperature)))
