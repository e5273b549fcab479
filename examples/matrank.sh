#!/usr/bin/env bash
# MatRank (paper 000) at CPU scale: `mono` (point-wise), `matrank-row` and `matrank` re-ranking
#   1. TREC DL19's BM25 top-100, trained on DL20 only (bundled data), with BM25 interpolation tuned on DL20;
#   2. WikiQA test, trained on WikiQA train (MAP / MRR, Table 2);
#   3. SemEval-2016 Task 3 subtask A, trained on train-part2, tested on dev.
# Through bench/rerank.py; every step goes through the rankkit CLI.
#
#   bash examples/matrank.sh DATA [OUTPUT]     DATA: a ../shared/data-style folder (wikiqa/, semeval2016-task3-cqa/)
# Writes OUTPUT/{dl19,wikiqa,semeval}/results.md (default runs/matrank).
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,10p' "$0"; exit 2; }
data="$(cd "$1" && pwd)"; out="${2:-runs/matrank}"
cd "$(dirname "$0")/.."
"${PYTHON:-python}" bench/rerank.py dl19 --output "$out/dl19"
[ -f "$out/wikiqa-data/test.candidates.run" ] || "${PYTHON:-python}" examples/wikiqa/prepare.py --source "$data/wikiqa" --output "$out/wikiqa-data"
"${PYTHON:-python}" bench/rerank.py wikiqa --data "$out/wikiqa-data" --output "$out/wikiqa" --settings bi
[ -f "$out/semeval-data/test.candidates.run" ] || "${PYTHON:-python}" examples/semeval/prepare.py --source "$data/semeval2016-task3-cqa" --output "$out/semeval-data"
"${PYTHON:-python}" bench/rerank.py semeval --data "$out/semeval-data" --output "$out/semeval" --settings bi
