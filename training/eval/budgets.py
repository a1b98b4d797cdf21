"""Default response budgets of checkpoint evaluation, following the training budgets.

A thinking model (Qwen3) spends thousands of tokens before it answers; cut there, it leaves
nothing to grade. So evaluation gives it what training gave it: 16,000 new tokens on HealthBench
(stage 3's ``max_completion_length``) and 10,000 on multiple-choice sets (stages 1 and 2).
``--no-thinking`` (the chat template's ``enable_thinking=False``) asks for a direct answer, which
fits in a short budget. An explicit ``--max-new-tokens`` always wins.
"""

from __future__ import annotations

from typing import Literal

Benchmark = Literal["healthbench", "mcq"]

THINKING_BUDGET: dict[str, int] = {"healthbench": 16000, "mcq": 10000}
SHORT_BUDGET: dict[str, int] = {"healthbench": 2048, "mcq": 1024}


def default_max_new_tokens(benchmark: Benchmark, thinking: bool | None, given: int | None = None) -> int:
    """The response budget: ``given`` when set; the short budget with thinking off; the training
    budget otherwise (thinking on, or left to the chat template, whose default is to think)."""
    if given is not None:
        return given
    return SHORT_BUDGET[benchmark] if thinking is False else THINKING_BUDGET[benchmark]


# Qwen3's own guidance for thinking mode (its model card and generation_config.json): sample,
# never greedy, which can loop and repeat.
THINKING_SAMPLING = {"temperature": 0.6, "top_p": 0.95, "top_k": 20}


def default_sampling(thinking: bool | None, temperature: float | None, top_p: float | None,
                     top_k: int | None) -> dict[str, float | int | None]:
    """The policy's decoding: what was given, else the thinking models' recommended sampling when
    thinking is on or left to the template (whose default is to think), else greedy."""
    if temperature is None:
        if thinking is False:
            return {"temperature": 0.0, "top_p": top_p or 1.0, "top_k": top_k}
        return {"temperature": THINKING_SAMPLING["temperature"],
                "top_p": top_p if top_p is not None else THINKING_SAMPLING["top_p"],
                "top_k": top_k if top_k is not None else THINKING_SAMPLING["top_k"]}
    return {"temperature": temperature, "top_p": top_p if top_p is not None else 1.0, "top_k": top_k}
