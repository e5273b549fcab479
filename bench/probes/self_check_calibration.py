#!/usr/bin/env python
"""Probe (issue 41): how each CPU backend's re-ranking agrees with torch fp32, query by query, on out-of-domain
collections with long passages, against what it does to nDCG@10: the data auto's self-check thresholds come from.

    python bench/probes/self_check_calibration.py --data ../shared/data --output runs/self-check \\
        --collections med cisi time npl [--model repbert | --model mono --checkpoint CK]

For each classic collection (rankkit.datasets.classic; BM25 top ``--depth`` of every judged query through
Anserini), every system re-ranks every query (rankkit.rerank on a loaded model); per query it records Kendall's
tau-b and the top-10 overlap between the system's and torch fp32's scores on the first ``--sample-depth``
candidates (what a self-check on the run's own first pairs sees), and per collection nDCG@10 of each system
(rankkit's evaluation). Writes ``results.json`` and prints a table; CPU flags are recorded.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SYSTEMS = {"torch fp32": ("torch", "none", "fp32"), "openvino int8 bf16": ("openvino", "int8", "bf16"),
           "openvino bf16": ("openvino", "none", "bf16"), "onnx int8": ("onnx", "int8", "fp32"),
           "openvino fp32": ("openvino", "none", "fp32")}


def kendall_tau(a: list[float], b: list[float]) -> float:
    from scipy.stats import kendalltau

    tau = kendalltau(a, b).statistic
    return 1.0 if tau != tau else float(tau)  # constant lists: no disagreement


def top_overlap(a: list[float], b: list[float], k: int = 10) -> float:
    k = min(k, len(a))
    top = lambda s: set(sorted(range(len(s)), key=lambda i: (-s[i], i))[:k])  # noqa: E731
    return len(top(a) & top(b)) / k if k else 1.0


def collection(data: Path, out: Path, name: str, depth: int) -> Path:
    folder = out / name
    if not (folder / "bm25.run").is_file():
        run = [sys.executable, "-m", "rankkit"]
        subprocess.run([sys.executable, "-m", "rankkit.datasets.classic", "--collection", name, "--source",
                        str(data / "classic-ir-collections"), "--output", str(folder), "--folds", "0"], check=True)
        subprocess.run([*run, "index", "--kind", "bm25", "--corpus", str(folder / "corpus.jsonl"), "--index",
                        str(folder / "index"), "--force"], check=True)
        subprocess.run([*run, "retrieve", "--model", "bm25", "--index", str(folder / "index"), "--topics",
                        str(folder / "topics.tsv"), "--k", str(depth), "--output", str(folder / "bm25.run")], check=True)
    return folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--collections", nargs="+", default=["med", "cisi", "time", "npl"])
    parser.add_argument("--model", default="repbert")
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--label", default=None, help="names the saved runs (default: the model)")
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS))
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--sample-depth", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    import rankkit
    from rankkit.cpu import describe_cpu
    from rankkit.evaluation import evaluate
    from rankkit.formats import read_qrels, read_run, read_topics, write_run
    from rankkit.formats.corpus import iter_corpus

    args.output.mkdir(parents=True, exist_ok=True)
    out_json = args.output / f"results-{args.label or args.model}.json"
    results: dict[str, Any] = json.loads(out_json.read_text(encoding="utf-8")) if out_json.is_file() else {}
    results.update({"cpu": describe_cpu(), "model": args.model, "checkpoint": args.checkpoint,
                    "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())})
    results.setdefault("collections", {})
    for name in args.collections:
        folder = collection(args.data, args.output, name, args.depth)
        run, topics = read_run(folder / "bm25.run"), read_topics(folder / "topics.tsv")
        texts = {doc.docid: doc.contents for doc in iter_corpus(folder / "corpus.jsonl")}
        qrels = read_qrels(folder / "qrels.txt")
        qids = [q for q in topics if q in run and q in qrels]
        words = sorted(len(texts[d].split()) for q in qids for d in run[q])
        scores: dict[str, dict[str, dict[str, float]]] = {}
        seconds: dict[str, float] = {}
        label = args.label or args.model
        for system in args.systems:
            saved = folder / f"{label}-{system.replace(' ', '-')}.run"
            if saved.is_file():  # measured before: reused (the table's seconds are then those of that run)
                scores[system], seconds[system] = read_run(saved), float("nan")
                continue
            backend, quantize, precision = SYSTEMS[system]
            model = rankkit.load_model(args.model, args.checkpoint, backend=backend, quantize=quantize,
                                       precision=precision, threads=args.threads)
            started = time.perf_counter()
            scores[system] = rankkit.rerank(model, {q: run[q] for q in qids}, topics, texts, depth=args.depth,
                                            show_progress=False)
            seconds[system] = time.perf_counter() - started
            write_run(saved, scores[system], f"{label}-{system.replace(' ', '-')}")
        reference = scores["torch fp32"]
        rows = {}
        for system in args.systems:
            ndcg = evaluate({system: scores[system]}, qrels, ["nDCG@10"]).runs[system].aggregates["nDCG@10"]
            taus, overlaps = [], []
            for q in qids:
                head = sorted(run[q], key=lambda d: (-run[q][d], d))[: args.sample_depth]
                a, b = [reference[q][d] for d in head], [scores[system][q][d] for d in head]
                taus.append(kendall_tau(a, b))
                overlaps.append(top_overlap(a, b))
            rows[system] = {"ndcg10": ndcg, "seconds": seconds[system], "tau": taus, "top10": overlaps,
                            "tau_first3_min": min(taus[:3]), "tau_mean": sum(taus) / len(taus),
                            "top10_first3_mean": sum(overlaps[:3]) / 3}
        base = rows["torch fp32"]["ndcg10"]
        results["collections"][f"{name} {label}"] = {"queries": len(qids), "words_median": words[len(words) // 2],
                                        "words_max": words[-1], "systems": rows}
        for system, row in rows.items():
            print(f"{name:5} {system:20} nDCG@10 {row['ndcg10']:.4f} ({row['ndcg10'] - base:+.4f})  tau mean "
                  f"{row['tau_mean']:.3f} first-3 min {row['tau_first3_min']:.3f}  top10 first-3 "
                  f"{row['top10_first3_mean']:.2f}  {row['seconds']:.1f} s", flush=True)
        print(f"{name:5} {len(qids)} queries, passages median {words[len(words) // 2]} words, longest {words[-1]}",
              flush=True)
        out_json.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
