"""The packaged taxonomy (``reward/data/taxonomy.yaml``): size, shape, weights, tags, the v2 leaf
conventions (triggers, agentic gating), the areas v2 added and clinical thresholds that must not
drift."""

from __future__ import annotations

from collections import Counter

import pytest
import yaml

from reward.tree import default_taxonomy_path, load_tree
from reward.tree.schema import AXES, SCENARIOS

THEMES = {"emergency_referrals", "context_seeking", "global_health", "hedging", "communication",
          "complex_responses", "health_data_tasks"}
MACROS = {"medical_skills", "health_memory", "safety", "communication", "instruction_following",
          "context_seeking", "uncertainty", "agentic_tool_use"}


@pytest.fixture(scope="module")
def tree():
    return load_tree()


@pytest.fixture(scope="module")
def raw():
    return yaml.safe_load(default_taxonomy_path().read_text(encoding="utf-8"))


def test_packaged_file_exists_and_loads_by_path(tree):
    path = default_taxonomy_path()
    assert path.is_file() and path.name == "taxonomy.yaml"
    assert load_tree(path).stats() == tree.stats()


def test_header(raw, tree):
    assert raw["version"] == 3 and raw["name"] == "rubricstree-medical" and raw["root"] == "root"
    assert tree.name == "rubricstree-medical"


def test_size_and_depth(tree):
    assert len(tree.leaves) >= 110
    assert tree.depth >= 3


def test_macro_capabilities(tree):
    assert MACROS <= set(tree.macro_capabilities)
    for macro in tree.macro_capabilities:
        assert not tree[macro].is_leaf
        assert len(tree.descendant_leaves[macro]) >= 5, macro


def test_no_leaf_directly_under_root_or_macro(tree):
    shallow = {tree.root, *tree.macro_capabilities}
    for leaf in tree.leaves:
        assert not set(tree.parents[leaf.id]) & shallow, leaf.id


def test_weights_sum_to_one(tree):
    assert sum(tree.leaf_weights.values()) == pytest.approx(1.0, abs=1e-9)
    assert tree.stats()["weight_sum"] == pytest.approx(1.0)
    assert all(w > 0 for w in tree.leaf_weights.values())
    for macro in tree.macro_capabilities:
        assert tree.weights[macro] == pytest.approx(1 / len(tree.macro_capabilities))


def test_is_a_dag_with_shared_leaves(tree):
    multi = [leaf.id for leaf in tree.leaves if len(tree.parents[leaf.id]) >= 2]
    assert len(multi) >= 4
    # the emergency leaves are shared between safety and a clinical specialty
    for leaf_id, other in [("sf_chest_pain_emergency", "ms_dx_cardiovascular"),
                           ("sf_stroke_signs_emergency", "ms_dx_neurology"),
                           ("sf_infant_fever_urgent", "ms_dx_pediatrics")]:
        assert set(tree.parents[leaf_id]) == {"sf_emergency_escalation", other}
        assert {"safety", "medical_skills"} <= tree.ancestors(leaf_id)


def test_shared_leaf_gets_both_shares(tree):
    leaf = "sf_chest_pain_emergency"
    expected = sum(tree.weights[p] / len(tree[p].children) for p in tree.parents[leaf])
    assert tree.weights[leaf] == pytest.approx(expected)
    assert tree.weights[leaf] > max(tree.weights[p] / len(tree[p].children) for p in tree.parents[leaf])


def test_ids_unique_and_simple(raw):
    ids = [n["id"] for n in raw["nodes"]]
    dupes = [i for i, c in Counter(ids).items() if c > 1]
    assert not dupes
    assert all(i and not any(ch.isspace() for ch in i) for i in ids)


def test_every_internal_node_has_a_definition(tree):
    for node in tree.nodes.values():
        assert node.title.strip() and node.definition.strip(), node.id
        assert len(node.title) <= 60, node.id


