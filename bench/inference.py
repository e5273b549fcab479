#!/usr/bin/env python
"""CPU inference backends: rankkit torch / onnx / onnx-int8 / openvino (fp32, bf16, int8) against sentence-transformers.

    python bench/inference.py --output runs/bench-inference                 # every step
    python bench/inference.py --output runs/bench-inference --steps rerank  # one step again

Steps (``--steps``, in this order by default):

``mono``: the trained ``mono`` the re-ranking rows use: unless ``--mono CHECKPOINT`` is given,
BM25 over the bundled DL20 pool, ``rankkit mine`` (judged rel >= 2 positives, 30 random BM25
negatives), ``rankkit train --model mono`` (cross-encoder on the packaged MiniLM, ``--mono-steps`` steps of
4 groups of 5; DL20 only: DL19 is never trained or tuned on). Reused when the checkpoint exists.

``rerank``: DL19's BM25 top-100 (43 queries x 100 = 4,300 pairs, ``examples/data/dl19``) re-ranked
by the zero-shot bi-encoder (``repbert``: the packaged all-MiniLM-L6-v2, cosine) and by the trained
``mono``, each through ``rerank_scores`` in chunks of ~1024 pairs as ``rankkit rerank`` does, on
``--backend torch``, ``onnx``, ``onnx --quantize int8``, ``openvino``, ``openvino --precision bf16``
and ``openvino --quantize int8`` (NNCF static int8; with and without ``--precision bf16`` for the
operations it leaves in float); then sentence-transformers on the
same weights and inputs: ``SentenceTransformer(backend="torch")`` (the same MiniLM folder) and
``CrossEncoder(backend="torch")`` on the mono checkpoint itself (``--hf-head``, the default, saves a
``BertForSequenceClassification`` folder; a ``--rankkit-head`` mono is written as one with its pooler
set to ``0.001 I`` and the classifier to ``1000 w``, so that ``tanh(0.001 h) * 1000 w`` = mono's
``w . h`` to ~1e-5 relative: same encoder, same scores). Pairs/s = pairs / wall seconds of
the scoring call (model loading and the one-time ONNX export excluded; ``set-up s`` is loading
the model and the backend's set-up: hashing the weights, export and check or cache lookup, session creation),
DL19 nDCG@10 of each run (rankkit's evaluation; DL19 is only evaluated).

``encode``: texts/s encoding the first ``--encode-passages`` passages of the DL19 pool (batch
``--batch-size``) with the zero-shot bi-encoder on each backend and with
``SentenceTransformer.encode``; cosine of every vector to rankkit's torch fp32 vector.

``peers`` (with ``--peer-python``): sentence-transformers' ``backend="onnx"``, ONNX-int8,
``"openvino"`` and OpenVINO-int8 on the same weights and inputs. They load through optimum-onnx
(transformers < 4.58) and optimum-intel (transformers < 5.6), which cannot be installed beside
rankkit's stack, so each runs in a peer environment given by ``--peer-python SYSTEMS=PYTHON`` (e.g.
``onnx,onnx-int8=/tmp/peer-onnx/bin/python``; ``bench/st_backends.py`` is the script they run, its
doc says how each system is built), one after the other in this same run; their scores are
evaluated and their vectors compared here. ``make peers`` style set-up::

    python -m venv /tmp/peer-onnx && /tmp/peer-onnx/bin/pip install torch==2.13.0 \
        "transformers<4.58" "sentence-transformers<6" "optimum-onnx[onnxruntime]==0.1.0"
    python -m venv /tmp/peer-ov && /tmp/peer-ov/bin/pip install torch==2.13.0 "transformers<5.6" \
        sentence-transformers "optimum-intel[openvino]==2.2.0" && /tmp/peer-ov/bin/pip uninstall -y torchvision

(the PyPI torchvision that optimum-intel pulls in does not load with the CPU torch build, and text
models do not need it).

Everything else runs in this one process, one system after the other (``--threads`` intra-op
threads for every system); writes ``results.md``, ``results.json`` and ``commands.sh``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import harness
from harness import ROOT, Steps

DL19 = ROOT / "examples" / "data" / "dl19"
DL20 = ROOT / "examples" / "data" / "dl20"
STEPS = ("mono", "rerank", "encode", "peers")
BACKENDS = {"torch": ("torch", "none", "fp32"), "onnx": ("onnx", "none", "fp32"), "onnx-int8": ("onnx", "int8", "fp32"),
            "onnx-int8-u8": ("onnx", "int8-u8", "fp32"),
            "openvino": ("openvino", "none", "fp32"), "openvino-bf16": ("openvino", "none", "bf16"),
            "openvino-int8": ("openvino", "int8", "fp32"), "openvino-int8-bf16": ("openvino", "int8", "bf16"),
            "auto": ("auto", "auto", "auto")}
MONO_TRAIN = ["--group-size", "5", "--lr", "2e-5", "--batch-size", "4", "--seed", "0", "--device", "cpu",
              "--precision", "fp32"]  # the same weights on every CPU (auto would train in bf16 where it is native)
#: Near-identity pooler of the CrossEncoder copy of mono: tanh(EPS * h) / EPS = h (1 - (EPS h)^2 / 3 ...).
EPS = 1e-3
#: DL20 passages the OpenVINO-int8 peer is calibrated on (DL19 is never tuned on).
CALIBRATION_TEXTS = 300


# -- data ----------------------------------------------------------------------------------------

def dl19_candidates(depth: int, queries: int | None) -> tuple[list[str], list[str], list[list[str]], list[list[str]]]:
    """``(qids, query texts, candidate docids, candidate texts)`` of DL19's BM25 top ``depth``."""
    from rankkit.docstore import open_docstore
    from rankkit.formats import read_topics
    from rankkit.formats.runs import iter_run_queries

    topics = read_topics(DL19 / "topics.dl19-passage.txt")
    qids, texts, docids, passages = [], [], [], []
    with open_docstore(corpus=DL19 / "passages.dl19-pool.tsv.gz") as store:
        for qid, ranking in iter_run_queries(DL19 / "runs" / "BM25.dl19.txt"):
            head = [d for d, _ in ranking[:depth]]
            found = store.get_many(head)
            qids.append(qid)
            texts.append(topics[qid])
            docids.append(head)
            passages.append([found[d] for d in head])
            if queries is not None and len(qids) == queries:
                break
    return qids, texts, docids, passages


