#!/usr/bin/env python
"""Every stage of rankkit measured as its input grows, projected to MS MARCO size (issue 30).

Synthetic MS MARCO-shaped data built from the repository's own real text (``bench/synthetic.py``:
sentences of the bundled MS MARCO passages, classic collections and WikiQA; fresh ids), three sizes
a stage. Each measurement is one fresh child process (``harness.run_measured``: wall seconds, CPU
seconds user+sys of it and its children, peak RSS), with ``OMP_NUM_THREADS=1`` and one search or
index thread unless said; disk is the size of what the stage leaves (and, for the BM25 index, the
peak while building). Growth exponents are least-squares slopes of log CPU seconds on log size
(CPU, not wall: the machine is shared); MS MARCO projections extrapolate the largest size with that
exponent, and memory linearly from the two largest sizes.

Stages (``--stages``, default all):

* ``bm25-index``: ``rankkit index --kind bm25 --threads 1`` of 100k / 300k / 1M passages;
* ``bm25-retrieve``: 1,000 queries x k 1000 on each index (1 thread); on 1M also k 10 / 100 (the
  cost per returned hit) and ``--threads 2`` (worker processes);
* ``docstore``: the docid table of each collection, then 10,000 random look-ups;
* ``mine``: ``rankkit mine`` from runs of 1,000 / 3,000 / 10,000 queries x 100 over 1M passages,
  with texts and ``--ids-only``;
* ``train``: ``rankkit train --max-steps 1`` on the tiny test backbone (time to the first step and
  peak RSS) on 2,000 / 12,000 / 60,000 groups of 8 passages (JSONL with texts, ids-only groups over
  the 1M collection) and 8,000 / 40,000 / 240,000 triples (text triples, qidpidtriples);
* ``runs``: ``eval`` (4 measures), ``fuse`` (RRF of two runs) and ``validate`` of 1M / 3M / 7M-line runs;
* ``dense-encode``: ``rankkit index --kind dense`` with the packaged all-MiniLM-L6-v2 (zero-shot, --model repbert; 256
  tokens) of 500 / 1,000 / 2,000 passages (the encoding rate);
* ``faiss``: ``IndexFlatIP`` and rankkit's ``IndexIVFPQ`` (16 x 8 bits, nlist 1000 here, nprobe 10) over
  100k / 300k / 1M random 384-d unit vectors: build, and search of 1,000 queries x k 1000;
* ``rerank``: ``rankkit rerank`` (a tiny mono checkpoint) of runs of 200 / 1,000 / 5,000 queries x 20;
* ``dense-search``: ``rankkit retrieve --model repbert`` (tiny checkpoint, flat index of 30k passages)
  for 1,000 / 3,000 / 10,000 queries x k 1000.

    python bench/scale.py --output runs/bench-scale [--stages train,runs] [--baseline-src ../main]
        [--small (a quick check with ~10x smaller sizes)] [--nice 5]

``--baseline-src DIR`` also runs the train and runs stages with another rankkit source tree on
``PYTHONPATH`` (before/after on the same machine). Writes OUTPUT/scale.json (every measurement,
kept between runs: a rerun skips what it has) and OUTPUT/scale.md (tables, exponents, projections).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shlex
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import harness
import synthetic

ROOT = harness.ROOT
STAGES = ("bm25-index", "bm25-retrieve", "docstore", "mine", "train", "runs", "dense-encode", "faiss", "rerank",
          "dense-search")
#: MS MARCO passage sizes the projections aim at.
MSMARCO = {"passages": 8_841_823, "train_queries": 502_939, "dev_queries": 6_980, "triples": 39_780_811,
           "dev_run_lines": 6_980_000, "train_run_lines": 50_293_900}
KB = 1024


def tree_mb(path: Path) -> float:
    """Megabytes under ``path`` (a file or a folder)."""
    if path.is_file():
        return path.stat().st_size / KB / KB
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total / KB / KB


class DiskWatch:
    """The peak size of a folder while a command runs (polled every half second)."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.peak, self._stop = folder, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.wait(0.5):
            self.peak = max(self.peak, tree_mb(self.folder))

    def __enter__(self) -> "DiskWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, tree_mb(self.folder))


