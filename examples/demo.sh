#!/usr/bin/env bash
# rankkit demo on the data bundled in examples/data (no ../shared needed).
#
#   bash examples/demo.sh [--force] [OUTPUT_DIR]      (default output: runs/demo)
#
# What it does, each step printed before it runs; a step whose outputs exist is skipped unless --force:
#   1. BM25 with Anserini: index the DL19 passage pool (test) and the DL20 pool (training), retrieve the
#      top 100 for the DL19 and DL20 queries;
#   2. dense retrieval: index the DL19 pool with the packaged all-MiniLM-L6-v2 (zero-shot, --model repbert) and
#      retrieve the top 100 (encoding on OpenVINO, see below);
#   3. fuse BM25 and RepBERT with RepBERT's alternating merge (Eq. 6);
#   4. mine DL20 training groups (judged positives + BM25 hard negatives) and train MatRank on them
#      (`--encoder bi`: a head over the frozen MiniLM features, minutes on a CPU);
#   5. re-rank the fused run's top 100 with MatRank, and explain one query (the preference matrix);
#   6. validate the five bundled TREC DL 2019 runs (BM25, BM25+RM3, TAS-B, ADA2, SPLADE++) and fuse them
#      (alternating merge, reciprocal rank fusion, CombSUM); RepBERT's consistency factor;
#   7. evaluate every run with significance against BM25 (paired randomization test, Holm-corrected), as a
#      table on stdout, a markdown file, and a per-query plot.
# The encoder of steps 2 and 5 runs on --backend auto: the fastest CPU backend measured for this CPU class
# and model whose quality check passes here (rankkit doctor shows it, each command logs it): OpenVINO bf16
# where the CPU has native bf16 (AVX512-BF16/AMX; the demo's DL19 nDCG@10 within 0.002), OpenVINO's fp32
# (checked against torch within 1e-4) elsewhere. RANKKIT_DEMO_BACKEND="--backend torch --precision fp32"
# runs plain torch fp32.
set -euo pipefail

force=0
out=runs/demo
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
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

dl20="examples/data/dl20"
# shellcheck disable=SC2206  # word splitting is the point: the variable holds options
backend=(${RANKKIT_DEMO_BACKEND:---backend auto})
step "index the DL19 passage pool (BM25, Anserini)" "$out/index.dl19-pool" -- \
  rankkit index --kind bm25 --corpus "$data/passages.dl19-pool.tsv.gz" --index "$out/index.dl19-pool" --force
step "index the DL20 passage pool (training side)" "$out/index.dl20-pool" -- \
  rankkit index --kind bm25 --corpus "$dl20/passages.dl20-pool.tsv.gz" --index "$out/index.dl20-pool" --force
step "BM25 top-100 for the DL19 queries" "$out/bm25.dl19-pool.run" -- \
  rankkit retrieve --model bm25 --index "$out/index.dl19-pool" --topics "$data/topics.dl19-passage.txt" \
    --k 100 --runtag bm25-pool --output "$out/bm25.dl19-pool.run"
step "BM25 top-100 for the DL20 queries" "$out/bm25.dl20-pool.run" -- \
  rankkit retrieve --model bm25 --index "$out/index.dl20-pool" --topics "$dl20/topics.dl20-judged.tsv" \
    --k 100 --runtag bm25-pool --output "$out/bm25.dl20-pool.run"
step "dense index of the DL19 pool (all-MiniLM-L6-v2 zero-shot, --model repbert)" \
  "$out/dense.dl19-pool/rankkit-index.json" -- \
  rankkit index --kind dense --model repbert --corpus "$data/passages.dl19-pool.tsv.gz" \
    --index "$out/dense.dl19-pool" --force "${backend[@]}"
step "RepBERT top-100 for the DL19 queries" "$out/repbert.dl19-pool.run" -- \
  rankkit retrieve --model repbert --index "$out/dense.dl19-pool" --topics "$data/topics.dl19-passage.txt" \
    --k 100 --runtag repbert-zs --output "$out/repbert.dl19-pool.run" "${backend[@]}"
step "alternate merge of BM25 and RepBERT (RepBERT Eq. 6)" "$out/alternate.bm25+repbert.run" -- \
  rankkit fuse --method alternate "$out/bm25.dl19-pool.run" "$out/repbert.dl19-pool.run" \
    --k 100 --runtag alt-bm25-repbert --output "$out/alternate.bm25+repbert.run"
step "mine DL20 training groups (positives rel >= 2, 15 random BM25 negatives from the top 100)" \
  "$out/groups.dl20.jsonl" -- \
  rankkit mine --run "$out/bm25.dl20-pool.run" --qrels "$dl20/qrels.dl20-passage.txt" \
    --topics "$dl20/topics.dl20-judged.tsv" --index "$out/index.dl20-pool" --min-rel 2 --negatives 15 \
    --strategy random --seed 0 --output "$out/groups.dl20.jsonl"
step "train MatRank on DL20 (--encoder bi: head over frozen MiniLM features, 5 epochs)" \
  "$out/matrank.dl20/rankkit.json" -- \
  rankkit train --model matrank --encoder bi --train "$out/groups.dl20.jsonl" --output "$out/matrank.dl20" \
    --epochs 5 --batch-size 4 --group-size 16 --lr 1e-3 --seed 0 --device cpu
step "re-rank the fused run's top 100 with MatRank" "$out/matrank.alternate.run" -- \
  rankkit rerank --model matrank --checkpoint "$out/matrank.dl20" --run "$out/alternate.bm25+repbert.run" \
    --topics "$data/topics.dl19-passage.txt" --index "$out/index.dl19-pool" --depth 100 \
    --runtag matrank --output "$out/matrank.alternate.run" --device cpu "${backend[@]}"
step "explain MatRank's preference matrix for query 1112341" "$out/explain.1112341.png" -- \
  rankkit explain --model matrank --checkpoint "$out/matrank.dl20" --run "$out/alternate.bm25+repbert.run" \
    --topics "$data/topics.dl19-passage.txt" --index "$out/index.dl19-pool" --qid 1112341 --depth 12 \
    --output "$out/explain.1112341.png" --device cpu "${backend[@]}"

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

all_runs=("$runs/BM25.dl19.txt" "$out/bm25.dl19-pool.run" "$out/repbert.dl19-pool.run" "$out/alternate.bm25+repbert.run" \
  "$out/matrank.alternate.run" "$runs/BM25_RM3.dl19.txt" "$runs/D_BERT_KD_TASB.dl19.txt" \
  "$runs/OPEN_AI_ADA2.dl19.txt" "$runs/SPLADE_P_P_ENSEMBLE_DISTIL.dl19.txt" \
  "$out/alternate.bm25+tasb.run" "$out/alternate.tasb+bm25.run" "$out/rrf.all5.run" "$out/combsum.dense3.run")
measures=(-m nDCG@10 -m "RR(rel=2)@10" -m "AP(rel=2)@100" -m "R(rel=2)@100")

step "evaluate (markdown report and plot)" "$out/eval.md" "$out/eval.png" -- \
  rankkit eval --qrels "$qrels" "${all_runs[@]}" "${measures[@]}" --baseline "$runs/BM25.dl19.txt" \
    --correction holm --format markdown --output "$out/eval.md" --plot "$out/eval.png"
echo "==> evaluation table (significance vs BM25, paired randomization test, Holm)" >&2
rankkit eval --qrels "$qrels" "${all_runs[@]}" "${measures[@]}" --baseline "$runs/BM25.dl19.txt" --correction holm
echo "==> outputs in $out/" >&2
