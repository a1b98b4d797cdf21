"""The judge gate at launch (stage 3, TRL and verl): the judge the reward will use is looked up by
identity among the calibrations on record (``rubricstree judge calibrate``), compared with what
the run will do, and a judge the reward cannot survive is refused before any model loads
(``reward.calibration.gate``).

The gate covers the clinical-rubric stage, whose verdicts (one yes/no per rubric leaf) are what a
calibration measures. Stage 2 asks its judge for error lists, a task the calibration does not
grade; stage 1 has no judge.

Every launcher calls :func:`enforce_judge_gate` (``training.launch_checks`` for TRL, so
``scripts/train.sh`` and the pipeline too; ``training.verl_preflight`` for verl) and records the
outcome it returns in the run's folder (``training.gate_record``), from where the exports copy it
into their model card. ``judge_gate.enforce: false`` is the one way past a refusal, and it is
written down there, not only logged.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from reward.calibration.binding import judge_binding, scoring_code_version, scoring_settings, template_hash
from reward.calibration.gate import JudgeGateSettings, RunFacts, check_judge
from reward.errors import InputError
from reward.settings import JudgeSettings, RewardSettings, reward_flags

log = logging.getLogger(__name__)


@contextmanager
def built_judge(judge: JudgeSettings) -> Iterator[Any]:
    """The judge ``judge`` builds, without the verdict cache (its start-up establishes who grades:
    a served judge's pool agrees, is fingerprinted and answers the fixed probe items), closed after."""
    built = judge.build(cache=False)
    try:
        yield built
    finally:
        asyncio.run(built.aclose())


def judge_identity(judge: JudgeSettings) -> str:
    """The identity of the judge ``judge`` builds, as the verdict cache and the calibrations key it."""
    with built_judge(judge) as built:
        return built.model_id


def judge_flags(judge: JudgeSettings) -> str:
    """The ``rubricstree judge calibrate`` options that build ``judge``: its endpoint and every
    grading setting that is not the default (a calibration under other settings is another judge's)."""
    opts = [f"--judge-url {shlex.quote(str(judge.url))}" if judge.url else f"--judge-model {shlex.quote(str(judge.model))}"]
    default = JudgeSettings()
    for key, flag in (("served_model", "--served-model"), ("tokenizer", "--judge-tokenizer"), ("api", "--judge-api"),
                      ("api_key_env", "--judge-api-key-env"),
                      ("mode", "--judge-mode"), ("template", "--judge-template"),
                      ("temperature", "--judge-temperature"), ("max_tokens", "--judge-max-tokens"),
                      ("revision", "--judge-revision")):
        value = getattr(judge, key, None)
        if value is not None and value != getattr(default, key, None):
            opts.append(f"{flag} {shlex.quote(str(value))}")
    return " ".join(opts)


def recipe_flags(recipe: RewardSettings) -> str:
    """The ``rubricstree judge calibrate`` options of every recipe field the run sets otherwise than
    the default (the calibration must be of the run's recipe)."""
    flags = reward_flags()
    default = RewardSettings().model_dump(mode="json")
    opts = []
    for key, value in scoring_settings(recipe).items():
        if value == default.get(key) or key not in flags:
            continue
        flag = flags[key]["flag"]
        if key == "router_options":
            opts += [f"--router-option {shlex.quote(f'{k}={json.dumps(v)}')}" for k, v in value.items()]
        elif isinstance(value, bool):
            opts.append(flag if value else f"--no-{flag[2:]}")
        else:
            opts.append(f"{flag} {shlex.quote('none' if value is None else str(value))}")
    return " ".join(opts)


def run_facts(built: Any, *, tree: str | None, recipe: RewardSettings) -> RunFacts:
    """What the run will do, for the gate to compare with the calibration: the built judge's
    identity, probe answers and prompts, the taxonomy, the recipe and the scoring code."""
    from reward.router.base import tree_fingerprint
    from reward.tree import load_tree

    return RunFacts(judge_id=built.model_id, taxonomy_fingerprint=tree_fingerprint(load_tree(tree)),
                    template_hash=template_hash(built.template, built.config.mode), judge_mode=built.config.mode,
                    judge_template=built.config.template_file, reward_settings=scoring_settings(recipe),
                    scoring_code=scoring_code_version(), who=judge_binding(built))


def enforce_judge_gate(judge: JudgeSettings, gate: JudgeGateSettings, *, recipe: RewardSettings,
                       field: str = "judge_gate", file: str | None = None, override: str | None = None,
                       tree: str | None = None) -> dict[str, Any]:
    """Check the run's judge against its calibration (``tree``: the run's taxonomy file, None the
    packaged one; ``recipe``: the run's reward recipe). Returns the outcome the run records
    (``training.gate_record``): the verdict line, whether the judge passed, and whether the launch
    goes on past a refusal (``overridden``).

    Raises:
        InputError: the gate refuses and ``gate.enforce`` is set (the message names every problem,
            or how to make a calibration, and the override), or the judge's start-up refuses (a
            pool that does not agree on who grades).
    """
    with built_judge(judge) as built:
        facts = run_facts(built, tree=tree, recipe=recipe)
    how = " ".join(x for x in ("rubricstree judge calibrate", judge_flags(judge), recipe_flags(recipe),
                               f"--taxonomy {shlex.quote(tree)}" if tree else "") if x)
    verdict = check_judge(facts, gate, how_to_calibrate=how)
    line = verdict.message(gate, override or f"`--set {field}.enforce=false` or {field}.enforce: false in the config")
    outcome = {"at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "judge_id": facts.judge_id,
               "passed": verdict.ok, "enforced": gate.enforce, "overridden": not verdict.ok and not gate.enforce,
               "problems": verdict.problems, "calibration": verdict.source or None,
               "record_hash": verdict.record.record_hash if verdict.record is not None else None,
               "thresholds": gate.model_dump(exclude={"calibration", "enforce"}), "line": line}
    if verdict.ok:
        log.info(line)
        return outcome
    if gate.enforce:
        raise InputError(line, file=file, field=f"{field}.enforce")
    outcome["line"] = line.split(". To train on this judge anyway")[0] + (
        f" (NOT ENFORCED: {field}.enforce is false; this override is recorded in the run and its model card)")
    log.warning(outcome["line"])
    return outcome
