"""Load test of ``rankkit serve`` on the loopback interface, beside infinity and a plain FastAPI + CrossEncoder.

Each system is started as a server process on 127.0.0.1, warmed up, then sent DL19 queries with their BM25 top
``--depth`` passages (bundled: examples/data/dl19) as request bodies, one request per query, from ``C`` client
threads with keep-alive connections, for each concurrency of ``--concurrency``; a level stops after ``--requests``
requests or ``--time-limit`` seconds, whichever comes first (bounded). Per level: throughput (pairs/s of answered
requests over the level's wall time), latency p50/p95/p99 of answered requests, 429s (and whether each carried
``Retry-After``), other errors, and the server's resident memory (its process tree, sampled every 0.25 s) before,
at the peak of and after the level. The scores of every system are compared with the first rankkit system's on
the same requests (largest absolute difference: a check that all systems run the same model).

Systems (``--systems``):

* ``rankkit`` rows from ``--rankkit LABEL=ARGS`` (repeatable; default ``rankkit-torch=--backend torch --precision
  fp32``): ``rankkit serve --model M --checkpoint CK ARGS``; its ``/metrics`` give the requests per dynamic batch;
* ``infinity``: ``infinity_emb v2`` (PyPI ``infinity-emb``, never a rankkit dependency: give its interpreter with
  ``--peer-python``), engine torch, the same model folder, ``--dtype float32``, ``raw_scores`` (no sigmoid);
* ``st-fastapi``: a plain FastAPI app around sentence-transformers' ``CrossEncoder`` (the model's logits), one
  ``predict`` per request in FastAPI's thread pool, no batching across requests (``--st-python``, default this
  interpreter: rankkit's ``bench`` extra has sentence-transformers, pyserini brings FastAPI).

``--overload-queue Q`` adds a phase: the first rankkit system again with ``--max-queue Q`` at the largest
concurrency, showing what happens above the queue's limit (429 with Retry-After, nothing else).

Set-up of the peer environment (once)::

    python3 -m venv /tmp/peer-infinity && /tmp/peer-infinity/bin/pip install torch==2.13.0 \\
        && /tmp/peer-infinity/bin/pip install -c <(echo torch==2.13.0) "infinity-emb[server,torch]"

A cross-encoder folder both serve (rankkit's mono is a BertForSequenceClassification folder)::

    python -c "import torch; torch.manual_seed(0); from rankkit.models import create_model; \\
      from rankkit.models.checkpoint import save_model; save_model(create_model('mono'), 'runs/serve/mono', {})"
    python bench/serve_load.py --checkpoint runs/serve/mono --systems rankkit,infinity,st-fastapi \\
        --peer-python /tmp/peer-infinity/bin/python --rankkit "rankkit-auto=" --overload-queue 8 \\
        --output runs/bench/serve
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import machine, machine_line, save_json, write_text

ROOT = Path(__file__).resolve().parents[1]
DL19 = ROOT / "examples" / "data" / "dl19"

ST_PEER = '''
import sys
import torch
import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel
from sentence_transformers import CrossEncoder

folder, port = sys.argv[1], int(sys.argv[2])
try:  # the logits, as rankkit scores (sentence-transformers >= 4; older: default_activation_function)
    model = CrossEncoder(folder, device="cpu", activation_fn=torch.nn.Identity())
except TypeError:
    model = CrossEncoder(folder, device="cpu", default_activation_function=torch.nn.Identity())
app = FastAPI()


class Body(BaseModel):
    query: str
    texts: list[str]


@app.get("/health")
def health():
    return {"status": "ok"}


@app.post("/rerank")
def rerank(body: Body):
    scores = model.predict([(body.query, t) for t in body.texts], batch_size=32, show_progress_bar=False)
    order = sorted(range(len(scores)), key=lambda i: -float(scores[i]))
    return [{"index": i, "score": float(scores[i])} for i in order]


uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
'''


# -- data ---------------------------------------------------------------------------------------------------
def requests_of(data: Path, depth: int) -> list[tuple[str, str, list[str]]]:
    """``(qid, query, passages)``: each DL19 query with its BM25 top ``depth``, in BM25 order."""
    from rankkit.docstore import open_docstore
    from rankkit.formats import read_run, read_topics
    from rankkit.formats.sources import resolve_corpus

    run = read_run(data / "runs" / "BM25.dl19.txt")
    topics = read_topics(data / "topics.dl19-passage.txt")
    heads = {qid: sorted(docs, key=lambda d: (-docs[d], d))[:depth] for qid, docs in sorted(run.items())}
    with open_docstore(corpus=resolve_corpus(data / "passages.dl19-pool.tsv.gz")) as store:
        passages = store.get_many(sorted({d for head in heads.values() for d in head}))
    return [(qid, topics[qid], [passages[d] for d in head]) for qid, head in heads.items()]


# -- servers ------------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    label: str
    kind: str  # rankkit | infinity | st-fastapi
    process: subprocess.Popen[bytes]
    port: int
    log: Path
    served: str = "model"

    def body(self, query: str, texts: list[str]) -> bytes:
        if self.kind == "infinity":
            return json.dumps({"query": query, "documents": texts, "raw_scores": True, "model": self.served}).encode()
        return json.dumps({"query": query, "texts": texts}).encode()

    def scores(self, reply: Any, count: int) -> list[float]:
        results = reply["results"] if isinstance(reply, dict) else reply
        key = "relevance_score" if self.kind == "infinity" else "score"
        out = [float("nan")] * count
        for r in results:
            out[r["index"]] = float(r[key])
        return out

    def stop(self) -> int | None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(120)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(30)
        return self.process.returncode


def start(kind: str, label: str, args: argparse.Namespace, extra: list[str], workdir: Path) -> Server:
    port = free_port()
    log = workdir / f"{label}.log"
    env = dict(os.environ)
    if kind == "rankkit":
        command = [sys.executable, "-m", "rankkit", "serve", "--model", args.model, "--checkpoint", str(args.checkpoint),
                   "--port", str(port), "--served-model-name", "model", *extra]
    elif kind == "infinity":
        if not args.peer_python:
            raise SystemExit("serve_load.py: the infinity system needs --peer-python (see the module doc)")
        env["HF_HUB_OFFLINE"] = "1"
        command = [args.peer_python, "-m", "infinity_emb.cli", "v2", "--model-id", str(args.checkpoint),
                   "--served-model-name", "model", "--port", str(port), "--host", "127.0.0.1", "--engine", "torch",
                   "--device", "cpu", "--dtype", "float32", "--batch-size", "32", "--no-bettertransformer",
                   "--log-level", "warning", *extra]
    else:
        script = workdir / "st_fastapi_peer.py"
        script.write_text(ST_PEER, encoding="utf-8")
        command = [args.st_python or sys.executable, str(script), str(args.checkpoint), str(port), *extra]
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    server = Server(label, kind, process, port, log)
    deadline = time.monotonic() + args.start_timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"serve_load.py: {label} exited with {process.returncode}; its log: {log}\n"
                             + log.read_text(errors="replace")[-3000:])
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                conn.close()
                return server
            conn.close()
        except OSError:
            pass
        time.sleep(0.5)
    server.stop()
    raise SystemExit(f"serve_load.py: {label} did not answer /health within {args.start_timeout} s; its log: {log}")


def tree_rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its descendants, in MB."""
    total, todo, seen = 0.0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
            for task in Path(f"/proc/{p}/task").iterdir():
                children = (task / "children").read_text().split()
                todo += [int(c) for c in children]
        except (OSError, ValueError):
            continue
    return total


