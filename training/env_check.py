"""Can this machine run what a training config will start? (``scripts/train.sh``,
``scripts/train_pipeline.sh`` and ``scripts/train_verl.sh`` ask before they start a judge server, a
policy server or a trainer.)

Data flow: config (+ ``--set`` overrides) and the sharding -> what the run needs (:func:`needs`:
packages with accepted versions, and the modules it will import) ->

1. everywhere: the installed versions (``importlib.metadata``) against the accepted ranges;
2. on a GPU machine (``--gpu``): the driver (``nvidia-smi``), torch imported in a child interpreter
   (its CUDA build against the driver, ``torch.cuda.is_available()``), then every module the run
   imports, imported (vLLM and its compiled kernels, its sleep-mode allocator, flash-attn,
   DeepSpeed): ``training.gpu_stack``;

-> one line per problem naming the wheel or driver that fixes it; exit 2 before anything started.

What the configs need:

- ``grpo.use_vllm: true``: ``vllm`` in the range TRL 1.16 accepts (its
  ``trl.import_utils.is_vllm_available``: 0.22.0 to 0.31.0; the ``gpu`` extra pins 0.24.0, the
  version verl 0.9.1's ``vllm`` extra is built against), ``vllm._C`` (its kernels) and, with
  ``grpo.vllm_enable_sleep_mode``, ``vllm.cumem_allocator`` (the sleep-mode allocator, which links
  the CUDA runtime libraries of the CUDA vLLM was built for: ``libnvrtc.so.13`` for PyPI's wheel);
- ``TRAIN_SHARDING=zero3``: ``deepspeed`` >= 0.18.6 (TRL 1.16's ``deepspeed`` extra);
- ``grpo.model_init_kwargs.attn_implementation: flash_attention_2`` (and verl's actor, whose
  default it is: ``--flash-attn``): ``flash-attn`` and its kernels (``flash_attn_2_cuda``).

``python -m training.env_check --config FILE [--config FILE ...] [--sharding fsdp2|zero3|none] [--set k=v ...] [--gpu]``
``python -m training.env_check --verl [--flash-attn] [--gpu]``: exit 0 when all is there, 2 with
the problems on stderr.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata

from training.gpu_stack import CUDA12_ROUTE, STACK

__all__ = ["DEEPSPEED_MIN", "VLLM_RANGE", "Need", "check", "check_gpu", "merge", "needs", "requirements",
           "version_problems"]

VLLM_RANGE = ("0.22.0", "0.31.0")  # trl/import_utils.py (TRL 1.16), inclusive
DEEPSPEED_MIN = "0.18.6"
FLASH_ATTN_MIN = "2.6.0"
VLLM_FIX = (f'pip install -e ".[train,verl,gpu]" (vllm=={STACK["vllm"]}: PyPI\'s wheel is built for CUDA 13 and torch '
            f'{STACK["torch"]}); with a CUDA 12 driver, ' + CUDA12_ROUTE)
DEEPSPEED_FIX = f'pip install -e ".[train,verl,gpu]" (deepspeed{STACK["deepspeed"]}), or TRAIN_SHARDING=fsdp2'
FLASH_FIX = (f'pip install "flash-attn=={STACK["flash-attn"]}" --no-build-isolation (no prebuilt wheel for torch '
             f"{STACK['torch']}: it compiles against the installed torch and CUDA, an hour or more, with an nvcc of "
             "torch's CUDA; not verl's fsdp extra, which pins another trl), or a prebuilt flash-attn wheel built for "
             "that torch and CUDA; or, slower, ")
FLASH_SDPA = {True: "pass +actor_rollout_ref.model.override_config.attn_implementation=sdpa "
                    "actor_rollout_ref.model.use_remove_padding=false",
              False: "set grpo.model_init_kwargs.attn_implementation: sdpa"}


@dataclass(frozen=True)
class Need:
    """A package a run uses: accepted versions, why, the modules it imports, and the fix."""

    package: str
    lo: str | None
    hi: str | None
    why: str
    modules: tuple[str, ...]
    fix: str


def needs(grpo: dict, sharding: str, *, verl: bool = False, flash_attn: bool = False) -> list[Need]:
    """What a TRL config's ``grpo`` mapping and sharding (or verl's trainer, ``verl=True``) will use."""
    out: list[Need] = []
    if verl or grpo.get("use_vllm"):
        why = "verl's rollout engine" if verl else f"grpo.use_vllm: true (vllm_mode {grpo.get('vllm_mode', 'colocate')})"
        mods = ["vllm", "vllm._C"]
        if verl or grpo.get("vllm_enable_sleep_mode"):
            mods.append("vllm.cumem_allocator")  # sleep mode (verl frees the rollout's memory the same way)
        out.append(Need("vllm", *VLLM_RANGE, why, tuple(mods), VLLM_FIX))
    if not verl and sharding == "zero3":
        out.append(Need("deepspeed", DEEPSPEED_MIN, None, "TRAIN_SHARDING=zero3", ("deepspeed",), DEEPSPEED_FIX))
    attn = (grpo.get("model_init_kwargs") or {}).get("attn_implementation")
    if flash_attn or (isinstance(attn, str) and attn.startswith("flash_attention")):
        why = ("verl's actor (FlashAttention-2, its default attn_implementation)" if verl
               else f"grpo.model_init_kwargs.attn_implementation: {attn}")
        out.append(Need("flash-attn", FLASH_ATTN_MIN, None, why, ("flash_attn", "flash_attn_2_cuda"),
                        FLASH_FIX + FLASH_SDPA[verl]))
    return out


def merge(a: list[Need], b: list[Need]) -> list[Need]:
    """The needs of two runs: one per package, with the modules of both (the first one's reason)."""
    out = {n.package: n for n in a}
    for n in b:
        had = out.get(n.package)
        out[n.package] = n if had is None else Need(
            had.package, had.lo, had.hi, had.why, had.modules + tuple(m for m in n.modules if m not in had.modules),
            had.fix)
    return list(out.values())


def requirements(grpo: dict, sharding: str) -> dict[str, tuple[str | None, str | None, str]]:
    """package -> (lowest, highest inclusive, why) for a config's ``grpo`` mapping and sharding."""
    return {n.package: (n.lo, n.hi, n.why) for n in needs(grpo, sharding)}


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def version_problems(want: list[Need], version_of) -> list[tuple[Need, str]]:
    from packaging.version import Version

    problems = []
    for n in want:
        have = version_of(n.package)
        if have is None:
            problems.append((n, f"{n.package} is not installed, and {n.why} needs it"))
            continue
        base = Version(Version(have).base_version)
        if (n.lo and base < Version(n.lo)) or (n.hi and base > Version(n.hi)):
            rng = f">= {n.lo}" + (f" and <= {n.hi}" if n.hi else "")
            problems.append((n, f"{n.package} {have} is installed; {n.why} needs {rng}"))
    return problems


def check(grpo: dict, sharding: str, *, version_of=_version) -> list[str]:
    """Problems (empty: all there) with the versions of the packages :func:`needs` names."""
    return [text for _, text in version_problems(needs(grpo, sharding), version_of)]


def check_gpu(want: list[Need], *, skip: set[str] = frozenset(), python: str | None = None,
              driver=None, found=None) -> tuple[list[str], list[str]]:
    """(problems, notes) of this GPU machine's stack for ``want``: the driver, torch's CUDA build and
    every module imported (packages in ``skip``, already reported missing, are not imported).
    ``driver``/``found``: a :class:`~training.gpu_stack.Driver`/:class:`~training.gpu_stack.Probe`
    instead of reading them (tests)."""
    from training.gpu_stack import probe, read_driver, stack_problems

    chosen = [n for n in want if n.package not in skip]
    if driver is None:
        driver = read_driver()
    if found is None:
        found = probe([m for n in chosen for m in n.modules], python)
    fixes = {m: f"Needed by {n.why}: {n.fix}" for n in chosen for m in n.modules}
    problems, notes = stack_problems(driver, found, fixes)
    if driver is None:
        notes.append("nvidia-smi did not answer: the driver's CUDA version was not compared with torch's")
    return problems, notes


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    from reward.errors import InputError

    p = argparse.ArgumentParser(prog="python -m training.env_check", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--config", action="append", help="a TRL stage config (configs/trl, configs/smoke); repeated: "
                                                        "everything the configs use (scripts/train_pipeline.sh)")
    src.add_argument("--verl", action="store_true", help="verl's trainer (vLLM rollouts)")
    p.add_argument("--sharding", default="none", choices=["fsdp2", "zero3", "none"])
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--flash-attn", action="store_true", help="the run loads the model with FlashAttention-2")
    p.add_argument("--gpu", action="store_true", help="a GPU machine: check the driver, torch's CUDA build and "
                                                      "import every module the run will (scripts pass it)")
    p.add_argument("--debug", action="store_true", help="a bad config raises with its traceback (scripts/train.sh "
                                                        "passes its own --debug on)")
    a = p.parse_args(argv)
    want = needs({}, a.sharding, verl=True, flash_attn=a.flash_attn) if a.verl else []
    for path in a.config or []:
        from training.trl_config import load_config

        try:
            want = merge(want, needs(load_config(path, a.overrides).grpo, a.sharding, flash_attn=a.flash_attn))
        except InputError as exc:
            if a.debug:
                raise
            print(f"error: {exc}", file=sys.stderr)
            return 2
    problems = version_problems(want, _version)
    for need, text in problems:
        print(f"missing: {text}; install it with: {need.fix}", file=sys.stderr)
    stack: list[str] = []
    if a.gpu:
        stack, notes = check_gpu(want, skip={n.package for n, _ in problems})
        for text in notes:
            print(f"note: {text}", file=sys.stderr)
        for text in stack:
            print(f"gpu stack: {text}", file=sys.stderr)
    return 2 if problems or stack else 0


if __name__ == "__main__":
    raise SystemExit(main())
