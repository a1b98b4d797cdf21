"""The GPU stack a machine actually has: the NVIDIA driver, the CUDA build of torch, and whether the
compiled modules a run imports load (``training.env_check`` asks before anything starts).

Data flow: ``nvidia-smi`` -> :class:`Driver` (its version and the newest CUDA it runs);
a child interpreter imports torch and then each module in turn -> :class:`Probe` (torch's version,
its CUDA build, ``torch.cuda.is_available()``, one result per module); :func:`stack_problems`
compares the two and says, for each problem, which wheel or driver fixes it.

Why a child process: a compiled extension built for another CUDA or torch can take the
interpreter down with it (a missing ``libnvrtc.so.13`` is an ``ImportError``, an ABI mismatch can
be a crash); the child reports each step before it takes it, so a crash still names the module.
The child runs with the interpreter the run will use, so it sees that environment's wheels.

The supported stack (docs/training.md, "The supported stack") is :data:`STACK`; a CUDA major needs
a driver of at least :data:`DRIVER_FOR_CUDA` (NVIDIA's minimum for that major on Linux, with
CUDA's minor-version compatibility).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = ["DRIVER_FOR_CUDA", "STACK", "Driver", "Probe", "cuda_of_driver", "probe", "read_driver", "stack_problems"]

# what the gpu extra installs and the trainers were tested against (pyproject.toml, docs/training.md)
STACK = {"torch": "2.11.0", "vllm": "0.24.0", "trl": "1.16", "verl": "0.9.1", "flash-attn": "2.8.3",
         "deepspeed": ">=0.18.6"}
# the oldest Linux driver that runs any toolkit of a CUDA major (minor-version compatibility)
DRIVER_FOR_CUDA = {13: "580.65.06", 12: "525.60.13", 11: "450.80.02"}
CUDA12_ROUTE = "the CUDA 12 route in docs/training.md (torch 2.11.0 and vLLM 0.24.0 built for CUDA 12.9)"
ROLE = {"vllm._C": "vLLM's compiled kernels", "vllm.cumem_allocator": "vLLM's sleep-mode allocator",
        "flash_attn_2_cuda": "flash-attn's CUDA kernels"}
MARK = "ENVCHECK "  # the child's report lines; vLLM logs to stdout too


@dataclass(frozen=True)
class Driver:
    """The NVIDIA driver: its version and the newest CUDA version it runs (``nvidia-smi``'s header)."""

    version: str | None
    cuda: str | None


@dataclass
class Probe:
    """What the child interpreter found: torch (``None`` when it did not import) and each module."""

    python: str
    torch: dict | None = None
    torch_error: str | None = None
    modules: dict[str, str | None] = field(default_factory=dict)  # module -> None (imported) or the error
    crashed: str | None = None  # the module being imported when the child died


def _ver(text: str | None) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text or "")[:3])


def cuda_of_driver(version: str) -> str | None:
    """The CUDA major a driver version runs at least (``"13"`` for 580.65.06), from :data:`DRIVER_FOR_CUDA`."""
    for major, least in sorted(DRIVER_FOR_CUDA.items(), reverse=True):
        if _ver(version) >= _ver(least):
            return str(major)
    return None


