#!/usr/bin/env bash
# The Fathom-Vaidya pipeline with TRL: filter -> stage 1 -> stage 2 -> stage 3, each stage starting
# from the previous stage's Hugging Face export, resumable.
#
#   RUBRICSTREE_RUN_ROOT=runs/fv scripts/train_pipeline.sh [--set key=value ...]
#   PIPELINE_CONFIGS=configs/smoke RUBRICSTREE_TINY_MODEL=... RUBRICSTREE_JUDGE_URL=... scripts/train_pipeline.sh
#
# 1. filter: the stage 1 config's difficulty filter with the BASE model (8 samples, its own
#    completion budget); its result (rule and rubric splits) is cached under difficulty.out_dir and
#    read by stages 1 and 2, as in the paper.
# 2. stage 1 (scripts/train.sh) -> $ROOT/stage1_mcq; its export $ROOT/stage1_mcq/hf is stage 2's model.
# 3. stage 2 -> $ROOT/stage2_error_rubric, refused without a stage 1 export.
# 4. stage 3 -> $ROOT/stage3_clinical_rubric from the stage 2 export. With difficulty.per_epoch,
#    one epoch per scripts/train.sh run: before each, the epoch's filter samples from the current
#    policy (the newest epoch export, else stage 2's), then the trainer trains that epoch, exports
#    $ROOT/stage3_clinical_rubric/hf-epoch-N and exits, so the next filter gets every GPU.
#
# Serving the policy a filter samples from (PIPELINE_SERVE=1, the default on GPU machines): a vLLM
# server on the filter's model (the base model, or the current checkpoint's export) is started with
# scripts/serve_judge.sh on $POLICY_PORT (default 8200), health-checked (it must list the name
# "policy"), used only by that filter (--set difficulty.generate_url=..., never exported) and stopped
# (by its PID, waiting for it to exit) before training resumes. It gets $POLICY_CUDA_VISIBLE_DEVICES,
# else $TRAIN_CUDA_VISIBLE_DEVICES, else every GPU but the judge's ($JUDGE_CUDA_VISIBLE_DEVICES; a
# judge URL on this machine without it is refused, and so are lists that overlap), as data-parallel replicas
# (--data-parallel-size N; $POLICY_VLLM_ARGS replaces that, e.g. "--tensor-parallel-size 2
# --data-parallel-size 4"). Filters run only after the previous trainer has exited, so its GPUs
# are free. A server left by a killed run (its PID in $ROOT/policy.pid) is stopped first.
# PIPELINE_SERVE=0: the filter samples in process (transformers; slow for long completions), or
# from RUBRICSTREE_POLICY_URL for the base-model filter only (a server you run on the base model).
# A judge the configs name by model (no url) is started once for stages 2-3 (see ensure_judge), before
# stage 1 when stage 3 is still to do: stage 3's judge gate is checked before anything trains.
# Each finished step writes $ROOT/<step>.done (the export it produced); rerunning skips done
# steps and resumes a stopped one from its last checkpoint (stage 3: at its epoch). Progress: one
# line per step with the elapsed time and an ETA from the mean duration of the steps run so far.
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
GPU=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then GPU=1; fi
SERVE=${PIPELINE_SERVE:-$GPU}
SHARDING=none
[ "$GPU" = 1 ] && SHARDING=${TRAIN_SHARDING:-fsdp2}
PORT=${POLICY_PORT:-8200}
PID_FILE=$ROOT/policy.pid
# shellcheck source=scripts/gpu_lists.sh
. "$ROOT_DIR/scripts/gpu_lists.sh"
JUDGE_URL=${RUBRICSTREE_JUDGE_URL:-}  # the judge in use (a stage's config may name another): its GPUs stay its own

