"""What a TRL launch checks before any model loads, so that a mistake costs seconds, not the
policy load, the vLLM start and a first generation batch on every GPU:

- :func:`guard_start`: a rerun from another start model does not resume the old run
  (:mod:`training.start_record`);
- :func:`check_judge`: the served judge answers, and serves the model the config names; in stage
  3 its calibration passes the judge gate (:mod:`training.judge_gate`);
- :func:`check_filter_plan`: the difficulty filter samples where the run can afford it;
- :func:`check_collective_timeout`: a reward call's wait on the judge ends before the other ranks'
  collective times out.
"""

from __future__ import annotations

import logging
import math
import os

from reward.errors import InputError
from reward.settings import JudgeSettings
from training.run_folder import difficulty_dir, last_checkpoint, next_epoch
from training.start_record import check_start
from training.trl_config import TrainConfig

__all__ = ["FILTER_IN_PROCESS_ENV", "check_collective_timeout", "check_filter_plan", "check_judge", "gate_only",
           "guard_start", "judge_answers", "judge_rounds", "judge_spec", "process_rank"]

log = logging.getLogger(__name__)


def process_rank() -> int:
    """This process's global rank under ``accelerate launch``/``torchrun`` (0 when alone)."""
    return int(os.environ.get("RANK", "0"))


def judge_spec(cfg: TrainConfig) -> JudgeSettings:
    """The judge the reward builds: with a url the server's (never judge.model as its tokenizer:
    the configs default that to the model train.sh would serve); in process with in_process."""
    j = cfg.judge
    if not j.url and not j.in_process:
        raise InputError("no judge url: start one (scripts/train.sh does when judge.model is set) or set "
                         "judge.in_process: true", field="judge.url")
    return j.resolved()


def check_judge(cfg: TrainConfig) -> dict | None:
    """A served judge answers before any model loads: a wrong or dead ``judge.url`` would otherwise
    surface at the first reward call, after the policy, vLLM and a first generation batch (a
    traceback on every rank). Stage 1 has no judge. In stage 3 the judge must pass the judge gate
    (its calibration on record is of this run and predicts a reward that survives it), or
    ``judge_gate.enforce`` be false: the gate's outcome is returned for the run to record
    (``training.gate_record``; None: not gated).

    Raises:
        InputError: see :func:`judge_answers`, and the gate's refusal.
    """
    if cfg.stage != "mcq":
        judge_answers(judge_spec(cfg))
    if cfg.stage != "clinical_rubric":
        return None
    from training.judge_gate import enforce_judge_gate

    return enforce_judge_gate(judge_spec(cfg), cfg.judge_gate, recipe=cfg.reward, tree=cfg.reward.tree)


def gate_only(cfg: TrainConfig) -> int:
    """The TRL launcher's ``--gate-only``: stage 3's judge answers and passes the judge gate (other
    stages are not gated); prints one JSON line and returns the exit status (2: refused)."""
    import json

    try:
        gate = check_judge(cfg) if cfg.stage == "clinical_rubric" else None
    except InputError as exc:
        print(f"error: {exc}", flush=True)
        return 2
    said = "not gated" if gate is None else "passed" if gate["passed"] else "overridden"
    print(json.dumps({"judge_gate": said, "stage": cfg.stage}), flush=True)
    return 0


def judge_answers(j: JudgeSettings, *, prefix: str = "judge", file: str | None = None) -> None:
    """``GET /v1/models`` once from a served judge (nothing for one in process), and the served
    model when one is named; shared by the TRL launcher and the verl preflight (``prefix``: where
    the judge's keys sit in the config).

    Raises:
        InputError: no endpoint answers, or none serves ``served_model``.
    """
    from reward.serving import JUDGE_API_KEY_ENV, list_models, redact_url, resolve_served_model

    if not j.url:
        return
    try:
        models = list_models(j.url, api_key_env=j.api_key_env or JUDGE_API_KEY_ENV)
    except ValueError as exc:
        raise InputError(f"the judge does not answer: {exc} (scripts/serve_judge.sh starts one; "
                         "`rubricstree judge check --judge-url URL` tries one)", file=file,
                         field=f"{prefix}.url") from None
    if j.served_model:
        try:  # the judge client's own rule: a served id, or the one model whose root is that path
            resolve_served_model(models, j.served_model, redact_url(j.url))
        except ValueError as exc:
            raise InputError(str(exc), file=file, field=f"{prefix}.served_model") from None


