"""A GPU machine on a CPU one, for launch-script tests: a stand-in ``nvidia-smi`` on PATH (its header
with a driver and CUDA version, ``-L`` with optional MIG devices, the memory query) and stand-in
modules on PYTHONPATH (``torch`` with a CUDA build, ``vllm`` with its kernels, ``deepspeed``,
``flash_attn``) with their installed-package records. Every module is a stand-in that behaves as
the real one does at import (a missing CUDA library is an ImportError naming it); nothing else of
the scripts is replaced."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

H200_MIB = 143771


def stand_in_nvidia_smi(bin_: Path, *, gpus: int = 8, mib: int = H200_MIB, driver: str = "580.65.06",
                        cuda: str = "13.0", mig: int = 0) -> Path:
    """``nvidia-smi`` listing ``gpus`` GPUs (each with ``mig`` MIG devices under it in ``-L``)."""
    bin_.mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(gpus):
        lines.append(f"GPU {i}: NVIDIA H200 (UUID: GPU-{i})")
        lines += [f"  MIG 1g.18gb     Device  {j}: (UUID: MIG-{i}-{j})" for j in range(mig)]
    listing = "\n".join(lines)
    header = (f"| NVIDIA-SMI {driver}              Driver Version: {driver}      CUDA Version: {cuda}     |")
    smi = bin_ / "nvidia-smi"
    smi.write_text("#!/bin/sh\n"
                   'case "$*" in\n'
                   f"  *query-gpu=memory.total*) for i in $(seq {gpus}); do echo {mib}; done ;;\n"
                   f"  *query-gpu=driver_version*) for i in $(seq {gpus}); do echo {driver}; done ;;\n"
                   f"  -L*) cat <<'EOF'\n{listing}\nEOF\n  ;;\n"
                   f"  *) echo '{header}' ;;\n"
                   "esac\n")
    smi.chmod(0o755)
    return smi


def _record(site: Path, name: str, version: str) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def _module(site: Path, dotted: str, body: str = "") -> None:
    parts = dotted.split(".")
    folder = site.joinpath(*parts[:-1])
    folder.mkdir(parents=True, exist_ok=True)
    for k in range(1, len(parts)):
        init = site.joinpath(*parts[:k], "__init__.py")
        if not init.exists():
            init.write_text("")
    (folder / f"{parts[-1]}.py").write_text(body)


def stand_in_modules(site: Path, *, torch: str | None = "2.11.0+cu130", torch_cuda: str | None = "13.0",
                     cuda_available: bool = True, devices: int = 8, vllm: str | None = "0.24.0",
                     vllm_kernels_error: str | None = None, deepspeed: str | None = "0.18.6",
                     flash_attn: str | None = None) -> Path:
    """A folder for PYTHONPATH with the named stand-ins (None: not installed). ``vllm_kernels_error``:
    the ImportError ``vllm._C`` and ``vllm.cumem_allocator`` raise (a wheel built for another CUDA)."""
    site.mkdir(parents=True, exist_ok=True)
    if torch:
        _record(site, "torch", torch.split("+")[0])
        (site / "torch" / "cuda").mkdir(parents=True, exist_ok=True)
        (site / "torch" / "__init__.py").write_text(f"__version__ = {torch!r}\nfrom . import cuda, version\n")
        (site / "torch" / "version.py").write_text(f"cuda = {torch_cuda!r}\nhip = None\n")
        (site / "torch" / "cuda" / "__init__.py").write_text(textwrap.dedent(f"""\
            import warnings
            def is_available():
                if not {cuda_available!r}:
                    warnings.warn("CUDA initialization: The NVIDIA driver on your system is too old.")
                return {cuda_available!r}
            def device_count():
                return {devices if cuda_available else 0}
            """))
    if vllm:
        _record(site, "vllm", vllm)
        _module(site, "vllm.__init__", f"__version__ = {vllm!r}\n")
        body = f"raise ImportError({vllm_kernels_error!r})\n" if vllm_kernels_error else ""
        _module(site, "vllm._C", body)
        _module(site, "vllm.cumem_allocator", body)
    if deepspeed:
        _record(site, "deepspeed", deepspeed)
        _module(site, "deepspeed.__init__", f"__version__ = {deepspeed!r}\n")
    if flash_attn:
        _record(site, "flash-attn", flash_attn)
        _module(site, "flash_attn.__init__", f"__version__ = {flash_attn!r}\n")
        _module(site, "flash_attn_2_cuda", "")
    return site


def gpu_machine(tmp_path: Path, *, gpus: int = 8, mib: int = H200_MIB, driver: str = "580.65.06",
                cuda: str = "13.0", mig: int = 0, **modules) -> dict:
    """Environment entries (PATH, PYTHONPATH) for a GPU machine: see the two functions above."""
    bin_ = tmp_path / "gpu-bin"
    stand_in_nvidia_smi(bin_, gpus=gpus, mib=mib, driver=driver, cuda=cuda, mig=mig)
    site = stand_in_modules(tmp_path / "gpu-site", **modules)
    return {"PATH": f"{bin_}:{os.environ['PATH']}", "PYTHONPATH": str(site)}
