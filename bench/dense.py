"""Dense first stage benchmark: Quora question retrieval, encoding throughput and memory, TREC DL pool, fusion.

    python bench/dense.py [--steps quora,throughput,dl,fuse] [--output runs/bench-dense]
        [--quora-dir runs/bench-bm25/quora] [--dl-dir ../shared/data/msmarco-passage-trec-dl]
        [--densetrans-steps 294] [--densetrans-d-model 96] [--densetrans-variants densetrans,no-top-dense,...]
        [--repbert-steps 294] [--threads 2]

Every stage runs the ``rankkit`` CLI in a subprocess, in the output folder, through the bench
harness (wall time and peak RSS recorded with the exact command; see bench/harness.py for how
peak memory is measured); an output that already exists is reused (the bench resumes), so delete
the output folder for a clean measurement. Runs are evaluated with
:func:`rankkit.evaluation.evaluate_files` (the code behind ``rankkit eval``). Results go to
``OUTPUT/dense.json`` and a markdown summary ``OUTPUT/dense.md``.

Steps:
  quora       BM25, all-MiniLM-L6-v2 zero-shot (--model repbert), RepBERT fine-tuned and DenseTrans
              (and its three Table 3 ablations) trained on the dev split's BM25-mined groups, on the Quora task of
              rankkit.datasets.quora (examples/quora/prepare.py)
              (R@100, RR@100, AP@100, nDCG@10; DenseTrans Table 2).
  throughput  rankkit's dense encoding vs SentenceTransformer.encode, same weights, same 2,000
              DL pool passages, same process, alternating, best of --repeats.
  dl          all-MiniLM-L6-v2 zero-shot over the DL19+DL20 pooled corpus (24,884 passages) vs BM25 on
              the same pool; also the peak-RSS comparison: the pool's first 10% vs all of it.
  fuse        BM25 + RepBERT and RepBERT + BM25 with ``rankkit fuse --method alternate``.
  memory      peak RSS of ``rankkit index --kind dense`` on 25k vs 250k documents (see :func:`memory`).
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path
from typing import Any

import harness
from harness import ROOT, SHARED_DATA, Steps

from rankkit.datasets import quora as quora_task
from rankkit.evaluation import evaluate_files
from rankkit.formats import atomic_write

STEPS = ("quora", "throughput", "dl", "fuse", "memory")
QUORA_MEASURES = ["R@100", "RR@100", "AP@100", "nDCG@10"]
DL_MEASURES = ["nDCG@10", "RR(rel=2)@10", "R(rel=2)@100"]


def step(steps: Steps, args: list[Any], record: dict[str, Any], name: str, done: Path | None = None) -> None:
    """``rankkit ARGS`` as step ``name`` unless ``done`` exists; command, wall seconds and peak RSS in ``record[name]``.

    A reused step keeps what an earlier run recorded for it.
    """
    result = steps.rankkit(name, args, [done] if done is not None else [])
    if result.reused:
        record.setdefault(name, result.record())
    else:
        record[name] = result.record()


def scores(qrels: Path, run: Path, measures: list[str]) -> dict[str, float]:
    """``rankkit eval``'s aggregates of one run, rounded to 4 digits."""
    result = evaluate_files([run], qrels, measures)
    return {m: round(v, 4) for m, v in next(iter(result.runs.values())).aggregates.items()}