say() { echo "[pipeline $(date +%H:%M:%S)] $*" >&2; }
eta() {
  local i=$1 now; now=$(date +%s)
  if [ "$RAN" -gt 0 ]; then
    say "step $((i + 1))/${#STEPS[@]} ${STEPS[$i]}: elapsed $(( (now - T0) / 60 )) min, ETA ~$(( (now - T0) / RAN * (${#STEPS[@]} - i) / 60 )) min"
  else
    say "step $((i + 1))/${#STEPS[@]} ${STEPS[$i]}: elapsed $(( (now - T0) / 60 )) min, ETA unknown until a step finishes"
  fi
}
is_export() {
  "$PY" -c 'import sys; from training.hf_export import is_export; sys.exit(0 if is_export(sys.argv[1]) else 1)' "$1"
}
launcher() { env -u RUBRICSTREE_POLICY_URL -u RUBRICSTREE_POLICY_SERVED "$PY" -m training.trl_launcher "$@"; }
json_field() { "$PY" -c 'import json, sys; v = json.loads(sys.argv[1])[sys.argv[2]]; print("" if v is None else v)' "$1" "$2"; }

stop_server() {  # NAME PID_FILE [PORT]: a server this pipeline started (or a killed earlier run left)
  local name=$1 file=$2 port=${3:-}
  [ -f "$file" ] || return 0
  # the whole process group, and wait for the port: the engine cores (one per data-parallel rank)
  # outlive a signal to the API process alone, even its death, and keep their GPU memory from the
  # next trainer; a stale pid file whose group runs no vLLM is left alone (serve_judge.sh --stop)
  say "stopping the $name server (PID $(cat "$file"), its process group)"
  scripts/serve_judge.sh --stop --pid-file "$file" ${port:+--port "$port"} || true
  rm -f "$file"
}
stop_policy() { stop_server policy "$PID_FILE" "$PORT"; }
stop_judge() { stop_server judge "$ROOT/judge.pid"; }
trap 'stop_policy; stop_judge' EXIT

# Stages 2-3 and stage 3's filters score with the judge. When the config names a judge model and no
# url (GPU machines), the pipeline starts it once, on $JUDGE_CUDA_VISIBLE_DEVICES, sized by the
# memory plan as train.sh sizes it, and hands its url to every filter and trainer run (train.sh
# then starts none); the policy server of stage 3's filters then gets $TRAIN_CUDA_VISIBLE_DEVICES.
JUDGE_SETS=()
ensure_judge() {  # CONFIG [--set ...]
  local cfg=$1 spec url model served name n_all n_judge mem jargs; shift
  [ "${#JUDGE_SETS[@]}" -gt 0 ] && return 0
  spec=$(launcher --config "$cfg" "$@" --print-judge | tail -n 1)
  IFS=$'\t' read -r url model served <<<"$spec"
  [ "$url" != "-" ] && JUDGE_URL=$url
  if [ "$GPU" != 1 ] || [ "$url" != "-" ] || [ "$model" = "-" ]; then return 0; fi
  if [ -z "${JUDGE_CUDA_VISIBLE_DEVICES:-}" ] || [ -z "${TRAIN_CUDA_VISIBLE_DEVICES:-}" ]; then
    say "the judge ($model) needs its own GPUs: set JUDGE_CUDA_VISIBLE_DEVICES and TRAIN_CUDA_VISIBLE_DEVICES"; exit 2
  fi
  name=$served; [ "$name" = "-" ] && name=$(basename "$model")
  n_judge=$(awk -F, '{print NF}' <<<"$JUDGE_CUDA_VISIBLE_DEVICES")
  n_all=$(( $(awk -F, '{print NF}' <<<"$TRAIN_CUDA_VISIBLE_DEVICES") + n_judge ))
  # the plan train.sh checks before it starts a judge, checked before this one starts (exit 3 unless TRAIN_FORCE=1)
  plan_fits pipeline "$PY" "$cfg" "$n_all" "$n_judge" "$SHARDING" "$@" || exit 3
  mapfile -t jargs < <("$PY" -m rubricstree train plan "$cfg" --gpus "$n_all" --gpu-memory-gb "$(gpu_memory_gb)" \
                       --judge-gpus "$n_judge" --sharding "$SHARDING" "$@" --print-judge-args)
  # shellcheck disable=SC2206
  jargs+=(${JUDGE_VLLM_ARGS:-})
  say "starting the judge server for $model on GPUs $JUDGE_CUDA_VISIBLE_DEVICES"
  url=$(env CUDA_VISIBLE_DEVICES="$JUDGE_CUDA_VISIBLE_DEVICES" scripts/serve_judge.sh --model "$model" \
        --served-name "$name" --port "${JUDGE_PORT:-8100}" --pid-file "$ROOT/judge.pid" \
        --log "$ROOT/judge-server.log" -- "${jargs[@]}")
  JUDGE_SETS=(--set "judge.url=$url" --set "judge.served_model=$name")
  JUDGE_URL=$url
}