class Bench:
    """The output folder, the children's environment, and every measurement (``scale.json``)."""

    def __init__(self, out: Path, src: Path, baseline: Path | None, small: bool, nice: int) -> None:
        self.out, self.src, self.baseline, self.small, self.nice = out.resolve(), src, baseline, small, nice
        self.out.mkdir(parents=True, exist_ok=True)
        self.data = self.out / "data"
        self.data.mkdir(exist_ok=True)
        self.results_path = self.out / "scale.json"
        self.results = harness.load_results(self.results_path) or {}
        self.results.setdefault("rows", [])
        self.results["machine"] = harness.machine()

    def n(self, value: int) -> int:
        """A size, ten times smaller with ``--small``."""
        return max(1, value // 10) if self.small else value

    def env(self, src: Path | None = None, **extra: str) -> dict[str, str]:
        env = {**os.environ, "PYTHONPATH": str(src or self.src), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "TOKENIZERS_PARALLELISM": "false", "RANKKIT_HEARTBEAT": "0",
               "RANKKIT_CACHE_DIR": str(self.out / "cache")}
        env.update(extra)
        return env

    def done(self, key: dict[str, Any]) -> dict[str, Any] | None:
        for row in self.results["rows"]:
            if all(row.get(k) == v for k, v in key.items()):
                return row
        return None

    def measure(self, stage: str, variant: str, size: int, unit: str, argv: Sequence[Any], *,
                disk: Path | None = None, watch: Path | None = None, src: Path | None = None,
                env: dict[str, str] | None = None, code: str = "this") -> dict[str, Any]:
        """Run ``argv`` once (unless measured already) and record it."""
        key = {"stage": stage, "variant": variant, "size": size, "code": code}
        found = self.done(key)
        if found is not None:
            return found
        command = [str(a) for a in argv]
        print(f"==> {stage} {variant} {size:,} {unit} ({code})\n    $ {shlex.join(command)}", file=sys.stderr, flush=True)
        environment = env or self.env(src)
        if watch is not None:
            with DiskWatch(watch) as watcher:
                measured = harness.run_measured(command, cwd=self.out, nice=self.nice, env=environment)
            peak_disk: float | None = watcher.peak
        else:
            measured = harness.run_measured(command, cwd=self.out, nice=self.nice, env=environment)
            peak_disk = None
        if not measured.ok:
            raise SystemExit(f"scale: {stage} {variant} {size} failed (exit {measured.returncode}):\n{measured.tail(12)}")
        row: dict[str, Any] = {**key, "unit": unit, "cpu_s": round(measured.cpu_seconds or 0.0, 2),
                               "wall_s": round(measured.seconds, 2), "rss_mb": round(measured.peak_rss_mb or 0.0, 1),
                               "command": shlex.join(command)}
        if disk is not None:
            row["disk_mb"] = round(tree_mb(disk), 1)
        if peak_disk is not None:
            row["peak_disk_mb"] = round(peak_disk, 1)
        phases = [line for line in measured.stdout.splitlines() if line.startswith("{")]
        if phases:
            row["phases"] = json.loads(phases[-1])
        self.results["rows"].append(row)
        harness.save_json(self.results_path, self.results)
        print(f"    cpu {row['cpu_s']} s, wall {row['wall_s']} s, peak RSS {row['rss_mb']} MB"
              + (f", disk {row['disk_mb']} MB" if "disk_mb" in row else ""), file=sys.stderr, flush=True)
        return row

    def codes(self) -> list[tuple[str, Path]]:
        """This checkout, and the baseline source tree when one is given."""
        return [("this", self.src)] + ([("baseline", self.baseline)] if self.baseline is not None else [])

    def rankkit(self, *args: Any) -> list[str]:
        return [sys.executable, "-m", "rankkit", *[str(a) for a in args]]

    def python(self, code: str, *args: Any) -> list[str]:
        return [sys.executable, "-c", code, *[str(a) for a in args]]

    # -- shared data -------------------------------------------------------------------------

    def collection(self, size: int) -> Path:
        path = self.data / f"collection.{size}.tsv"
        if not path.exists():
            synthetic.write_collection(path.with_suffix(".part"), size)
            path.with_suffix(".part").rename(path)
        return path

    def queries(self, count: int, collection_size: int, seed: int = 0) -> tuple[Path, Path]:
        path = self.data / f"queries.{count}.on{collection_size}.s{seed}.tsv"
        qrels = path.with_suffix(".qrels")
        if not path.exists() or not qrels.exists():
            synthetic.write_queries(path, count, self.collection(collection_size), seed=seed, qrels=qrels)
        return path, qrels

    def run_file(self, queries: int, depth: int, collection_size: int, tag: str = "synthetic") -> Path:
        path = self.data / f"run.{queries}x{depth}.on{collection_size}.{tag}"
        if not path.exists():
            synthetic.write_run(path.with_suffix(".part"), queries, depth, collection_size, tag=tag)
            path.with_suffix(".part").rename(path)
        return path

    def tiny(self) -> Path:
        """The tests' tiny random BERT (2 layers, 24 wide), words of the bundled sentences in its vocabulary."""
        folder = self.data / "tiny"
        if not (folder / "config.json").exists():
            from rankkit.models.backbone import write_tiny_backbone

            words = sorted({w.lower() for s in synthetic.sentences()[:4000] for w in s.split() if w.isalpha()})[:3000]
            write_tiny_backbone(folder, words=words, hidden=24, layers=2, heads=2, intermediate=48, dropout=0.1,
                                max_positions=512)
        return folder


# -- stages ---------------------------------------------------------------------------------------

def bm25_index(b: Bench) -> None:
    for size in (b.n(100_000), b.n(300_000), b.n(1_000_000)):
        corpus = b.collection(size)
        folder = b.out / "bm25" / str(size)
        folder.mkdir(parents=True, exist_ok=True)
        index = folder / "index"
        b.measure("bm25-index", "threads 1", size, "passages",
                  b.rankkit("index", "--kind", "bm25", "--corpus", corpus, "--index", index, "--threads", 1, "--force"),
                  disk=index, watch=folder)


def bm25_retrieve(b: Bench) -> None:
    sizes = (b.n(100_000), b.n(300_000), b.n(1_000_000))
    queries = b.n(1000)
    for size in sizes:
        index = b.out / "bm25" / str(size) / "index"
        if not (index / "rankkit-index.json").exists():
            bm25_index(b)
        topics, _ = b.queries(queries, size)
        settings = [(1000, 1)] + ([(10, 1), (100, 1), (1000, 2)] if size == sizes[-1] else [])
        for k, threads in settings:
            for code, src in b.codes() if size == sizes[-1] and threads == 1 and k != 100 else [("this", b.src)]:
                b.measure("bm25-retrieve", f"{queries} queries, k {k}, threads {threads}", size, "passages",
                          b.rankkit("retrieve", "--model", "bm25", "--index", index, "--topics", topics, "--output",
                                    b.out / "bm25" / str(size) / f"run.k{k}.t{threads}.{code}", "--k", k,
                                    "--threads", threads), src=src, code=code)


DOCSTORE = """
import json, random, sys, time
from rankkit.docstore import open_docstore
corpus, size, lookups = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t0 = time.process_time()
store = open_docstore(corpus=corpus)
t1 = time.process_time()
rng = random.Random(0)
for _ in range(lookups // 100):
    store.get_many([f"p{rng.randrange(size)}" for _ in range(100)])
t2 = time.process_time()
print(json.dumps({"build_cpu_s": round(t1 - t0, 2), "lookup_cpu_us": round((t2 - t1) / lookups * 1e6, 1)}))
"""


def docstore(b: Bench) -> None:
    for size in (b.n(100_000), b.n(300_000), b.n(1_000_000)):
        corpus = b.collection(size)
        cache = b.out / "docstore-cache" / str(size)
        b.measure("docstore", "build + 10,000 look-ups", size, "passages",
                  b.python(DOCSTORE, corpus, size, 10_000), disk=cache,
                  env=b.env(RANKKIT_CACHE_DIR=str(cache)))


def mine(b: Bench) -> None:
    size = b.n(1_000_000)
    corpus = b.collection(size)
    import subprocess

    # The collection's docid table is built before (measured in the docstore stage): mine reads through it.
    subprocess.run(b.python("import sys; from rankkit.docstore import open_docstore; open_docstore(corpus=sys.argv[1])",
                            corpus), check=True, env=b.env(), capture_output=True)
    for count in (b.n(1000), b.n(3000), b.n(10_000)):
        topics, qrels = b.queries(count, size, seed=2)
        run = b.run_file(count, 100, size)
        for variant, extra in (("with texts", []), ("--ids-only", ["--ids-only"])):
            output = b.out / "mine" / f"groups.{count}.{'ids' if extra else 'text'}.jsonl"
            output.parent.mkdir(exist_ok=True)
            b.measure("mine", variant, count, "queries",
                      b.rankkit("mine", "--run", run, "--qrels", qrels, "--topics", topics, "--corpus", corpus,
                                "--output", output, "--depth", 100, "--negatives", 7, *extra), disk=output)


def train(b: Bench) -> None:
    tiny = b.tiny()
    size = b.n(1_000_000)
    corpus = b.collection(size)
    folder = b.out / "train"
    folder.mkdir(exist_ok=True)
    common = ["--model", "mono", "--backbone", tiny, "--max-steps", 1, "--batch-size", 8, "--group-size", 8,
              "--device", "cpu", "--max-query-length", 16, "--max-doc-length", 96]
    group_sizes = (b.n(2000), b.n(12_000), b.n(60_000))
    triple_sizes = (b.n(8000), b.n(40_000), b.n(240_000))
    query_count = max(group_sizes[-1], b.n(100_000))
    queries, _ = b.queries(query_count, size, seed=3)
    series: list[tuple[str, Sequence[int], Callable[[int], tuple[Path, list[Any]]]]] = []

    def jsonl(n: int) -> tuple[Path, list[Any]]:
        path = folder / f"groups.{n}.jsonl"
        if not path.exists():
            synthetic.write_groups(path, n)
        return path, []

    def ids(n: int) -> tuple[Path, list[Any]]:
        path = folder / f"groups.{n}.ids.jsonl"
        if not path.exists():
            synthetic.write_groups(path, n, ids_only=True, collection_size=size)
        return path, ["--collection", corpus, "--queries", queries]

    def text_triples(n: int) -> tuple[Path, list[Any]]:
        path = folder / f"triples.{n}.tsv"
        if not path.exists():
            synthetic.write_text_triples(path, n)
        return path, []

    def id_triples(n: int) -> tuple[Path, list[Any]]:
        path = folder / f"qidpidtriples.{n}.tsv"
        if not path.exists():
            synthetic.write_id_triples(path, n, query_count, size)
        return path, ["--collection", corpus, "--queries", queries]

    series = [("JSONL groups, 8 passages", group_sizes, jsonl), ("ids-only groups, 8 passages", group_sizes, ids),
              ("text triples", triple_sizes, text_triples), ("qidpidtriples", triple_sizes, id_triples)]
    codes = b.codes()
    from rankkit.training.group_table import table_dir

    for variant, sizes, make in series:
        for n in sizes:
            path, extra = make(n)
            for code, src in codes:
                if code == "baseline" and variant.startswith("ids-only"):
                    continue  # the baseline has no ids-only groups
                output = folder / f"out.{code}.{path.name}"
                if output.exists() and b.done({"stage": "train", "variant": variant, "size": n, "code": code}) is None:
                    import shutil

                    shutil.rmtree(output)
                b.measure("train", variant, n, "groups" if "groups" in variant else "triples",
                          b.rankkit("train", "--train", path, *extra, *common, "--output", output),
                          disk=table_dir(path, b.out / "cache" / "groups") if code == "this" else None, src=src,
                          code=code)


def runs(b: Bench) -> None:
    size = b.n(1_000_000)
    codes = b.codes()
    for queries in (b.n(1000), b.n(3000), b.n(7000)):
        lines = queries * 1000
        first, second = b.run_file(queries, 1000, size, "a"), b.run_file(queries, 1000, size, "b")
        _, qrels = b.queries(queries, size, seed=4)
        for code, src in codes:
            b.measure("runs", "eval (nDCG@10, RR@10, AP, R@1000)", lines, "run lines",
                      b.rankkit("eval", first, "--qrels", qrels, "-o", b.out / "runs" / f"eval.{queries}.{code}.txt"),
                      src=src, code=code)
            b.measure("runs", "fuse (RRF of two runs)", lines, "run lines",
                      b.rankkit("fuse", first, second, "--method", "rrf", "-o", b.out / "runs" / f"fused.{queries}.{code}"),
                      src=src, code=code)
            b.measure("runs", "validate", lines, "run lines", b.rankkit("validate", first, "--quiet"), src=src, code=code)


def dense_encode(b: Bench) -> None:
    for count in (b.n(500), b.n(1000), b.n(2000)):
        corpus = b.data / f"encode.{count}.tsv"
        if not corpus.exists():
            with open(b.collection(b.n(100_000)), encoding="utf-8") as source, open(corpus, "w", encoding="utf-8") as out:
                for _, line in zip(range(count), source):
                    out.write(line)
        index = b.out / "dense-encode" / str(count)
        b.measure("dense-encode", "MiniLM, 256 tokens, threads 1", count, "passages",
                  b.rankkit("index", "--kind", "dense", "--model", "repbert", "--corpus", corpus, "--index", index,
                            "--threads", 1, "--force"), disk=index)


FAISS = """
import json, sys, time
import faiss, numpy as np
from rankkit.dense.faiss_index import TRAIN_POINTS_PER_LIST, effective_ivfpq, new_index
kind, size, queries, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
faiss.omp_set_num_threads(1)
rng = np.random.default_rng(0)
def unit(n):
    x = rng.standard_normal((n, 384), dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)
t0 = time.process_time()
if kind == "flat":
    index = new_index(384, "flat", 0, 16, 8)
else:
    lists, bits = effective_ivfpq(size, 1000, 8)
    index = new_index(384, "ivfpq", lists, 16, bits)
    index.train(unit(min(size, max(lists, 2 ** bits) * TRAIN_POINTS_PER_LIST)))
    faiss.extract_index_ivf(index).nprobe = 10
for start in range(0, size, 65536):
    index.add(unit(min(65536, size - start)))
t1 = time.process_time()
index.search(unit(queries), k)
t2 = time.process_time()
print(json.dumps({"build_cpu_s": round(t1 - t0, 2), "search_cpu_s": round(t2 - t1, 2)}))
"""


def faiss_stage(b: Bench) -> None:
    for kind in ("flat", "ivfpq"):
        for size in (b.n(100_000), b.n(300_000), b.n(1_000_000)):
            b.measure("faiss", f"{kind}: build + 1,000 queries x k 1000", size, "vectors",
                      b.python(FAISS, kind, size, b.n(1000), 1000))


def _tiny_checkpoint(b: Bench, model: str) -> Path:
    """A tiny checkpoint of ``model`` (one training step on synthetic groups)."""
    output = b.data / f"tiny-{model}"
    if not (output / "rankkit.json").exists():
        groups = b.data / "tiny-groups.jsonl"
        if not groups.exists():
            synthetic.write_groups(groups, 64)
        import subprocess

        subprocess.run(b.rankkit("train", "--model", model, "--train", groups, "--backbone", b.tiny(), "--max-steps", 1,
                                 "--batch-size", 4, "--group-size", 4, "--device", "cpu", "--max-doc-length", 96,
                                 "--output", output), check=True, env=b.env(), capture_output=True)
    return output


def rerank(b: Bench) -> None:
    checkpoint = _tiny_checkpoint(b, "mono")
    size = b.n(1_000_000)
    corpus = b.collection(size)
    for count in (b.n(200), b.n(1000), b.n(5000)):
        topics, _ = b.queries(count, size, seed=5)
        run = b.run_file(count, 20, size)
        b.measure("rerank", "tiny mono, depth 20", count, "queries",
                  b.rankkit("rerank", "--model", "mono", "--checkpoint", checkpoint, "--run", run, "--topics", topics,
                            "--corpus", corpus, "--output", b.out / "rerank" / f"run.{count}", "--depth", 20,
                            "--threads", 1))


def dense_search(b: Bench) -> None:
    checkpoint = _tiny_checkpoint(b, "repbert")
    passages = b.n(30_000)
    corpus = b.data / f"dense.{passages}.tsv"
    if not corpus.exists():
        with open(b.collection(b.n(100_000)), encoding="utf-8") as source, open(corpus, "w", encoding="utf-8") as out:
            for _, line in zip(range(passages), source):
                out.write(line)
    index = b.out / "dense-search" / "index"
    if not (index / "rankkit-index.json").exists():
        import subprocess

        subprocess.run(b.rankkit("index", "--kind", "dense", "--model", "repbert", "--checkpoint", checkpoint,
                                 "--corpus", corpus, "--index", index, "--threads", 1, "--force"),
                       check=True, env=b.env(), capture_output=True)
    for count in (b.n(1000), b.n(3000), b.n(10_000)):
        topics, _ = b.queries(count, b.n(100_000), seed=6)  # words of the collection the 30k passages come from
        for code, src in b.codes():
            b.measure("dense-search", f"tiny repbert, flat, {passages:,} passages, k 1000", count, "queries",
                      b.rankkit("retrieve", "--model", "repbert", "--index", index, "--topics", topics,
                                "--output", b.out / "dense-search" / f"run.{count}.{code}", "--k", 1000, "--threads", 1),
                      src=src, code=code)


RUNNERS: dict[str, Callable[[Bench], None]] = {
    "bm25-index": bm25_index, "bm25-retrieve": bm25_retrieve, "docstore": docstore, "mine": mine, "train": train,
    "runs": runs, "dense-encode": dense_encode, "faiss": faiss_stage, "rerank": rerank, "dense-search": dense_search,
}


# -- report ---------------------------------------------------------------------------------------

def exponent(sizes: Sequence[float], values: Sequence[float]) -> float | None:
    """Least-squares slope of log(value) on log(size)."""
    points = [(math.log(s), math.log(v)) for s, v in zip(sizes, values) if s > 0 and v > 0]
    if len(points) < 2:
        return None
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else None


def marginal_fit(sizes: Sequence[float], cpu: Sequence[float]) -> tuple[float, float, float] | None:
    """``(a, b, e)`` with ``cpu = a + b * size ** e`` through the three largest points: the growth
    exponent of the part of the cost that grows (a process's fixed start-up, imports, JVM or model
    loading, is ``a``). ``None`` when the cost does not grow (noise)."""
    (n1, n2, n3), (c1, c2, c3) = sizes[-3:], cpu[-3:]
    if not c3 > c2 > c1:
        return None
    target = (c3 - c2) / (c2 - c1)

    def ratio(e: float) -> float:
        return (n3 ** e - n2 ** e) / (n2 ** e - n1 ** e)

    low, high = 0.05, 3.0
    if not ratio(low) <= target <= ratio(high):
        e = low if target < ratio(low) else high
    else:
        for _ in range(60):
            mid = (low + high) / 2
            low, high = (mid, high) if ratio(mid) < target else (low, mid)
        e = (low + high) / 2
    b = (c3 - c2) / (n3 ** e - n2 ** e)
    return c3 - b * n3 ** e, b, e


#: For each stage: the MS MARCO size its series projects to, what that is, and whether --threads
#: spreads it over cores (the 16-core projection divides by 16 then: an upper bound).
TARGETS: dict[str, tuple[str, str, bool]] = {
    "bm25-index": ("passages", "8.8M passages", True),
    "bm25-retrieve": ("passages", "1,000 queries on 8.8M passages", True),
    "docstore": ("passages", "8.8M passages", False),
    "mine": ("train_queries", "502,939 queries", False),
    "dense-encode": ("passages", "8.8M passages", True),
    "faiss": ("passages", "8.8M vectors", True),
    "rerank": ("dev_queries", "6,980 queries", False),
    "dense-search": ("train_queries", "502,939 queries", False),
}


def target_of(stage: str, variant: str) -> tuple[int, str, bool]:
    if stage == "train":
        if "triples" in variant:
            return MSMARCO["triples"], "39.8M triples (triples.train.small)", False
        return MSMARCO["train_queries"], "502,939 groups", False
    if stage == "runs":
        return MSMARCO["train_run_lines"], "50.3M lines (502,939 queries x 100)", False
    key, label, parallel = TARGETS[stage]
    return MSMARCO[key], label, parallel


def fmt_time(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def bm25_notes(series: dict[tuple[str, str, str], list[dict[str, Any]]]) -> list[str]:
    """The cost per returned hit (k 1000 minus k 10) and what --threads 2 gives, on the largest collection."""
    def row(k: int, threads: int, code: str) -> dict[str, Any] | None:
        for (stage, variant, c), points in series.items():
            if stage == "bm25-retrieve" and c == code and variant.endswith(f"k {k}, threads {threads}"):
                return max(points, key=lambda p: p["size"])
        return None

    out = []
    for code in ("this", "baseline"):
        deep, shallow = row(1000, 1, code), row(10, 1, code)
        if deep and shallow and deep["size"] == shallow["size"]:
            queries = int(deep["variant"].split()[0])
            per_hit = (deep["cpu_s"] - shallow["cpu_s"]) / (queries * 990) * 1e6
            out.append(f"- {code}: CPU per returned hit {per_hit:.1f} us (k 1000 minus k 10, {deep['size']:,} passages); "
                       f"peak RSS at k 1000 {deep['rss_mb']} MB.")
    one, two = row(1000, 1, "this"), row(1000, 2, "this")
    if one and two:
        out.append(f"- --threads 2 (worker processes) vs 1 at k 1000: wall {one['wall_s']} -> {two['wall_s']} s "
                   f"({one['wall_s'] / two['wall_s']:.2f}x), CPU {one['cpu_s']} -> {two['cpu_s']} s; on two idle "
                   f"cores the wall time would be about the CPU over two: {one['cpu_s'] / (two['cpu_s'] / 2):.2f}x.")
    return out + [""] if out else []


def report(b: Bench) -> str:
    rows = b.results["rows"]
    m = b.results["machine"]
    lines = [f"# rankkit at scale ({m['date']})", "", f"Machine: {harness.machine_line(m)}.", "",
             "Command: `python bench/scale.py --output OUT" + (" --small" if b.small else "")
             + (f" --baseline-src {b.baseline}" if b.baseline else "") + "`", ""]
    series: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in rows:
        series.setdefault((row["stage"], row["variant"], row.get("code", "this")), []).append(row)
    for stage in STAGES:
        keys = [key for key in series if key[0] == stage]
        if not keys:
            continue
        lines += [f"## {stage}", "", "| variant | code | size | CPU s | wall s | peak RSS MB | disk MB | details |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        fits = []
        for key in keys:
            points = sorted(series[key], key=lambda r: r["size"])
            for r in points:
                details = ", ".join(f"{k} {v}" for k, v in r.get("phases", {}).items())
                if "peak_disk_mb" in r:
                    details = (details + ", " if details else "") + f"peak disk {r['peak_disk_mb']} MB"
                lines.append(f"| {key[1]} | {key[2]} | {r['size']:,} {r['unit']} | {r['cpu_s']} | {r['wall_s']} | "
                             f"{r['rss_mb']} | {r.get('disk_mb', '')} | {details} |")
            if len(points) >= 3:
                fits.append((key, points))
        lines.append("")
        if fits:
            lines += ["| variant | code | fixed CPU s | growth exponent | RSS growth MB per 1,000 | projection | "
                      "CPU, 1 core | CPU, 16 cores | peak RSS |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
            for key, points in fits:
                sizes = [float(p["size"]) for p in points]
                cpu = [float(p["cpu_s"]) for p in points]
                target, label, parallel = target_of(stage, key[1])
                if stage == "bm25-retrieve":  # per 1,000 queries; all training queries are 503x that
                    label += " (x503 for all training queries)"
                fit = marginal_fit(sizes, cpu)
                last = points[-1]
                if fit is None:
                    growth, projected = "flat", last["cpu_s"]
                    fixed = f"{min(cpu):.1f}"
                else:
                    a, slope, e = fit
                    growth, fixed = f"{e:.2f}", f"{a:.1f}"
                    projected = a + slope * target ** e
                per_unit = (points[-1]["rss_mb"] - points[-2]["rss_mb"]) / (points[-1]["size"] - points[-2]["size"])
                noise = 0.02 * points[-1]["rss_mb"] / (points[-1]["size"] - points[-2]["size"])
                if per_unit <= noise:
                    rss_growth, rss = "flat", f"{points[-1]['rss_mb'] / 1024:.2f} GB (flat)"
                else:
                    rss_growth = f"{per_unit * 1000:.2f}"
                    rss = f"{(points[-1]['rss_mb'] + per_unit * (target - points[-1]['size'])) / 1024:.1f} GB"
                lines.append(f"| {key[1]} | {key[2]} | {fixed} | {growth} | {rss_growth} | {label} | "
                             f"{fmt_time(projected)} | {fmt_time(projected / 16) if parallel else fmt_time(projected)} | "
                             f"{rss} |")
            lines.append("")
        if stage == "bm25-retrieve":
            lines += bm25_notes(series)
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--stages", type=harness.step_list(STAGES), default=list(STAGES))
    parser.add_argument("--baseline-src", type=Path, default=None,
                        help="another rankkit source tree (its parent of rankkit/) for before/after rows")
    parser.add_argument("--small", action="store_true", help="sizes ten times smaller (a quick check)")
    parser.add_argument("--nice", type=int, default=5)
    args = parser.parse_args(argv)
    bench = Bench(args.output, ROOT, args.baseline_src.resolve() if args.baseline_src else None, args.small, args.nice)
    started = time.perf_counter()
    for stage in args.stages:
        RUNNERS[stage](bench)
        harness.write_text(bench.out / "scale.md", report(bench))
    harness.write_text(bench.out / "scale.md", report(bench))
    print(f"scale: done in {fmt_time(time.perf_counter() - started)}; {bench.out / 'scale.md'}", file=sys.stderr)


if __name__ == "__main__":
    random.seed(0)
    main()
