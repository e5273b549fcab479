"""``rankkit.rerank`` from Python on its runtimes, beside sentence-transformers on the same weights.

Re-ranks the BM25 top ``--depth`` of the first ``--queries`` DL19 queries (bundled: examples/data/dl19)
with the zero-shot bi-encoder (``repbert``: the packaged all-MiniLM-L6-v2) through
``rankkit.rerank(..., backend=B)`` for each ``--backends`` entry, and through
``SentenceTransformer.encode`` plus a dot product (the peer a notebook user would otherwise write),
interleaved over ``--rounds`` rounds in one process after one warm-up call each (the warm-up builds and
checks the export). Prints wall and CPU seconds per round, the best wall time's ratio to rankkit torch,
and nDCG@10 over those queries (a sanity check of the scores, not a result to tune on).

    OMP_NUM_THREADS=2 PYTHONPATH=$PWD python bench/api_rerank.py --queries 12 --depth 100 --rounds 2
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any, Callable

import rankkit
from rankkit.docstore import open_docstore
from rankkit.formats import read_run, read_topics
from rankkit.formats.sources import resolve_corpus

DL19 = Path(__file__).resolve().parents[1] / "examples" / "data" / "dl19"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=12)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--backends", default="torch,auto")
    args = parser.parse_args()

    full = read_run(DL19 / "runs" / "BM25.dl19.txt")
    run = {qid: full[qid] for qid in sorted(full)[:args.queries]}
    topics = read_topics(DL19 / "topics.dl19-passage.txt")
    heads = {qid: sorted(docs, key=lambda d: (-docs[d], d))[:args.depth] for qid, docs in run.items()}
    with open_docstore(corpus=resolve_corpus(DL19 / "passages.dl19-pool.tsv.gz")) as store:
        passages = store.get_many(sorted({d for head in heads.values() for d in head}))
    qrels = DL19 / "qrels.dl19-passage.txt"

    systems: dict[str, Callable[[], dict[str, dict[str, float]]]] = {}
    for backend in args.backends.split(","):
        systems[f"rankkit {backend}"] = lambda backend=backend: rankkit.rerank(
            "repbert", run, topics, passages, depth=args.depth, backend=backend, show_progress=False)

    from sentence_transformers import SentenceTransformer

    from rankkit.models.backbone import default_backbone_path

    st = SentenceTransformer(str(default_backbone_path()), device="cpu", backend="torch")

    def peer() -> dict[str, dict[str, float]]:
        qids = list(heads)
        q = st.encode([topics[qid] for qid in qids], batch_size=32, convert_to_tensor=True)
        out = {}
        for i, qid in enumerate(qids):
            d = st.encode([passages[docid] for docid in heads[qid]], batch_size=32, convert_to_tensor=True)
            out[qid] = dict(zip(heads[qid], (d @ q[i]).tolist()))
        return out

    systems["sentence-transformers torch"] = peer
    for score in systems.values():
        score()  # warm-up: exports built and checked, caches filled
    rows: dict[str, list[tuple[float, float, Any]]] = {name: [] for name in systems}
    for _ in range(args.rounds):
        for name, score in systems.items():
            wall, cpu = time.perf_counter(), time.process_time()
            out = score()
            rows[name].append((time.perf_counter() - wall, time.process_time() - cpu, out))
    pairs = sum(len(h) for h in heads.values())
    base = min(w for w, _, _ in rows[next(iter(rows))])
    print(f"{len(heads)} DL19 queries x BM25 top {args.depth} = {pairs} pairs, {args.rounds} rounds")
    print("| system | wall s per round | CPU s per round | pairs/s (best) | x rankkit torch | nDCG@10 |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, measured in rows.items():
        best = min(measured, key=lambda m: m[0])
        ndcg = rankkit.evaluate(best[2], qrels, ["nDCG@10"])["nDCG@10"]
        print(f"| {name} | {', '.join(f'{w:.2f}' for w, _, _ in measured)} | "
              f"{', '.join(f'{c:.2f}' for _, c, _ in measured)} | {pairs / best[0]:.1f} | {base / best[0]:.2f}x | "
              f"{ndcg:.4f} |")


if __name__ == "__main__":
    main()
