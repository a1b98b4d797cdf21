#!/usr/bin/env bash
# The whole test suite: builds the tiny model, starts a real vLLM judge server on it (CPU or GPU)
# and a second one on SmolLM2-135M-Instruct (the calibration tests' real judge), runs every test
# (unit and server) in one pytest run, and stops the servers by their PIDs.
# Called by `make test` (and so by .ci/run); extra arguments go to pytest.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PORT=${JUDGE_PORT:-8765}
STATE="$ROOT/.cache/test-server"
mkdir -p "$STATE"
MODEL="$STATE/tiny-model"
[ -f "$MODEL/config.json" ] || .venv/bin/python scripts/make_tiny_model.py "$MODEL" >/dev/null

# A second server, for the calibration tests: SmolLM2-135M-Instruct (a real, bad judge). It starts
# in the background once the first is up, while the first tests run; its URL (or "error ...")
# lands in smollm2.url, which the smollm2_url fixture waits for.
SMOL_PORT=$((PORT + 1))
SMOL="$ROOT/.cache/smollm2"
[ -f "$SMOL/config.json" ] || .venv/bin/python scripts/make_smollm2.py "$SMOL" >/dev/null

# each server's whole process group (its engine core too), then until its port is closed
stop() {
  scripts/serve_judge.sh --stop --pid-file "$STATE/judge.pid" --port "$PORT" || true
  scripts/serve_judge.sh --stop --pid-file "$STATE/smollm2.pid" --port "$SMOL_PORT" || true
}
trap stop EXIT
stop
rm -f "$STATE/smollm2.url"
URL=$(scripts/serve_judge.sh --model "$MODEL" --served-name tiny --port "$PORT" \
      --pid-file "$STATE/judge.pid" --log "$STATE/judge-server.log")
(scripts/serve_judge.sh --model "$SMOL" --served-name smollm2 --port "$SMOL_PORT" --pid-file "$STATE/smollm2.pid" \
   --log "$STATE/smollm2-server.log" > "$STATE/smollm2.url.tmp" 2>> "$STATE/smollm2-server.log" \
   || echo "error: see $STATE/smollm2-server.log" > "$STATE/smollm2.url.tmp"
 mv "$STATE/smollm2.url.tmp" "$STATE/smollm2.url") &
echo "judge server ready at $URL"
export RUBRICSTREE_JUDGE_URL="$URL" RUBRICSTREE_TINY_MODEL="$MODEL" RUBRICSTREE_SMOLLM2_MODEL="$SMOL" \
       RUBRICSTREE_SMOLLM2_URL_FILE="$STATE/smollm2.url"
set +e
.venv/bin/python -m pytest tests -q -p no:cacheprovider --durations=40 "$@"
rc=$?
set -e
if [ $rc -ne 0 ]; then echo "--- last lines of the judge server log ---"; tail -n 40 "$STATE/judge-server.log"; fi
exit $rc
