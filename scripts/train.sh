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
# Training: `accelerate launch` with one process per visible GPU on GPU machines, sharded by
# $TRAIN_SHARDING: fsdp2 (default, configs/accelerate/fsdp2.yaml), zero3 (configs/accelerate/zero3.yaml,
# e.g. Qwen3-30B-A3B) or none (plain DDP); both configs are bf16 mixed precision over fp32 master
# weights. Extra accelerate flags in $ACCELERATE_ARGS (a --config_file there replaces ours).
# Plain python on CPU.
# Environment: before anything starts, `python -m training.env_check` checks the packages the config
# uses and, on GPU machines, the driver against torch's CUDA build and every compiled module imported
# (vLLM's kernels, flash-attn, DeepSpeed); a problem stops the launch (exit 2) with the fix.
# Memory plan: on GPU machines `rubricstree train plan` checks the run (training GPUs, judge GPUs,
# GPU memory from nvidia-smi) before anything starts and refuses a plan that does not fit (exit 3)
# unless TRAIN_FORCE=1. The judge server gets the vLLM arguments the plan sized (the config's
# judge_server: tensor_parallel_size = its GPU count, max_model_len, gpu_memory_utilization,
# quantization, extra_args) plus any in $JUDGE_VLLM_ARGS.
# Judge gate: in stage 3 the judge must pass it (docs/judge.md) before anything starts (exit 2).
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

# The judge gate (stage 3; training.judge_gate): a judge whose calibration is missing, not of this
# run or unfit stops the launch here, before the environment check, the memory plan, any server or
# accelerate; a judge this script serves itself is checked as soon as it answers. The trainer checks
# again in every process and records the outcome (an override included) in its output_dir.
gate() {
  if ! "$PY" -m training.trl_launcher --config "$CONFIG" "${ARGS[@]}" --gate-only >&2; then
    echo "train.sh: the judge gate refused this launch (see above); nothing was trained" >&2
    exit 2
  fi
}
[ "$J_URL" != "-" ] && gate

GPU=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then GPU=1; fi
SHARDING=none
[ "$GPU" = 1 ] && SHARDING=${TRAIN_SHARDING:-fsdp2}

JUDGE_ARGS=()
if [ "$GPU" = 1 ] && [ "$J_URL" = "-" ] && [ "$J_MODEL" != "-" ]; then
  # the judge and the trainer (with its colocated vLLM) must not share GPUs: an empty or
  # inherited CUDA_VISIBLE_DEVICES would hide every GPU from the judge, or put it on the trainer's
  if [ -z "${JUDGE_CUDA_VISIBLE_DEVICES:-}" ] || [ -z "${TRAIN_CUDA_VISIBLE_DEVICES:-}" ]; then
    echo "train.sh: this config starts a judge server for $J_MODEL; on a GPU machine give it and the" \
         "trainer their own GPUs, e.g. JUDGE_CUDA_VISIBLE_DEVICES=7 TRAIN_CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6" \
         "(or pass --set judge.url=URL of a running judge)" >&2
    exit 2
  fi
fi
# no GPU on both lists, whether this script starts the judge or it runs already (judge.url): the
# judge's KV cache and the trainer's colocated vLLM would each claim it
# shellcheck source=scripts/gpu_lists.sh
. "$ROOT/scripts/gpu_lists.sh"
SHARED=$(gpu_overlap "${JUDGE_CUDA_VISIBLE_DEVICES:-}" "${TRAIN_CUDA_VISIBLE_DEVICES:-}")
if [ "$GPU" = 1 ] && [ -n "$SHARED" ]; then
  echo "train.sh: GPU(s) $SHARED are in both JUDGE_CUDA_VISIBLE_DEVICES ($JUDGE_CUDA_VISIBLE_DEVICES) and" \
       "TRAIN_CUDA_VISIBLE_DEVICES ($TRAIN_CUDA_VISIBLE_DEVICES); give each its own" >&2
  exit 2
fi
# a judge that runs already (judge.url, RUBRICSTREE_JUDGE_URL), or any judge whose GPUs are named
# (stage 1 too: a judge left running for the next stage): the trainer keeps off its GPUs
if [ "$GPU" = 1 ] && [ -z "${TRAIN_CUDA_VISIBLE_DEVICES:-}" ]; then
  if [ -n "${JUDGE_CUDA_VISIBLE_DEVICES:-}" ]; then
    TRAIN_CUDA_VISIBLE_DEVICES=$(gpu_minus "${CUDA_VISIBLE_DEVICES:-$(gpu_all)}" "$JUDGE_CUDA_VISIBLE_DEVICES")
    if [ -z "$TRAIN_CUDA_VISIBLE_DEVICES" ]; then
      echo "train.sh: no GPU is left for the trainer besides the judge's (JUDGE_CUDA_VISIBLE_DEVICES=$JUDGE_CUDA_VISIBLE_DEVICES)" >&2
      exit 2
    fi
    echo "train.sh: the trainer takes GPU(s) $TRAIN_CUDA_VISIBLE_DEVICES: every one but the judge's" \
         "(JUDGE_CUDA_VISIBLE_DEVICES=$JUDGE_CUDA_VISIBLE_DEVICES)" >&2
  elif [ "$J_URL" != "-" ] && [ -z "${CUDA_VISIBLE_DEVICES:-}" ] && is_local_url "$J_URL"; then
    echo "train.sh: the judge at $J_URL runs on this machine, on GPUs nobody named: the trainer would take" \
         "every GPU, its own included. Set JUDGE_CUDA_VISIBLE_DEVICES (the judge's GPUs: the trainer gets the" \
         "others), or TRAIN_CUDA_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES (the trainer's)" >&2
    exit 2
  fi
