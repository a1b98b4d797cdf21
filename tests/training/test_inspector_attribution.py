"""What the inspector says explains a score, on records the real reward wrote (rt_inspector: a
group whose advantages one critical leaf decides). Contributions are the reward's own rescoring
of a flipped verdict; they add up as docs/inspector.md says; the critical leaf comes first in the
variance shares; compare finds the +0.181 change and the 3 flipped rollouts; the group view's
drivers and other add up to each advantage. Expected values are worked out here from the prices
(critical 0.5, minor 0.05), not read from the inspector's code."""

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


def test_a_contribution_is_the_change_if_the_verdict_flipped(runs):
    a, _ = runs
    by = {r.id: r for r in a.rollouts}
    # r4 fails both: the critical failure costs half of what passing it would give (0.95 - 0.475)
    assert by["r4"].contrib[CRITICAL] == pytest.approx(-0.475, abs=1e-9)
    assert by["r4"].contrib[MINOR] == pytest.approx(0.475 - 0.5, abs=1e-9)
    # r0 passes both: what each pass is worth
    assert by["r0"].contrib[CRITICAL] == pytest.approx(0.5, abs=1e-9)
    assert by["r0"].contrib[MINOR] == pytest.approx(0.05, abs=1e-9)
    always_on = [lid for lid in by["r0"].contrib if lid not in (CRITICAL, MINOR)]
    assert always_on and all(by["r0"].contrib[lid] > 0 for lid in always_on)  # passing checks are worth something


def test_under_a_linear_variant_contributions_add_up_to_2s_minus_1(tree, tmp_path):
    """docs/inspector.md: under paper and active, a rollout's leaf contributions sum to a(2 tree - 1)."""
    for variant in ("paper", "active"):
        run = load_run(write(tmp_path / f"{variant}.jsonl", score(A_MET, scoring_variant=variant)), tree=tree)
        for r in run.rollouts:
            assert sum(r.contrib.values()) == pytest.approx(2 * r.score - 1, abs=1e-9), (variant, r.id)


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
    assert p["leaves"][0]["leaf_id"] == CRITICAL and p["leaves"][0]["met_a"] == 0.5 and p["leaves"][0]["met_b"] == 0.875


def test_a_scores_file_without_prompts_or_group_ids_is_refused(tmp_path: Path):
    from reward.errors import InputError

    rows = score(A_MET)
    for r in rows:
        r.pop("group")
    with pytest.raises(InputError, match="grouped by prompt"):
        load_run(write(tmp_path / "s.jsonl", rows))