serve_policy() {  # MODEL -> prints the server's base URL once it answers
  local model=$1 args gpus=""
  stop_policy
  if [ "$GPU" = 1 ]; then  # never the judge's GPUs (refused with a message when the lists overlap)
    gpus=$(policy_gpus "$JUDGE_URL") || { say "refusing to start the policy server (see above)"; exit 2; }
  fi
  if [ -n "${POLICY_VLLM_ARGS:-}" ]; then
    read -r -a args <<<"$POLICY_VLLM_ARGS"
  elif [ "$GPU" = 1 ]; then
    args=(--data-parallel-size "$(awk -F, '{print NF}' <<<"$gpus")")
  else
    args=()
  fi
  say "serving $model for the filter on port $PORT${gpus:+, GPUs $gpus} (${args[*]:-defaults})"
  env ${gpus:+CUDA_VISIBLE_DEVICES=$gpus} \
    scripts/serve_judge.sh --model "$model" --served-name policy --port "$PORT" \
    --pid-file "$PID_FILE" --log "$ROOT/policy-server.log" -- "${args[@]}"
}

filter_with() {  # MODEL CONFIG [--set ...]: the config's filter, sampling from MODEL
  local model=$1 cfg=$2 url; shift 2
  if [ "$SERVE" = 1 ]; then
    url=$(serve_policy "$model")
    launcher --config "$cfg" "$@" --set "difficulty.generate_url=$url" --set difficulty.served_model=policy \
      --filter-only >&2
    stop_policy
  elif [ -n "${RUBRICSTREE_POLICY_URL:-}" ] && [ "$model" = base ]; then
    # a server you started on the base model: only the base-model filter may use it
    launcher --config "$cfg" "$@" --set "difficulty.generate_url=$RUBRICSTREE_POLICY_URL" \
      --set "difficulty.served_model=${RUBRICSTREE_POLICY_SERVED:-}" --filter-only >&2
  else
    launcher --config "$cfg" "$@" --set difficulty.generate_url= --filter-only >&2
  fi
}

# Before any server or trainer starts: can this machine run every stage still to do (the packages, and
# on a GPU machine the driver against torch's CUDA build and every compiled module imported)? Stages
# 2-3 read their start model from FV_STAGE1_MODEL/FV_STAGE2_MODEL, which the check does not use.
CHECK=()
for step in "${STEPS[@]:1}"; do [ -f "$ROOT/$step.done" ] || CHECK+=(--config "$CONFIGS/$step.yaml"); done
if [ "${#CHECK[@]}" -gt 0 ]; then
  ON_GPU=(); [ "$GPU" = 1 ] && ON_GPU=(--gpu)
  if ! FV_STAGE1_MODEL=${FV_STAGE1_MODEL:-unused} FV_STAGE2_MODEL=${FV_STAGE2_MODEL:-unused} \
       "$PY" -m training.env_check "${CHECK[@]}" --sharding "$SHARDING" "${ON_GPU[@]}" "${SETS[@]}"; then
    say "this machine cannot run the stages still to do (see above); nothing was started"; exit 2
  fi
fi