def pool_passages(count: int, pool: Path = DL19 / "passages.dl19-pool.tsv.gz") -> list[str]:
    """The first ``count`` passages of a pool file (the DL19 pool by default), in file order."""
    import gzip

    out = []
    with gzip.open(pool, "rt", encoding="utf-8") as handle:
        for line in handle:
            out.append(line.rstrip("\n").split("\t", 1)[1])
            if len(out) == count:
                break
    return out


def chunks(sizes: Sequence[int], chunk_pairs: int = 1024) -> list[tuple[int, int]]:
    """Query ranges of about ``chunk_pairs`` pairs each (rankkit rerank's streaming chunks)."""
    out, start, pairs = [], 0, 0
    for i, size in enumerate(sizes):
        pairs += size
        if pairs >= chunk_pairs:
            out.append((start, i + 1))
            start, pairs = i + 1, 0
    if start < len(sizes):
        out.append((start, len(sizes)))
    return out


def ndcg10(qids: Sequence[str], docids: Sequence[Sequence[str]], scores: Sequence[Sequence[float]]) -> float:
    """DL19 nDCG@10 (trec_eval semantics, rankkit's evaluation) of one re-ranking."""
    from rankkit.evaluation import evaluate
    from rankkit.formats import read_qrels

    run = {q: {d: float(s) for d, s in zip(ds, ss)} for q, ds, ss in zip(qids, docids, scores)}
    result = evaluate({"run": run}, read_qrels(DL19 / "qrels.dl19-passage.txt"), ["nDCG@10"])
    return float(result.runs["run"].aggregates["nDCG@10"])


