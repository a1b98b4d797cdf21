"""Peak GPU memory per training phase, of the measured process only (``benchmarks/gpu_check.py``).

Phases are tagged on the trainer: ``generation`` while TRL's ``_generate_and_score_completions``
runs (the colocated vLLM awake), ``update`` from the start of ``training_step`` through the
backward pass and the optimiser step until the step ends (``on_step_end``), ``export`` while the
Hugging Face export gathers and writes. A sampler thread reads the memory every 20 ms.

Whose memory: NVML's per-process figure for this process and its descendants (a colocated vLLM
runs in this process or in children of it); where NVML does not list them (a container whose PID
namespace differs from the host's) the device's used memory minus what was in use before this
process allocated anything, the parent's cached memory included, which stays constant while the
phase runs. The JSON says which (``memory_source``). Never the whole device's used memory: the
driver process and anything else on the GPU are not the trainer's.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

GIB = 2**30


def _descendants(root: int) -> set[int]:
    """``root`` and every process below it (from /proc; no psutil needed)."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
                parent[int(d.name)] = int(fields[1])
            except (OSError, IndexError, ValueError):
                continue
    out, grew = {root}, True
    while grew:
        more = {p for p, pp in parent.items() if pp in out and p not in out}
        out |= more
        grew = bool(more)
    return out


class ProcessMemory:
    """GiB of GPU memory held by this process tree: NVML per process, else device used minus a baseline."""

    def __init__(self) -> None:
        import torch

        self.torch = torch
        self.nvml = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
        except Exception:  # noqa: BLE001 - no NVML: the baseline method below
            self.nvml = None
        free, total = torch.cuda.mem_get_info()  # creates this process's context first
        self.baseline = (total - free) / GIB
        self.source = "nvml_process" if self._nvml_ours() is not None else "device_minus_baseline"

    def _nvml_ours(self) -> float | None:
        if self.nvml is None:
            return None
        pids = _descendants(os.getpid())
        used, seen = 0, False
        try:
            for i in range(self.nvml.nvmlDeviceGetCount()):
                h = self.nvml.nvmlDeviceGetHandleByIndex(i)
                for p in self.nvml.nvmlDeviceGetComputeRunningProcesses(h):
                    if p.pid in pids and p.usedGpuMemory is not None:
                        used, seen = used + p.usedGpuMemory, True
        except Exception:  # noqa: BLE001 - an NVML call this driver lacks: the baseline method
            return None
        return used / GIB if seen else None

    def read(self) -> float:
        if self.source == "nvml_process":
            got = self._nvml_ours()
            if got is not None:
                return got
        free, total = self.torch.cuda.mem_get_info()
        return (total - free) / GIB - self.baseline


class PhaseSampler:
    """Peak memory of this process tree per phase (GPU only; on CPU the phases are still tagged)."""

    def __init__(self) -> None:
        import torch

        self.phase, self.peaks = "setup", {}
        self.optimizer_step_phase: str | None = None
        self.memory = ProcessMemory() if torch.cuda.is_available() else None
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            used = self.memory.read()
            self.peaks[self.phase] = max(self.peaks.get(self.phase, 0.0), used)
            time.sleep(0.02)

    def __enter__(self) -> PhaseSampler:
        if self.memory is not None:
            self._t.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()

    def enter(self, obj: Any, name: str, phase: str, *, restore: bool) -> None:
        """Tag ``phase`` while ``obj.name`` runs; ``restore=False`` keeps it after (until re-tagged)."""
        fn = getattr(obj, name)

        def wrapped(*a: Any, **k: Any) -> Any:
            before, self.phase = self.phase, phase
            try:
                return fn(*a, **k)
            finally:
                if restore:
                    self.phase = before

        setattr(obj, name, wrapped)

    def callback(self):
        """A TrainerCallback: records the phase the optimiser step runs in, ends the update at step end."""
        from transformers import TrainerCallback

        sampler = self

        class _Phases(TrainerCallback):
            def on_pre_optimizer_step(self, args, state, control, **kw):
                sampler.optimizer_step_phase = sampler.phase

            def on_step_end(self, args, state, control, **kw):
                sampler.phase = "between_steps"

        return _Phases()