# The judge gate before stage 1: a stage-3 judge the gate refuses (no calibration of this run, or an
# unfit one) would stop the pipeline after days of stages 1-2, so it is asked now (the judge started
# first when the configs name a model; the start models of stages 2-3 do not matter to it).
STAGE3=$CONFIGS/stage3_clinical_rubric.yaml
if [ ! -f "$ROOT/stage3_clinical_rubric.done" ] && [ -f "$STAGE3" ]; then
  s3=(--set "output_dir=$ROOT/stage3_clinical_rubric" "${SETS[@]}")
  S1=${FV_STAGE1_MODEL-}; S2=${FV_STAGE2_MODEL-}
  export FV_STAGE1_MODEL=${S1:-unused} FV_STAGE2_MODEL=${S2:-unused}  # the configs load without them
  ensure_judge "$STAGE3" "${s3[@]}"
  if ! launcher --config "$STAGE3" "${s3[@]}" "${JUDGE_SETS[@]}" --gate-only >&2; then
    say "the judge gate refuses stage 3's judge (see above): nothing was trained"; exit 2
  fi
  if [ -z "$S1" ]; then unset FV_STAGE1_MODEL; fi
  if [ -z "$S2" ]; then unset FV_STAGE2_MODEL; fi
fi

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
    sets=(--set "output_dir=$ROOT/stage1_mcq" "${SETS[@]}")
    if [ "$SERVE" = 1 ]; then
      base=$(launcher --config "$cfg" "${sets[@]}" --print-model | tail -n 1)
      filter_with "$base" "$cfg" "${sets[@]}"
    else
      filter_with base "$cfg" "${sets[@]}"
    fi
    echo "-" >"$ROOT/filter.done"
  else
    extra=()
    if [ "$step" != stage1_mcq ]; then
      if [ -z "$MODEL" ] || [ "$MODEL" = "-" ] || ! is_export "$MODEL"; then
        say "$step needs the previous stage's Hugging Face export and there is none ($MODEL): refusing"; exit 2
      fi
      extra=(--set "model=$MODEL")
      say "$step starts from $MODEL"
    fi
    cfg="$CONFIGS/$step.yaml"
    sets=(--set "output_dir=$ROOT/$step" "${extra[@]}" "${SETS[@]}")
    if [ "$step" != stage1_mcq ]; then
      ensure_judge "$cfg" "${sets[@]}"
      sets+=("${JUDGE_SETS[@]}")
    fi
    if [ "$step" = stage3_clinical_rubric ]; then
      # one epoch per trainer run, each after its own filter (a no-op loop without per_epoch)
      while :; do
        nxt=$(launcher --config "$cfg" "${sets[@]}" --print-next-epoch | tail -n 1)
        epoch=$(json_field "$nxt" epoch)
        [ -n "$epoch" ] || break
        if [ "$(json_field "$nxt" filtered)" != True ]; then
          policy=$(json_field "$nxt" policy)
          say "stage 3 epoch $epoch: filtering with $policy"
          filter_with "$policy" "$cfg" "${sets[@]}"
        fi
        say "stage 3 epoch $epoch: training"
        env -u RUBRICSTREE_POLICY_URL -u RUBRICSTREE_POLICY_SERVED \
          scripts/train.sh "$cfg" "${sets[@]}" --set difficulty.epochs_per_run=1 >&2
      done
    fi
    # a stage without per-epoch filtering trains here; after the epoch loop this only re-exports
    # (every epoch is done, so the trainer stops at once)
    if [ ! -e "$ROOT/$step/hf" ]; then
      env -u RUBRICSTREE_POLICY_URL -u RUBRICSTREE_POLICY_SERVED scripts/train.sh "$cfg" "${sets[@]}" >&2
    fi
    MODEL=$ROOT/$step/hf
    if ! is_export "$MODEL"; then say "$step finished without a Hugging Face export in $MODEL"; exit 1; fi
    echo "$MODEL" >"$ROOT/$step.done"
  fi
  RAN=$((RAN + 1))
  say "step $((i + 1))/${#STEPS[@]} $step: finished in $(( ($(date +%s) - s0) / 60 )) min"
done
say "pipeline done: $MODEL"
echo "$MODEL"
