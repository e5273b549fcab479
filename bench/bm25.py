#!/usr/bin/env python
"""Benchmark rankkit's BM25 (Anserini through pyserini) for effectiveness and speed.

1. TREC DL: index the union of the DL19 and DL20 candidate pools (24,884 passages), retrieve the
   DL19 (43) and DL20 (54) queries, evaluate nDCG@10, RR(rel=2)@10, R(rel=2)@100 with
   ir_measures; compare with ../shared/BASELINES.md (DL19 0.4682 / 0.6574 / 0.4934).
2. Quora question retrieval (rankkit.datasets.quora, the task of examples/quora/prepare.py): index
   the 36,737 questions, retrieve the 4,732 test queries with --remove-query, evaluate R@100,
   RR@100, nDCG@10 (BASELINES: 0.9826 / 0.6750 / 0.7123).
3. Speed: index time; search queries/s of rankkit's ``Bm25Searcher.batch_search`` and of
   pyserini's own ``LuceneSearcher.batch_search`` on the same index, same k and threads, each
   converted to (docid, score) lists in Python (median of ``--repeats`` warm runs), and their ratio;
   plus the wall time of the whole ``retrieve_bm25`` call (reading topics, searching, writing the run).
   rankkit's and pyserini's rankings are checked to be identical.

    python bench/bm25.py [--dl-dir ../shared/data/msmarco-passage-trec-dl] \
        [--quora-source ../shared/data/quora-qqp-bimpm] [--output runs/bench-bm25] [--threads 2]

Prints a markdown report (also written to OUTPUT/bm25.md) and OUTPUT/bm25.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import ir_measures
from harness import (
    ROOT,
    SHARED_DATA,
    dl_pool_corpus,
    machine,
    machine_line,
    median_seconds,
    save_json,
    write_text,
)

from rankkit.datasets import quora as quora_task
from rankkit.formats import read_qrels, read_run, read_topics
from rankkit.lexical import java
from rankkit.lexical.index import build_bm25_index
from rankkit.lexical.search import Bm25Searcher, retrieve_bm25

DL_MEASURES = ["nDCG@10", "RR(rel=2)@10", "R(rel=2)@100"]
QUORA_MEASURES = ["R@100", "RR@100", "nDCG@10"]
BASELINES = {
    "dl19": {"nDCG@10": 0.4682, "RR(rel=2)@10": 0.6574, "R(rel=2)@100": 0.4934},
    "dl20": {"nDCG@10": 0.4660, "RR(rel=2)@10": 0.6444, "R(rel=2)@100": 0.5628},
    "quora": {"R@100": 0.9826, "RR@100": 0.6750, "nDCG@10": 0.7123},
}


def evaluate(qrels_path: Path, run_path: Path, measures: list[str]) -> dict[str, float]:
    """ir_measures' aggregate of each measure for one run."""
    parsed = [ir_measures.parse_measure(m) for m in measures]
    values = ir_measures.calc_aggregate(parsed, read_qrels(qrels_path), read_run(run_path))
    return {m: float(values[p]) for m, p in zip(measures, parsed)}


def speed(
    index: Path, topics: Path, k: int, threads: int, repeats: int, remove_query: bool = False
) -> dict[str, Any]:
    """Warm queries/s of rankkit's and pyserini's batch search on the same index (same hits checked)."""
    queries = list(read_topics(topics).items())
    qids, texts = [q for q, _ in queries], [t for _, t in queries]
    depth = k + 1 if remove_query else k
    lucene_searcher = java.import_pyserini_lucene().LuceneSearcher(str(index))
    with Bm25Searcher(index) as ours:

        def run_ours() -> dict[str, list[tuple[str, float]]]:
            return ours.batch_search(queries, depth, threads)

        def run_pyserini() -> dict[str, list[tuple[str, float]]]:
            hits = lucene_searcher.batch_search(texts, qids, k=depth, threads=threads)
            return {qid: [(h.docid, float(h.score)) for h in hs] for qid, hs in hits.items()}

        identical = run_ours() == run_pyserini()  # also warms both up (JIT)
        ours_s = median_seconds(run_ours, repeats)
        pyserini_s = median_seconds(run_pyserini, repeats)
    lucene_searcher.close()
    return {
        "queries": len(queries),
        "k": depth,
        "threads": threads,
        "identical_to_pyserini": identical,
        "rankkit_seconds": ours_s,
        "pyserini_seconds": pyserini_s,
        "rankkit_qps": len(queries) / ours_s,
        "pyserini_qps": len(queries) / pyserini_s,
        "ratio_rankkit_over_pyserini_time": ours_s / pyserini_s,
    }


def task(
    name: str,
    corpus: Path,
    topics: Path,
    qrels: Path,
    measures: list[str],
    out: Path,
    args: argparse.Namespace,
    *,
    index_name: str,
    remove_query: bool = False,
    k: int = 1000,
) -> dict[str, Any]:
    """Index ``corpus`` (twice: cold and steady), retrieve ``topics``, evaluate, time the searches."""
    index = out / index_name
    # Twice: the first build in a process pays the JVM's JIT warm-up, the second is the steady state.
    cold = build_bm25_index(corpus, index, threads=args.threads, force=True)
    report = build_bm25_index(corpus, index, threads=args.threads, force=True)
    run = out / f"{name}.bm25.run"
    started = time.perf_counter()
    retrieved = retrieve_bm25(index, topics, run, k=k, threads=args.threads, remove_query=remove_query)
    retrieve_wall = time.perf_counter() - started
    return {
        "corpus": str(corpus),
        "documents": report.documents,
        "indexed": report.indexed,
        "index_seconds": report.seconds,
        "anserini_index_seconds": report.index_seconds,
        "index_seconds_first_in_process": cold.seconds,
        "retrieve": {
            "queries": retrieved.queries,
            "k": k,
            "remove_query": remove_query,
            "search_seconds": retrieved.seconds,
            "call_seconds": retrieve_wall,
            "no_hits": len(retrieved.no_hits),
        },
        "effectiveness": evaluate(qrels, run, measures),
        "baseline": BASELINES.get(name.split(".")[0], {}),
        "speed": speed(index, topics, k, args.threads, args.repeats, remove_query),
    }