FILTER_IN_PROCESS_ENV = "RUBRICSTREE_FILTER_IN_PROCESS"


def check_filter_plan(cfg: TrainConfig) -> None:
    """The difficulty filter samples where the run can afford it; refused before any model loads:

    - under a multi-GPU launch with no policy server (``difficulty.generate_url``) and results still
      to compute, rank 0 alone would sample every row ``difficulty.n`` times with
      ``transformers.generate`` while the other ranks wait (days on a real data set);
      ``RUBRICSTREE_FILTER_IN_PROCESS=1`` lets it;
    - stage 3 per epoch with a policy server and more than one epoch left in this run: a server
      serves one model, so the second epoch's filter would sample from the first's policy while
      ``epoch.json`` names the new export. ``difficulty.epochs_per_run: 1`` (one epoch per launch,
      the server restarted on each export: scripts/train_pipeline.sh) or no server.

    Raises:
        InputError: the filter would run as described (the message gives the ways out).
    """
    d = cfg.difficulty
    if not (d.enabled or d.per_epoch):
        return
    world = max(1, int(os.environ.get("WORLD_SIZE", "1")))
    in_this_run = 1
    if d.per_epoch:
        nxt = next_epoch(cfg)
        n_epochs = int(math.ceil(float(cfg.grpo.get("num_train_epochs", 1))))
        left = n_epochs - (nxt["epoch"] if nxt["epoch"] is not None else n_epochs)
        in_this_run = min(left, d.epochs_per_run or left)
        # every epoch after the next is filtered inside this run, from the export the run just wrote
        pending = (nxt["epoch"] is not None and not nxt["filtered"]) or in_this_run > 1
        if d.generate_url and in_this_run > 1:
            raise InputError(f"difficulty.generate_url ({d.generate_url}) serves one model, but this run would filter "
                             f"{in_this_run} epochs, each with the newest epoch's export: from the second on, the "
                             "filter would sample the old policy. Set difficulty.epochs_per_run: 1 and serve each "
                             "epoch's export before its launch (scripts/train_pipeline.sh does both)"
                             + ("" if world > 1 else ", or leave generate_url empty (each epoch's filter then samples "
                                                     "its export in process)"), field="difficulty.generate_url")
    else:
        pending = not (difficulty_dir(cfg) / "stats.json").exists()
    if not pending or d.generate_url or world == 1:
        return
    if os.environ.get(FILTER_IN_PROCESS_ENV) == "1":
        log.warning("difficulty filter: rank 0 samples in process while %d ranks wait (%s=1)", world - 1,
                    FILTER_IN_PROCESS_ENV)
        return
    per_epoch = (f" (this run would filter {in_this_run} stage-3 epochs: set difficulty.epochs_per_run: 1, so that "
                 "each launch filters one epoch ahead of it)") if in_this_run > 1 else ""
    raise InputError(f"the difficulty filter would sample every row {d.n} times on rank 0 alone with transformers "
                     f"while the other {world - 1} ranks wait (days on a real data set){per_epoch}. Make its results "
                     "before this launch: scripts/train_pipeline.sh serves the policy with vLLM on every GPU, filters, "
                     "stops the server and trains; or run `python -m training.trl_launcher --config CONFIG "
                     "--filter-only --set difficulty.generate_url=URL` against a vLLM server of the policy and stop "
                     "it before training (a server on another machine may stay: RUBRICSTREE_POLICY_URL). "
                     f"{FILTER_IN_PROCESS_ENV}=1 samples in process anyway", field="difficulty.generate_url")