# -- systems -------------------------------------------------------------------------------------

def rankkit_model(name: str, checkpoint: Path | None, backend: str, threads: int, batch_size: int,
                  task: str = "rerank") -> tuple[Any, float, str]:
    """An inference session of a rankkit model on ``backend`` (on the CPU; ``batch_size`` rows a batch), the
    seconds loading it and its backend's set-up took, and the system's label (``auto`` names what it chose)."""
    from rankkit.runtime import InferenceSession, Runtime, load_for_inference

    engine, quantize, precision = BACKENDS[backend]
    started = time.perf_counter()
    loaded = load_for_inference(name, checkpoint, Runtime(engine, quantize, threads, precision), "cpu", task=task)
    ran = loaded.runtime
    label = f"rankkit {backend}" + (f" ({ran.backend}{'' if ran.quantize == 'none' else ' ' + ran.quantize} {ran.precision})"
                                    if backend == "auto" else "")
    return InferenceSession.of(loaded, batch_size=batch_size), time.perf_counter() - started, label


def interleaved_rounds(systems: dict[str, Callable[[], Any]], rounds: int) -> dict[str, dict[str, Any]]:
    """Each system's result, median wall seconds and median CPU seconds (user + sys of this process) over
    ``rounds`` rounds of one call each, systems in turn within a round (so load changes hit all alike)."""
    import statistics

    samples: dict[str, dict[str, Any]] = {name: {"wall": [], "cpu": []} for name in systems}
    for _ in range(rounds):
        for name, fn in systems.items():
            cpu, wall = time.process_time(), time.perf_counter()
            samples[name]["value"] = fn()
            samples[name]["wall"].append(time.perf_counter() - wall)
            samples[name]["cpu"].append(time.process_time() - cpu)
    return {name: {"value": s["value"], "seconds": statistics.median(s["wall"]), "cpu_s": statistics.median(s["cpu"]),
                   "rounds": [round(x, 3) for x in s["wall"]]} for name, s in samples.items()}


def crossencoder_folder(mono_checkpoint: Path, out: Path) -> Path | None:
    """The mono checkpoint as a ``BertForSequenceClassification`` folder: itself when it has the Hugging Face
    head (``--hf-head``, the default), else a copy with a near-identity pooler (module doc); None when mono is
    not a cross-encoder with a linear head (``--encoder bi``, ``--hidden``): CrossEncoder has no such model."""
    import torch
    from transformers import BertForSequenceClassification

    from rankkit.models.checkpoint import load_for_inference

    mono: Any = load_for_inference("mono", mono_checkpoint)
    if mono.hf_head:  # trained with --hf-head (the default): the checkpoint is a CrossEncoder folder already
        return mono_checkpoint
    if mono.config.encoder != "cross" or not isinstance(mono.head, torch.nn.Linear):
        return None
    if (out / "config.json").is_file():
        return out
    encoder = mono.pairs.encoder
    config = encoder.config
    config.num_labels = 1
    model = BertForSequenceClassification(config)
    model.bert.load_state_dict(encoder.state_dict(), strict=False)
    head = mono.head
    with torch.no_grad():
        model.bert.pooler.dense.weight.copy_(torch.eye(config.hidden_size) * EPS)
        model.bert.pooler.dense.bias.zero_()
        model.classifier.weight.copy_(head.weight / EPS)
        model.classifier.bias.copy_(head.bias)
    model.save_pretrained(str(out))
    mono.tokenizer.save_pretrained(str(out))
    return out


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - started


