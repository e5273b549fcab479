"""Training data for the DL19 CPU recipe (issue 18) from TREC DL 2020-2022: no DL19 data is read.

    python examples/dl19_cpu_recipe/prepare.py --data ../shared/data --output runs/dl19-cpu-recipe/data
        [--label-weight 1.0] [--splits dl20,dl21,dl22]

Writes to OUTPUT:
  corpus.tsv.gz                 every passage with text in the DL20 (5 systems + RepLLaMA), DL21 and DL22 runs
  topics.dlNN.tsv               the queries that have runs (DL20: 54 judged, DL21: 53 judged, DL22: 76)
  qrels.dl20.txt, qrels.dl21.txt  NIST judgments as given
  qrels.dl22-pseudo.txt         DL22 has no qrels here: the teacher's top 3 as grade-1 pseudo-positives
  teacher.dlNN.run              the teacher: per query, the mean of each system's z-scored top-100 scores
                                (a document missing from a system gets that system's lowest z), plus
                                LABEL_WEIGHT x grade for judged documents; DL20 fuses SPLADE++, TAS-B, ADA2
                                and RepLLaMA, DL21/DL22 have SPLADE++ only
  bm25.dl20.run                 DL20's official BM25 top-100 (for checking a recipe on DL20)

Every run is written sorted the trec_eval way (score descending, docid descending) and ranked 1..n.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
from pathlib import Path

DL = "msmarco-passage-trec-dl"
DL2 = "msmarco-v2-passage-trec-dl21-dl22"
EXTRA = "msmarco-passage-rankllm-extra/REP_LLAMA"
TEACHERS = {
    "dl20": [f"{DL}/runs-with-text/{s}/retrieve_results_dl20.json.gz"
             for s in ("SPLADE_P_P_ENSEMBLE_DISTIL", "D_BERT_KD_TASB", "OPEN_AI_ADA2")]
    + [f"{EXTRA}/retrieve_results_dl20.json.gz"],
    "dl21": [f"{DL2}/runs-with-text/SPLADE_P_P_ENSEMBLE_DISTIL/retrieve_results_dl21.json.gz"],
    "dl22": [f"{DL2}/runs-with-text/SPLADE_P_P_ENSEMBLE_DISTIL/retrieve_results_dl22.json.gz"],
}
OTHER_TEXT = {  # runs read for their passage texts only
    "dl20": [f"{DL}/runs-with-text/{s}/retrieve_results_dl20.json.gz" for s in ("BM25", "BM25_RM3")],
    "dl21": [f"{DL2}/runs-with-text/{s}/retrieve_results_dl21.json.gz" for s in ("BM25", "BM25_RM3")],
    "dl22": [f"{DL2}/runs-with-text/{s}/retrieve_results_dl22.json.gz" for s in ("BM25", "BM25_RM3")],
}
QRELS = {"dl20": f"{DL}/topics-qrels/qrels.dl20-passage.txt", "dl21": f"{DL2}/topics-qrels/qrels.dl21-passage.txt"}
Run = dict[str, dict[str, float]]


def clean(text: str) -> str:
    return " ".join(text.replace("\t", " ").split())


def read_results(path: Path, texts: dict[str, str], topics: dict[str, str]) -> Run:
    """One rank_llm retrieve_results JSON: its scores by query, texts and query texts collected."""
    run: Run = {}
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for entry in json.load(f):
            hits = entry["hits"]
            if not hits:
                continue
            qid = str(hits[0]["qid"])
            topics.setdefault(qid, clean(entry["query"]))
            for hit in hits:
                docid = str(hit["docid"])
                texts.setdefault(docid, clean(hit["content"]))
                run.setdefault(qid, {})[docid] = float(hit["score"])
    return run


def zscores(scores: dict[str, float]) -> dict[str, float]:
    values = list(scores.values())
    mean = statistics.fmean(values)
    std = statistics.pstdev(values) or 1.0
    return {d: (s - mean) / std for d, s in scores.items()}


def fuse(runs: list[Run], qrels: dict[str, dict[str, int]], label_weight: float) -> Run:
    fused: Run = {}
    for qid in sorted(set().union(*runs)):
        per_run = [zscores(r[qid]) for r in runs if qid in r]
        docs = set().union(*per_run)
        fused[qid] = {d: statistics.fmean(z.get(d, min(z.values())) for z in per_run)
                      + label_weight * max(0, qrels.get(qid, {}).get(d, 0)) for d in docs}
    return fused


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    for line in path.read_text().splitlines():
        qid, _, docid, grade = line.split()
        qrels.setdefault(qid, {})[docid] = int(grade)
    return qrels


def write_run(path: Path, run: Run, tag: str, depth: int = 100) -> None:
    with path.open("w") as f:
        for qid in sorted(run):
            ranked = sorted(run[qid].items(), key=lambda x: (x[1], x[0]), reverse=True)[:depth]
            for rank, (docid, score) in enumerate(ranked, 1):
                f.write(f"{qid} Q0 {docid} {rank} {score:.6f} {tag}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="the shared data folder (../shared/data)")
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--label-weight", type=float, default=1.0)
    parser.add_argument("--splits", default="dl20,dl21,dl22")
    args = parser.parse_args()
    args.output.mkdir(parents=True, exist_ok=True)
    texts: dict[str, str] = {}
    for split in args.splits.split(","):
        topics: dict[str, str] = {}
        runs = [read_results(args.data / p, texts, topics) for p in TEACHERS[split]]
        for p in OTHER_TEXT[split]:
            read_results(args.data / p, texts, {})
        topics = {q: t for q, t in topics.items() if q in runs[0]}
        if split in QRELS:
            qrels = read_qrels(args.data / QRELS[split])
            (args.output / f"qrels.{split}.txt").write_text((args.data / QRELS[split]).read_text())
        else:  # pseudo-positives: the teacher's own top 3
            qrels = {}
            plain = fuse(runs, {}, 0.0)
            with (args.output / f"qrels.{split}-pseudo.txt").open("w") as f:
                for qid in sorted(plain):
                    for docid, _ in sorted(plain[qid].items(), key=lambda x: (x[1], x[0]), reverse=True)[:3]:
                        f.write(f"{qid} 0 {docid} 1\n")
        write_run(args.output / f"teacher.{split}.run", fuse(runs, qrels, args.label_weight), "teacher")
        with (args.output / f"topics.{split}.tsv").open("w") as f:
            f.writelines(f"{q}\t{topics[q]}\n" for q in sorted(topics))
        print(f"{split}: {len(topics)} queries, teacher from {len(runs)} run(s)")
    if "dl20" in args.splits.split(","):
        bm25 = args.data / DL / "runs-with-text/BM25/trec_results_dl20.txt"
        (args.output / "bm25.dl20.run").write_text(bm25.read_text())
    with gzip.open(args.output / "corpus.tsv.gz", "wt", encoding="utf-8", compresslevel=6) as f:
        f.writelines(f"{d}\t{texts[d]}\n" for d in sorted(texts))
    print(f"corpus: {len(texts)} passages -> {args.output}")


if __name__ == "__main__":
    main()
