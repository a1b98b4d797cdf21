"""What a TRL run logs: wandb offline without a key, and completions tables kept small.

* ``report_to: wandb`` on a training node with no ``WANDB_API_KEY``, no ``wandb login``
  (``~/.netrc``) and no ``WANDB_MODE`` would stop at wandb's login prompt or fail;
  :func:`wandb_mode_for` sets ``WANDB_MODE=offline`` and says so in a log line (the run folder is
  synced later with ``wandb sync``). ``scripts/train_verl.sh`` does the same for verl's logger.
* ``log_completions: true`` makes TRL keep every completion of the generation batch (256 x up to
  16k tokens at stage 3) and write them, each logging step, to the wandb table and to
  ``output_dir/completions/*.parquet``. :class:`BoundCompletionLogs` cuts them just before TRL
  writes: the first ``max_rows`` rows (whole groups: TRL keeps a prompt's generations together)
  and the first ``max_chars`` characters of each prompt, completion and text column. The rubric
  reward's per-leaf columns (``reward.integrations.rollout_log``) ride in the same table.

Nothing here imports trl or transformers at module level.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def wandb_mode_for(report_to: Any, env: Mapping[str, str] | None = None) -> str | None:
    """Set ``WANDB_MODE=offline`` (in ``env``, default ``os.environ``) when ``report_to`` names
    wandb and there is neither an API key nor a chosen mode; returns the mode wandb will run in
    (None when the run does not report to wandb)."""
    env = os.environ if env is None else env
    targets = [report_to] if isinstance(report_to, str) else list(report_to or [])
    if "wandb" not in targets and "all" not in targets:
        return None
    if env.get("WANDB_MODE"):
        return env["WANDB_MODE"]
    netrc = Path(env.get("NETRC") or Path.home() / ".netrc")
    if env.get("WANDB_API_KEY") or (netrc.is_file() and "api.wandb.ai" in netrc.read_text(errors="replace")):
        return "online"  # a key, or a `wandb login` on this machine
    env["WANDB_MODE"] = "offline"  # type: ignore[index]
    log.info("wandb: no WANDB_API_KEY and no WANDB_MODE, so logging offline (WANDB_MODE=offline); "
             "upload later with `wandb sync <output_dir>/wandb/offline-run-*`")
    return "offline"


def _cut(x: Any, n: int) -> Any:
    if isinstance(x, str):
        return x if len(x) <= n else x[:n] + f" [… {len(x) - n} more characters]"
    if isinstance(x, list):  # a conversation: cut each message's text
        return [{**m, "content": _cut(m["content"], n)} if isinstance(m, dict) and "content" in m else m for m in x]
    return x


def bound_logs(logs: Mapping[str, Any], max_chars: int | None, max_rows: int | None) -> None:
    """Cut TRL's completion logs in place (``GRPOTrainer._logs``: deques, and dicts of deques);
    every column keeps the same rows, so they stay aligned."""
    def cut(d: Any, text: bool) -> None:
        items = list(d)
        if max_rows is not None:
            items = items[:max_rows]
        if text and max_chars is not None:
            items = [_cut(x, max_chars) for x in items]
        d.clear()
        d.extend(items)

    for key in ("prompt", "completion"):
        if key in logs:
            cut(logs[key], True)
    for key in ("advantages", "images"):
        if key in logs:
            cut(logs[key], False)
    for key in ("rewards", "extra"):
        for d in (logs.get(key) or {}).values():
            cut(d, key == "extra")


def bound_completion_logs(trainer: Any, max_chars: int | None, max_rows: int | None):
    """A ``TrainerCallback`` that bounds ``trainer``'s completion logs at each log event.

    GRPOTrainer.log calls the callbacks' ``on_log`` (through ``Trainer.log``) before it prints and
    writes the completions table, so the table, the parquet file and the console sample all get
    the bounded rows."""
    from transformers import TrainerCallback

    class BoundCompletionLogs(TrainerCallback):
        def on_log(self, args, state, control, **kwargs):
            logs = getattr(trainer, "_logs", None)
            if logs is not None and getattr(trainer, "log_completions", False):
                bound_logs(logs, max_chars, max_rows)
            return control

    return BoundCompletionLogs()
