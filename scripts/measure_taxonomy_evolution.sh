#!/usr/bin/env bash
# Measure a taxonomy's coverage of HealthBench rows and one evolution step, in one command:
# coverage -> propose -> review (scripted: accept the proposals ranked above lambda) -> apply ->
# coverage on the new version, then one JSON line with the figures.
#
#   scripts/measure_taxonomy_evolution.sh [DATA] [TAXONOMY] [OUTDIR] [-- extra options for coverage/propose]
#
# DATA defaults to healthbench_hard_sample50.jsonl in $RUBRICSTREE_SHARED_DATA, else in ../shared/data
# beside the checkout; TAXONOMY to the packaged one,
# OUTDIR to runs/evolution. Extra options (e.g. --router static, --match-threshold 0.5, or
# --matcher llm --judge-url URL) go to both `tree coverage` and `tree propose`. Writes OUTDIR/
# coverage_before.json, proposals.yaml, next/taxonomy.yaml, coverage_after.json, summary.json.
# With the default embedding matcher the figures are a MiniLM proxy, not physician-checked matches.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SAMPLE=healthbench_hard_sample50.jsonl
DEFAULT_DATA=${RUBRICSTREE_SHARED_DATA:-$ROOT/../shared/data}/$SAMPLE
DATA=${1:-$DEFAULT_DATA}
TAXONOMY=${2:-$ROOT/reward/data/taxonomy.yaml}
OUT=${3:-$ROOT/runs/evolution}
shift $(( $# < 3 ? $# : 3 ))
[ "${1:-}" = "--" ] && shift
EXTRA=("$@")
PY=${PYTHON:-$ROOT/.venv/bin/python}
[ -x "$PY" ] || PY=python3
rt() { PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PY" -c 'import sys; from rubricstree import main; sys.argv[0] = "rubricstree"; main()' "$@"; }

mkdir -p "$OUT"
rt tree coverage --data "$DATA" --taxonomy "$TAXONOMY" --json "${EXTRA[@]}" > "$OUT/coverage_before.json"
rt tree propose --data "$DATA" --taxonomy "$TAXONOMY" --out "$OUT" --json "${EXTRA[@]}" > "$OUT/propose.json"
rt tree review "$OUT/proposals.yaml" --taxonomy "$TAXONOMY" --non-interactive --accept-recommended --json > "$OUT/review.json"
rt tree apply "$OUT/proposals.yaml" --taxonomy "$TAXONOMY" --out "$OUT/next" --json > "$OUT/apply.json"
rt tree coverage --data "$DATA" --taxonomy "$OUT/next/taxonomy.yaml" --json "${EXTRA[@]}" > "$OUT/coverage_after.json"
"$PY" - "$OUT" <<'PYEOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
b, a = (json.loads((out / f"coverage_{k}.json").read_text()) for k in ("before", "after"))
rv = json.loads((out / "review.json").read_text())
summary = {
    "taxonomy": b["taxonomy"], "rows": b["n_rows"], "items": b["n_items"], "settings": b["settings"],
    "before": {"coverage": b["coverage"], "all_leaves": b["all_leaves"]["coverage"],
               "by_theme": {k: v["coverage"] for k, v in b["by_theme"].items()},
               "by_axis": {k: v["coverage"] for k, v in b["by_axis"].items()}},
    "accepted": rv["accepted"], "predicted_coverage": rv["predicted_coverage"],
    "after": {"coverage": a["coverage"], "all_leaves": a["all_leaves"]["coverage"], "leaves": a["taxonomy"]["leaves"]},
}
summary["prediction_error"] = a["coverage"] - (rv["predicted_coverage"] or 0.0)
(out / "summary.json").write_text(json.dumps(summary, indent=1))
print(json.dumps(summary))
PYEOF
