#!/usr/bin/env bash
# The whole test suite: builds the tiny model, starts a real vLLM judge server on it (CPU or GPU),
# runs every test (unit and server) in one pytest run, and stops the server by its PID.
# Called by `make test` (and so by .ci/run); extra arguments go to pytest.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PORT=${JUDGE_PORT:-8765}
STATE="$ROOT/.cache/test-server"
mkdir -p "$STATE"
MODEL="$STATE/tiny-model"
[ -f "$MODEL/config.json" ] || .venv/bin/python scripts/make_tiny_model.py "$MODEL" >/dev/null

# the server's whole process group (its engine core too), then until its port is closed
stop() { scripts/serve_judge.sh --stop --pid-file "$STATE/judge.pid" --port "$PORT" || true; }
trap stop EXIT
stop
URL=$(scripts/serve_judge.sh --model "$MODEL" --served-name tiny --port "$PORT" \
      --pid-file "$STATE/judge.pid" --log "$STATE/judge-server.log")
echo "judge server ready at $URL"
export RUBRICSTREE_JUDGE_URL="$URL" RUBRICSTREE_TINY_MODEL="$MODEL"
set +e
.venv/bin/python -m pytest tests -q -p no:cacheprovider --durations=40 "$@"
rc=$?
set -e
if [ $rc -ne 0 ]; then echo "--- last lines of the judge server log ---"; tail -n 40 "$STATE/judge-server.log"; fi
exit $rc