def rerank_step(args: argparse.Namespace, section: dict[str, Any]) -> dict[str, Any]:
    import torch

    torch.set_num_threads(args.threads)
    qids, queries, docids, passages = dl19_candidates(args.depth, args.queries)
    pairs = sum(len(p) for p in passages)
    parts = chunks([len(p) for p in passages])
    # Rows of models not measured this time are kept (the models can be measured in separate runs).
    rows: list[dict[str, Any]] = [r for r in section.get("rows", []) if r["model"] not in args.models]
    uptimes: dict[str, Any] = {k: v for k, v in section.get("uptime", {}).items() if k not in args.models}

    def record(model: str, system: str, scores: list[list[float]], seconds: float, **extra: Any) -> None:
        row = {"model": model, "system": system, "pairs": pairs, "seconds": seconds,
               "pairs_per_s": pairs / seconds, "ndcg10": ndcg10(qids, docids, scores), **extra}
        rows.append(row)
        print(f"    {model:5} {system:32} {row['pairs_per_s']:7.1f} pairs/s  nDCG@10 {row['ndcg10']:.4f}",
              file=sys.stderr, flush=True)

    for model_name, checkpoint in (("bi", None), ("mono", args.mono)):
        if model_name not in args.models:
            continue
        before = os.popen("uptime").read().strip()
        name = "repbert" if model_name == "bi" else "mono"
        systems, setups = {}, {}
        for backend in args.systems:
            session, export_s, label = rankkit_model(name, checkpoint, backend, args.threads, args.batch_size)
            session.scores(queries[:1], [passages[0][:8]])  # warm-up

            def score(session: Any = session) -> list[list[float]]:
                out: list[list[float]] = []
                for a, b in parts:
                    out += [s.tolist() for s in session.scores(queries[a:b], passages[a:b])]
                return out

            systems[label], setups[label] = score, export_s
        for label, measured in interleaved_rounds(systems, args.rounds).items():
            record(model_name, label, measured["value"], measured["seconds"], export_s=setups[label],
                   cpu_s=measured["cpu_s"], rounds=measured["rounds"])
        del systems
        if model_name == "bi":
            from sentence_transformers import SentenceTransformer

            st = SentenceTransformer(str(default_backbone()), device="cpu", backend="torch")
            st.encode(queries[:1])

            def st_score(st: Any = st) -> list[list[float]]:
                out: list[list[float]] = []
                for a, b in parts:
                    q = st.encode(queries[a:b], batch_size=args.batch_size, convert_to_tensor=True)
                    flat = [t for p in passages[a:b] for t in p]
                    d = st.encode(flat, batch_size=args.batch_size, convert_to_tensor=True)
                    start = 0
                    for i, p in enumerate(passages[a:b]):
                        out.append((d[start:start + len(p)] @ q[i]).tolist())
                        start += len(p)
                return out

            scores, seconds = timed(st_score)
            record(model_name, "sentence-transformers torch", scores, seconds)
        elif (folder := crossencoder_folder(args.mono, args.output / "mono-as-crossencoder")) is None:
            print(f"    {args.mono}: not a cross-encoder with a linear head: no CrossEncoder row", flush=True)
        else:
            from sentence_transformers import CrossEncoder

            max_length = int(load_max_length(args.mono))
            ce = CrossEncoder(str(folder), num_labels=1, max_length=max_length, device="cpu", backend="torch",
                              activation_fn=torch.nn.Identity())
            ce.predict([(queries[0], passages[0][0])])

            def ce_score(ce: Any = ce) -> list[list[float]]:
                out: list[list[float]] = []
                for a, b in parts:
                    flat = [(q, t) for q, p in zip(queries[a:b], passages[a:b]) for t in p]
                    s = ce.predict(flat, batch_size=args.batch_size, show_progress_bar=False)
                    start = 0
                    for p in passages[a:b]:
                        out.append([float(x) for x in s[start:start + len(p)]])
                        start += len(p)
                return out

            scores, seconds = timed(ce_score)
            record(model_name, "sentence-transformers CrossEncoder torch", scores, seconds)
        uptimes[model_name] = [before, os.popen("uptime").read().strip()]
    return {"rows": rows, "pairs": pairs, "queries": len(qids), "uptime": uptimes,
            "machine": harness.machine(torch_threads=True)}


