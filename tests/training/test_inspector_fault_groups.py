"""The inspector under fault groups, on records the real reward wrote (rt_inspector with the
emergency checked by five members of ``missed_emergency``: a reply that misses it fails all five,
priced once). Each failed member carries its share of the group's price (Shapley values, worked out
here by brute force over every order from the prices, not read from the inspector's code); the
Leaves tab's shares and Compare's shares add up with no "other" artefact; a negative leaf that
stopped failing "now passes"; compare carries both runs' settings and which keys differ; a
records folder whose last line a kill cut opens, the line skipped with a warning."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from rt_inspector import A_MET, B_MET, EMERGENCY, MINOR, score, write

from reward.errors import InputError
from reward.settings import RewardSettings
from reward.tree import load_tree
from training.inspector import build_data, compare_groups, leaf_variance_shares, load_run

NEGATIVE = "sf_red_flags_missed"  # a member whose criterion describes the failure: met = failed


@pytest.fixture(scope="module")
def tree():
    return load_tree()


@pytest.fixture(scope="module")
def runs(tree, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("faults")
    a = load_run(write(tmp / "a.jsonl", score(A_MET, emergency=EMERGENCY)), name="A", tree=tree)
    b = load_run(write(tmp / "b.jsonl", score(B_MET, emergency=EMERGENCY)), name="B", tree=tree)
    return a, b


def brute_force_shapley(players: list[str], worth) -> dict[str, float]:
    """Each player's marginal effect averaged over every order (worth: set of failed players -> score)."""
    total = dict.fromkeys(players, 0.0)
    orders = list(itertools.permutations(players))
    for order in orders:
        failed: set[str] = set()
        for p in order:
            before = worth(failed)
            failed.add(p)
            total[p] += worth(failed) - before
    return {p: v / len(orders) for p, v in total.items()}


def severity_worth(failed: set[str]) -> float:
    """The severity score of this routing from the prices: the group fails at the critical price
    (0.5) once any member fails; the minor leaf costs 0.05 of the score outside the critical part."""
    group = 0.5 if failed & set(EMERGENCY) else 0.0
    minor = 0.05 / 0.5 if MINOR in failed else 0.0
    return (1 - group) * ((1 - 0.5) + 0.5 * (1 - minor))


def test_the_scores_price_the_group_once(runs):
    a, _ = runs
    assert [round(r.score, 9) for r in a.rollouts] == [1.0, 0.95, 1.0, 0.95, 0.475, 0.475, 0.5, 0.5]
    r6 = next(r for r in a.rollouts if r.id == "r6")
    assert sum(lf["passed"] < 0.5 for lf in r6.leaves if lf["leaf_id"] in EMERGENCY) == 5


def test_a_groups_price_is_shared_by_its_failed_members(runs):
    a, _ = runs
    by = {r.id: r for r in a.rollouts}
    # r6 fails the five members only: each carries a fifth of the group's price
    for lid in EMERGENCY:
        assert by["r6"].contrib[lid] == pytest.approx(-0.1, abs=1e-9)
        assert by["r6"].flip[lid] == pytest.approx(0.0, abs=1e-9)  # flipped alone, a member changes nothing
    # r4 fails them and the minor leaf: the brute-force Shapley values of the prices
    want = brute_force_shapley([*EMERGENCY, MINOR], severity_worth)
    assert {lid: by["r4"].contrib[lid] for lid in want} == pytest.approx(want, abs=1e-9)
    for r in a.rollouts:  # the parts add up to the score minus the all-pass score
        assert sum(r.contrib.values()) == pytest.approx(r.score - 1.0, abs=1e-9)
    # the page's data: the group as one line with its failed members, and each leaf's contribution
    data = build_data([a], load_tree())
    rows = {data["S"][row[0]]: row for row in data["runs"][0]["R"]}
    (fault,) = rows["r6"][22]
    assert data["S"][fault[0]] == "missed_emergency" and fault[2] == pytest.approx(-0.5, abs=1e-4)
    assert sorted(data["S"][data["N"][n][0]] for n in fault[3][::2]) == sorted(EMERGENCY)
    leaves = rows["r6"][12]
    contrib = {data["S"][data["N"][leaves[i]][0]]: leaves[i + 7] for i in range(0, len(leaves), 9)}
    assert all(contrib[lid] == pytest.approx(-0.1, abs=1e-4) for lid in EMERGENCY)


