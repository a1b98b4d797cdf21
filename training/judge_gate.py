"""The judge gate at launch (stage 3, TRL and verl): the judge the reward will use is looked up by
identity among the calibrations on record (``rubricstree judge calibrate``), and a judge the reward
cannot survive is refused before any model loads (``reward.calibration.gate``).

The gate covers the clinical-rubric stage, whose verdicts (one yes/no per rubric leaf) are what a
calibration measures. Stage 2 asks its judge for error lists, a task the calibration does not
grade; stage 1 has no judge.
"""

from __future__ import annotations

import asyncio
import logging

from reward.calibration.gate import JudgeGateSettings, check_judge
from reward.errors import InputError
from reward.settings import JudgeSettings

log = logging.getLogger(__name__)


def judge_identity(judge: JudgeSettings) -> str:
    """The identity of the judge ``judge`` builds, as the verdict cache and the calibrations key it
    (a served judge: one request to its ``/v1/models``; in process: the model folder's fingerprint)."""
    built = judge.build(cache=False)
    try:
        return built.model_id
    finally:
        asyncio.run(built.aclose())


def judge_flags(judge: JudgeSettings) -> str:
    """The ``rubricstree judge calibrate`` options that build ``judge``: its endpoint and every
    grading setting that is not the default (a calibration under other settings is another judge's)."""
    import shlex

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


def enforce_judge_gate(judge: JudgeSettings, gate: JudgeGateSettings, *, field: str = "judge_gate",
                       file: str | None = None, override: str | None = None, tree: str | None = None,
                       reward: dict | None = None) -> str:
    """Check the judge against its calibration; the verdict line, logged. ``tree``: the run's
    taxonomy file (None: the packaged one), whose fingerprint the calibration must share;
    ``reward``: the run's reward settings (``router``, ``confirm_failures``) the prediction must share.

    Raises:
        InputError: the gate refuses and ``gate.enforce`` is set (the message gives both figures,
            or how to make a calibration, and the override).
    """
    from reward.router.base import tree_fingerprint
    from reward.tree import load_tree

    ident = judge_identity(judge)
    how = "rubricstree judge calibrate " + judge_flags(judge) + (f" --taxonomy {tree}" if tree else "")
    verdict = check_judge(ident, gate, how_to_calibrate=how, taxonomy_fingerprint=tree_fingerprint(load_tree(tree)),
                          run_judge={"mode": judge.mode, "template": judge.template}, run_reward=reward)
    line = verdict.message(gate, override or f"`--set {field}.enforce=false` or {field}.enforce: false in the config")
    if verdict.ok:
        log.info(line)
        return line
    if gate.enforce:
        raise InputError(line, file=file, field=f"{field}.enforce")
    line = line.split(". To train on this judge anyway")[0] + " (not enforced: judge_gate.enforce is false)"
    log.warning(line)
    return line