def encode_step(args: argparse.Namespace, section: dict[str, Any]) -> dict[str, Any]:
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(args.threads)
    texts = pool_passages(args.encode_passages)
    rows: list[dict[str, Any]] = []
    uptime = os.popen("uptime").read().strip()
    reference = None
    systems, setups = {}, {}
    for backend in args.systems:
        session, export_s, label = rankkit_model("repbert", None, backend, args.threads, args.batch_size, task="encode")
        session.encode(texts[:8], is_query=False)
        systems[label] = lambda session=session: session.encode(texts, is_query=False)
        setups[label] = export_s
    for label, measured in interleaved_rounds(systems, args.rounds).items():
        vectors, seconds = measured["value"], measured["seconds"]
        if reference is None:
            reference = vectors
            import numpy as np

            np.save(args.output / "encode-rankkit-torch.npy", vectors.float().numpy())
        rows.append({"system": label, "seconds": seconds, "texts_per_s": len(texts) / seconds, "cpu_s": measured["cpu_s"],
                     "rounds": measured["rounds"], "export_s": setups[label], **cosines(vectors, reference)})
        print(f"    {rows[-1]['system']:32} {rows[-1]['texts_per_s']:7.1f} texts/s", file=sys.stderr, flush=True)
    del systems
    st = SentenceTransformer(str(default_backbone()), device="cpu", backend="torch")
    st.encode(texts[:8])
    vectors, seconds = timed(lambda: st.encode(texts, batch_size=args.batch_size, convert_to_tensor=True))
    rows.append({"system": "sentence-transformers torch", "seconds": seconds, "texts_per_s": len(texts) / seconds,
                 **cosines(vectors.float().cpu(), reference)})
    print(f"    {rows[-1]['system']:32} {rows[-1]['texts_per_s']:7.1f} texts/s", file=sys.stderr, flush=True)
    return {"rows": rows, "texts": len(texts), "uptime_before": uptime, "uptime_after": os.popen("uptime").read().strip()}


def peers_step(args: argparse.Namespace, section: dict[str, Any]) -> dict[str, Any]:
    """sentence-transformers' ONNX / OpenVINO backends in their peer environments (module doc)."""
    import subprocess

    import numpy as np
    import torch

    if not args.peer_python:
        raise SystemExit("inference.py: the peers step needs --peer-python SYSTEMS=PYTHON (see the module doc)")
    qids, queries, docids, passages = dl19_candidates(args.depth, args.queries)
    pairs = sum(len(p) for p in passages)
    texts = pool_passages(args.encode_passages)
    reference_path = args.output / "encode-rankkit-torch.npy"
    if not reference_path.is_file():
        raise SystemExit(f"inference.py: {reference_path} is missing: run the encode step first")
    reference = torch.from_numpy(np.load(reference_path))
    ce_folder = crossencoder_folder(args.mono, args.output / "mono-as-crossencoder")  # None: no CrossEncoder twin
    job = {"threads": args.threads, "batch_size": args.batch_size,
           "tasks": ["bi", "mono", "encode"] if ce_folder else ["bi", "encode"], "bi_folder": str(default_backbone()),
           "ce_folder": str(ce_folder) if ce_folder else None,
           "ce_max_length": load_max_length(args.mono), "queries": queries, "passages": passages,
           "chunks": chunks([len(p) for p in passages]), "texts": texts,
           # The OpenVINO-int8 peer calibrates on DL20 (DL19 is never tuned on).
           "calibration": pool_passages(CALIBRATION_TEXTS, DL20 / "passages.dl20-pool.tsv.gz")}
    rows: list[dict[str, Any]] = []
    versions: dict[str, Any] = {}
    uptime = os.popen("uptime").read().strip()
    for spec in args.peer_python:
        systems, python = spec.split("=", 1)
        label = Path(python).parent.parent.name
        work = args.output / "peers" / label
        work.mkdir(parents=True, exist_ok=True)
        job_path, result_path = work / "job.json", work / "result.json"
        job_path.write_text(json.dumps({**job, "systems": systems.split(","), "work": str(work)}), encoding="utf-8")
        env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "HF_HUB_OFFLINE": "1",
               "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        print(f"==> peers {systems} ({python})", file=sys.stderr, flush=True)
        subprocess.run([python, str(Path(__file__).with_name("st_backends.py")), str(job_path), str(result_path)],
                       env=env, check=True)
        result = json.loads(result_path.read_text(encoding="utf-8"))
        versions[label] = result["versions"]
        for row in result["rows"]:
            system = f"sentence-transformers {row['system']}"
            if row.get("precision"):
                precision = row["precision"].replace("<Type: ", "").strip("'>")
                system += f" [{precision}]"
            out: dict[str, Any] = {"model": row["task"], "system": system, "env": label}
            if "error" in row:
                out["error"] = row["error"]
            elif row["task"] == "encode":
                vectors = torch.from_numpy(np.load(row["vectors"]))
                out.update(seconds=row["seconds"], texts_per_s=len(texts) / row["seconds"],
                           setup_s=row["setup_s"], **cosines(vectors, reference))
            else:
                out.update(pairs=pairs, seconds=row["seconds"], pairs_per_s=pairs / row["seconds"],
                           setup_s=row["setup_s"], ndcg10=ndcg10(qids, docids, row["scores"]))
            rows.append(out)
            speed = out.get("pairs_per_s") or out.get("texts_per_s")
            print(f"    {row['task']:6} {system:40} " + (f"{speed:7.1f}/s" if speed else out.get("error", "")),
                  file=sys.stderr, flush=True)
    return {"rows": rows, "versions": versions, "uptime_before": uptime,
            "uptime_after": os.popen("uptime").read().strip()}


