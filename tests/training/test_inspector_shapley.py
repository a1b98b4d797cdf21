"""The Shapley values behind the inspector's contributions: exact values equal a brute force over
every order; symmetric players share alike; an additive game's values are each player's own
effect; above the exact limit the sampled values still add up exactly and repeat for a seed."""

from __future__ import annotations

import itertools

import pytest

from training.inspector.shapley import EXACT_MAX, ORDERS, shapley


def brute_force(players, value):
    total = dict.fromkeys(players, 0.0)
    orders = list(itertools.permutations(players))
    for order in orders:
        inside: set[str] = set()
        for p in order:
            before = value(frozenset(inside))
            inside.add(p)
            total[p] += value(frozenset(inside)) - before
    return {p: v / len(orders) for p, v in total.items()}


def compounding(coalition: frozenset[str]) -> float:
    """A severity-like game: a group of three priced once (0.5), two faults of their own."""
    group = 0.5 if coalition & {"g1", "g2", "g3"} else 0.0
    return (1 - group) * (1 - 0.2 * ("a" in coalition)) * (1 - 0.05 * ("b" in coalition))


def test_exact_values_are_the_brute_force_and_symmetric_players_share_alike():
    players = ["g1", "g2", "g3", "a", "b"]
    split = shapley(players, compounding)
    assert split.orders == 0 and split.values == pytest.approx(brute_force(players, compounding), abs=1e-12)
    assert split.values["g1"] == pytest.approx(split.values["g3"], abs=1e-12)
    assert sum(split.values.values()) == pytest.approx(compounding(frozenset(players)) - 1.0, abs=1e-12)


def test_an_additive_game_takes_each_players_own_effect():
    weights = {"x": -0.3, "y": -0.1, "z": -0.05}

    def additive(coalition):
        return 1 + sum(weights[p] for p in coalition)

    assert shapley(list(weights), additive, additive=True).values == pytest.approx(weights, abs=1e-12)


def test_many_players_are_sampled_and_still_add_up():
    players = [f"p{k}" for k in range(EXACT_MAX + 3)]

    def game(coalition):
        return (1 - 0.5 * bool(coalition & {"p0", "p1", "p2"})) * (1 - 0.01 * len(coalition))

    split = shapley(players, game, seed=7)
    assert split.orders == 2 * ORDERS
    assert sum(split.values.values()) == pytest.approx(game(frozenset(players)) - game(frozenset()), abs=1e-12)
    assert shapley(players, game, seed=7).values == split.values  # the same file, the same figures
    assert split.values["p0"] < split.values["p5"] < 0  # a member of the priced group costs more
