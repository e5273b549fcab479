#!/usr/bin/env bash
# The DL19 CPU recipe (issue 18, recipes/dl19-cpu.toml): fine-tune the packaged all-MiniLM-L6-v2 as a
# bi-encoder on TREC DL 2020-2022 teacher lists (no DL19 data), re-rank DL19's BM25 top-100 with it,
# interpolate with BM25 (alpha 0.8, chosen on DL20), and evaluate against BM25 and the zero-shot model.
#
#   bash examples/dl19_cpu_recipe.sh DATA [OUTPUT]     DATA: a ../shared/data-style folder with
#       msmarco-passage-trec-dl/, msmarco-v2-passage-trec-dl21-dl22/, msmarco-passage-rankllm-extra/
# Writes OUTPUT (default runs/dl19-cpu-recipe): data/, checkpoint/, *.dl19.run and results.txt.
# About 30 minutes on 2 CPU threads (training ~25; OMP_NUM_THREADS defaults to the machine's cores).
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,9p' "$0"; exit 2; }
data="$(cd "$1" && pwd)"; out="${2:-runs/dl19-cpu-recipe}"
cd "$(dirname "$0")/.."
py="${PYTHON:-python}"
rk() { "$py" -m rankkit "$@"; }
dl19=examples/data/dl19
mkdir -p "$out"
[ -f "$out/data/corpus.tsv.gz" ] || "$py" examples/dl19_cpu_recipe/prepare.py --data "$data" --output "$out/data"
lists=()
for split in dl20 dl21 dl22; do
  qrels="$out/data/qrels.$split.txt"; [ -f "$qrels" ] || qrels="$out/data/qrels.$split-pseudo.txt"
  [ -f "$out/data/lists48.$split.jsonl" ] || rk mine --run "$out/data/teacher.$split.run" --teacher-list 48 --qrels "$qrels" \
      --topics "$out/data/topics.$split.tsv" --corpus "$out/data/corpus.tsv.gz" --output "$out/data/lists48.$split.jsonl"
  lists+=(--train "$out/data/lists48.$split.jsonl")
done
[ -f "$out/checkpoint/rankkit.json" ] || rk train --config recipes/dl19-cpu.toml "${lists[@]}" --output "$out/checkpoint"
rerank() { rk rerank --run $dl19/runs/BM25.dl19.txt --topics $dl19/topics.dl19-passage.txt \
             --corpus $dl19/passages.dl19-pool.tsv.gz --depth 100 --device cpu "$@"; }
[ -f "$out/recipe.dl19.run" ] || rerank --model mono --checkpoint "$out/checkpoint" --output "$out/recipe.dl19.run"
[ -f "$out/zero-shot.dl19.run" ] || rerank --model repbert --output "$out/zero-shot.dl19.run"
rk fuse --method interpolate --alpha 0.8 --norm minmax --k 100 --output "$out/recipe+bm25.dl19.run" \
    "$out/recipe.dl19.run" $dl19/runs/BM25.dl19.txt
measures=(-m nDCG@10 -m "RR(rel=2)@10" -m "AP(rel=2)@100")
{
  echo "== against BM25"
  rk eval "${measures[@]}" --qrels $dl19/qrels.dl19-passage.txt -b $dl19/runs/BM25.dl19.txt \
      $dl19/runs/BM25.dl19.txt "$out/zero-shot.dl19.run" "$out/recipe.dl19.run" "$out/recipe+bm25.dl19.run"
  echo "== against the zero-shot model"
  rk eval "${measures[@]}" --qrels $dl19/qrels.dl19-passage.txt -b "$out/zero-shot.dl19.run" \
      "$out/zero-shot.dl19.run" "$out/recipe.dl19.run" "$out/recipe+bm25.dl19.run"
} | tee "$out/results.txt"
