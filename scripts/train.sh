#!/usr/bin/env bash
# Launch one Fathom-Vaidya training stage with TRL (GRPOTrainer, GSPO) from a YAML config.
#
#   scripts/train.sh configs/trl/stage1_mcq.yaml [--set key=value ...]
#   RUBRICSTREE_TINY_MODEL=/tmp/tiny scripts/train.sh configs/smoke/stage1_mcq.yaml
#   RUBRICSTREE_TINY_MODEL=/tmp/tiny RUBRICSTREE_JUDGE_URL=http://127.0.0.1:8011 \
#       scripts/train.sh configs/smoke/stage3_clinical_rubric.yaml --set grpo.max_steps=4
#
# What the config needs is started first: for stages 2 and 3, when the config names a judge model
# (judge.model) and no judge.url, a vLLM judge server is started with scripts/serve_judge.sh on
# $JUDGE_PORT (default 8100) and stopped (by its PID) when training ends. On GPU machines the
# judge gets $JUDGE_CUDA_VISIBLE_DEVICES (e.g. "7") and the trainer $TRAIN_CUDA_VISIBLE_DEVICES
# (e.g. "0,1,2,3,4,5,6"), so the two do not fight over memory; both are required to start a judge
# there. Fewer training GPUs shrink the global batch (per_device x accumulation x GPUs
# completions; the launcher logs it): adjust grpo.gradient_accumulation_steps to suit.
# Training: `accelerate launch` with one process per visible GPU on GPU machines (extra accelerate
# flags in $ACCELERATE_ARGS, e.g. "--config_file configs/accelerate/zero3.yaml"), plain python on CPU.
# A run resumes from the last checkpoint in its output_dir.
set -euo pipefail

CONFIG=${1:?usage: scripts/train.sh CONFIG.yaml [--set key=value ...]}
shift
# the config is found from where you run this; paths inside it are read from the repository root
[ -f "$CONFIG" ] || { echo "train.sh: no such config: $CONFIG" >&2; exit 2; }
CONFIG=$(cd "$(dirname "$CONFIG")" && pwd)/$(basename "$CONFIG")
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PY=${PYTHON:-$ROOT/.venv/bin/python}
[ -x "$PY" ] || PY=python3

ARGS=("$@")
# an invalid config makes the launcher exit non-zero with "error: ..." on stdout: show it
if ! JUDGE=$("$PY" -m training.trl_launcher --config "$CONFIG" "${ARGS[@]}" --print-judge); then
  echo "train.sh: ${JUDGE:-the launcher failed (see above)}" >&2
  exit 2
fi
JUDGE=$(tail -n 1 <<<"$JUDGE")
IFS=$'\t' read -r J_URL J_MODEL J_SERVED <<<"$JUDGE"

GPU=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then GPU=1; fi

STATE=$(mktemp -d "${TMPDIR:-/tmp}/rubricstree-train.XXXXXX")
stop() {
  if [ -f "$STATE/judge.pid" ]; then kill "$(cat "$STATE/judge.pid")" 2>/dev/null || true; fi
  rm -rf "$STATE"
}
trap stop EXIT

if [ "$J_URL" = "-" ] && [ "$J_MODEL" != "-" ]; then
  PORT=${JUDGE_PORT:-8100}
  NAME=$J_SERVED; [ "$NAME" = "-" ] && NAME=$(basename "$J_MODEL")
  JUDGE_ENV=()
  if [ "$GPU" = 1 ]; then
    # the judge and the trainer (with its colocated vLLM) must not share GPUs: an empty or
    # inherited CUDA_VISIBLE_DEVICES would hide every GPU from the judge, or put it on the trainer's
    if [ -z "${JUDGE_CUDA_VISIBLE_DEVICES:-}" ] || [ -z "${TRAIN_CUDA_VISIBLE_DEVICES:-}" ]; then
      echo "train.sh: this config starts a judge server for $J_MODEL; on a GPU machine give it and the" \
           "trainer their own GPUs, e.g. JUDGE_CUDA_VISIBLE_DEVICES=7 TRAIN_CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6" \
           "(or pass --set judge.url=URL of a running judge)" >&2
      exit 2
    fi
    JUDGE_ENV=(CUDA_VISIBLE_DEVICES="$JUDGE_CUDA_VISIBLE_DEVICES")
  fi
  echo "train.sh: starting a judge server for $J_MODEL on port $PORT" >&2
  URL=$(env "${JUDGE_ENV[@]}" scripts/serve_judge.sh --model "$J_MODEL" --served-name "$NAME" --port "$PORT" \
        --pid-file "$STATE/judge.pid" --log "${JUDGE_LOG:-judge-server-$PORT.log}")
  ARGS+=(--set "judge.url=$URL" --set "judge.served_model=$NAME")
fi

if [ "$GPU" = 1 ]; then
  [ -n "${TRAIN_CUDA_VISIBLE_DEVICES:-}" ] && export CUDA_VISIBLE_DEVICES=$TRAIN_CUDA_VISIBLE_DEVICES
  if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
    NPROC=$(awk -F, '{print NF}' <<<"$CUDA_VISIBLE_DEVICES")
  else
    NPROC=$(nvidia-smi -L | wc -l)
  fi
  ACCEL=$(dirname "$PY")/accelerate; [ -x "$ACCEL" ] || ACCEL=accelerate
  # shellcheck disable=SC2086
  "$ACCEL" launch --num_processes "$NPROC" ${ACCELERATE_ARGS:-} -m training.trl_launcher \
    --config "$CONFIG" "${ARGS[@]}"
else
  "$PY" -m training.trl_launcher --config "$CONFIG" "${ARGS[@]}"
fi
