#!/usr/bin/env bash
# Issue 37's check, as a user would run it: a Set-Encoder trained briefly on DL20 groups (all-MiniLM-L6-v2, group 6,
# 128-token passages, 15 steps), then DL19's BM25 top 30 re-ranked with the command's defaults (--backend auto) as
# given and with every query's candidates reversed: the two runs must be byte-identical. Then the speed of auto
# against torch fp32 on all 43 queries (1,290 pairs). Under bench/cpu_mask.py the libraries run AVX2 kernels:
#
#   bash bench/probes/set_encoder_permutation.sh OUT
#   python bench/cpu_mask.py run -- bash bench/probes/set_encoder_permutation.sh OUT-avx2
set -euo pipefail
out="${1:?output folder}"; mkdir -p "$out"
py="${PYTHON:-python}"
rk() { "$py" -m rankkit "$@"; }
d=examples/data/dl19
if [ ! -f "$out/se/rankkit.json" ]; then
  "$py" - "$out/groups.jsonl" <<'EOF'
import sys
sys.path.insert(0, "bench")
from pathlib import Path
from gpu_suite import quality_groups
quality_groups(Path(sys.argv[1]), negatives=5)
EOF
  rk train --model set-encoder --train "$out/groups.jsonl" --output "$out/se" --group-size 6 --batch-size 2 \
    --max-steps 15 --max-doc-length 128 --device cpu --seed 0
fi
"$py" - "$d/runs/BM25.dl19.txt" "$out" <<'EOF'
import sys
from rankkit.formats import read_run, write_run
run = read_run(sys.argv[1])
top = {q: dict(sorted(run[q].items(), key=lambda kv: (-kv[1], kv[0]))[:30]) for q in sorted(run)}
write_run(f"{sys.argv[2]}/top30.run", top, "bm25")
write_run(f"{sys.argv[2]}/top30.reversed.run", {q: {d: -s for d, s in docs.items()} for q, docs in top.items()}, "bm25")
EOF
common=(--model set-encoder --checkpoint "$out/se" --topics $d/topics.dl19-passage.txt
        --corpus $d/passages.dl19-pool.tsv.gz --depth 30 --device cpu)
for name in top30 top30.reversed; do
  rk rerank "${common[@]}" --run "$out/$name.run" -o "$out/$name.auto.run" 2> "$out/$name.auto.log"
done
cmp "$out/top30.auto.run" "$out/top30.reversed.auto.run" && echo "auto: byte-identical runs for the given and reversed order"
grep -h "backend auto\|re-ranked" "$out/top30.auto.log"
TIMEFORMAT="torch fp32: %R s wall"; time rk rerank "${common[@]}" --run "$out/top30.run" -o "$out/torch.run" \
  --backend torch --precision fp32 2> "$out/torch.log"
grep -h "re-ranked" "$out/torch.log"
TIMEFORMAT="auto: %R s wall"; time rk rerank "${common[@]}" --run "$out/top30.run" -o "$out/auto2.run" 2> "$out/auto2.log"
grep -h "backend auto\|re-ranked" "$out/auto2.log"
rk eval --qrels $d/qrels.dl19-passage.txt "$out/torch.run" "$out/auto2.run" -m nDCG@10