class Sampler:
    """The server's memory every 0.25 s while the bench runs."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), tree_rss_mb(self.pid)))
            self._stop.wait(0.25)

    def between(self, start: float, end: float) -> list[float]:
        """Samples from the last one before ``start`` to the first one after ``end``."""
        samples = list(self.samples)
        first = max([i for i, (t, _) in enumerate(samples) if t <= start], default=0)
        last = min([i for i, (t, _) in enumerate(samples) if t >= end], default=len(samples) - 1)
        return [mb for _, mb in samples[first:last + 1]]

    def stop(self) -> None:
        time.sleep(0.3)  # one sample after the last level
        self._stop.set()
        self._thread.join(5)


# -- load ---------------------------------------------------------------------------------------------------
@dataclass
class Outcome:
    index: int
    status: int | None
    seconds: float
    retry_after: str | None = None
    error: str | None = None
    scores: list[float] | None = None


@dataclass
class Level:
    concurrency: int
    outcomes: list[Outcome] = field(default_factory=list)
    wall: float = 0.0
    started: float = 0.0
    ended: float = 0.0


def run_level(server: Server, requests: list[tuple[str, str, list[str]]], concurrency: int, count: int,
              time_limit: float, keep_scores: bool) -> Level:
    """``count`` requests (cycling through ``requests``) from ``concurrency`` threads, or until ``time_limit``."""
    bodies = [server.body(query, texts) for _, query, texts in requests]
    level = Level(concurrency)
    lock = threading.Lock()
    counter = iter(range(count))
    deadline = time.monotonic() + time_limit

    def worker() -> None:
        conn: http.client.HTTPConnection | None = None
        while time.monotonic() < deadline:
            with lock:
                i = next(counter, None)
            if i is None:
                break
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300)
            started = time.perf_counter()
            try:
                conn.request("POST", "/rerank", body=bodies[i % len(bodies)],
                             headers={"Content-Type": "application/json"})
                response = conn.getresponse()
                data = response.read()
                seconds = time.perf_counter() - started
                outcome = Outcome(i, response.status, seconds, response.getheader("Retry-After"))
                if response.status == 200:
                    if keep_scores:
                        outcome.scores = server.scores(json.loads(data), len(requests[i % len(requests)][2]))
                else:
                    outcome.error = data[:200].decode(errors="replace")
                if response.getheader("Connection", "").lower() == "close" or response.status >= 400:
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException) as err:
                outcome = Outcome(i, None, time.perf_counter() - started, error=f"{type(err).__name__}: {err}")
                conn.close()
                conn = None
            with lock:
                level.outcomes.append(outcome)
        if conn is not None:
            conn.close()

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    level.started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    level.ended = time.monotonic()
    level.wall = level.ended - level.started
    return level


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def metrics_of(server: Server) -> dict[str, float]:
    """rankkit's /metrics counters that tell how requests were batched."""
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
        conn.close()
    except OSError:
        return {}
    out = {}
    for name in ("rankkit_serve_batch_requests_sum", "rankkit_serve_batch_requests_count", "rankkit_serve_tokens_total",
                 "rankkit_serve_model_seconds_total"):
        match = re.search(rf"^{name} ([0-9.e+]+)$", text, re.M)
        if match:
            out[name] = float(match.group(1))
    return out