def cosines(vectors: Any, reference: Any) -> dict[str, float]:
    import torch

    cos = torch.nn.functional.cosine_similarity(vectors.float(), reference.float(), dim=-1)
    return {"cosine_min": float(cos.min()), "cosine_mean": float(cos.mean())}


def default_backbone() -> Path:
    from rankkit.models.backbone import default_backbone_path

    return default_backbone_path()


def load_max_length(checkpoint: Path) -> int:
    from rankkit.models.checkpoint import load_for_inference

    model: Any = load_for_inference("mono", checkpoint)
    return int(model.pairs.max_length)


def mono_step(args: argparse.Namespace, steps: Steps) -> Path:
    """Train the cross-encoder mono on DL20 (see the module doc) unless it exists or ``--mono`` was given."""
    out = steps.out
    index = out / "index.dl20-pool"
    steps.rankkit("index dl20", ["index", "--kind", "bm25", "--corpus", DL20 / "passages.dl20-pool.tsv.gz",
                                 "--index", index, "--force"], [index / "rankkit-index.json"])
    bm25 = out / "bm25.dl20-pool.run"
    steps.rankkit("bm25 dl20", ["retrieve", "--model", "bm25", "--index", index, "--topics",
                                DL20 / "topics.dl20-judged.tsv", "--k", "100", "--output", bm25], [bm25])
    groups = out / "groups.dl20.jsonl"
    steps.rankkit("mine dl20", ["mine", "--run", bm25, "--qrels", DL20 / "qrels.dl20-passage.txt", "--topics",
                                DL20 / "topics.dl20-judged.tsv", "--index", index, "--min-rel", "2",
                                "--negatives", "30", "--strategy", "random", "--seed", "0", "--output", groups],
                  [groups])
    ck = out / "ck" / "mono.cross"
    steps.rankkit("train mono", ["train", "--model", "mono", "--train", groups, "--output", ck, *MONO_TRAIN,
                                 "--max-steps", args.mono_steps], [ck / "rankkit.json"])
    return ck


# -- report --------------------------------------------------------------------------------------

