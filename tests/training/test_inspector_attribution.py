"""What the inspector says explains a score, on records the real reward wrote (rt_inspector: a
group whose advantages one critical leaf decides). Contributions are Shapley values of the reward's
own rescoring and add up to the score minus the all-pass score; the flip value is the change if one
verdict flipped; the critical leaf comes first in the variance shares; compare finds the +0.181
change and the 3 flipped rollouts; the group view's drivers and other add up to each advantage.
Expected values are worked out here from the prices (critical 0.5, minor 0.05), not read from the
inspector's code."""

from __future__ import annotations

from pathlib import Path

import pytest
from rt_inspector import A_MET, B_MET, CRITICAL, MEAN_CHANGE, MINOR, score, write

from reward.tree import load_tree
from training.inspector import compare_groups, group_view, leaf_variance_shares, load_run


@pytest.fixture(scope="module")
def tree():
    return load_tree()


@pytest.fixture(scope="module")
def runs(tree, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("attr")
    a = load_run(write(tmp / "a.jsonl", score(A_MET)), name="A", tree=tree)
    b = load_run(write(tmp / "b.jsonl", score(B_MET)), name="B", tree=tree)
    return a, b


def test_the_scores_are_the_severity_prices(runs):
    a, _ = runs
    got = {r.id: r.score for r in a.rollouts}
    assert got == pytest.approx({"r0": 1.0, "r1": 0.95, "r2": 1.0, "r3": 0.95, "r4": 0.475, "r5": 0.475,
                                 "r6": 0.5, "r7": 0.5}, abs=1e-9)
    assert len({r.group for r in a.rollouts}) == 1  # grouped by the records' own group id, no rollouts file


def test_a_contribution_is_the_checks_share_of_what_the_failures_cost(runs):
    a, _ = runs
    by = {r.id: r for r in a.rollouts}
    # r4 fails both: 1 -> 0.5 (critical alone), 0.95 (minor alone), 0.475 (both); each failure's
    # effect averaged over the two orders of restoring them
    assert by["r4"].contrib[CRITICAL] == pytest.approx(((0.5 - 1) + (0.475 - 0.95)) / 2, abs=1e-9)
    assert by["r4"].contrib[MINOR] == pytest.approx(((0.95 - 1) + (0.475 - 0.5)) / 2, abs=1e-9)
    for r in a.rollouts:  # the parts add up to the score minus the score with every check passing (1)
        assert sum(r.contrib.values()) == pytest.approx(r.score - 1.0, abs=1e-9), r.id
        assert r.orders == 0  # exact: two players at most
    # r0 passes both: nothing to share
    assert all(v == 0.0 for v in by["r0"].contrib.values())
    # the flip value stays: what the score would be with that one verdict flipped
    assert by["r4"].flip[CRITICAL] == pytest.approx(-0.475, abs=1e-9)
    assert by["r0"].flip[CRITICAL] == pytest.approx(0.5, abs=1e-9)
    assert by["r0"].flip[MINOR] == pytest.approx(0.05, abs=1e-9)


def test_under_a_linear_variant_contributions_are_each_failures_own_effect(tree, tmp_path):
    """Under paper and active the score is a weighted sum of pass values: each failed check's
    contribution is minus its weight's share (the flip of a failure), and they add up."""
    for variant in ("paper", "active"):
        run = load_run(write(tmp_path / f"{variant}.jsonl", score(A_MET, scoring_variant=variant)), tree=tree)
        for r in run.rollouts:
            assert sum(r.contrib.values()) == pytest.approx(r.score - 1.0, abs=1e-9), (variant, r.id)
            for lid, c in r.contrib.items():
                assert c == pytest.approx(min(0.0, r.flip[lid]), abs=1e-9), (variant, r.id, lid)


def test_the_critical_leaf_carries_the_group_variance(runs):
    a, _ = runs
    shares, other, var = leaf_variance_shares(a.rollouts)
    ranked = sorted(shares, key=lambda k: -abs(shares[k]))
    assert ranked[0] == CRITICAL and shares[CRITICAL] > 0.9
    assert abs(shares[MINOR]) < 0.05
    assert sum(shares.values()) + other == pytest.approx(1.0, abs=1e-9)
    assert var > 0


def test_the_group_view_explains_each_advantage(runs):
    a, _ = runs
    (g,) = group_view(a.rollouts, top=1000).values()
    mean = sum(r.score for r in a.rollouts) / 8
    assert g["mean"] == pytest.approx(mean, abs=1e-12) and g["n_scored"] == 8
    for r in a.rollouts:
        v = g["rollouts"][r.id]
        assert v["advantage"] == pytest.approx(r.score - mean, abs=1e-12)
        # every leaf's deviation plus other is the advantage; the critical leaf drives it most
        assert sum(d for _, d in v["drivers"]) + v["other"] == pytest.approx(v["advantage"], abs=1e-12)
        assert v["drivers"][0][0] == CRITICAL
    r4 = g["rollouts"]["r4"]
    assert r4["advantage"] < 0 and r4["drivers"][0][1] < 0


def test_compare_ranks_the_leaf_by_its_share_of_the_mean_change(runs):
    a, b = runs
    cmp = compare_groups(a, b)
    assert cmp["delta"] == pytest.approx(MEAN_CHANGE, abs=1e-9) and round(cmp["delta"], 3) == 0.181
    top = cmp["leaves"][0]
    assert top["leaf_id"] == CRITICAL and top["up"] == 3 and top["down"] == 0
    assert top["share"] == pytest.approx(1.0, abs=0.05)
    assert sum(x["share"] for x in cmp["leaves"]) + cmp["other"] == pytest.approx(1.0, abs=1e-9)
    (p,) = cmp["prompts"]
    assert p["leaves"][0]["leaf_id"] == CRITICAL and p["leaves"][0]["pass_a"] == 0.5 and p["leaves"][0]["pass_b"] == 0.875


def test_a_scores_file_without_prompts_or_group_ids_is_refused(tmp_path: Path):
    from reward.errors import InputError

    rows = score(A_MET)
    for r in rows:
        r.pop("group")
    with pytest.raises(InputError, match="grouped by prompt"):
        load_run(write(tmp_path / "s.jsonl", rows))
