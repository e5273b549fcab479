#!/usr/bin/env python
"""Probe (issue 16): NNCF static int8 of rankkit's own eager-attention ONNX exports on OpenVINO's CPU plug-in.

    PEER_PYTHON bench/probes/openvino_static_int8.py MONO_CHECKPOINT MONO_FP32_ONNX MINILM_FOLDER MINILM_FP32_ONNX

Runs in the peer environment of bench/inference.py's OpenVINO rows (openvino + nncf; rankkit does
not depend on NNCF yet). For a trained ``mono`` (cross-encoder; its export outputs the score) and the
packaged MiniLM (its export outputs hidden states, mean-pooled here): OpenVINO fp32, bf16, and NNCF
post-training static int8 (``ModelType.TRANSFORMER``, 300 calibration inputs: DL20 pool passages,
paired with DL20 queries for the cross-encoder; DL19 is never tuned on) at f32 and bf16 inference
precision, timed on the first 640 DL19 pool passages (paired with DL19 queries for the
cross-encoder), length-sorted batches of 32, 2 threads, best of 3; agreement with fp32 as score
correlation / pooled-vector cosine. The exports are the ``*.fp32.onnx`` files rankkit caches
(``~/.cache/rankkit/onnx/`` or beside the checkpoint in ``onnx/``).
"""

from __future__ import annotations

import gzip
import sys
import time
from pathlib import Path
from typing import Any

import nncf
import numpy as np
import openvino as ov
from transformers import AutoTokenizer

ROOT = Path(__file__).resolve().parents[2]
DL19, DL20 = ROOT / "examples" / "data" / "dl19", ROOT / "examples" / "data" / "dl20"
BATCH, MAX_LENGTH, TEXTS, CALIBRATION = 32, 256, 640, 300


def passages(path: Path, count: int) -> list[str]:
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            out.append(line.rstrip("\n").split("\t", 1)[1])
            if len(out) == count:
                break
    return out


def topics(path: Path) -> list[str]:
    return [line.rstrip("\n").split("\t", 1)[1] for line in path.open(encoding="utf-8")]


def batches(tokenizer: Any, items: list[Any], pairs: bool) -> list[tuple[list[int], dict[str, np.ndarray]]]:
    """Length-sorted batches of ``BATCH`` (indices, feeds)."""
    order = sorted(range(len(items)), key=lambda i: len("".join(items[i])) if pairs else len(items[i]))
    out = []
    for start in range(0, len(order), BATCH):
        index = order[start:start + BATCH]
        chunk = [items[i] for i in index]
        if pairs:
            encoded = tokenizer([c[0] for c in chunk], [c[1] for c in chunk], truncation=True,
                                max_length=MAX_LENGTH, padding=True, return_tensors="np")
        else:
            encoded = tokenizer(chunk, truncation=True, max_length=MAX_LENGTH, padding=True, return_tensors="np")
        out.append((index, {k: v.astype(np.int64) for k, v in encoded.items()}))
    return out


def run(compiled: Any, feeds: list[tuple[list[int], dict[str, np.ndarray]]], count: int) -> tuple[float, np.ndarray]:
    """Seconds for all batches and the outputs in input order (hidden states mean-pooled over the mask)."""
    request = compiled.create_infer_request()
    results: list[Any] = [None] * count
    started = time.perf_counter()
    for index, feed in feeds:
        out = np.array(request.infer(feed)[0])
        if out.ndim == 3:
            mask = feed["attention_mask"][..., None].astype(np.float32)
            out = (out * mask).sum(1) / mask.sum(1)
        for j, i in enumerate(index):
            results[i] = out[j]
    return time.perf_counter() - started, np.stack(results).reshape(count, -1)


def main() -> None:
    core = ov.Core()
    texts = passages(DL19 / "passages.dl19-pool.tsv.gz", TEXTS)
    calibration_texts = passages(DL20 / "passages.dl20-pool.tsv.gz", CALIBRATION)
    dl20_queries = topics(DL20 / "topics.dl20-judged.tsv")
    dl19_queries = topics(DL19 / "topics.dl19-passage.txt")
    for name, onnx_path, tokenizer_path, pairs in (("mono", sys.argv[2], sys.argv[1], True),
                                                   ("minilm", sys.argv[4], sys.argv[3], False)):
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
        items: list[Any] = [(dl19_queries[i % len(dl19_queries)], t) for i, t in enumerate(texts)] if pairs else texts
        calibration: list[Any] = ([(dl20_queries[i % len(dl20_queries)], p) for i, p in enumerate(calibration_texts)]
                                  if pairs else calibration_texts)
        feeds = batches(tokenizer, items, pairs)
        samples = []  # one unpadded example per calibration input
        for _, feed in batches(tokenizer, calibration, pairs):
            for j in range(feed["input_ids"].shape[0]):
                length = int(feed["attention_mask"][j].sum())
                samples.append({k: v[j:j + 1, :length] for k, v in feed.items()})
        model = core.read_model(onnx_path)
        started = time.perf_counter()
        quantized = nncf.quantize(model, nncf.Dataset(samples), model_type=nncf.ModelType.TRANSFORMER,
                                  subset_size=len(samples))
        quantize_s = time.perf_counter() - started
        rows = {}
        for label, graph, precision in (("fp32", model, "f32"), ("bf16", model, "bf16"),
                                        ("int8-static f32", quantized, "f32"), ("int8-static bf16", quantized, "bf16")):
            compiled = core.compile_model(graph, "CPU", {"INFERENCE_PRECISION_HINT": precision, "INFERENCE_NUM_THREADS": 2,
                                                         "PERFORMANCE_HINT": "LATENCY", "ENABLE_CPU_PINNING": False})
            run(compiled, feeds[:1], len(items))
            timings = [run(compiled, feeds, len(items)) for _ in range(3)]
            rows[label] = (len(items) / min(t for t, _ in timings), timings[0][1])
        reference = rows["fp32"][1]
        for label, (speed, out) in rows.items():
            if pairs:
                agree = (f"score corr {np.corrcoef(reference[:, 0], out[:, 0])[0, 1]:.5f} "
                         f"max|d| {np.abs(reference - out).max():.3g}")
            else:
                cos = (reference * out).sum(1) / np.linalg.norm(reference, axis=1) / np.linalg.norm(out, axis=1)
                agree = f"cos min {cos.min():.4f} mean {cos.mean():.4f}"
            print(f"{name:6} {label:17} {speed:7.1f}/s  {speed / rows['fp32'][0]:.2f}x OV fp32  {agree}", flush=True)
        print(f"{name} quantize {quantize_s:.1f} s", flush=True)


if __name__ == "__main__":
    main()