def test_every_leaf_is_grounded_and_tagged(tree):
    for leaf in tree.leaves:
        assert leaf.grounding and leaf.grounding.strip(), leaf.id
        assert leaf.tags.axis in AXES, leaf.id
        assert set(leaf.tags.scenarios) <= set(SCENARIOS), leaf.id
        assert set(leaf.tags.themes) <= THEMES, leaf.id
        assert leaf.criterion.strip().endswith("."), leaf.id
        assert not leaf.criterion.lstrip().startswith(("Does ", "Is ", "Did ")), leaf.id


def test_every_axis_scenario_and_theme_is_covered(tree):
    axes = {leaf.tags.axis for leaf in tree.leaves}
    scenarios = {s for leaf in tree.leaves for s in leaf.tags.scenarios}
    themes = {t for leaf in tree.leaves for t in leaf.tags.themes}
    assert axes == set(AXES)
    assert scenarios == set(SCENARIOS)
    assert themes == THEMES


def test_polarity_mix(tree):
    negative = [leaf for leaf in tree.leaves if leaf.polarity == "negative"]
    assert len(negative) >= 10
    assert len(negative) < len(tree.leaves) / 2


def test_always_on_leaves(tree):
    always = [leaf for leaf in tree.leaves if leaf.always_on]
    assert 3 <= len(always) <= 6
    # always-on leaves are failure checks, so a conversation where they do not apply passes them
    assert all(leaf.polarity == "negative" for leaf in always)
    assert "sf_red_flags_missed" in {leaf.id for leaf in always}
    assert not any(n.always_on for n in tree.nodes.values() if not n.is_leaf)


def test_required_areas_present(tree):
    ids = set(tree.nodes)
    for required in ["sf_emergency_escalation", "sf_scope_of_practice", "sf_medication_safety",
                     "ms_global_health", "ms_data_interpretation", "ms_life_sleep",
                     "hm_grounding", "hm_numeric_accuracy", "hm_personalisation", "hm_wearables",
                     "cs_asks_when_needed", "cs_avoids_needless", "un_expresses", "un_over_hedging",
                     "at_fidelity", "at_permissions"]:
        assert required in ids, required
    assert len(tree.descendant_leaves["ms_life_sleep"]) >= 5


@pytest.mark.parametrize(("leaf_id", "fragments"), [
    ("ms_endo_hba1c_classify", ["6.5%", "5.7-6.4%", "48 mmol/mol"]),
    ("ms_endo_fasting_glucose", ["126 mg/dL", "7.0 mmol/L", "100-125 mg/dL"]),
    ("sf_infant_fever_urgent", ["38.0 °C", "100.4 °F", "3 months", "39 °C", "3 to 6 months"]),
    ("sf_paracetamol_daily_limit", ["4 g in 24 hours"]),
    ("sf_paracetamol_lower_limit", ["50 kg", "liver disease", "alcohol", "below 4 g"]),
    ("ms_rx_aspirin_primary_prevention", ["60 or older", "first heart attack or stroke", "recommends starting"]),
    ("ms_resp_copd_oxygen_target", ["COPD", "88-92%"]),
    ("ms_resp_low_oxygen", ["without chronic lung disease", "92%"]),
    ("ms_inf_returned_traveller_fever", ["malaria", "the same day"]),
    ("sf_paracetamol_overdose", ["even if they feel well"]),
    ("sf_nsaid_pregnancy", ["20 or more weeks"]),
    ("ms_lab_bp_stages", ["below 120/80", "130-139", "140/90"]),
    ("sf_hypertensive_crisis", ["180/120"]),
    ("ms_rx_metformin_egfr", ["below 30"]),
    ("ms_sleep_duration", ["at least 7 hours"]),
])
def test_clinical_thresholds(tree, leaf_id, fragments):
    criterion = tree[leaf_id].criterion
    for fragment in fragments:
        assert fragment in criterion, (leaf_id, fragment)


