"""Shapley values of a score over the verdicts that differ from a reference.

The game: the players are the checks (leaves or rubric items) whose verdict differs from a
reference verdict (every check passing, or a group's mean verdict); a coalition ``S`` is worth the
score the reward gives with the checks in ``S`` at their own verdicts and the others at the
reference. Each player's value is its mean marginal effect over every order of adding the players,
so the values add up to ``score - score at the reference``, and players that play the same part
(five members of one fault group, failed together and priced once) get the same value.

- Exact when the score is additive in the verdicts (the reward says so: ``Rescorer.additive``;
  each value is then the player's own effect, one rescoring each) or when there are at most
  :data:`EXACT_MAX` players (every coalition is scored once, ``2^n`` rescorings).
- Otherwise estimated from :data:`ORDERS` random orders (each with its reverse) drawn from a
  generator seeded by the caller: the values still add up exactly (each order's marginals do), and
  the same records give the same figures on every run.

Why not a library: the Shapley packages (``shap`` and its kin) explain a model's input features
against background data; here the game is 30 lines over a rescoring function, and a dependency of
that weight for it would cost more than it gives.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["EXACT_MAX", "ORDERS", "Split", "shapley"]

EXACT_MAX = 12  # players at most for the exact value: 2^12 = 4,096 rescorings
ORDERS = 16  # random orders, each walked forward and back, when there are more players


@dataclass(frozen=True)
class Split:
    """Each player's value and how it was computed (``orders``: 0 when exact)."""

    values: dict[str, float]
    orders: int = 0


def shapley(players: Sequence[str], value: Callable[[frozenset[str]], float], *, additive: bool = False,
            seed: int = 0) -> Split:
    """The Shapley value of each of ``players`` in the game ``value`` (the score with the players in
    the coalition at their own verdicts, the others at the reference); see the module docstring."""
    players = list(players)
    n = len(players)
    if n == 0:
        return Split({})
    whole = value(frozenset(players))
    if additive or n == 1:
        return Split({p: whole - value(frozenset(players) - {p}) for p in players})
    if n <= EXACT_MAX:
        return Split(_exact(players, value))
    return Split(_sampled(players, value, seed), orders=2 * ORDERS)


def _exact(players: list[str], value: Callable[[frozenset[str]], float]) -> dict[str, float]:
    n = len(players)
    worth = [value(frozenset(p for k, p in enumerate(players) if mask >> k & 1)) for mask in range(1 << n)]
    weight = [math.factorial(s) * math.factorial(n - s - 1) / math.factorial(n) for s in range(n)]
    out = {}
    for k, p in enumerate(players):
        bit = 1 << k
        out[p] = sum(weight[bin(mask).count("1")] * (worth[mask | bit] - worth[mask])
                     for mask in range(1 << n) if not mask & bit)
    return out


def _sampled(players: list[str], value: Callable[[frozenset[str]], float], seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    total = dict.fromkeys(players, 0.0)
    empty = value(frozenset())
    for _ in range(ORDERS):
        order = players[:]
        rng.shuffle(order)
        for walk in (order, order[::-1]):
            inside: set[str] = set()
            before = empty
            for p in walk:
                inside.add(p)
                now = value(frozenset(inside))
                total[p] += now - before
                before = now
    return {p: v / (2 * ORDERS) for p, v in total.items()}