fi
if [ "$GPU" = 1 ]; then
  case "$SHARDING" in fsdp2|zero3|none) ;;
    *) echo "train.sh: TRAIN_SHARDING must be fsdp2, zero3 or none, got $SHARDING" >&2; exit 2 ;; esac
fi
# what the config will run, before anything starts: the packages (vllm for grpo.use_vllm, deepspeed
# for zero3, flash-attn when the model loads with it) and, on a GPU machine, the driver against
# torch's CUDA build and every compiled module imported. A problem fails here with the wheel or
# driver to get, not minutes later inside accelerate, the colocated vLLM or the judge.
ON_GPU=(); [ "$GPU" = 1 ] && ON_GPU=(--gpu)
if ! "$PY" -m training.env_check --config "$CONFIG" --sharding "$SHARDING" "${ON_GPU[@]}" "${ARGS[@]}"; then
  echo "train.sh: this machine cannot run what $(basename "$CONFIG") uses (see above); nothing was started" >&2
  exit 2
fi
if [ "$GPU" = 1 ]; then
  count() { awk -F, '{print NF}' <<<"$1"; }
  N_TRAIN=$(gpu_count)
  if [ -n "${TRAIN_CUDA_VISIBLE_DEVICES:-}" ]; then N_TRAIN=$(count "$TRAIN_CUDA_VISIBLE_DEVICES")
  elif [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then N_TRAIN=$(count "$CUDA_VISIBLE_DEVICES"); fi
  N_JUDGE=0
  if [ "$J_URL" = "-" ] && [ "$J_MODEL" != "-" ] && [ -n "${JUDGE_CUDA_VISIBLE_DEVICES:-}" ]; then
    N_JUDGE=$(count "$JUDGE_CUDA_VISIBLE_DEVICES")
  fi
  plan_fits train.sh "$PY" "$CONFIG" $((N_TRAIN + N_JUDGE)) "$N_JUDGE" "$SHARDING" "${ARGS[@]}" || exit 3
  if [ "$N_JUDGE" -gt 0 ]; then
    mapfile -t JUDGE_ARGS < <("$PY" -m rubricstree train plan "$CONFIG" --gpus $((N_TRAIN + N_JUDGE)) \
      --gpu-memory-gb "$(gpu_memory_gb)" --judge-gpus "$N_JUDGE" --sharding "$SHARDING" "${ARGS[@]}" --print-judge-args)
  fi
fi
# shellcheck disable=SC2206
JUDGE_ARGS+=(${JUDGE_VLLM_ARGS:-})

STATE=$(mktemp -d "${TMPDIR:-/tmp}/rubricstree-train.XXXXXX")
stop() {
  "$ROOT/scripts/serve_judge.sh" --stop --pid-file "$STATE/judge.pid" || true  # its whole process group
  rm -rf "$STATE"
}
trap stop EXIT

if [ "$J_URL" = "-" ] && [ "$J_MODEL" != "-" ]; then
  PORT=${JUDGE_PORT:-8100}
  NAME=$J_SERVED; [ "$NAME" = "-" ] && NAME=$(basename "$J_MODEL")
  JUDGE_ENV=()
  if [ "$GPU" = 1 ]; then
    JUDGE_ENV=(CUDA_VISIBLE_DEVICES="$JUDGE_CUDA_VISIBLE_DEVICES")
  fi
  echo "train.sh: starting a judge server for $J_MODEL on port $PORT" >&2
  URL=$(env "${JUDGE_ENV[@]}" scripts/serve_judge.sh --model "$J_MODEL" --served-name "$NAME" --port "$PORT" \
        --pid-file "$STATE/judge.pid" --log "${JUDGE_LOG:-judge-server-$PORT.log}" -- "${JUDGE_ARGS[@]}")
  ARGS+=(--set "judge.url=$URL" --set "judge.served_model=$NAME")
  gate
fi

if [ "$GPU" = 1 ]; then
  [ -n "${TRAIN_CUDA_VISIBLE_DEVICES:-}" ] && export CUDA_VISIBLE_DEVICES=$TRAIN_CUDA_VISIBLE_DEVICES
  if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
    NPROC=$(awk -F, '{print NF}' <<<"$CUDA_VISIBLE_DEVICES")
  else
    NPROC=$(gpu_count)
  fi
  ACCEL=${ACCELERATE:-$(dirname "$PY")/accelerate}; [ -x "$ACCEL" ] || ACCEL=accelerate
  ACCEL_CFG=()
  if [ "$SHARDING" != none ] && [[ "${ACCELERATE_ARGS:-}" != *--config_file* ]]; then
    ACCEL_CFG=(--config_file "configs/accelerate/$SHARDING.yaml")
  fi
  # shellcheck disable=SC2086
  "$ACCEL" launch "${ACCEL_CFG[@]}" --num_processes "$NPROC" ${ACCELERATE_ARGS:-} -m training.trl_launcher \
    --config "$CONFIG" "${ARGS[@]}"
else
  "$PY" -m training.trl_launcher --config "$CONFIG" "${ARGS[@]}"
fi
