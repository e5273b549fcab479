#!/usr/bin/env bash
# DenseTrans (paper 002) at CPU scale on Quora question retrieval: BM25, zero-shot MiniLM, and
# DenseTrans trained on the dev split with `rankkit mine` BM25 negatives, with its three Table 3
# ablations (-TopDense, -AllDense, +Concat), R@100 / MRR@100 / MAP@100 / nDCG@10 as in Table 2;
# then the 25k vs 250k peak-RSS measurement of streamed dense indexing. Through bench/dense.py.
#
#   bash examples/densetrans.sh DATA [OUTPUT] [-- bench/dense.py options, e.g. --densetrans-steps 600]
# DATA: a ../shared/data-style folder with quora-qqp-bimpm/. Writes OUTPUT/dense.md (default runs/densetrans).
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,9p' "$0"; exit 2; }
data="$(cd "$1" && pwd)"; shift
out="runs/densetrans"
if [ $# -ge 1 ] && [ "$1" != "--" ]; then out="$1"; shift; fi
[ "${1:-}" = "--" ] && shift
cd "$(dirname "$0")/.."
[ -f "$out/quora/corpus.jsonl" ] || "${PYTHON:-python}" examples/quora/prepare.py --source "$data/quora-qqp-bimpm" --output "$out/quora"
"${PYTHON:-python}" bench/dense.py --steps quora,memory --output "$out" --quora-dir "$out/quora" --repbert-steps 0 "$@"
cat "$out/dense.md"