def quora(args: argparse.Namespace, steps: Steps, rec: dict[str, Any]) -> None:
    """The Quora task: BM25, zero-shot and trained dense models (see the module docstring)."""
    q = args.quora_dir
    if not (q / "corpus.jsonl").exists():
        quora_task.main(["--output", str(q)])
    o = steps.out / "quora"
    o.mkdir(parents=True, exist_ok=True)
    cmds = rec.setdefault("commands", {})
    bm25 = o / "bm25.index"
    step(steps, ["index", "--kind", "bm25", "--corpus", q / "corpus.jsonl", "--index", bm25], cmds,
                "bm25-index", bm25 / "rankkit-index.json")
    step(steps, ["retrieve", "--model", "bm25", "--index", bm25, "--topics", q / "test.topics.tsv",
                 "--output", o / "test.bm25.run", "--k", "100", "--remove-query"], cmds, "bm25-retrieve",
                o / "test.bm25.run")
    zs = o / "repbert-zeroshot.index"
    step(steps, ["index", "--kind", "dense", "--model", "repbert", "--corpus", q / "corpus.jsonl",
                 "--index", zs, "--batch-size", "128", "--threads", str(args.threads)], cmds, "repbert-index",
                zs / "rankkit-index.json")
    step(steps, ["retrieve", "--model", "repbert", "--index", zs, "--topics", q / "test.topics.tsv",
                 "--output", o / "test.repbert.run", "--k", "100", "--remove-query", "--threads",
                 str(args.threads)], cmds, "repbert-retrieve", o / "test.repbert.run")
    # RepBERT's query limit is 20 tokens (§4.3.1); Quora queries are questions like the documents,
    # so also measure the zero-shot model with the documents' 256 (what sentence-transformers does).
    step(steps, ["retrieve", "--model", "repbert", "--index", zs, "--topics", q / "test.topics.tsv",
                 "--output", o / "test.repbert-q256.run", "--k", "100", "--remove-query", "--max-query-length", "256",
                 "--threads", str(args.threads)], cmds, "repbert-q256-retrieve", o / "test.repbert-q256.run")
    systems = {"BM25": o / "test.bm25.run", "RepBERT zero-shot (all-MiniLM-L6-v2), query length 20": o / "test.repbert.run",
               "RepBERT zero-shot, query length 256": o / "test.repbert-q256.run"}
    def index_and_retrieve(model: str, ck: Path, name: str, batch: int, retrieve_extra: list[str]) -> Path:
        """Dense-index the corpus with checkpoint ``ck``, retrieve the test queries; the run's path."""
        index, run = o / f"{name}.index", o / f"test.{name}.run"
        step(steps, ["index", "--kind", "dense", "--model", model, "--checkpoint", ck, "--corpus",
                     q / "corpus.jsonl", "--index", index, "--batch-size", str(batch), "--threads", str(args.threads)],
                    cmds, f"{name}-index", index / "rankkit-index.json")
        step(steps, ["retrieve", "--model", model, "--index", index, "--topics", q / "test.topics.tsv",
                     "--output", run, "--k", "100", "--remove-query", *retrieve_extra], cmds, f"{name}-retrieve", run)
        return run

    if args.densetrans_steps > 0 or args.repbert_steps > 0:
        step(steps, ["retrieve", "--model", "bm25", "--index", bm25, "--topics", q / "train.topics.tsv",
                     "--output", o / "train.bm25.run", "--k", "100", "--remove-query"], cmds, "train-bm25",
                    o / "train.bm25.run")
        step(steps, ["mine", "--run", o / "train.bm25.run", "--qrels", q / "train.qrels.txt", "--topics",
                     q / "train.topics.tsv", "--index", bm25, "--output", o / "train.groups.jsonl", "--depth", "100",
                     "--negatives", "7", "--strategy", "random", "--seed", "0"], cmds, "mine",
                    o / "train.groups.jsonl")
        # "densetrans" is §3.2.2's last-layer [CLS]; "all-layers" the concatenation of every layer's [CLS]
        # (rankkit's default before issue 17); "layers-N" Fig. 4's depth sweep (N = 3 is "densetrans").
        variants = [("densetrans", [], "DenseTrans"), ("all-layers", ["--all-layers"], "DenseTrans, all layers' [CLS]"),
                    ("no-top-dense", ["--no-top-dense"], "DenseTrans -TopDense"),
                    ("no-dense", ["--no-dense"], "DenseTrans -AllDense"),
                    ("concat", ["--concat-layers"], "DenseTrans +Concat"),
                    *[(f"layers-{n}", ["--num-layers", str(n)], f"DenseTrans, {n} layer(s) (Fig. 4)") for n in (1, 2, 4)]]
        wanted = args.densetrans_variants.split(",")
        for variant, flags, label in variants:
            if variant not in wanted or args.densetrans_steps <= 0:
                continue
            name = f"densetrans-{variant}-d{args.densetrans_d_model}-s{args.densetrans_steps}"
            ck = o / name
            step(steps, ["train", "--model", "densetrans", *flags, "--train", o / "train.groups.jsonl",
                         "--output", ck, "--max-steps", str(args.densetrans_steps), "--batch-size", "16",
                         "--group-size", "4", "--lr", "5e-4", "--scale", "20", "--d-model",
                         str(args.densetrans_d_model), "--seed", "42", "--log-every", "5"], cmds, f"{name}-train",
                        ck / "rankkit.json")
            systems[f"{label} (d={args.densetrans_d_model}, {args.densetrans_steps} steps)"] = index_and_retrieve(
                "densetrans", ck, name, 256, [])
            log = [json.loads(line) for line in (ck / "train.log").read_text().splitlines()]
            rec[f"{name}_loss"] = [(e["step"], round(e["loss"], 4)) for e in log if "loss" in e]
            rec[f"{name}_seconds"] = next((e["seconds"] for e in log if e.get("event") == "done"), None)
    if args.repbert_steps > 0:
        name = f"repbert-quora-s{args.repbert_steps}"
        ck = o / name
        # Fine-tuned from the packaged MiniLM on the Quora dev split (the same groups as DenseTrans);
        # cosine (--normalize) and segment id 0, as the backbone was trained, query length 256.
        step(steps, ["train", "--model", "repbert", "--train", o / "train.groups.jsonl", "--output", ck,
                     "--max-steps", str(args.repbert_steps), "--batch-size", "16", "--group-size", "4",
                     "--lr", "2e-5", "--normalize", "--doc-segment-id", "0", "--max-query-length", "64",
                     "--max-doc-length", "64", "--seed", "42", "--log-every", "5"], cmds, f"{name}-train",
                    ck / "rankkit.json")
        systems[f"RepBERT fine-tuned on Quora dev ({args.repbert_steps} steps)"] = index_and_retrieve(
            "repbert", ck, name, 128, ["--threads", str(args.threads)])
    rec["scores"] = {name: scores(q / "test.qrels.txt", run, QUORA_MEASURES) for name, run in systems.items()}
    rec["runs"] = {name: str(run) for name, run in systems.items()}


