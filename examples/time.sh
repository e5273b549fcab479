#!/usr/bin/env bash
# PARADE / MatRank-Split long-document re-ranking on the TIME collection (423 news stories, 1963),
# 5-fold cross-validation as PARADE §4.4 (docs/DOCUMENTS.md).
#
#   bash examples/time.sh /path/to/classic-ir-collections [--force] [OUTPUT_DIR] [-- BENCH OPTIONS...]
#
# (default output: runs/time). Steps, each printed before it runs:
#   1. examples/classic/prepare.py: corpus.jsonl, topics.tsv, qrels.txt and 5 query folds (seed 0) in
#      OUTPUT/data (skipped when there already, unless --force);
#   2. bench/documents.py: BM25 top-100 per fold, mined training groups, for each model train on 4 folds
#      and re-rank the 5th, evaluation with significance against BM25 and MaxP, speed, and PARADE's
#      distillation experiment, in OUTPUT/bench (finished steps are skipped unless --force).
# Options after `--` go to bench/documents.py (e.g. -- --models maxp,parade-max --max-steps 50).
# The defaults fit a 2-core CPU in about 35-40 minutes; PARADE's setting needs a GPU:
#   bash examples/time.sh DATA -- --window 225 --stride 200 --max-passages 16 --depth 100 --max-steps 2000
set -euo pipefail

if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then sed -n '2,17p' "$0"; exit 0; fi
source_dir="$1"; shift
force=0
out=runs/time
bench_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --force) force=1 ;;
    --) shift; bench_args=("$@"); break ;;
    *) out="$1" ;;
  esac
  shift
done
[ -d "$source_dir/time" ] || { echo "time.sh: error: $source_dir/time: no such folder (expected the classic-ir-collections folder)" >&2; exit 2; }

case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
case "$source_dir" in /*) ;; *) source_dir="$PWD/$source_dir" ;; esac
cd "$(dirname "$0")/.."
python=python
[ -x .venv/bin/python ] && python=.venv/bin/python

if [ "$force" = 1 ] || [ ! -e "$out/data/folds/folds.json" ]; then
  echo "==> prepare TIME (corpus, topics, qrels, 5 folds)" >&2
  echo "    \$ $python examples/classic/prepare.py --collection time --source $source_dir --output $out/data --folds 5 --seed 0" >&2
  "$python" examples/classic/prepare.py --collection time --source "$source_dir" --output "$out/data" --folds 5 --seed 0
else
  echo "==> prepare TIME: done already ($out/data), skipped" >&2
fi

force_flag=()
[ "$force" = 1 ] && force_flag=(--force)
echo "==> benchmark (bench/documents.py)" >&2
"$python" bench/documents.py --data "$out/data" --output "$out/bench" "${force_flag[@]}" "${bench_args[@]}"
echo "==> report: $out/bench/documents.md" >&2
