#!/usr/bin/env bash
# Out-of-domain checks of a re-ranker's backends (issue 26) on the classic collections (med, npl, cisi, ...):
# BM25 top-100 of every judged query re-ranked by `rankkit rerank --model repbert` (or MODEL) on each system given,
# one run file per system, then nDCG@10 / AP@100 with a paired randomization test against the first system.
#
#   bash bench/probes/ood_classic.sh SHARED_DATA OUTPUT_DIR COLLECTION "SYSTEM" ["SYSTEM" ...]
#
# A SYSTEM is a name and rerank options, e.g. "torch --backend torch --precision fp32", "auto", "int8
# --backend onnx --quantize int8". Another model: MODEL=mono CHECKPOINT=ck/mono LABEL=mono-recipe (LABEL names the
# run files; default: MODEL). Under bench/cpu_mask.py the libraries run their AVX2 kernels:
#   python bench/cpu_mask.py run -- bash bench/probes/ood_classic.sh ../shared/data runs/ood npl "torch ..." auto
set -euo pipefail
model="${MODEL:-repbert}"; label="${LABEL:-$model}"
checkpoint=(); [ -z "${CHECKPOINT:-}" ] || checkpoint=(--checkpoint "$CHECKPOINT")
data="$1"; out="$2"; collection="$3"; shift 3
c="$out/$collection"
mkdir -p "$out"
if [ ! -f "$c/bm25.run" ]; then
  python -m rankkit.datasets.classic --collection "$collection" --source "$data/classic-ir-collections" \
    --output "$c" --folds 0
  rankkit index --kind bm25 --corpus "$c/corpus.jsonl" --index "$c/index" --force
  rankkit retrieve --model bm25 --index "$c/index" --topics "$c/topics.tsv" --k 100 --output "$c/bm25.run"
fi
runs=()
for system in "$@"; do
  read -r name options <<< "$system"
  TIMEFORMAT="$collection $label $name: %R s wall, %U s user, %S s sys"
  # shellcheck disable=SC2086  # the options are words
  time rankkit rerank --model "$model" "${checkpoint[@]}" --run "$c/bm25.run" --topics "$c/topics.tsv" \
    --corpus "$c/corpus.jsonl" --depth 100 --output "$c/$label-$name.run" $options
  runs+=("$c/$label-$name.run")
done
rankkit eval --qrels "$c/qrels.txt" --baseline "${runs[0]}" "$c/bm25.run" "${runs[@]}" -m nDCG@10 -m AP@100