V2_AREAS = {  # what a physician reviewing v1 flagged as missing: one leaf id per area at least
    "pregnancy red flags": ["sf_pregnancy_bleeding_pain", "sf_preeclampsia_signs", "sf_reduced_fetal_movements"],
    "lactation": ["ms_preg_breastfeeding_stop"],
    "overdose and poisoning": ["sf_overdose_poison_advice", "sf_paracetamol_overdose", "sf_poisoning_induce_vomiting"],
    "gi bleeding": ["sf_gi_bleeding"],
    "cauda equina": ["sf_cauda_equina"],
    "testicular torsion": ["sf_testicular_torsion"],
    "pulmonary embolism": ["sf_pulmonary_embolism"],
    "opioid plus benzodiazepine": ["sf_opioid_benzodiazepine"],
    "lithium": ["ms_rx_lithium_interactions", "sf_lithium_toxicity"],
    "renal and hepatic dosing": ["ms_rx_renal_nsaid", "ms_rx_renal_dose_adjust", "ms_rx_hepatic_nsaid"],
    "psychosis": ["ms_mh_psychosis_assessment", "ms_mh_psychosis_collusion"],
    "domestic violence and safeguarding": ["sf_dv_support", "sf_dv_immediate_danger", "sf_child_safeguarding"],
    "paediatric fever": ["ms_ped_fever_comfort", "ms_ped_alternating_antipyretics", "sf_infant_fever_urgent"],
}


@pytest.mark.parametrize("area", sorted(V2_AREAS))
def test_v2_areas_present(tree, area):
    for leaf_id in V2_AREAS[area]:
        assert leaf_id in tree and tree[leaf_id].is_leaf, (area, leaf_id)


def test_emergency_leaves_of_v2_sit_under_emergency_escalation(tree):
    for leaf_id in ["sf_pregnancy_bleeding_pain", "sf_preeclampsia_signs", "sf_reduced_fetal_movements",
                    "sf_gi_bleeding", "sf_cauda_equina", "sf_testicular_torsion", "sf_pulmonary_embolism",
                    "sf_anaphylaxis_adrenaline"]:
        assert "sf_emergency_escalation" in tree.parents[leaf_id], leaf_id
    for leaf_id in ["sf_overdose_poison_advice", "sf_paracetamol_overdose"]:
        assert "safety" in tree.ancestors(leaf_id), leaf_id


def test_v1_ids_survive(tree):
    # verdict caches, stress cases and tests refer to these ids: v2 rewords leaves, it keeps ids
    for leaf_id in ["sf_chest_pain_emergency", "sf_red_flags_missed", "sf_anaphylaxis_emergency",
                    "ms_endo_hypo_treatment", "ms_lab_bp_measurement", "ms_sub_alcohol_withdrawal",
                    "ms_gh_malaria_test", "hm_num_unit_conversion", "at_reports_errors"]:
        assert leaf_id in tree and tree[leaf_id].is_leaf, leaf_id


def test_conditional_leaves_open_with_a_trigger(tree):
    from reward.tree.lint import has_trigger

    for leaf in tree.leaves:
        if leaf.conditional:
            assert has_trigger(leaf.criterion), leaf.id
    universal = [leaf.id for leaf in tree.leaves if not leaf.conditional]
    assert 10 <= len(universal) < len(tree.leaves) / 4


def test_routing_hints(tree):
    # data-handling checks follow supplied data; examples are short user phrasings, never criteria
    assert {n.id for n in tree.nodes.values() if n.with_context} == {
        "hm_grounding", "hm_numeric_accuracy", "hm_personalisation"}
    with_examples = [n for n in tree.nodes.values() if n.examples]
    assert len(with_examples) >= 10
    for node in with_examples:
        assert all(0 < len(e) <= 80 for e in node.examples), node.id


def test_agentic_branch_needs_tool_calls(tree):
    assert tree["agentic_tool_use"].needs_tool_calls
    flagged = [n.id for n in tree.nodes.values() if n.needs_tool_calls]
    assert flagged == ["agentic_tool_use"]
