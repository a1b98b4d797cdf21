#!/usr/bin/env bash
# The first-GPU-run check: one command, JSON out, under 10 minutes on one H200 (see
# benchmarks/gpu_check.py for the phases): one stage-1 GSPO step of a Qwen3-0.6B-shaped random
# model with colocated vLLM and FSDP2 (peak memory per phase against the memory plan, as a ratio,
# and the logged importance-sampling ratio), the export -> reload -> `vllm serve` of its checkpoint,
# and in-process judge throughput on a Qwen3-8B shape. Random weights: wiring and cost only.
#
#   scripts/gpu_check.sh [--out runs/gpu_check.json] [--work DIR]
#   scripts/gpu_check.sh --dry-run --out /tmp/gpu_check.json    # CPU, tiny model: the wiring
#
# Needs the gpu extra on a GPU machine (pip install -e ".[train,verl,gpu]"). Exit 0 when every
# phase ran, 1 when one failed (its "error" says why), 2 on a usage error.
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