def report(results: dict[str, Any], args: argparse.Namespace) -> str:
    where = results.get("rerank", {}).get("machine") or harness.machine(torch_threads=True)
    lines = [f"### Inference backends ({where['date']}; {harness.machine_line(where)}; {args.threads} threads)", ""]
    rerank = results.get("rerank", {})
    peers = results.get("peers", {})
    peer_rows = [r for r in peers.get("rows", []) if "error" not in r]
    failed = [r for r in peers.get("rows", []) if "error" in r]
    if rerank.get("rows"):
        lines += [f"Re-ranking DL19's BM25 top-{args.depth} ({rerank['queries']} queries, {rerank['pairs']:,} pairs, "
                  f"batch {args.batch_size}, chunks of ~1024 pairs as `rankkit rerank`). `uptime` before / after: "
                  + "; ".join(f"{m}: `{b}` / `{a}`" for m, (b, a) in sorted(rerank.get("uptime", {}).items())) + ".", "",
                  "| model | system | pairs/s | x rankkit torch | x sentence-transformers torch | nDCG@10 | Δ nDCG@10 "
                  "| set-up s | CPU s (median) |",
                  "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for model in ("bi", "mono"):
            mine = [r for r in rerank["rows"] if r["model"] == model] + [r for r in peer_rows if r["model"] == model]
            base = next((r for r in mine if r["system"] == "rankkit torch"), None)
            if base is None:  # not measured (yet) in this output folder
                continue
            peer = next((r for r in mine if r["system"].startswith("sentence-transformers") and "env" not in r), None)
            label = "zero-shot bi-encoder (repbert)" if model == "bi" else f"mono ({args.mono.name})"
            for r in mine:
                vs_peer = f"{r['pairs_per_s'] / peer['pairs_per_s']:.2f}x" if peer else "-"
                setup = r.get("export_s") or r.get("setup_s")
                cpu = f"{r['cpu_s']:.1f}" if r.get("cpu_s") else "-"
                system = r["system"] + (f" ({r['env']})" if "env" in r else "")
                lines.append(f"| {label} | {system} | {r['pairs_per_s']:.1f} | "
                             f"{r['pairs_per_s'] / base['pairs_per_s']:.2f}x | {vs_peer} | {r['ndcg10']:.4f} | "
                             f"{r['ndcg10'] - base['ndcg10']:+.4f} | {f'{setup:.1f}' if setup else '-'} | {cpu} |")
            lines.append(fastest_line(label, mine, "pairs_per_s", base))
        lines.append("")
    encode = results.get("encode", {})
    if encode.get("rows"):
        rows = encode["rows"] + [r for r in peer_rows if r["model"] == "encode"]
        base = rows[0]
        peer = next(r for r in rows if r["system"].startswith("sentence-transformers") and "env" not in r)
        lines += [f"Encoding the first {encode['texts']:,} passages of the DL19 pool (zero-shot bi-encoder, "
                  f"batch {args.batch_size}). `uptime` before: `{encode['uptime_before']}`.", "",
                  "| system | texts/s | x rankkit torch | x sentence-transformers torch | cosine to torch fp32 (min / mean) |",
                  "| --- | ---: | ---: | ---: | ---: |"]
        for r in rows:
            system = r["system"] + (f" ({r['env']})" if "env" in r else "")
            lines.append(f"| {system} | {r['texts_per_s']:.1f} | {r['texts_per_s'] / base['texts_per_s']:.2f}x | "
                         f"{r['texts_per_s'] / peer['texts_per_s']:.2f}x | {r['cosine_min']:.4f} / "
                         f"{r['cosine_mean']:.4f} |")
        lines.append("")
    if peers:
        lines += ["Peer environments (bench/st_backends.py): " + "; ".join(
            f"{label}: " + ", ".join(f"{k} {v}" for k, v in versions.items() if v)
            for label, versions in peers.get("versions", {}).items())
            + f". `uptime` before / after the peers: `{peers['uptime_before']}` / `{peers['uptime_after']}`.", ""]
        for r in failed:
            lines.append(f"- {r['system']} ({r['model']}, {r['env']}) did not run: {r['error']}")
        if failed:
            lines.append("")
    else:
        lines += ["sentence-transformers' onnx / openvino backends: not measured in this run (no --peer-python).", ""]
    return "\n".join(lines)


def fastest_line(label: str, rows: list[dict[str, Any]], key: str, base: dict[str, Any]) -> str:
    """rankkit's fastest system within 0.005 nDCG@10 of torch fp32 against sentence-transformers' fastest."""
    ok = [r for r in rows if abs(r["ndcg10"] - base["ndcg10"]) <= 0.005]
    ours = max((r for r in ok if r["system"].startswith("rankkit")), key=lambda r: r[key])
    theirs = max((r for r in ok if r["system"].startswith("sentence-transformers")), key=lambda r: r[key], default=None)
    if theirs is None:
        return f"| {label} | fastest within 0.005 nDCG@10: {ours['system']} | | | | | | |"
    return (f"| {label} | fastest within 0.005 nDCG@10: {ours['system']} vs {theirs['system']} | "
            f"{ours[key] / theirs[key]:.2f}x | | | | | |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, default=ROOT / "runs" / "bench-inference")
    parser.add_argument("--steps", type=harness.step_list(STEPS), default=list(STEPS))
    parser.add_argument("--mono", type=Path, default=None, help="trained mono checkpoint (default: train one on DL20)")
    parser.add_argument("--mono-steps", type=int, default=80, help="training steps of the DL20 mono")
    parser.add_argument("--models", type=lambda t: [m for m in t.split(",") if m], default=["bi", "mono"],
                        help="rerank step: bi and/or mono")
    parser.add_argument("--threads", type=int, default=2, help="intra-op threads of every system")
    parser.add_argument("--systems", type=lambda t: [b for b in t.split(",") if b], default=list(BACKENDS),
                        help=f"rankkit systems to measure, torch first (default: all of {','.join(BACKENDS)})")
    parser.add_argument("--rounds", type=int, default=1,
                        help="interleaved rounds: every system scores once per round, the median is reported")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--queries", type=int, default=None, help="first N DL19 queries only (default: all 43)")
    parser.add_argument("--encode-passages", type=int, default=1000)
    parser.add_argument("--peer-python", action="append", default=[], metavar="SYSTEMS=PYTHON",
                        help="peers step: sentence-transformers systems (torch, onnx, onnx-int8, openvino, "
                             "openvino-int8) to run with a peer interpreter; repeatable")
    args = parser.parse_args()
    steps = Steps(args.output, prog="inference.py")
    args.output = steps.out
    steps.commands.append(shlex.join([sys.executable, *sys.argv]))
    results_path = args.output / "results.json"
    results = harness.load_results(results_path)
    if args.mono is None:
        args.mono = args.output / "ck" / "mono.cross"
    todo: dict[str, Callable[[dict[str, Any]], dict[str, Any] | None]] = {
        "mono": lambda section: {"checkpoint": str(mono_step(args, steps))},
        "rerank": lambda section: rerank_step(args, section),
        "encode": lambda section: encode_step(args, section),
        "peers": lambda section: peers_step(args, section),
    }
    if not args.peer_python and "peers" in args.steps:
        args.steps = [s for s in args.steps if s != "peers"]
    if "mono" in args.steps and args.mono != args.output / "ck" / "mono.cross":
        args.steps = [s for s in args.steps if s != "mono"]
    harness.run_steps(args.steps, todo, results, lambda: harness.save_json(results_path, results))
    steps.write_commands(args.output / "commands.sh", f"bench/inference.py, {harness.machine()['date']}")
    text = report(results, args)
    harness.write_text(args.output / "results.md", text)
    print(text)
    json.dumps(results)  # results.json is written after every step by run_steps


if __name__ == "__main__":
    main()