def read_driver(run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> Driver | None:
    """The driver ``nvidia-smi`` reports; None when there is no working ``nvidia-smi``."""
    try:
        res = run(["nvidia-smi"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if res.returncode != 0:
        return None
    version = re.search(r"Driver Version:\s*([0-9.]+)", res.stdout)
    cuda = re.search(r"CUDA Version:\s*([0-9.]+)", res.stdout)
    if version is None:  # an nvidia-smi without the header: ask for the driver alone
        try:
            q = run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                    text=True, timeout=60, check=False)
        except (OSError, subprocess.SubprocessError):
            q = None
        first = q.stdout.strip().splitlines()[0].strip() if q is not None and q.returncode == 0 and q.stdout.strip() else ""
        version = re.match(r"([0-9.]+)", first)
    v = version.group(1) if version else None
    return Driver(version=v, cuda=cuda.group(1) if cuda else (cuda_of_driver(v) if v else None))


# The child: no project imports (it may run in another environment), one marked JSON line per step.
_CHILD = r'''
import importlib, json, sys, warnings
def say(**kw):
    sys.stdout.write("ENVCHECK " + json.dumps(kw) + "\n"); sys.stdout.flush()
say(step="start", module="torch")
try:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import torch
        available = bool(torch.cuda.is_available())
        devices = torch.cuda.device_count() if available else 0
    say(step="torch", version=torch.__version__, cuda=getattr(torch.version, "cuda", None),
        hip=getattr(torch.version, "hip", None), available=available, devices=devices,
        warnings=[str(w.message)[:400] for w in caught if "cuda" in str(w.message).lower()][:3])
except BaseException as exc:
    say(step="torch", error=(type(exc).__name__ + ": " + str(exc))[:600])
for name in json.loads(sys.argv[1]):
    say(step="start", module=name)
    try:
        importlib.import_module(name)
        say(step="import", module=name, error=None)
    except BaseException as exc:
        say(step="import", module=name, error=(type(exc).__name__ + ": " + str(exc))[:600])
'''


def probe(modules: Sequence[str], python: str | None = None, *, timeout_s: float = 600.0) -> Probe:
    """Import torch, then each of ``modules``, in a child ``python`` (default: this interpreter)."""
    py = python or sys.executable
    out = Probe(python=py)
    try:
        res = subprocess.run([py, "-c", _CHILD, json.dumps(list(modules))], capture_output=True, text=True,
                             timeout=timeout_s, check=False)
        text, code = res.stdout, res.returncode
    except subprocess.TimeoutExpired as exc:
        text, code = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or ""), None
    except OSError as exc:
        out.torch_error = f"{py} does not run: {exc}"
        return out
    started = None
    for line in text.splitlines():
        if not line.startswith(MARK):
            continue
        rec = json.loads(line[len(MARK):])
        if rec["step"] == "start":
            started = rec["module"]
        elif rec["step"] == "torch":
            started = None
            if "error" in rec:
                out.torch_error = rec["error"]
            else:
                out.torch = rec
        else:
            started = None
            out.modules[rec["module"]] = rec["error"]
    if started is not None:
        how = "timed out" if code is None else f"exited with status {code}"
        out.crashed = started
        if started == "torch":
            out.torch_error = f"the interpreter {how} while importing torch"
        else:
            out.modules[started] = f"the interpreter {how} while importing it"
    return out


def _major(cuda: str | None) -> int | None:
    v = _ver(cuda)
    return v[0] if v else None


def stack_problems(driver: Driver | None, found: Probe, fixes: dict[str, str]) -> tuple[list[str], list[str]]:
    """(problems, notes) of a GPU machine's stack. ``fixes``: module -> what to install when it does not
    import (its reason for being needed included)."""
    problems: list[str] = []
    notes: list[str] = []
    if found.torch is None:
        return [f"torch does not import in {found.python} ({found.torch_error}): pip install torch=={STACK['torch']} "
                "(PyPI's wheel is built for CUDA 13.0), or " + CUDA12_ROUTE], notes
    t = found.torch
    tv, tc = t["version"], t.get("cuda")
    dv = driver.version if driver else None
    dc = driver.cuda if driver else None
    if not tc:
        kind = f"a ROCm build (HIP {t['hip']})" if t.get("hip") else "a CPU build"
        problems.append(f"torch {tv} is {kind} on a machine with NVIDIA GPUs (driver {dv or 'unknown'}, CUDA "
                        f"{dc or 'unknown'}): install the CUDA build, pip install torch=={STACK['torch']} (PyPI: CUDA "
                        f"13.0, driver >= {DRIVER_FOR_CUDA[13]}), or on an older driver " + CUDA12_ROUTE)
        return problems, notes
    tm, dm = _major(tc), _major(dc)
    if dm is not None and tm is not None and tm > dm:
        least = DRIVER_FOR_CUDA.get(tm, "newer")
        route = CUDA12_ROUTE if dm == 12 else f"a torch and vLLM built for CUDA {dm}"
        problems.append(f"torch {tv} is built for CUDA {tc}, and the NVIDIA driver {dv} runs CUDA {dc} at most: every "
                        f"trainer rank, the colocated vLLM and a judge served from this environment would die at "
                        f"start. Install driver >= {least} (CUDA {tm}), or take {route}")
    elif dm is not None and tm == dm and _ver(tc) > _ver(dc):
        notes.append(f"torch {tv} is built for CUDA {tc} and the driver {dv} runs CUDA {dc}: it runs through CUDA's "
                     "minor-version compatibility, but kernels compiled at run time (Triton, FlashInfer) may need a "
                     f"driver that runs CUDA {tc}")
    if not t.get("available") and not problems:
        why = "; ".join(t.get("warnings") or []) or "no warning from torch"
        problems.append(f"torch.cuda.is_available() is False with torch {tv} (CUDA {tc}) and driver {dv} ({why}): "
                        "check that nvidia-smi lists the GPUs this process may use (CUDA_VISIBLE_DEVICES) and that "
                        "the driver matches the kernel module")
    for mod, err in found.modules.items():
        if err is None:
            continue
        name = f"{mod} ({ROLE[mod]})" if mod in ROLE else mod
        linked = re.search(r"lib[a-z_]+\.so\.(\d+)", err)
        if linked and dm is not None and int(linked.group(1)) > dm:
            lib_major = int(linked.group(1))
            problems.append(f"{name} does not import ({err}): it links CUDA {lib_major} libraries, which the driver "
                            f"{dv} (CUDA {dc}) cannot run: driver >= {DRIVER_FOR_CUDA.get(lib_major, 'newer')}, or "
                            + CUDA12_ROUTE)
            continue
        problems.append(f"{name} does not import in {found.python} ({err}). {fixes.get(mod, '')}".rstrip(". ") + ".")
    return problems, notes