def memory(args: argparse.Namespace, steps: Steps, rec: dict[str, Any]) -> None:
    """Peak RSS of ``rankkit index --kind dense`` on 25k vs 250k documents (same model, same chunking).

    The documents are the Quora corpus's questions repeated under new ids (``<id>~<copy>``) up to
    the size wanted, so both corpora have the same length distribution. A 2-hour MiniLM encode of
    250k passages does not fit this CPU, so the model is ``--memory-checkpoint`` (default: the
    CPU-sized DenseTrans trained by the quora step), which encodes thousands of texts per second:
    what is measured is rankkit's streaming (chunks, memory-mapped shards, faiss add), which is
    the same code path for every model.
    """
    q, out = args.quora_dir, steps.out
    o = out / "memory"
    o.mkdir(parents=True, exist_ok=True)
    cmds = rec.setdefault("commands", {})
    default = out / "quora" / f"densetrans-densetrans-d{args.densetrans_d_model}-s{args.densetrans_steps}"
    checkpoint = args.memory_checkpoint or default
    questions = [json.loads(line) for line in (q / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    for size in (25_000, 250_000):
        corpus = o / f"corpus.{size}.jsonl"
        if not corpus.exists():
            with atomic_write(corpus) as handle:
                for n in range(size):
                    doc = questions[n % len(questions)]
                    handle.write(json.dumps({"id": f"{doc['id']}~{n // len(questions)}", "contents": doc["contents"]}) + "\n")
        index = o / f"index.{size}"
        step(steps, ["index", "--kind", "dense", "--model", "densetrans", "--checkpoint", checkpoint,
                     "--corpus", corpus, "--index", index, "--batch-size", "256", "--chunk-size", "8192",
                     "--threads", str(args.threads), "--force"], cmds, f"index-{size}", index / "rankkit-index.json")
    rec["model"] = str(checkpoint)


def throughput(args: argparse.Namespace, steps: Steps, rec: dict[str, Any]) -> dict[str, Any]:
    """Passages/s of rankkit's encoder vs SentenceTransformer.encode (same weights, texts, process)."""
    import torch
    from sentence_transformers import SentenceTransformer

    from rankkit.dense import load_bi_encoder
    from rankkit.models.backbone import resolve_backbone

    torch.set_num_threads(args.threads)
    texts = []
    with gzip.open(args.dl_dir / "derived" / "dl19.passages.union5runs.tsv.gz", "rt", encoding="utf-8") as src:
        for line in src:
            texts.append(line.rstrip("\n").split("\t", 1)[1])
            if len(texts) == args.throughput_passages:
                break
    ours = load_bi_encoder("repbert", None, "cpu")
    path = resolve_backbone(None)
    st = SentenceTransformer(str(path), device="cpu")
    st.max_seq_length = ours.hparams.get("max_doc_length") or 256
    encoded: dict[str, Any] = {}
    timings = harness.interleaved({
        "rankkit": lambda: encoded.update(rankkit=ours.encode(texts, is_query=False, batch_size=64)),
        "sentence-transformers": lambda: encoded.update(st=st.encode(texts, batch_size=64, convert_to_numpy=True)),
    }, args.repeats)
    agree = float(abs(encoded["rankkit"].numpy() - encoded["st"]).max()) if encoded else None
    best = {k: min(v) for k, v in timings.items()}
    return {
        "passages": len(texts), "batch_size": 64, "max_length": st.max_seq_length, "threads": args.threads,
        "seconds": {k: [round(x, 2) for x in v] for k, v in timings.items()},
        "passages_per_s": {k: round(len(texts) / v, 1) for k, v in best.items()},
        "speedup": round(best["sentence-transformers"] / best["rankkit"], 2),
        "max_abs_difference": agree,
    }


def dl(args: argparse.Namespace, steps: Steps, rec: dict[str, Any]) -> None:
    """Zero-shot RepBERT vs BM25 on the DL19+DL20 pool; peak RSS on 10% vs all of it."""
    o = steps.out / "dl"
    o.mkdir(parents=True, exist_ok=True)
    cmds = rec.setdefault("commands", {})
    pool = o / "dl19+dl20.pool.tsv"
    if not pool.exists():
        rec["documents"] = harness.dl_pool_corpus(args.dl_dir, pool)
    small = o / "pool.first10pct.tsv"
    if not small.exists():
        rec["documents_small"] = harness.dl_pool_corpus(args.dl_dir, small, limit=2488)
    # Peak RSS: the same command on 10% and on 100% of the pool.
    step(steps, ["index", "--kind", "dense", "--model", "repbert", "--corpus", small, "--index",
                 o / "repbert-small.index", "--threads", str(args.threads)], cmds, "repbert-index-2488",
                o / "repbert-small.index" / "rankkit-index.json")
    idx = o / "repbert.index"
    step(steps, ["index", "--kind", "dense", "--model", "repbert", "--corpus", pool, "--index", idx,
                 "--threads", str(args.threads)], cmds, "repbert-index-24884", idx / "rankkit-index.json")
    bm25 = o / "bm25.index"
    step(steps, ["index", "--kind", "bm25", "--corpus", pool, "--index", bm25], cmds, "bm25-index",
                bm25 / "rankkit-index.json")
    tq = args.dl_dir / "topics-qrels"
    topics = {"dl19": tq / "topics.dl19-passage.txt", "dl20": tq / "topics.dl20.txt"}
    qrels = {"dl19": tq / "qrels.dl19-passage.txt", "dl20": tq / "qrels.dl20-passage.txt"}
    rec["scores"] = {}
    for year in ("dl19", "dl20"):
        for model, index in (("bm25", bm25), ("repbert", idx)):
            run = o / f"{year}.{model}.run"
            step(steps, ["retrieve", "--model", model, "--index", index, "--topics", topics[year], "--output",
                         run, "--k", "1000"], cmds, f"{year}-{model}", run)
            rec["scores"][f"{year} {model}"] = scores(qrels[year], run, DL_MEASURES)


def fuse(args: argparse.Namespace, steps: Steps, rec: dict[str, Any]) -> None:
    """RepBERT's alternating merge of BM25 and RepBERT, both orders, on every task that has both runs."""
    out = steps.out
    cmds = rec.setdefault("commands", {})
    rec["scores"] = {}
    tq = args.dl_dir / "topics-qrels"
    tasks = [("quora", out / "quora" / "test.bm25.run", out / "quora" / "test.repbert.run",
              args.quora_dir / "test.qrels.txt", QUORA_MEASURES, "100")]
    for year, q in (("dl19", "qrels.dl19-passage.txt"), ("dl20", "qrels.dl20-passage.txt")):
        tasks.append((year, out / "dl" / f"{year}.bm25.run", out / "dl" / f"{year}.repbert.run", tq / q,
                      DL_MEASURES, "1000"))
    for task, bm25, dense, qrels, measures, k in tasks:
        if not (bm25.exists() and dense.exists()):
            continue
        for name, first, second in (("BM25 + RepBERT", bm25, dense), ("RepBERT + BM25", dense, bm25)):
            fused = first.parent / f"{task}.alternate.{'bm25+repbert' if first == bm25 else 'repbert+bm25'}.run"
            step(steps, ["fuse", "--method", "alternate", "--output", fused, "--k", k, first, second], cmds,
                        f"{task} {name}", fused)
            rec["scores"][f"{task} {name}"] = scores(qrels, fused, measures)


def markdown(results: dict[str, Any]) -> str:
    """The report: scores and step commands per section."""
    lines = [f"# Dense benchmark ({results['date']}, {results['machine']})", ""]
    for section, measures in (("quora", QUORA_MEASURES), ("dl", DL_MEASURES), ("fuse", None)):
        if "scores" not in results.get(section, {}):
            continue
        rows = results[section]["scores"]
        ms = measures or list(dict.fromkeys(m for vals in rows.values() for m in vals))
        lines += [f"## {section}", "", "| system | " + " | ".join(ms) + " |", "| --- |" + " --- |" * len(ms)]
        for name, vals in rows.items():
            lines.append(f"| {name} | " + " | ".join(f"{vals[m]:.4f}" if m in vals else "-" for m in ms) + " |")
        lines += ["", "| step | command | wall s | peak RSS MB |", "| --- | --- | --- | --- |"]
        for name, c in results[section].get("commands", {}).items():
            lines.append(f"| {name} | `{c['command']}` | {c.get('seconds', 'reused')} | {c.get('peak_rss_mb', '')} |")
        lines.append("")
    if "memory" in results:
        lines += ["## memory (peak RSS of rankkit index --kind dense)", "", "| step | command | wall s | peak RSS MB |",
                  "| --- | --- | --- | --- |"]
        for name, c in results["memory"].get("commands", {}).items():
            lines.append(f"| {name} | `{c['command']}` | {c.get('seconds', 'reused')} | {c.get('peak_rss_mb', '')} |")
        lines.append("")
    if "throughput" in results:
        t = results["throughput"]
        lines += ["## throughput", "", "```", json.dumps(t, indent=2), "```", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description="Dense retrieval benchmark (see the module docstring).")
    parser.add_argument("--steps", type=harness.step_list(STEPS), default="quora,throughput,dl,fuse",
                        help=f"comma-separated: {', '.join(STEPS)}")
    parser.add_argument("--output", type=Path, default=ROOT / "runs" / "bench-dense")
    parser.add_argument("--quora-dir", type=Path, default=ROOT / "runs" / "bench-bm25" / "quora",
                        help="the Quora task from examples/quora/prepare.py (made there if missing)")
    parser.add_argument("--dl-dir", type=Path, default=SHARED_DATA / "msmarco-passage-trec-dl")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--densetrans-steps", type=int, default=294, help="training steps (0: skip DenseTrans; 294 = one epoch)")
    parser.add_argument("--densetrans-d-model", type=int, default=96,
                        help="DenseTrans token width (384 = MiniLM's; 96 = its principal components, CPU-sized)")
    parser.add_argument("--densetrans-variants", default="densetrans,no-top-dense,no-dense,concat")
    parser.add_argument("--memory-checkpoint", type=Path, default=None,
                        help="model for the 25k vs 250k peak-RSS step (default: the quora step's DenseTrans)")
    parser.add_argument("--repbert-steps", type=int, default=294, help="RepBERT fine-tuning steps on Quora dev (0: skip)")
    parser.add_argument("--throughput-passages", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    steps = Steps(args.output, prog="dense.py")
    path = steps.out / "dense.json"
    results = harness.load_results(path)
    where = harness.machine(torch_threads=True)
    results["date"] = where["date"]
    results["machine"] = harness.machine_line(where)
    results["machine_details"] = where

    def save() -> None:  # after each step: a long bench keeps what it measured
        harness.save_json(path, results)
        harness.write_text(steps.out / "dense.md", markdown(results))

    table = {name: (lambda section, fn=fn: fn(args, steps, section))
             for name, fn in (("quora", quora), ("throughput", throughput), ("dl", dl), ("fuse", fuse),
                              ("memory", memory))}
    harness.run_steps(args.steps, table, results, save)


if __name__ == "__main__":
    main()
