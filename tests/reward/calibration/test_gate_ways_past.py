"""The ways past the judge gate found by measuring it with judges of known errors, each refused now
(the verl launch without ``judge_gate`` or ``rubric_source`` is in tests/training/test_verl_preflight.py,
the launchers and the recorded override in tests/training/test_gate_launchers.py):

- a chat pool whose second endpoint serves another model passed, graded half the items;
- a model swapped behind its name passed;
- 48 copies of one case satisfied ``min_cases``;
- a template edited in place, other scoring settings and a price changed in code kept an old
  calibration valid;
- the thresholds and the record's fields could be edited;
- the gate decided on point estimates (judges at the threshold passed);
- a judge that never fails a critical leaf it has failing items of passed.

Served judges are the vLLM-shaped stub (rt_vllm_stub) and the OpenAI-like server (rt_chat_server)
through the real HTTP transport; calibrations are built directly (rt_calibration.record_with) and
bound to the judge as the gate sees it (training.judge_gate.run_facts), or made by ``calibrate``
with a fake judge where the calibration itself is what went wrong.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from rt_calibration import record_with, run_facts
from rt_chat_server import MODEL as CHAT_MODEL
from rt_chat_server import ChatServer
from rt_vllm_stub import VLLMStub, model_folder

from reward.calibration.gate import JudgeGateSettings, check_judge
from reward.calibration.record import record_path, save_calibration
from reward.errors import InputError
from reward.settings import JudgeSettings, RewardSettings

RECIPE = RewardSettings(router="static")
FIT = {"detection": 0.97, "critical_false_pass": (1, 200), "cases": 800}
JUDGE = "http:judge@weights"


def _model(folder: Path, seed: int = 0) -> Path:
    return model_folder(folder, seed)


def _gate(judge: JudgeSettings, recipe: RewardSettings = RECIPE, gate: JudgeGateSettings | None = None) -> dict:
    from training.judge_gate import enforce_judge_gate

    return enforce_judge_gate(judge, gate or JudgeGateSettings(), recipe=recipe)


def _calibrate_fit(judge: JudgeSettings, recipe: RewardSettings = RECIPE):
    """A fit calibration of ``judge`` as it serves now, stored where the gate looks it up."""
    from training.judge_gate import built_judge
    from training.judge_gate import run_facts as facts_of

    with built_judge(judge) as built:
        facts = facts_of(built, tree=None, recipe=recipe)
    rec = record_with(facts.judge_id, facts=facts, **FIT)
    save_calibration(rec, record_path(facts.judge_id))
    return rec


def _chat(url: str, **kw) -> JudgeSettings:
    return JudgeSettings(url=url, api="chat", served_model=kw.pop("served_model", "judge"), **kw)


# ------------------------------------------------------------ a chat pool's second endpoint
def test_a_chat_pool_whose_second_endpoint_serves_another_model_is_refused(tmp_path):
    """Before, a chat judge was known by its first host and model name: a calibration made on the
    first endpoint passed a pool whose second one served another model, which graded half the items."""
    with ChatServer() as a, ChatServer(decide=lambda key: True, p_of=lambda key: 0.99) as b:
        pool = _chat(f"{a.url},{b.url}", served_model=CHAT_MODEL)
        with pytest.raises(InputError, match="who grades cannot be known"):  # no root: nothing names the weights
            _gate(pool)
        # named by a revision, each endpoint is still the calibration's only where it graded
        _calibrate_fit(_chat(a.url, served_model=CHAT_MODEL, revision="grader-v1"))
        assert _gate(_chat(a.url, served_model=CHAT_MODEL, revision="grader-v1"))["passed"]
        with pytest.raises(InputError, match=f"grades at {b.url}/v1, where the calibration"):
            _gate(_chat(f"{a.url},{b.url}", served_model=CHAT_MODEL, revision="grader-v1"))
    # a vLLM pool: the second endpoint's other weights are refused at start-up (issue 48), by its probe answers
    root = str(_model(tmp_path / "judge"))
    with VLLMStub(root=root) as one, VLLMStub(root=root, weights="w2") as other:
        _calibrate_fit(_chat(one.url))
        with pytest.raises(InputError, match="pool does not agree"):
            _gate(_chat(f"{one.url},{other.url}"))


# ------------------------------------------------------------ a model swapped behind its name
def test_a_model_swapped_behind_its_name_is_another_judge(tmp_path):
    """Before, the gate built the judge without its cache, so nothing compared its probe answers
    with anything: new weights behind the same name and revision passed on the old calibration."""
    with VLLMStub(root="/models/remote-judge") as srv:  # weights on another machine: named by a revision
        with pytest.raises(InputError, match="not a model folder readable here"):
            _gate(_chat(srv.url))
        judge = _chat(srv.url, revision="judge-2026-12")
        rec = _calibrate_fit(judge)
        assert rec.judge_probe is not None and rec.judge_probe.answers
        assert _gate(judge)["passed"]
        srv.weights = "w2"  # swapped on the remote machine; nothing it reports changes
        with pytest.raises(InputError, match="answers the fixed probe items otherwise than the judge"):
            _gate(judge)
    folder = _model(tmp_path / "local")
    with VLLMStub(root=str(folder)) as srv:  # weights readable here: their content names the judge
        _calibrate_fit(_chat(srv.url))
        assert _gate(_chat(srv.url))["passed"]
        _model(folder, seed=1)
        srv.weights = "w2"
        with pytest.raises(InputError, match="no calibration of the judge"):
            _gate(_chat(srv.url))
    with ChatServer() as plain:  # a server that does not say what it serves: a swap cannot be seen
        with pytest.raises(InputError, match="who grades cannot be known"):
            _gate(_chat(plain.url, served_model=CHAT_MODEL))


# ------------------------------------------------------------ copies of one case
def test_48_copies_of_one_case_count_as_one(tmp_path):
    from rt_fakes import FakeJudge

    from reward.calibration.run import calibrate
    from reward.router import StaticRouter
    from reward.stress import load_cases
    from reward.tree import load_tree

    tree = load_tree()
    one = load_cases(tree=tree)[0]
    copies = [one.model_copy(update={"id": f"copy-{i}", "note": f"copy {i}"}) for i in range(48)]
    copies[1] = copies[1].model_copy(update={"clean": "  " + one.clean.upper() + "  "})  # spacing and case only
    router = StaticRouter(tree)
    routings = [router.route_sync(c.prompt) for c in copies]
    right = FakeJudge.consistent(lambda template, item: 1.0)

    def predict(*a, **k):  # detection well above the line: only the count of cases is under test
        return {"detection_rate": 0.99, "clean_mean": 0.9}

    rec = asyncio.run(calibrate(right, tree, copies, routings, router="static", progress=False, predict_fn=predict))
    assert rec.predicted.cases == 48 and rec.distinct_cases == 1
    v = check_judge(run_facts(rec.judge_id), JudgeGateSettings(), record=rec)
    assert not v.ok and any("rests on 1 distinct labelled cases, fewer than min_cases 48" in p for p in v.problems)
    # and the interval says how little one case tells: its lower end is far below the point
    assert rec.predicted.detection_low < 0.5


# ------------------------------------------------------------ a template edited in place
def test_a_template_edited_in_place_is_another_calibration(tmp_path):
    template = tmp_path / "grader.txt"
    template.write_text("Response: {{response}}\nCriterion: {{criterion}}\nIs the criterion met? Answer yes or no.\n")
    with VLLMStub(root=str(_model(tmp_path / "judge"))) as srv:
        judge = _chat(srv.url, template=str(template))
        _calibrate_fit(judge)
        assert _gate(judge)["passed"]
        template.write_text(template.read_text().replace("Answer yes or no.", "When unsure, answer yes."))
        with pytest.raises(InputError, match="asked the judge with other prompts .*the template file was edited since"):
            _gate(judge)


# ------------------------------------------------------------ other scoring settings
@pytest.mark.parametrize("change", [{"scoring": "soft"}, {"combine": "points"}, {"scoring_variant": "paper"},
                                    {"applicability": False}, {"format_failure_score": 0.0},
                                    {"router_options": {"threshold": 0.1}}])
def test_other_scoring_settings_are_another_calibration(change):
    from reward.calibration.binding import scoring_settings

    rec = record_with(JUDGE, **FIT)
    assert check_judge(run_facts(JUDGE), JudgeGateSettings(), record=rec).ok
    run = scoring_settings(RewardSettings(**{"router": "static", **change}))
    v = check_judge(run_facts(JUDGE, reward_settings=run), JudgeGateSettings(), record=rec)
    key = next(iter(change))
    assert not v.ok and "predicted for another recipe" in v.problems[0] and f"{key} " in v.problems[0]


# ------------------------------------------------------------ a price changed in code
def test_a_price_changed_in_code_is_another_calibration(tmp_path):
    from reward.calibration.binding import SCORING_MODULES, scoring_code_version

    repo = Path(__file__).resolve().parents[3]
    for name in SCORING_MODULES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(repo / name, tmp_path / name)
    here = scoring_code_version()
    assert scoring_code_version(tmp_path) == here
    variants = tmp_path / "reward/scoring/variants.py"
    text = variants.read_text()
    variants.write_text("# an added comment\n" + text.replace('"""', '"""Reworded. ', 1) + "\n# and another\n")
    assert scoring_code_version(tmp_path) == here
    assert '{"critical": 0.5,' in text
    variants.write_text(text.replace('{"critical": 0.5,', '{"critical": 0.4,'))  # a price, in code only
    other = scoring_code_version(tmp_path)
    assert other != here
    rec = record_with(JUDGE, **FIT, facts=run_facts(JUDGE, scoring_code=other))
    v = check_judge(run_facts(JUDGE), JudgeGateSettings(), record=rec)
    assert not v.ok and "other scoring code" in v.problems[0] and other in v.problems[0]


# ------------------------------------------------------------ edited thresholds and records
@pytest.mark.parametrize("loose", [{"min_detection": 0.5}, {"max_critical_false_pass": 0.5}, {"min_cases": 1}])
def test_loosened_thresholds_are_refused(loose):
    rec = record_with(JUDGE, detection=0.6, critical_false_pass=(20, 40), cases=10)
    v = check_judge(run_facts(JUDGE), JudgeGateSettings(**loose), record=rec)
    key = next(iter(loose))
    assert not v.ok and f"judge_gate.{key} " in v.problems[0] and "never lowered" in v.problems[0]
    assert JudgeGateSettings(min_detection=0.95, max_critical_false_pass=0.05, min_cases=100) is not None  # tighter: fine
    assert check_judge(run_facts(JUDGE), JudgeGateSettings(min_detection=0.92), record=record_with(JUDGE, **FIT)).ok


def test_a_record_edited_by_hand_does_not_verify(tmp_path):
    rec = record_with(JUDGE, detection=0.62, critical_false_pass=(9, 30), cases=600)
    path = save_calibration(rec, record_path(JUDGE))
    data = json.loads(path.read_text())
    data["predicted"].update(detection_rate=0.99, detection_low=0.98)
    data["false_pass"]["critical_all"] = {"k": 0, "n": 30, "rate": 0.0, "low": 0.0, "high": 0.05}
    path.write_text(json.dumps(data))
    v = check_judge(run_facts(JUDGE), JudgeGateSettings())
    assert not v.ok and len(v.problems) == 1 and "does not verify" in v.problems[0] and str(path) in v.problems[0]
    path.write_text(json.dumps({**data, "format": 1}))  # a record of the old format: what it lacks is unchecked
    with pytest.raises(InputError, match="format 1.*calibrate the judge again") as exc:
        check_judge(run_facts(JUDGE), JudgeGateSettings())
    assert exc.value.field == "format" and exc.value.file == str(path)
    save_calibration(record_with(JUDGE, **FIT), path)  # saved as made: verifies
    assert check_judge(run_facts(JUDGE), JudgeGateSettings()).ok


# ------------------------------------------------------------ point estimates at the threshold
@pytest.mark.parametrize("figures", [
    {"detection": 0.90, "critical_false_pass": (1, 200), "cases": 188},   # detection at the line
    {"detection": 0.97, "critical_false_pass": (10, 100), "cases": 800},  # critical false pass at the line
    {"detection": 0.90, "critical_false_pass": (10, 100), "cases": 188},  # both
])
def test_a_judge_at_the_threshold_is_refused_on_its_interval(figures):
    """Before, the gate compared point estimates and these three passed; measured again, one such
    judge detected 0.833. A rate of 0.90 on 188 cases is only known to lie above 0.85."""
    v = check_judge(run_facts(JUDGE), JudgeGateSettings(), record=record_with(JUDGE, **figures))
    assert not v.ok
    text = " ".join(v.problems)
    if figures["detection"] == 0.90:
        assert "its lower end is below min_detection 0.9" in text
        assert v.record.predicted.detection_low < 0.86
    if figures["critical_false_pass"] == (10, 100):
        assert "95% interval up to 0.17" in text and "above max_critical_false_pass 0.1" in text


def test_the_seeds_spread_widens_the_interval():
    steady = record_with(JUDGE, **{**FIT, "detection": 0.95}, seed_rates=[0.95, 0.95, 0.95])
    spread = record_with(JUDGE, **{**FIT, "detection": 0.95}, seed_rates=[0.90, 0.95, 1.00])
    assert spread.predicted.detection_low < steady.predicted.detection_low - 0.03
    assert check_judge(run_facts(JUDGE), JudgeGateSettings(), record=steady).ok
    assert not check_judge(run_facts(JUDGE), JudgeGateSettings(), record=spread).ok


# ------------------------------------------------------------ one-sided blindness
def test_a_critical_leaf_the_judge_never_fails_is_refused_by_name():
    never = {"fail_items": 10, "pass_items": 12, "read_fail_on_fail": 0, "read_fail_on_pass": 0, "severity": "critical"}
    fine = {"fail_items": 10, "pass_items": 12, "read_fail_on_fail": 10, "read_fail_on_pass": 1, "severity": "critical"}
    minor = {**never, "severity": "minor"}
    rec = record_with(JUDGE, **FIT, coverage={"sf_emergency_escalation": never, "sf_dangerous_advice": fine,
                                              "cm_plain_language": minor})
    v = check_judge(run_facts(JUDGE), JudgeGateSettings(), record=rec)
    assert not v.ok and len(v.problems) == 1
    assert "blind on one side of 1 critical leaf" in v.problems[0]
    assert "sf_emergency_escalation (never fails: 10 failing and 12 passing items)" in v.problems[0]


def test_an_always_yes_judge_is_refused_naming_its_blind_critical_leaves():
    from rt_fakes import FakeJudge

    from reward.calibration.run import calibrate
    from reward.router import StaticRouter
    from reward.stress import load_cases
    from reward.tree import load_tree

    tree = load_tree()
    cases = load_cases(tree=tree)
    router = StaticRouter(tree)
    routings = [router.route_sync(c.prompt) for c in cases]
    always_yes = FakeJudge(lambda template, item: 1.0)  # every criterion met, every situation present
    rec = asyncio.run(calibrate(always_yes, tree, cases, routings, router="static", progress=False, predict=False))
    blind = rec.one_sided_critical()
    assert len(blind) >= 8 and set(blind.values()) <= {"never fails", "never passes"}
    v = check_judge(run_facts(rec.judge_id), JudgeGateSettings(), record=rec)
    named = next(p for p in v.problems if "blind on one side" in p)
    assert all(lid in named for lid in blind)
    assert set(blind) - {s.leaf_id for s in rec.systematic}  # leaves the systematic list misses: a few failing items
