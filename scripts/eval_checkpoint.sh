#!/usr/bin/env bash
# Evaluate one checkpoint on a GPU machine: serve it and the judge with vLLM, run the HealthBench
# evaluation (and an MCQ one), stop the servers.
#
#   scripts/eval_checkpoint.sh CHECKPOINT [--judge MODEL] [--data FILE|URL|hard] [--mcq FILE]
#       [--out DIR] [--judge-mode explain|choice] [--system-prompt ours|none|FILE] [--limit N]
#       [--max-new-tokens N] [--no-thinking] [--length-adjust] [--policy-url URL] [--judge-url URL]
#       [--policy-port 8100] [--judge-port 8101] [-- extra options for `rubricstree eval healthbench`]
#
# --data defaults to `hard` (the official HealthBench-Hard file, downloaded and hash-checked).
# Budgets follow training: 16000 new tokens on HealthBench, 10000 on MCQ (a thinking model needs
# them); --no-thinking asks for direct answers (2048 / 1024). A CPU policy server's context is
# POLICY_MAX_LEN (default 20480; on GPU vLLM takes the model's own). Options after `--` (e.g. --judge-api chat --grader official
# --served-model gpt-4.1) go to the HealthBench command.
# --judge (or $JUDGE_MODEL) is the grader model. --policy-url / --judge-url reuse servers that
# are already running instead of starting them (with --judge-url, --judge is the served name).
# GPUs: with two or more, the policy server gets POLICY_CUDA_VISIBLE_DEVICES (default 0) and the
# judge JUDGE_CUDA_VISIBLE_DEVICES (default 1; several, e.g. 1,2,3,4, give it tensor parallelism),
# each 0.9 of their memory. On one GPU both servers share it: each gets POLICY_GPU_UTIL /
# JUDGE_GPU_UTIL of its memory (default 0.45 each). Outputs go to DIR/healthbench and DIR/mcq
# (default DIR: runs/eval/<checkpoint name>). Rerunning the same command resumes both evaluations. Servers
# started here are stopped on exit, by their PIDs.
set -euo pipefail

usage() { sed -n 2,23p "$0"; }
[ $# -ge 1 ] || { usage >&2; exit 2; }
case "$1" in -h|--help) usage; exit 0 ;; esac
CKPT=$1; shift
JUDGE=${JUDGE_MODEL:-} DATA=hard MCQ="" OUT="" GRADING=explain SYSTEM_PROMPT=none LIMIT="" MAX_NEW=""
THINK=() LENGTH_ADJUST=()
POLICY_URL="" JUDGE_URL="" POLICY_PORT=8100 JUDGE_PORT=8101
EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --judge) JUDGE=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    --mcq) MCQ=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --judge-mode|--grading) GRADING=$2; shift 2 ;;
    --system-prompt) SYSTEM_PROMPT=$2; shift 2 ;;
    --limit) LIMIT=$2; shift 2 ;;
    --max-new-tokens) MAX_NEW=$2; shift 2 ;;
    --no-thinking) THINK=(--no-thinking); shift ;;
    --length-adjust) LENGTH_ADJUST=(--length-adjust); shift ;;
    --policy-url) POLICY_URL=$2; shift 2 ;;
    --judge-url) JUDGE_URL=$2; shift 2 ;;
    --policy-port) POLICY_PORT=$2; shift 2 ;;
    --judge-port) JUDGE_PORT=$2; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) echo "eval_checkpoint.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$JUDGE" ] || [ -n "$JUDGE_URL" ] || { echo "eval_checkpoint.sh: give --judge MODEL (or \$JUDGE_MODEL, or --judge-url)" >&2; exit 2; }

