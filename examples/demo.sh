#!/usr/bin/env bash
# rankkit demo on the data bundled in examples/data (no ../shared needed).
#
#   bash examples/demo.sh [--force] [OUTPUT_DIR]      (default output: runs/demo)
#
# What it does, each step printed before it runs; a step whose outputs exist is skipped unless --force:
#   1. validate the five bundled TREC DL 2019 runs (BM25, BM25+RM3, TAS-B, ADA2, SPLADE++);
#   2. fuse them: RepBERT's alternating merge of BM25 and TAS-B (both orders), reciprocal rank fusion of
#      all five, and CombSUM of the dense runs;
#   3. measure how consistent TAS-B's top-n is with BM25's candidates (RepBERT's consistency factor);
#   4. evaluate every run with significance against BM25 (paired randomization test, Holm-corrected), as a table on
#      stdout, a markdown file, and a per-query plot.
set -euo pipefail

force=0
out=runs/demo
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) out="$arg" ;;
  esac
done

# Paths relative to the repository root keep the run names in the tables short.
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
cd "$(dirname "$0")/.."
out="${out#"$PWD"/}"
data="examples/data/dl19"
runs="$data/runs"
qrels="$data/qrels.dl19-passage.txt"
mkdir -p "$out"

# step DESCRIPTION OUTPUT... -- COMMAND...: run COMMAND unless every OUTPUT exists (and no --force).
step() {
  local description="$1"; shift
  local outputs=()
  while [ "$1" != "--" ]; do outputs+=("$1"); shift; done
  shift
  local done_already=1
  for f in "${outputs[@]}"; do [ -e "$f" ] || done_already=0; done
  if [ "$force" = 0 ] && [ "$done_already" = 1 ]; then
    echo "==> $description: done already (${outputs[*]}), skipped" >&2
    return 0
  fi
  echo "==> $description" >&2
  echo "    \$ $*" >&2
  "$@"
}

for system in BM25 BM25_RM3 D_BERT_KD_TASB OPEN_AI_ADA2 SPLADE_P_P_ENSEMBLE_DISTIL; do
  echo "==> validate $system" >&2
  # Exit 1 means warnings (e.g. a rank column that breaks score ties differently from trec_eval);
  # only exit 2 (unreadable input) stops the demo.
  rankkit validate --quiet "$runs/$system.dl19.txt" --qrels "$qrels" || [ $? -eq 1 ]
done

step "alternate merge BM25 + TAS-B (RepBERT Eq. 6)" "$out/alternate.bm25+tasb.run" -- \
  rankkit fuse --method alternate "$runs/BM25.dl19.txt" "$runs/D_BERT_KD_TASB.dl19.txt" \
    --k 100 --runtag alt-bm25-tasb --output "$out/alternate.bm25+tasb.run"
step "alternate merge TAS-B + BM25" "$out/alternate.tasb+bm25.run" -- \
  rankkit fuse --method alternate "$runs/D_BERT_KD_TASB.dl19.txt" "$runs/BM25.dl19.txt" \
    --k 100 --runtag alt-tasb-bm25 --output "$out/alternate.tasb+bm25.run"
step "reciprocal rank fusion of all five runs" "$out/rrf.all5.run" -- \
  rankkit fuse --method rrf "$runs"/*.dl19.txt --k 100 --runtag rrf-all5 --output "$out/rrf.all5.run"
step "CombSUM (min-max) of TAS-B, ADA2 and SPLADE++" "$out/combsum.dense3.run" -- \
  rankkit fuse --method combsum --norm minmax "$runs/D_BERT_KD_TASB.dl19.txt" "$runs/OPEN_AI_ADA2.dl19.txt" \
    "$runs/SPLADE_P_P_ENSEMBLE_DISTIL.dl19.txt" --k 100 --runtag combsum-3 --output "$out/combsum.dense3.run"

echo "==> consistency of TAS-B's top-n with BM25's top-100 (RepBERT Eq. 5)" >&2
rankkit consistency "$runs/D_BERT_KD_TASB.dl19.txt" "$runs/BM25.dl19.txt" --depth 10 --depth 50 --depth 100

all_runs=("$runs/BM25.dl19.txt" "$runs/BM25_RM3.dl19.txt" "$runs/D_BERT_KD_TASB.dl19.txt" \
  "$runs/OPEN_AI_ADA2.dl19.txt" "$runs/SPLADE_P_P_ENSEMBLE_DISTIL.dl19.txt" \
  "$out/alternate.bm25+tasb.run" "$out/alternate.tasb+bm25.run" "$out/rrf.all5.run" "$out/combsum.dense3.run")
measures=(-m nDCG@10 -m "RR(rel=2)@10" -m "AP(rel=2)@100" -m "R(rel=2)@100")

step "evaluate (markdown report and plot)" "$out/eval.md" "$out/eval.png" -- \
  rankkit eval --qrels "$qrels" "${all_runs[@]}" "${measures[@]}" --baseline "$runs/BM25.dl19.txt" \
    --correction holm --format markdown --output "$out/eval.md" --plot "$out/eval.png"
echo "==> evaluation table (significance vs BM25, paired randomization test, Holm)" >&2
rankkit eval --qrels "$qrels" "${all_runs[@]}" "${measures[@]}" --baseline "$runs/BM25.dl19.txt" --correction holm
echo "==> outputs in $out/" >&2
