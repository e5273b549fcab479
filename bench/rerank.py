#!/usr/bin/env python
"""Re-ranking benchmarks: `mono`, `matrank-row`, `matrank` on DL19, WikiQA and SemEval, and throughput.

    python bench/rerank.py dl19 --output runs/bench-rerank/dl19      # bundled data only

    python examples/wikiqa/prepare.py --output runs/wikiqa
    python bench/rerank.py wikiqa --data runs/wikiqa --output runs/bench-rerank/wikiqa --settings bi,cross
    python examples/semeval/prepare.py --output runs/semeval
    python bench/rerank.py semeval --data runs/semeval --output runs/bench-rerank/semeval --settings bi
    python bench/rerank.py throughput --output runs/bench-rerank/throughput

``wikiqa`` / ``semeval``: for every chosen training setting (``--settings``, see SETTINGS) and
model (``--models``), ``rankkit train`` on ``DATA/train.groups.jsonl``, ``rankkit rerank`` of
``DATA/test.candidates.run`` (all candidates of a question), then one ``rankkit eval -m AP -m RR``
(MAP / MRR) of every run against the zero-shot ``rerank --model repbert`` row as the significance
baseline (paired randomization, Holm). Everything goes through the ``rankkit`` command line, as a
user's script would; a finished checkpoint or run is reused unless ``--force``. A failed step is
reported in the table with its last error line instead of stopping the benchmark.

``throughput``: in one process, on the same (query, passage) pairs of the bundled DL19 BM25 runs,
query-passage pairs/s of ``mono`` and ``matrank`` (untrained cross-encoder heads on the packaged
MiniLM; the head's values do not change the cost) through ``rerank_scores``, against
sentence-transformers' ``CrossEncoder.predict`` on the same MiniLM weights with a one-logit head.
Then MatRank's overhead over ``mono`` at depths 100 and 1000: the head alone on ``h`` of M
candidates (time, and peak resident memory of a fresh process), next to the encoding time of M
pairs.

Each part writes ``results.md`` (table and reading) and ``commands.sh`` (the exact commands) into
``--output``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from _timing import median_seconds  # noqa: E402  (one timing helper for every bench script)

RANKKIT = str(Path(sys.executable).parent / "rankkit")
MODELS = ("mono", "matrank-row", "matrank")

#: Training settings: ``rankkit train`` options. ``bi``: frozen MiniLM features, head-sized lr,
#: cheap steps after the first epoch; ``cross``: the cross-encoder default under a CPU step budget.
#: Group size 5 = MatRank's 1:4 positive:negative ratio on WikiQA and SemEval (paper 000, §4.2).
SETTINGS: dict[str, list[str]] = {
    "bi": ["--encoder", "bi", "--group-size", "16", "--lr", "1e-3", "--epochs", "3", "--batch-size", "4"],
    "bi-e10": ["--encoder", "bi", "--group-size", "16", "--lr", "1e-3", "--epochs", "10", "--batch-size", "4"],
    "bi-gs5": ["--encoder", "bi", "--group-size", "5", "--lr", "1e-3", "--epochs", "5", "--batch-size", "4"],
    "bi-lr3e-4": ["--encoder", "bi", "--group-size", "16", "--lr", "3e-4", "--epochs", "5", "--batch-size", "4"],
    "bi-h1024": ["--encoder", "bi", "--group-size", "16", "--lr", "1e-3", "--epochs", "3", "--batch-size", "4",
                 "--hidden", "1024"],
    "bi-tune": ["--encoder", "bi", "--tune-encoder", "--group-size", "5", "--lr", "2e-5", "--max-steps", "200",
                "--batch-size", "4"],
    "cross": ["--group-size", "5", "--lr", "2e-5", "--max-steps", "200", "--batch-size", "4"],
    "cross-paper": ["--group-size", "5", "--optimizer", "adafactor", "--lr", "1e-5", "--max-steps", "200",
                    "--batch-size", "4"],
}
#: Token budgets per task: WikiQA sentences are short; SemEval queries are subject + body.
LENGTHS = {
    "wikiqa": ["--max-query-length", "32", "--max-doc-length", "128"],
    "semeval": ["--max-query-length", "96", "--max-doc-length", "160"],
}


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} CPU cores, Python {platform.python_version()}"


@dataclass
class Recorder:
    """Runs commands, keeps them (for commands.sh) with their wall time and outcome."""

    commands: list[str] = field(default_factory=list)

    def run(self, cmd: list[str], *, nice: bool = True) -> tuple[float, str | None]:
        """``(seconds, None)`` on success, ``(seconds, last stderr line)`` on failure."""
        full = (["nice", "-n", "10"] if nice else []) + cmd
        self.commands.append(shlex.join(cmd))
        start = time.perf_counter()
        done = subprocess.run(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            lines = [line for line in done.stderr.splitlines() if line.strip()] or [f"exit {done.returncode}"]
            self.commands[-1] += f"    # FAILED: {lines[-1]}"
            return seconds, lines[-1]
        return seconds, None

    def reused(self, cmd: list[str]) -> None:
        """A command whose output already existed (kept in commands.sh, not run again)."""
        self.commands.append(shlex.join(cmd) + "    # output reused, not rerun")

    def write(self, path: Path, header: str) -> None:
        path.write_text(f"#!/bin/sh\n# {header}\n" + "\n".join(self.commands) + "\n", encoding="utf-8")


@dataclass
class Row:
    """One system of a task table."""

    name: str
    setting: str
    run: Path
    train_s: float | None = None
    steps: int | None = None
    rerank_s: float | None = None
    error: str | None = None


def checkpoint_steps(folder: Path) -> int | None:
    """Optimiser steps recorded in a checkpoint's rankkit.json, if readable."""
    try:
        meta = json.loads((folder / "rankkit.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    for key in ("steps", "step", "global_step"):
        if isinstance(meta.get(key), int):
            return meta[key]
    return None


def task_bench(args: argparse.Namespace) -> None:
    """Train, re-rank and evaluate every (setting, model) on one prepared task."""
    data, out = args.data, args.output
    out.mkdir(parents=True, exist_ok=True)
    rec = Recorder()
    topics, corpus, qrels = data / "test.topics.tsv", data / "corpus.jsonl", data / "test.qrels.txt"
    candidates = data / "test.candidates.run"
    rerank_common = ["--run", str(candidates), "--topics", str(topics), "--corpus", str(corpus),
                     "--depth", "1000", "--device", "cpu"]
    zero_shot = Row("`rerank --model repbert` (zero-shot MiniLM cosine)", "-", out / "repbert-zs.test.run")
    zs_cmd = [RANKKIT, "rerank", "--model", "repbert", *rerank_common, "--output", str(zero_shot.run)]
    if (args.force or not zero_shot.run.exists()) and not args.table_only:
        zero_shot.rerank_s, zero_shot.error = rec.run(zs_cmd)
    else:
        rec.reused(zs_cmd)
    rows = [zero_shot]
    for setting in args.settings:
        for model in args.models:
            ck = out / "ck" / f"{model}.{setting}"
            row = Row(f"`{model}`", setting, out / f"{model}.{setting}.test.run")
            rows.append(row)
            options = list(SETTINGS[setting])
            if args.max_steps is not None and "--max-steps" in options:
                options[options.index("--max-steps") + 1] = str(args.max_steps)
            train_cmd = [RANKKIT, "train", "--model", model, "--train", str(data / "train.groups.jsonl"),
                         "--output", str(ck), *options, *LENGTHS[args.part], "--seed", str(args.seed),
                         "--device", "cpu"]
            if args.table_only and not row.run.exists():
                row.error = "not run"
                continue
            if args.force or not (ck / "rankkit.json").exists():
                row.train_s, row.error = rec.run(train_cmd)
            else:
                rec.reused(train_cmd)
            row.steps = checkpoint_steps(ck)
            rerank_cmd = [RANKKIT, "rerank", "--model", model, "--checkpoint", str(ck), *rerank_common,
                          "--output", str(row.run)]
            if row.error is None and (args.force or not row.run.exists()):
                row.rerank_s, row.error = rec.run(rerank_cmd)
            elif row.error is None:
                rec.reused(rerank_cmd)
    done = [r for r in rows if r.error is None and r.run.exists()]
    eval_json = out / "eval.json"
    eval_cmd = [RANKKIT, "eval", "-m", "AP", "-m", "RR", "--qrels", str(qrels), "-b", str(zero_shot.run),
                str(candidates), *[str(r.run) for r in done if r is not zero_shot]]
    _, error = rec.run([*eval_cmd, "-f", "json", "-o", str(eval_json)], nice=False)
    rec.run([*eval_cmd, "-f", "markdown", "-o", str(out / "eval.md")], nice=False)
    scores = json.loads(eval_json.read_text(encoding="utf-8")) if error is None else {}
    rec.write(out / "commands.sh", f"bench/rerank.py {args.part}, {datetime.date.today().isoformat()}")
    (out / "results.md").write_text(task_table(args, rows, scores, candidates), encoding="utf-8")
    print((out / "results.md").read_text(encoding="utf-8"))


def task_table(args: argparse.Namespace, rows: list[Row], scores: dict, candidates: Path) -> str:
    def cell(run: Path, measure: str) -> str:
        entry = scores.get(str(run), {})
        if measure not in entry:
            return "-"
        mark = "†" if entry.get("significance", {}).get(measure, {}).get("significant") else ""
        return f"{entry[measure]:.4f}{mark}"

    def seconds(value: float | None) -> str:
        return "-" if value is None else f"{value:.0f}"

    lines = [
        f"### {args.part}: re-ranking the test candidates ({datetime.date.today().isoformat()}; {machine()})",
        "",
        "| system | setting | train s | steps | re-rank s | MAP | MRR |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
        f"| candidates in the given order | - | - | - | - | {cell(candidates, 'AP')} | {cell(candidates, 'RR')} |",
    ]
    for r in rows:
        if r.error == "not run":
            lines.append(f"| {r.name} | {r.setting} | - | - | - | not run | |")
        elif r.error is not None:
            lines.append(f"| {r.name} | {r.setting} | {seconds(r.train_s)} | - | - | failed: {r.error} | |")
        else:
            lines.append(f"| {r.name} | {r.setting} | {seconds(r.train_s)} | {r.steps if r.steps is not None else '-'} "
                         f"| {seconds(r.rerank_s)} | {cell(r.run, 'AP')} | {cell(r.run, 'RR')} |")
    lines += [
        "",
        "MAP = `AP`, MRR = `RR` of `rankkit eval` (trec_eval semantics, all candidates of a question). "
        "† significantly different from the zero-shot `repbert` row (paired randomization test, "
        "10,000 permutations, Holm over all runs x measures, alpha 0.05). Settings (`rankkit train` "
        "options, plus " + " ".join(LENGTHS[args.part]) + f" --seed {args.seed}):",
        "",
        *[f"* `{s}`: `{' '.join(SETTINGS[s])}`" for s in args.settings],
        "",
        "Times are wall seconds on shared cores (other jobs running); `-` in `train s` / `re-rank s` = "
        "output reused from an earlier invocation (see commands.sh).",
        "",
    ]
    return "\n".join(lines)


# -- throughput ---------------------------------------------------------------------------------

def dl19_pairs(data: Path, queries: int, depth: int) -> tuple[list[str], list[list[str]]]:
    """The first ``queries`` DL19 queries with the texts of their BM25 top ``depth``."""
    from rankkit.docstore import open_docstore
    from rankkit.formats import read_topics
    from rankkit.formats.runs import iter_run_queries

    topics = read_topics(data / "topics.dl19-passage.txt")
    store = open_docstore(corpus=data / "passages.dl19-pool.tsv.gz")
    qs: list[str] = []
    cands: list[list[str]] = []
    for qid, ranking in iter_run_queries(data / "runs" / "BM25.dl19.txt"):
        docids = [d for d, _ in ranking[:depth]]
        texts = store.get_many(docids)
        qs.append(topics[qid])
        cands.append([texts[d] for d in docids])
        if len(qs) == queries:
            break
    return qs, cands


def rss_mb(field: str) -> float:
    """``VmRSS`` (current) or ``VmHWM`` (peak) resident memory of this process, in MB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def head_probe(model_name: str, depth: int, repeats: int) -> None:
    """Child process: time the head of ``model_name`` on random ``h`` [depth, 384]; print JSON.

    Peak memory: torch tensors bypass Python's allocator, so tracemalloc cannot see ``S``; the
    kernel's peak RSS is reset (``clear_refs`` 5) after loading the model and read after the head.
    """
    import torch

    from rankkit.models import get_model_class

    torch.manual_seed(0)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    model = get_model_class(model_name).for_training(None, {"encoder": "cross"}).eval()
    h = torch.randn(depth, model.pairs.dim)
    Path("/proc/self/clear_refs").write_text("5")  # peak RSS := current RSS
    before = rss_mb("VmRSS")
    with torch.inference_mode():
        model.list_scores(h, None)  # warm-up (allocator, kernels)
        seconds = median_seconds(lambda: model.list_scores(h, None), repeats)
    print(json.dumps({"seconds": seconds, "peak_rss_growth_mb": rss_mb("VmHWM") - before}))


def throughput_bench(args: argparse.Namespace) -> None:
    import torch
    from sentence_transformers import CrossEncoder

    from rankkit.models import backbone as bb
    from rankkit.models import get_model_class

    out = args.output
    out.mkdir(parents=True, exist_ok=True)
    rec = Recorder()
    rec.commands.append(shlex.join([sys.executable, *sys.argv]))
    torch.manual_seed(0)
    queries, candidates = dl19_pairs(args.data, args.queries, args.depth)
    pairs = [(q, t) for q, texts in zip(queries, candidates) for t in texts]
    backbone = bb.resolve_backbone(None)
    models = {name: get_model_class(name).for_training(None, {"encoder": "cross"}).eval()
              for name in ("mono", "matrank")}
    max_length = int(models["mono"].pairs.max_length)
    ce = CrossEncoder(str(backbone), num_labels=1, max_length=max_length, device="cpu")
    timers = {
        "rankkit mono (`rerank_scores`)":
            lambda: models["mono"].rerank_scores(queries, candidates, batch_size=args.batch_size),
        "rankkit matrank (`rerank_scores`)":
            lambda: models["matrank"].rerank_scores(queries, candidates, batch_size=args.batch_size),
        "sentence-transformers `CrossEncoder.predict`": lambda: ce.predict(pairs, batch_size=args.batch_size,
                                                                            show_progress_bar=False),
    }
    for fn in timers.values():  # warm-up: first-call allocations and thread pools
        fn()
    samples: dict[str, list[float]] = {name: [] for name in timers}
    for _ in range(args.repeats):  # interleaved, so a load change on the shared cores hits all alike
        for name, fn in timers.items():
            start = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - start)
    median = {name: statistics.median(v) for name, v in samples.items()}
    ce_name = "sentence-transformers `CrossEncoder.predict`"
    heads = {}
    for depth in args.head_depths:
        for name in ("mono", "matrank"):
            cmd = [sys.executable, str(Path(__file__).resolve()), "_head", "--model", name,
                   "--head-depth", str(depth), "--repeats", str(args.repeats)]
            rec.commands.append(shlex.join(cmd))
            done = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True)
            heads[(name, depth)] = json.loads(done.stdout.strip().splitlines()[-1])
    per_pair = median["rankkit mono (`rerank_scores`)"] / len(pairs)
    lines = [
        f"### Throughput ({datetime.date.today().isoformat()}; {machine()}, torch threads {torch.get_num_threads()})",
        "",
        f"{len(pairs)} (query, passage) pairs: the first {len(queries)} DL19 queries x BM25 top {args.depth} "
        f"(examples/data/dl19); max length {max_length} tokens, batch size {args.batch_size}; untrained heads on "
        f"the packaged all-MiniLM-L6-v2 (CrossEncoder: same weights, `num_labels=1`); median of {args.repeats} "
        "interleaved repeats after one warm-up, same process.",
        "",
        "| scorer | median s | pairs/s | rankkit / CrossEncoder |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, seconds in median.items():
        ratio = median[ce_name] / seconds
        lines.append(f"| {name} | {seconds:.2f} | {len(pairs) / seconds:.1f} | {ratio:.2f}x |")
    lines += [
        "",
        "MatRank's head (Eqs. 2-8: row-blocked preference matrix, row/column means, Borda vote) against "
        "`mono`'s linear head, on `h` of M candidates (fresh process each; peak RSS growth during the head):",
        "",
        "| M | `mono` head s | `matrank` head s | peak RSS +MB mono / matrank | encoding M pairs (est.) s | overhead |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for depth in args.head_depths:
        mono, mat = heads[("mono", depth)], heads[("matrank", depth)]
        encode = per_pair * depth
        lines.append(
            f"| {depth} | {mono['seconds']:.4f} | {mat['seconds']:.4f} | {mono['peak_rss_growth_mb']:.0f} / "
            f"{mat['peak_rss_growth_mb']:.0f} | {encode:.1f} | {100 * (mat['seconds'] - mono['seconds']) / encode:.1f}% |"
        )
    lines += ["", "Encoding estimate = M x the `mono` seconds per pair above. Shared cores: other jobs "
              "were running, so absolute numbers drift; the interleaving keeps the ratio fair.", ""]
    rec.write(out / "commands.sh", f"bench/rerank.py throughput, {datetime.date.today().isoformat()}")
    (out / "results.md").write_text("\n".join(lines), encoding="utf-8")
    record = {"samples": samples, "heads": {f"{k[0]}@{k[1]}": v for k, v in heads.items()}}
    (out / "samples.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print("\n".join(lines))


DL19_SETTING = ["--encoder", "bi", "--group-size", "16", "--lr", "1e-3", "--epochs", "5", "--batch-size", "4",
                "--max-doc-length", "256"]
ALPHAS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)


def dl19_bench(args: argparse.Namespace) -> None:
    """DL19 BM25 top-100 re-ranking with models trained on DL20 only, and BM25 interpolation tuned on DL20.

    Training side (bundled ``examples/data/dl20``): BM25 over the DL20 pool, ``rankkit mine`` (positives
    rel >= 2, 30 random BM25 negatives), ``rankkit train`` of each model (``DL19_SETTING``). The
    interpolation weight is the alpha whose ``fuse --method interpolate`` of the zero-shot bi-encoder and
    BM25 scores best on DL20 (nDCG@10); DL19 is only ever evaluated.
    """
    out, dl19, dl20 = args.output, args.data, args.dl20
    out.mkdir(parents=True, exist_ok=True)
    rec = Recorder()

    def step(cmd: list[str], target: Path) -> None:
        if args.force or not target.exists():
            _, error = rec.run(cmd)
            if error is not None:
                raise SystemExit(f"[bench] failed: {shlex.join(cmd)}: {error}")
        else:
            rec.reused(cmd)

    index = out / "index.dl20-pool"
    step([RANKKIT, "index", "--kind", "bm25", "--corpus", str(dl20 / "passages.dl20-pool.tsv.gz"), "--index",
          str(index), "--force"], index / "rankkit-index.json")
    bm25_dl20 = out / "bm25.dl20-pool.run"
    step([RANKKIT, "retrieve", "--model", "bm25", "--index", str(index), "--topics",
          str(dl20 / "topics.dl20-judged.tsv"), "--k", "100", "--output", str(bm25_dl20)], bm25_dl20)
    groups = out / "groups.dl20.jsonl"
    step([RANKKIT, "mine", "--run", str(bm25_dl20), "--qrels", str(dl20 / "qrels.dl20-passage.txt"), "--topics",
          str(dl20 / "topics.dl20-judged.tsv"), "--index", str(index), "--min-rel", "2", "--negatives", "30",
          "--strategy", "random", "--seed", "0", "--output", str(groups)], groups)
    # alpha on DL20: zero-shot bi-encoder re-ranking of DL20's BM25 top-100, interpolated with BM25
    zs_dl20 = out / "repbert-zs.dl20.run"
    step([RANKKIT, "rerank", "--model", "repbert", "--run", str(bm25_dl20), "--topics",
          str(dl20 / "topics.dl20-judged.tsv"), "--index", str(index), "--depth", "100", "--output", str(zs_dl20),
          "--device", "cpu"], zs_dl20)
    tuned: dict[float, float] = {}
    for alpha in ALPHAS:
        fused = out / f"interp{alpha}.repbert-zs.dl20.run"
        step([RANKKIT, "fuse", "--method", "interpolate", "--alpha", str(alpha), "--norm", "minmax", str(zs_dl20),
              str(bm25_dl20), "--k", "100", "--output", str(fused)], fused)
        score = out / f"interp{alpha}.dl20.json"
        step([RANKKIT, "eval", "-m", "nDCG@10", "--qrels", str(dl20 / "qrels.dl20-passage.txt"), str(fused),
              "-f", "json", "-o", str(score)], score)
        tuned[alpha] = float(next(iter(json.loads(score.read_text(encoding="utf-8")).values()))["nDCG@10"])
    alpha = max(tuned, key=lambda a: tuned[a])

    bm25_dl19 = dl19 / "runs" / "BM25.dl19.txt"
    rerank_common = ["--run", str(bm25_dl19), "--topics", str(dl19 / "topics.dl19-passage.txt"), "--corpus",
                     str(dl19 / "passages.dl19-pool.tsv.gz"), "--depth", "100", "--device", "cpu"]
    systems: dict[str, Path] = {"BM25": bm25_dl19}
    zs = out / "repbert-zs.dl19.run"
    step([RANKKIT, "rerank", "--model", "repbert", *rerank_common, "--output", str(zs)], zs)
    systems["zero-shot bi-encoder"] = zs
    for model in MODELS:
        ck = out / "ck" / f"{model}.bi-e5"
        step([RANKKIT, "train", "--model", model, "--train", str(groups), "--output", str(ck), *DL19_SETTING,
              "--seed", str(args.seed), "--device", "cpu"], ck / "rankkit.json")
        run = out / f"{model}.bi-e5.dl19.run"
        step([RANKKIT, "rerank", "--model", model, "--checkpoint", str(ck), *rerank_common, "--output", str(run)], run)
        systems[f"{model} --encoder bi"] = run
    for name, run in list(systems.items())[1:]:
        fused = out / f"interp{alpha}.{run.name}"
        step([RANKKIT, "fuse", "--method", "interpolate", "--alpha", str(alpha), "--norm", "minmax", str(run),
              str(bm25_dl19), "--k", "100", "--output", str(fused)], fused)
        systems[f"{name} + BM25 (alpha {alpha})"] = fused
    measures = ["-m", "nDCG@10", "-m", "RR(rel=2)@10", "-m", "AP(rel=2)@100"]
    qrels = str(dl19 / "qrels.dl19-passage.txt")
    runs = [str(r) for r in systems.values()]
    rec.run([RANKKIT, "eval", *measures, "--qrels", qrels, *runs, "-b", str(bm25_dl19), "-f", "markdown",
             "-o", str(out / "eval.vs-bm25.md")], nice=False)
    rec.run([RANKKIT, "eval", *measures, "--qrels", qrels, *runs[2:], "-b", str(systems["mono --encoder bi"]),
             "-f", "markdown", "-o", str(out / "eval.vs-mono.md")], nice=False)
    rec.write(out / "commands.sh", f"bench/rerank.py dl19, {datetime.date.today().isoformat()}")
    lines = [f"# DL19 BM25 top-100 re-ranking ({datetime.date.today().isoformat()}, {machine()})", "",
             "Systems: " + ", ".join(f"{k} = `{v.name}`" for k, v in systems.items()), "",
             "Interpolation weight tuned on DL20 (nDCG@10): " + ", ".join(f"{a}: {v:.4f}" for a, v in tuned.items()),
             f"-> alpha {alpha}", "", "## Significance against BM25", "",
             (out / "eval.vs-bm25.md").read_text(encoding="utf-8"), "", "## Significance against mono", "",
             (out / "eval.vs-mono.md").read_text(encoding="utf-8")]
    (out / "results.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print((out / "results.md").read_text(encoding="utf-8"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("part", choices=("dl19", "wikiqa", "semeval", "throughput", "_head"))
    parser.add_argument("--data", type=Path, default=None,
                        help="prepared task folder (wikiqa/semeval) or DL19 folder (throughput)")
    parser.add_argument("--output", type=Path, default=None, help="folder for results.md and commands.sh")
    parser.add_argument("--dl20", type=Path, default=ROOT / "examples" / "data" / "dl20",
                        help="dl19: the DL20 training side (pool, judged topics, qrels)")
    parser.add_argument("--settings", default="bi", help=f"comma-separated: {', '.join(SETTINGS)}")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated models to train")
    parser.add_argument("--max-steps", type=int, default=None,
                        help="override the step budget of step-limited settings")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--force", action="store_true", help="retrain and re-rank even if outputs exist")
    parser.add_argument("--table-only", action="store_true",
                        help="run nothing new: tabulate the runs already in --output (others: 'not run')")
    parser.add_argument("--queries", type=int, default=4, help="throughput: DL19 queries")
    parser.add_argument("--depth", type=int, default=100, help="throughput: candidates per query")
    parser.add_argument("--batch-size", type=int, default=32, help="throughput: pairs per forward pass")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--head-depths", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--model", default="matrank", help=argparse.SUPPRESS)
    parser.add_argument("--head-depth", type=int, default=100, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part == "_head":
        head_probe(args.model, args.head_depth, args.repeats)
        return
    args.output = args.output or ROOT / "runs" / "bench-rerank" / args.part
    if args.part == "dl19":
        args.data = args.data or ROOT / "examples" / "data" / "dl19"
        dl19_bench(args)
        return
    if args.part == "throughput":
        args.data = args.data or ROOT / "examples" / "data" / "dl19"
        throughput_bench(args)
        return
    args.data = args.data or ROOT / "runs" / args.part
    args.settings = [s for s in args.settings.split(",") if s]
    args.models = [m for m in args.models.split(",") if m]
    unknown = [s for s in args.settings if s not in SETTINGS] + [m for m in args.models if m not in MODELS]
    if unknown:
        parser.error(f"unknown setting or model: {', '.join(unknown)}")
    task_bench(args)


if __name__ == "__main__":
    main()