def test_the_variance_shares_add_up_without_an_other_artefact(runs):
    a, _ = runs
    shares, other, _ = leaf_variance_shares(a.rollouts)
    members = [shares[lid] for lid in EMERGENCY]
    assert max(members) - min(members) < 1e-9  # symmetric members share alike
    assert sum(members) > 0.95 and all(0.0 < s < 0.25 for s in members)
    assert abs(other) < 1e-9 and sum(shares.values()) + other == pytest.approx(1.0, abs=1e-9)


def test_compare_shares_the_change_among_the_members(runs):
    a, b = runs
    cmp = compare_groups(a, b)
    by = {x["leaf_id"]: x for x in cmp["leaves"]}
    members = [by[lid]["share"] for lid in EMERGENCY]
    assert max(members) - min(members) < 1e-9 and sum(members) == pytest.approx(1.0, abs=0.01)
    assert abs(cmp["other"]) < 1e-9


def test_a_negative_leaf_that_stopped_failing_now_passes(runs):
    a, b = runs
    cmp = compare_groups(a, b)
    by = {x["leaf_id"]: x for x in cmp["leaves"]}
    for lid in EMERGENCY:  # 3 more rollouts escalate: every member, positive or negative, now passes in them
        assert (by[lid]["up"], by[lid]["down"]) == (3, 0), lid
    (p,) = cmp["prompts"]
    neg = next(x for x in p["leaves"] if x["leaf_id"] == NEGATIVE)
    assert (neg["pass_a"], neg["pass_b"]) == (0.5, 0.875)


def test_compare_carries_both_runs_settings_and_the_keys_that_differ(tmp_path, tree):
    a = write(tmp_path / "a.jsonl", score(A_MET, emergency=EMERGENCY))
    b = write(tmp_path / "b.jsonl", score(B_MET, emergency=EMERGENCY, confirm_failures=False))
    base = RewardSettings().record()
    (tmp_path / "a.settings.json").write_text(json.dumps({"reward": base}))
    (tmp_path / "b.settings.json").write_text(json.dumps({"reward": {**base, "confirm_failures": False}}))
    data = build_data([load_run(a, name="A", tree=tree), load_run(b, name="B", tree=tree)], tree)
    assert data["CD"]["settings_diff"] == ["confirm_failures"]
    assert data["runs"][0]["settings"] == base and data["runs"][1]["settings"]["confirm_failures"] is False


def _records_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "run" / "rubric_records"
    folder.mkdir(parents=True)
    rows = score(A_MET, emergency=EMERGENCY)
    (folder / "settings.json").write_text(json.dumps({"name": "clinical_rubric", "reward": RewardSettings().record()}))
    write(folder / "step-000001.jsonl", rows[:4])
    text = "".join(json.dumps(r) + "\n" for r in rows[4:])
    (folder / "step-000002.jsonl").write_text(text[:-40], encoding="utf-8")  # killed mid-line
    return tmp_path / "run"


def test_a_records_folder_cut_mid_line_opens_with_the_line_skipped(tmp_path, tree):
    run = load_run(_records_folder(tmp_path), tree=tree)
    assert [r.id for r in run.rollouts] == ["r0", "r1", "r2", "r3", "r4", "r5", "r6"]
    (warning,) = run.warnings
    assert warning.startswith("step-000002.jsonl line 4: skipped a cut last line")
    assert build_data([run], tree)["runs"][0]["warnings"] == [warning]


def test_a_bad_line_before_the_last_is_an_error_in_a_scores_file_and_skipped_in_a_records_folder(tmp_path, tree):
    """A scores file is a user's (a bad line is theirs to mend); a records folder is the trainer's,
    where a resumed run appends after the line its kill cut (tests/training/test_inspector_resume.py)."""
    folder = _records_folder(tmp_path) / "rubric_records"
    path = folder / "step-000002.jsonl"
    path.write_text("{not json\n" + path.read_text(), encoding="utf-8")
    run = load_run(folder.parent, tree=tree)
    assert any(w.startswith("step-000002.jsonl line 1: skipped a line that does not parse") for w in run.warnings)
    single = tmp_path / "scores.jsonl"
    single.write_text("{not json\n" + (folder / "step-000001.jsonl").read_text(), encoding="utf-8")
    with pytest.raises(InputError, match=r"scores\.jsonl: record line 1: invalid JSON"):
        load_run(single, tree=tree)
