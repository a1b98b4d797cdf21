#!/usr/bin/env bash
# The Fathom-Vaidya pipeline with TRL: filter -> stage 1 -> stage 2 -> stage 3, with explicit
# checkpoints, resumable.
#
#   RUBRICSTREE_RUN_ROOT=runs/fv scripts/train_pipeline.sh [--set key=value ...]
#   PIPELINE_CONFIGS=configs/smoke RUBRICSTREE_TINY_MODEL=... RUBRICSTREE_JUDGE_URL=... scripts/train_pipeline.sh
#
# 1. filter: the stage 1 config's difficulty filter with the BASE model (8 samples, its own
#    completion budget); its result (rule and rubric splits) is cached under difficulty.out_dir and
#    read by stages 1 and 2, as in the paper. On a GPU machine without RUBRICSTREE_POLICY_URL a
#    vLLM server for the base model is started for it (scripts/serve_judge.sh on $POLICY_PORT,
#    default 8200, GPUs $POLICY_CUDA_VISIBLE_DEVICES, default all) and stopped before training.
# 2. stage 1 (scripts/train.sh) -> $ROOT/stage1_mcq; its last checkpoint is stage 2's model.
# 3. stage 2 -> $ROOT/stage2_error_rubric, refused without a stage 1 checkpoint.
# 4. stage 3 (per-epoch re-filter as its config says) -> $ROOT/stage3_clinical_rubric, from the
#    stage 2 checkpoint.
# Each finished step writes $ROOT/<step>.done (the checkpoint it produced); rerunning skips done
# steps and resumes a stopped one from its last checkpoint. Progress: one line per step with the
# elapsed time and an ETA from the mean duration of the steps run so far.
set -euo pipefail

ROOT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT_DIR"
PY=${PYTHON:-$ROOT_DIR/.venv/bin/python}
[ -x "$PY" ] || PY=python3
CONFIGS=${PIPELINE_CONFIGS:-configs/trl}
export RUBRICSTREE_RUN_ROOT=${RUBRICSTREE_RUN_ROOT:-runs/fv}
ROOT=$RUBRICSTREE_RUN_ROOT
mkdir -p "$ROOT"
SETS=("$@")
STEPS=(filter stage1_mcq stage2_error_rubric stage3_clinical_rubric)
T0=$(date +%s); RAN=0

say() { echo "[pipeline $(date +%H:%M:%S)] $*" >&2; }
eta() {
  local i=$1 now; now=$(date +%s)
  if [ "$RAN" -gt 0 ]; then
    say "step $((i + 1))/${#STEPS[@]} ${STEPS[$i]}: elapsed $(( (now - T0) / 60 )) min, ETA ~$(( (now - T0) / RAN * (${#STEPS[@]} - i) / 60 )) min"
  else
    say "step $((i + 1))/${#STEPS[@]} ${STEPS[$i]}: elapsed $(( (now - T0) / 60 )) min, ETA unknown until a step finishes"
  fi
}
last_ckpt() {
  "$PY" -c 'import sys; from training.trl_launcher import last_checkpoint; print(last_checkpoint(sys.argv[1]) or "")' "$1"
}
POLICY_PID=""
cleanup() { [ -n "$POLICY_PID" ] && kill "$POLICY_PID" 2>/dev/null || true; }
trap cleanup EXIT

MODEL=""
for i in "${!STEPS[@]}"; do
  step=${STEPS[$i]}
  if [ -f "$ROOT/$step.done" ]; then
    MODEL=$(cat "$ROOT/$step.done")
    say "step $((i + 1))/${#STEPS[@]} $step: done before ($MODEL), skipped"
    continue
  fi
  eta "$i"
  s0=$(date +%s)
  if [ "$step" = filter ]; then
    cfg="$CONFIGS/stage1_mcq.yaml"
    if [ -z "${RUBRICSTREE_POLICY_URL:-}" ] && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
      base=$("$PY" -c 'import sys; from training.trl_config import load_config
print(load_config(sys.argv[1], [a for a in sys.argv[2:] if a != "--set"]).model)' "$cfg" "${SETS[@]}")
      env ${POLICY_CUDA_VISIBLE_DEVICES:+CUDA_VISIBLE_DEVICES=$POLICY_CUDA_VISIBLE_DEVICES} \
        scripts/serve_judge.sh --model "$base" --served-name policy --port "${POLICY_PORT:-8200}" \
        --pid-file "$ROOT/policy.pid" --log "$ROOT/policy-server.log" >/dev/null
      POLICY_PID=$(cat "$ROOT/policy.pid")
      export RUBRICSTREE_POLICY_URL="http://127.0.0.1:${POLICY_PORT:-8200}" RUBRICSTREE_POLICY_SERVED=policy
    fi
    "$PY" -m training.trl_launcher --config "$cfg" --set "output_dir=$ROOT/stage1_mcq" "${SETS[@]}" --filter-only >&2
    if [ -n "$POLICY_PID" ]; then kill "$POLICY_PID"; wait "$POLICY_PID" 2>/dev/null || true; POLICY_PID=""; fi
    echo "-" >"$ROOT/filter.done"
  else
    extra=()
    if [ "$step" != stage1_mcq ]; then
      if [ -z "$MODEL" ] || [ "$MODEL" = "-" ]; then
        say "$step needs the previous stage's checkpoint and there is none: refusing"; exit 2
      fi
      extra=(--set "model=$MODEL")
      say "$step starts from $MODEL"
    fi
    scripts/train.sh "$CONFIGS/$step.yaml" --set "output_dir=$ROOT/$step" "${extra[@]}" "${SETS[@]}" >&2
    MODEL=$(last_ckpt "$ROOT/$step")
    if [ -z "$MODEL" ]; then say "$step finished without a checkpoint in $ROOT/$step"; exit 1; fi
    echo "$MODEL" >"$ROOT/$step.done"
  fi
  RAN=$((RAN + 1))
  say "step $((i + 1))/${#STEPS[@]} $step: finished in $(( ($(date +%s) - s0) / 60 )) min"
done
say "pipeline done: $MODEL"
echo "$MODEL"
