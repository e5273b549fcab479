"""Derive this folder from ../shared/data/msmarco-passage-trec-dl (run once; see PROVENANCE.txt).

python tests/data/corpus_small/derive.py /work/shared/data/msmarco-passage-trec-dl tests/data/corpus_small
"""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

# Eight TREC DL 2020 queries: many and few positives, some judged passages without text in the pool.
QIDS = ["23849", "42255", "135802", "330975", "336901", "1037496", "1113256", "1133579"]
SYSTEMS = ["BM25", "BM25_RM3", "D_BERT_KD_TASB", "OPEN_AI_ADA2", "SPLADE_P_P_ENSEMBLE_DISTIL"]


def main(source: Path, target: Path) -> None:
    wanted = set(QIDS)
    pool: set[str] = set()
    for system in SYSTEMS:
        for line in open(source / "runs-with-text" / system / "trec_results_dl20.txt", encoding="utf-8"):
            qid, _, docid, *_ = line.split()
            if qid in wanted:
                pool.add(docid)
    texts: dict[str, str] = {}
    with gzip.open(source / "derived" / "dl20.passages.union5runs.tsv.gz", "rt", encoding="utf-8") as handle:
        for line in handle:
            docid, _, text = line.rstrip("\n").partition("\t")
            if docid in pool:
                texts[docid] = text
    with gzip.GzipFile(target / "passages.tsv.gz", "wb", mtime=0) as out:
        for docid in sorted(texts):
            out.write(f"{docid}\t{texts[docid]}\n".encode("utf-8"))
    with open(target / "topics.tsv", "w", encoding="utf-8") as out:
        for line in open(source / "derived" / "dl20.queries.tsv", encoding="utf-8"):
            if line.split("\t", 1)[0] in wanted:
                out.write(line)
    with open(target / "qrels.txt", "w", encoding="utf-8") as out:
        for line in open(source / "topics-qrels" / "qrels.dl20-passage.txt", encoding="utf-8"):
            if line.split()[0] in wanted:
                out.write(line)
    print(f"{len(texts)} passages, {len(QIDS)} queries", file=sys.stderr)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
