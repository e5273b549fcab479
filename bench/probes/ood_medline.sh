#!/usr/bin/env bash
# Out-of-domain check of --backend auto (issue 26): MEDLINE (1,033 abstracts, 30 queries, 696 judgments; the
# classic collection in ../shared/data/classic-ir-collections/med), BM25 top-100 re-ranked by the zero-shot
# bi-encoder and by a mono checkpoint, torch fp32 against the default --backend auto; nDCG@10 and AP@100.
#
#   bash bench/probes/ood_medline.sh SHARED_DATA MONO_CHECKPOINT OUTPUT_DIR
set -euo pipefail
data="$1"; mono="$2"; out="$3"
mkdir -p "$out"
python -m rankkit.datasets.classic --collection med --source "$data/classic-ir-collections" --output "$out/med" --folds 0
m="$out/med"
rankkit index --kind bm25 --corpus "$m/corpus.jsonl" --index "$m/index" --force
rankkit retrieve --model bm25 --index "$m/index" --topics "$m/topics.tsv" --k 100 --output "$m/bm25.run"
for model in repbert mono; do
  ck=(); [ "$model" = mono ] && ck=(--checkpoint "$mono")
  for system in torch auto; do
    opts=(--backend auto); [ "$system" = torch ] && opts=(--backend torch --precision fp32)
    TIMEFORMAT="$model $system: %R s wall, %U s user, %S s sys"
    time rankkit rerank --model "$model" "${ck[@]}" --run "$m/bm25.run" --topics "$m/topics.tsv" \
      --corpus "$m/corpus.jsonl" --depth 100 --output "$m/$model-$system.run" "${opts[@]}"
  done
done
rankkit eval --qrels "$m/qrels.txt" "$m/bm25.run" "$m"/repbert-*.run "$m"/mono-*.run -m nDCG@10 -m AP@100