def guard_start(cfg: TrainConfig) -> None:
    """A rerun from another start model must not resume the old run's checkpoint in ``output_dir``
    (``training.start_record``); a fresh start records its start model there (first process).

    Raises:
        InputError: ``output_dir`` holds a checkpoint of a run started from another model.
    """
    check_start(cfg.output_dir, cfg.model, resuming=last_checkpoint(cfg.output_dir), write=process_rank() == 0,
                field="model", ways_out="Use another output_dir, name the same start model to resume, or move "
                                        "that output_dir away to start over (its exports, epochs.json and "
                                        "difficulty results belong to the old run too)")


DDP_TIMEOUT_S = 1800  # transformers' TrainingArguments.ddp_timeout default (seconds)
LLM_ROUTER_ROUNDS = 4  # the llm router walks the tree one level per judge round (the packaged tree's depth)


def judge_rounds(cfg: TrainConfig) -> int:
    """Judge calls one reward call makes one after another, each bounded on its own by
    ``judge.deadline_s`` (``reward.judge.budget.call_deadline``): stage 2 one JSON call; stage 3 with
    the row items alone one grading; with tree leaves the llm router's walk, the applicability
    decision and its second reading of critical leaves read as absent, the grading and up to two
    confirmation readings."""
    if cfg.stage == "mcq":
        return 0
    if cfg.stage == "error_rubric":
        return 1
    r = cfg.reward
    if r.rubric_source == "rows":
        return 1
    return (LLM_ROUTER_ROUNDS if r.router == "llm" else 0) + 2 * int(r.applicability) + 1 + 2 * int(r.confirm_failures)


def check_collective_timeout(cfg: TrainConfig) -> None:
    """Under a multi-process launch, every rank scores its own rollouts and then meets the others in
    a collective (the gather of the rewards), which fails after ``grpo.ddp_timeout`` seconds (1800 by
    default) and ends the job. So the longest a reward call may wait on a served judge,
    :func:`judge_rounds` x ``judge.deadline_s``, must be shorter: refused before any model loads,
    naming both ways out (a smaller deadline: unanswered items are then unscored, or a larger
    ``ddp_timeout``). Without a deadline a call has no bound (requests queue behind each other).

    Raises:
        InputError: the judge may keep one rank waiting past the collective timeout.
    """
    world = max(1, int(os.environ.get("WORLD_SIZE", "1")))
    rounds = judge_rounds(cfg)
    if world == 1 or rounds == 0 or not cfg.judge.url or cfg.judge.in_process:
        return
    ddp = float(cfg.grpo.get("ddp_timeout") or DDP_TIMEOUT_S)
    j = cfg.judge
    if j.deadline_s is None:
        raise InputError(f"judge.deadline_s is null: a reward call may wait on the judge without bound "
                         f"({rounds} judge round(s) of up to {j.max_retries + 1} x {j.timeout_s:g} s per request, "
                         f"queued {j.concurrency} at a time) while the other {world - 1} rank(s) wait in a "
                         f"collective that fails after grpo.ddp_timeout = {ddp:g} s. Set judge.deadline_s below "
                         f"{ddp / rounds:g} s", field="judge.deadline_s")
    worst = rounds * j.deadline_s
    if worst >= ddp:
        raise InputError(f"a reward call may wait {rounds} x judge.deadline_s = {worst:g} s on the judge ({rounds} "
                         f"judge round(s) of up to {j.deadline_s:g} s each), and the other {world - 1} rank(s) wait "
                         f"in a collective that fails after grpo.ddp_timeout = {ddp:g} s, ending the job. Set "
                         f"judge.deadline_s below {ddp / rounds:g} s (unanswered items are then unscored) or "
                         f"grpo.ddp_timeout above {worst:g}", field="judge.deadline_s")
