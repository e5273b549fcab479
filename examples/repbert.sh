#!/usr/bin/env bash
# RepBERT (paper 001) at CPU scale: the packaged all-MiniLM-L6-v2 zero-shot (--model repbert) vs BM25 on the
# TREC DL19/DL20 pooled corpus and on Quora question retrieval, RepBERT fine-tuned on the Quora dev
# split, and RepBERT's alternating merge with BM25 in both orders (Tables 3-4), through bench/dense.py.
#
#   bash examples/repbert.sh DATA [OUTPUT]     DATA: a ../shared/data-style folder
#                                              (quora-qqp-bimpm/, msmarco-passage-trec-dl/)
# Writes OUTPUT/dense.md (default runs/repbert); rerunning reuses finished steps.
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,9p' "$0"; exit 2; }
data="$(cd "$1" && pwd)"; out="${2:-runs/repbert}"
cd "$(dirname "$0")/.."
[ -f "$out/quora/corpus.jsonl" ] || "${PYTHON:-python}" examples/quora/prepare.py --source "$data/quora-qqp-bimpm" --output "$out/quora"
"${PYTHON:-python}" bench/dense.py --steps quora,dl,fuse --output "$out" --quora-dir "$out/quora" \
  --dl-dir "$data/msmarco-passage-trec-dl" --densetrans-steps 0
cat "$out/dense.md"
