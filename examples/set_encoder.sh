#!/usr/bin/env bash
# Set-Encoder (paper 003) at CPU scale, on the bundled DL19/DL20 data plus one SPLADE++ teacher run:
#   1. mono, matrank and set-encoder trained the same way on DL20 (LCE), then the Set-Encoder's
#      RankNet distillation stage from the teacher; DL19 BM25 top-100 re-ranked, with significance;
#   2. the permutation study of §5.3 (BM25 / random / ideal / reverse-ideal input orders, plus a
#      position-aware control);
#   3. peak memory and time per query at 10, 30, 100 candidates, set-encoder vs mono.
# Through bench/set_encoder.py; every step goes through the rankkit CLI.
#
#   bash examples/set_encoder.sh DATA [OUTPUT] [-- bench/set_encoder.py options, e.g. --max-steps 200]
# DATA: a ../shared/data-style folder (msmarco-passage-trec-dl/ for the SPLADE++ DL20 teacher run).
# Writes OUTPUT/set_encoder.md (default runs/set-encoder).
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,13p' "$0"; exit 2; }
data="$(cd "$1" && pwd)"; shift
out="runs/set-encoder"
if [ $# -ge 1 ] && [ "$1" != "--" ]; then out="$1"; shift; fi
[ "${1:-}" = "--" ] && shift
cd "$(dirname "$0")/.."
teacher="$data/msmarco-passage-trec-dl/runs-with-text/SPLADE_P_P_ENSEMBLE_DISTIL/trec_results_dl20.txt"
"${PYTHON:-python}" bench/set_encoder.py --output "$out" --teacher "$teacher" "$@"
cat "$out/set_encoder.md"