def summarise(level: Level, requests: list[tuple[str, str, list[str]]], sampler: Sampler, before: dict[str, float],
              after: dict[str, float]) -> dict[str, Any]:
    ok = [o for o in level.outcomes if o.status == 200]
    pairs = sum(len(requests[o.index % len(requests)][2]) for o in ok)
    latencies = [o.seconds for o in ok]
    rejected = [o for o in level.outcomes if o.status == 429]
    errors = [o for o in level.outcomes if o.status not in (200, 429)]
    memory = sampler.between(level.started, level.ended)
    row: dict[str, Any] = {
        "concurrency": level.concurrency, "requests": len(level.outcomes), "ok": len(ok), "rejected_429": len(rejected),
        "rejected_with_retry_after": sum(1 for o in rejected if o.retry_after), "errors": len(errors),
        "error_examples": sorted({(o.error or str(o.status))[:160] for o in errors})[:3],
        "wall_s": round(level.wall, 3), "pairs_per_s": round(pairs / level.wall, 1) if level.wall else None,
        "requests_per_s": round(len(ok) / level.wall, 2) if level.wall else None,
        "p50_s": percentile(latencies, 50), "p95_s": percentile(latencies, 95), "p99_s": percentile(latencies, 99),
        "rss_mb_start": round(memory[0], 1) if memory else None, "rss_mb_peak": round(max(memory), 1) if memory else None,
        "rss_mb_end": round(memory[-1], 1) if memory else None,
    }
    count = after.get("rankkit_serve_batch_requests_count", 0) - before.get("rankkit_serve_batch_requests_count", 0)
    if count:
        summed = after["rankkit_serve_batch_requests_sum"] - before.get("rankkit_serve_batch_requests_sum", 0)
        row["requests_per_batch"] = round(summed / count, 2)
        seconds = after["rankkit_serve_model_seconds_total"] - before.get("rankkit_serve_model_seconds_total", 0)
        tokens = after["rankkit_serve_tokens_total"] - before.get("rankkit_serve_tokens_total", 0)
        row["model_tokens_per_s"] = round(tokens / seconds) if seconds else None
    return row