def markdown(results: dict[str, Any]) -> str:
    """The report: effectiveness and speed tables."""
    lines = [
        f"# BM25 benchmark ({results['date']}, {results['machine']})",
        "",
        (f"`{results['command']}`; Anserini {results['anserini']}, pyserini {results['pyserini']}, "
        f"Java {results['java']}."),
        "",
        ("| task | documents | index s (first build in process) | queries | k "
        "| metric: rankkit (BASELINES.md) |"),
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in results["tasks"].items():
        metrics = ", ".join(
            f"{m} {v:.4f}" + (f" ({r['baseline'][m]:.4f})" if m in r["baseline"] else "")
            for m, v in r["effectiveness"].items()
        )
        lines.append(
            f"| {name} | {r['documents']:,} | {r['index_seconds']:.1f} "
            f"({r['index_seconds_first_in_process']:.1f}) | "
            f"{r['retrieve']['queries']:,} | "
            f"{r['retrieve']['k']} | {metrics} |"
        )
    lines += [
        "",
        ("| task | threads | hits/query | rankkit q/s | pyserini q/s | time ratio rankkit/pyserini "
        "| identical rankings | retrieve_bm25 call (s) |"),
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in results["tasks"].items():
        s = r["speed"]
        lines.append(
            f"| {name} | {s['threads']} | {s['k']} | {s['rankkit_qps']:,.0f} | {s['pyserini_qps']:,.0f} | "
            f"{s['ratio_rankkit_over_pyserini_time']:.2f} | {s['identical_to_pyserini']} | "
            f"{r['retrieve']['call_seconds']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description="BM25 effectiveness and speed (see the module docstring).")
    parser.add_argument("--dl-dir", type=Path, default=SHARED_DATA / "msmarco-passage-trec-dl")
    parser.add_argument("--quora-source", type=Path, default=SHARED_DATA / "quora-qqp-bimpm")
    parser.add_argument("--output", type=Path, default=ROOT / "runs" / "bench-bm25")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats of each search (median)")
    parser.add_argument("--k", type=int, default=1000, help="hits per TREC DL query")
    parser.add_argument("--skip-quora", action="store_true")
    args = parser.parse_args(argv)
    out = args.output
    out.mkdir(parents=True, exist_ok=True)
    java.start_jvm()
    _home, java_version = java.check_java()
    from importlib import metadata

    where = machine()
    results: dict[str, Any] = {
        "date": where["date"],
        "machine": machine_line(where),
        "machine_details": where,
        "command": "python bench/bm25.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "anserini": java.anserini_version(),
        "pyserini": metadata.version("pyserini"),
        "java": java_version,
        "tasks": {},
    }
    corpus = out / "dl19+dl20.pool.tsv"
    documents = dl_pool_corpus(args.dl_dir, corpus)
    print(f"DL19+DL20 pool: {documents:,} passages", file=sys.stderr)
    first = True
    for year, topics_name in (("dl19", "dl19"), ("dl20", "dl20")):
        qrels = args.dl_dir / "topics-qrels" / f"qrels.{year}-passage.txt"
        topics = args.dl_dir / "derived" / f"{topics_name}.queries.tsv"
        name = year
        if first:
            results["tasks"][name] = task(
                name, corpus, topics, qrels, DL_MEASURES, out, args, index_name="dl-pool.index", k=args.k
            )
            first = False
        else:  # same index: only retrieval and evaluation again
            index = out / "dl-pool.index"
            run = out / f"{name}.bm25.run"
            started = time.perf_counter()
            retrieved = retrieve_bm25(index, topics, run, k=args.k, threads=args.threads)
            wall = time.perf_counter() - started
            previous = results["tasks"]["dl19"]
            results["tasks"][name] = {
                **{
                    key: previous[key]
                    for key in (
                        "corpus",
                        "documents",
                        "indexed",
                        "index_seconds",
                        "anserini_index_seconds",
                        "index_seconds_first_in_process",
                    )
                },
                "retrieve": {
                    "queries": retrieved.queries,
                    "k": args.k,
                    "remove_query": False,
                    "search_seconds": retrieved.seconds,
                    "call_seconds": wall,
                    "no_hits": len(retrieved.no_hits),
                },
                "effectiveness": evaluate(qrels, run, DL_MEASURES),
                "baseline": BASELINES[name],
                "speed": speed(index, topics, args.k, args.threads, args.repeats),
            }
    if not args.skip_quora:
        quora = out / "quora"
        quora_task.main(["--source", str(args.quora_source), "--output", str(quora)])
        results["tasks"]["quora"] = task(
            "quora",
            quora / "corpus.jsonl",
            quora / "test.topics.tsv",
            quora / "test.qrels.txt",
            QUORA_MEASURES,
            out,
            args,
            index_name="quora.index",
            remove_query=True,
            k=100,
        )
    report = markdown(results)
    save_json(out / "bm25.json", results)
    write_text(out / "bm25.md", report)
    print(report)


if __name__ == "__main__":
    main()
