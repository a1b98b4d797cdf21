#!/usr/bin/env bash
# The first-GPU-run check: one command, JSON out, inside a global deadline (--deadline-s, 480 s by
# default: under 10 minutes on one H200 with the machine's start). Phases (benchmarks/gpu_check.py),
# each with its wall time in the JSON: env (versions, and training.env_check's problems: any makes
# "ok" false), build (the random Qwen3-0.6B-shaped policy), train (one stage-1 GSPO step through
# `accelerate launch` with the FSDP2 config and colocated vLLM in sleep mode: peak memory of the
# trainer's own process in the generation, update (backward and optimiser step) and export phases,
# against the memory plan; the logged importance-sampling ratio; the export), serve (the export
# reloaded and served by `vllm serve`), judge (in-process judge throughput on a Qwen3-8B shape).
# Random weights: wiring and cost only.
#
#   scripts/gpu_check.sh [--out runs/gpu_check.json] [--work DIR] [--deadline-s 480] [--no-vllm]
#   scripts/gpu_check.sh --dry-run --out /tmp/gpu_check.json    # CPU, tiny model: the wiring
#
# --dry-run goes through the same `accelerate launch` with the FSDP2 config as two CPU processes
# (accelerate gives them gloo data parallelism there, not the FSDP2 plugin: the JSON says so).
# --no-vllm: a GPU machine without vLLM still measures the train step (transformers generates; no
# serve phase; "ok" stays false). Needs the gpu extra on a GPU machine (pip install -e ".[train,verl,gpu]"). Exit 0 when every
# phase passed, 1 when one failed, timed out or was skipped (its "error" says why), 2 on a usage error.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PY=${PYTHON:-$ROOT/.venv/bin/python}
[ -x "$PY" ] || PY=python3
DRY=0
for a in "$@"; do [ "$a" = --dry-run ] && DRY=1; done
if [ "$DRY" = 0 ] && ! { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }; then
  echo "gpu_check.sh: no GPU found; --dry-run runs the same phases on CPU with the tiny model" >&2
  exit 2
fi
exec "$PY" benchmarks/gpu_check.py "$@"