def bench_system(kind: str, label: str, extra: list[str], args: argparse.Namespace, requests: list[Any],
                 workdir: Path, levels: list[int], reference: dict[int, list[float]] | None) -> dict[str, Any]:
    print(f"==> {label}: starting", file=sys.stderr, flush=True)
    server = start(kind, label, args, extra, workdir)
    sampler = Sampler(server.process.pid)
    result: dict[str, Any] = {"system": label, "kind": kind, "args": extra, "levels": []}
    try:
        warm = run_level(server, requests, min(2, max(levels)), args.warmup, 600, keep_scores=False)
        result["warmup_errors"] = sum(1 for o in warm.outcomes if o.status != 200)
        for concurrency in levels:
            before = metrics_of(server) if kind == "rankkit" else {}
            level = run_level(server, requests, concurrency, args.requests, args.time_limit,
                              keep_scores=concurrency == levels[0])
            after = metrics_of(server) if kind == "rankkit" else {}
            row = summarise(level, requests, sampler, before, after)
            if concurrency == levels[0]:
                scored = {o.index % len(requests): o.scores for o in level.outcomes if o.scores is not None}
                result["scores"] = scored
                if reference is not None:
                    diffs = [abs(a - b) for i, s in scored.items() if i in reference for a, b in zip(s, reference[i])]
                    row["max_abs_score_diff_vs_reference"] = max(diffs) if diffs else None
            result["levels"].append(row)
            print(f"    c={concurrency}: {row['ok']}/{row['requests']} ok, {row['pairs_per_s']} pairs/s, "
                  f"p99 {row['p99_s']}, 429 {row['rejected_429']}, errors {row['errors']}, "
                  f"rss {row['rss_mb_start']}->{row['rss_mb_end']} MB", file=sys.stderr, flush=True)
    finally:
        sampler.stop()
        result["exit_code"] = server.stop()
        result["rss_mb_samples"] = [round(mb, 1) for _, mb in sampler.samples[:: max(1, len(sampler.samples) // 200)]]
        result["log_tail"] = server.log.read_text(errors="replace")[-1500:]
    return result


# -- report -------------------------------------------------------------------------------------------------
def markdown(results: dict[str, Any]) -> str:
    lines = [f"`{results['command']}`", "", f"Machine: {machine_line(results['machine'])}; {results['machine']['date']}.",
             f"Requests: DL19 queries with their BM25 top {results['depth']} as bodies, {results['requests']} a level "
             f"(or {results['time_limit']:g} s).", "",
             "| system | concurrency | ok / sent | pairs/s | p50 s | p95 s | p99 s | 429 (Retry-After) | errors | "
             "requests/batch | RSS MB start -> peak -> end | max abs score diff |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]

    def num(value: Any, digits: int = 3) -> str:
        return "-" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)

    for system in results["systems"]:
        for row in system["levels"]:
            lines.append(
                f"| {system['system']} | {row['concurrency']} | {row['ok']} / {row['requests']} | "
                f"{num(row['pairs_per_s'], 1)} | {num(row['p50_s'])} | {num(row['p95_s'])} | {num(row['p99_s'])} | "
                f"{row['rejected_429']} ({row['rejected_with_retry_after']}) | {row['errors']} | "
                f"{num(row.get('requests_per_batch'), 2)} | {num(row['rss_mb_start'], 0)} -> {num(row['rss_mb_peak'], 0)} -> "
                f"{num(row['rss_mb_end'], 0)} | {num(row.get('max_abs_score_diff_vs_reference'), 7)} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--model", default="mono")
    parser.add_argument("--checkpoint", type=Path, required=True, help="a model folder every system can load")
    parser.add_argument("--data", type=Path, default=DL19, help="a folder like examples/data/dl19")
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument("--requests", type=int, default=86, help="requests a level at most (86: every DL19 query twice)")
    parser.add_argument("--time-limit", type=float, default=300.0, help="seconds a level at most")
    parser.add_argument("--warmup", type=int, default=4, help="requests sent before the levels")
    parser.add_argument("--systems", default="rankkit,infinity,st-fastapi")
    parser.add_argument("--rankkit", action="append", default=[], metavar="LABEL=ARGS",
                        help="a rankkit serve system: its label and extra options (repeatable)")
    parser.add_argument("--peer-python", help="the interpreter of the environment with infinity-emb")
    parser.add_argument("--st-python", help="the interpreter for the FastAPI + CrossEncoder peer [this one]")
    parser.add_argument("--overload-queue", type=int, help="also run the first rankkit system with --max-queue Q at "
                                                           "the largest concurrency")
    parser.add_argument("--overload-args", default="", help="more options for that overload server")
    parser.add_argument("--start-timeout", type=float, default=600.0)
    parser.add_argument("--output", type=Path, default=Path("runs/bench/serve"))
    args = parser.parse_args()

    levels = [int(c) for c in args.concurrency.split(",")]
    requests = requests_of(args.data, args.depth)
    args.output.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="serve-load-", dir=args.output))
    rankkit_rows = args.rankkit or ["rankkit-torch=--backend torch --precision fp32"]
    results: dict[str, Any] = {"command": " ".join(["python", *sys.argv]), "machine": machine(torch_threads=True),
                               "depth": args.depth, "requests": args.requests, "time_limit": args.time_limit,
                               "queries": len(requests), "systems": []}
    with open("/proc/loadavg") as handle:
        results["loadavg_before"] = handle.read().strip()
    reference: dict[int, list[float]] | None = None
    for kind in args.systems.split(","):
        plans = [(spec.split("=", 1)[0], spec.split("=", 1)[1].split()) for spec in rankkit_rows] \
            if kind == "rankkit" else [(kind, [])]
        for label, extra in plans:
            result = bench_system(kind, label, extra, args, requests, workdir, levels, reference)
            if reference is None:
                reference = result.get("scores")
            result.pop("scores", None)
            results["systems"].append(result)
            save_json(args.output / "results.json", results)
    if args.overload_queue:
        label, extra = rankkit_rows[0].split("=", 1)[0], rankkit_rows[0].split("=", 1)[1].split()
        extra = [*extra, "--max-queue", str(args.overload_queue), *args.overload_args.split()]
        result = bench_system("rankkit", f"{label} --max-queue {args.overload_queue}", extra, args, requests, workdir,
                              [max(levels)], None)
        result.pop("scores", None)
        results["systems"].append(result)
    with open("/proc/loadavg") as handle:
        results["loadavg_after"] = handle.read().strip()
    save_json(args.output / "results.json", results)
    write_text(args.output / "results.md", markdown(results))
    print(markdown(results))


if __name__ == "__main__":
    main()

