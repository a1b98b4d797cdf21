"""The generate step every evaluation shares: answer the missing examples, append as they come.

:func:`generate_step` takes the requests still missing from ``generations.jsonl``, runs them
through a :mod:`training.generation` backend (the caller's, or one built and closed here) and
appends each response to ``generations.jsonl`` (each failure to ``generation_failures.jsonl``)
the moment it exists, under the crash-test hook. It returns a :class:`GenerateResult`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from reward.jsonl import JsonlLog
from training.eval.records import Failure, Generation, KeyField
from training.eval.store import CrashHook
from training.generation import GenOutput, GenRequest

__all__ = ["GenerateResult", "generate_step"]


@dataclass
class GenerateResult:
    """What one generate step produced: new responses and errors, by example key."""

    new: dict[str, Generation] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def generate_step(requests: Sequence[GenRequest], out: Path, *, key_field: KeyField, crash: CrashHook,
                  generator=None, make_generator: Callable[[], object] | None = None) -> GenerateResult:
    """Answer ``requests``, appending each result to ``out``'s generation files as it arrives.

    Args:
        generator: an object with ``generate(requests, on_done, desc)``; else ``make_generator()``
            builds one, which is closed afterwards.
    """
    gens, fails = JsonlLog(out / "generations.jsonl"), JsonlLog(out / "generation_failures.jsonl")
    result = GenerateResult()

    def on_done(key: str, output: GenOutput) -> None:
        crash.guard()
        if output.ok:
            g = Generation(key, output.text or "", output.finish_reason, output.completion_tokens, output.reasoning)
            gens.append(g.to_json(key_field))
            result.new[key] = g
        else:
            error = output.error or "unknown error"
            fails.append(Failure(key=key, error=error).to_json(key_field))
            result.errors[key] = error
        crash.tick("generations")

    own = generator is None
    if own:
        if make_generator is None:
            raise ValueError("generate_step needs a generator or make_generator")
        generator = make_generator()
    try:
        generator.generate(list(requests), on_done, desc="generate")
    finally:
        gens.close()
        fails.close()
        if own:
            generator.close()
    return result