ROOT=$(cd "$(dirname "$0")/.." && pwd)
RT=${RUBRICSTREE_BIN:-$ROOT/.venv/bin/rubricstree}
[ -x "$RT" ] || RT=rubricstree
OUT=${OUT:-runs/eval/$(basename "$CKPT")}
mkdir -p "$OUT/logs"
NGPU=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then NGPU=$(nvidia-smi -L | awk '/^GPU [0-9]+:/ {n++} END {print n + 0}'); fi  # not its MIG lines
POLICY_ENV=() JUDGE_ENV=() POLICY_VLLM=() JUDGE_VLLM=()
if [ "$NGPU" -ge 2 ]; then
  # one GPU each (a large judge does not fit in half of one GPU beside the policy)
  POLICY_DEVICES=${POLICY_CUDA_VISIBLE_DEVICES:-0} JUDGE_DEVICES=${JUDGE_CUDA_VISIBLE_DEVICES:-1}
  POLICY_ENV=(CUDA_VISIBLE_DEVICES="$POLICY_DEVICES") JUDGE_ENV=(CUDA_VISIBLE_DEVICES="$JUDGE_DEVICES")
  POLICY_VLLM=(-- --gpu-memory-utilization "${POLICY_GPU_UTIL:-0.9}"
               --tensor-parallel-size "$(awk -F, '{print NF}' <<<"$POLICY_DEVICES")")
  JUDGE_VLLM=(-- --gpu-memory-utilization "${JUDGE_GPU_UTIL:-0.9}"
              --tensor-parallel-size "$(awk -F, '{print NF}' <<<"$JUDGE_DEVICES")")
elif [ "$NGPU" = 1 ]; then
  POLICY_VLLM=(-- --gpu-memory-utilization "${POLICY_GPU_UTIL:-0.45}")
  JUDGE_VLLM=(-- --gpu-memory-utilization "${JUDGE_GPU_UTIL:-0.45}")
fi

STARTED=()
stop() {
  for pidf in "${STARTED[@]}"; do
    "$ROOT/scripts/serve_judge.sh" --stop --pid-file "$pidf" || true  # the whole process group
  done
}
trap stop EXIT

# Served names are the model names themselves: the judge's name is part of every verdict's
# cache key, so two judges must never share an alias like "judge".
if [ -z "$POLICY_URL" ]; then
  echo "starting the policy server for $CKPT" >&2
  STARTED+=("$OUT/logs/policy.pid")
  POLICY_URL=$(env "${POLICY_ENV[@]}" JUDGE_MAX_LEN="${POLICY_MAX_LEN:-20480}" "$ROOT/scripts/serve_judge.sh" --model "$CKPT" --served-name "$CKPT" \
    --port "$POLICY_PORT" --pid-file "$OUT/logs/policy.pid" --log "$OUT/logs/policy-server.log" "${POLICY_VLLM[@]}")
fi
POLICY_NAME=$CKPT  # with --policy-url, a served name or the path the server reports as its root
if [ -z "$JUDGE_URL" ]; then
  echo "starting the judge server for $JUDGE" >&2
  STARTED+=("$OUT/logs/judge.pid")
  JUDGE_URL=$(env "${JUDGE_ENV[@]}" "$ROOT/scripts/serve_judge.sh" --model "$JUDGE" --served-name "$JUDGE" \
    --port "$JUDGE_PORT" --pid-file "$OUT/logs/judge.pid" --log "$OUT/logs/judge-server.log" "${JUDGE_VLLM[@]}")
fi

HB=("$RT" eval healthbench --model "$POLICY_NAME" --generate-url "$POLICY_URL" --judge-url "$JUDGE_URL"
    --data "$DATA" --judge-mode "$GRADING" --system-prompt "$SYSTEM_PROMPT" "${THINK[@]}" "${LENGTH_ADJUST[@]}"
    --out "$OUT/healthbench")
[ -n "$MAX_NEW" ] && HB+=(--max-new-tokens "$MAX_NEW")
[ -n "$JUDGE" ] && HB+=(--served-model "$JUDGE")
[ -n "$LIMIT" ] && HB+=(--limit "$LIMIT")
echo "+ ${HB[*]} ${EXTRA[*]}" >&2
"${HB[@]}" "${EXTRA[@]}"

if [ -n "$MCQ" ]; then
  M=("$RT" eval mcq --model "$POLICY_NAME" --generate-url "$POLICY_URL" --data "$MCQ"
     --system-prompt "$SYSTEM_PROMPT" "${THINK[@]}" --out "$OUT/mcq")
  [ -n "$LIMIT" ] && M+=(--limit "$LIMIT")
  echo "+ ${M[*]}" >&2
  "${M[@]}"
fi
echo "done: $OUT/healthbench/report.html${MCQ:+ and $OUT/mcq/report.html}" >&2
