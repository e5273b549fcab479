#!/usr/bin/env python
"""ONNX Runtime int8 variants of rankkit's checked MiniLM export: speed and agreement with fp32, interleaved.

    python bench/probes/ort_int8_variants.py [--threads 2] [--rounds 3] [--passages 320] [--batch 32]

Issue 26 asks whether ONNX Runtime's int8 can go further on AVX2 CPUs (no VNNI), where its u8 x s8
products use ``vpmaddubsw`` (16-bit intermediate sums that can saturate) and activation x activation
products (attention) fall back to a slower u8 x u8 kernel. Each variant quantizes the same fp32 export
(the zero-shot all-MiniLM-L6-v2 of rankkit's cache, built if missing) with
``onnxruntime.quantization.quantize_dynamic`` and runs it on the first ``--passages`` DL19 pool
passages (length-sorted batches, as rankkit does):

* ``qint8-pc``: rankkit's setting (QInt8 weights per channel);
* ``qint8``: per tensor;
* ``qint8-pc-rr``: ``reduce_range`` (7-bit weights: no ``vpmaddubsw`` saturation on AVX2/AVX-512 without VNNI);
* ``quint8-pc``: QUInt8 weights (u8 x u8: no saturation, another kernel);
* ``qint8-pc-constb``: ``MatMulConstBOnly``: only products with a constant weight matrix quantized
  (attention's Q.K and P.V stay fp32);
* ``qint8-pc-x64``: rankkit's graph with the session option ``session.x64quantprecision`` (ONNX Runtime
  converts u8 x s8 to u8 x u8 where a weight exceeds 7 bits, on CPUs without VNNI only);
* ``qint8-pc-basic``: rankkit's graph with ``ORT_ENABLE_BASIC`` instead of all graph optimisations.

Prints texts/s (median of the rounds, all variants interleaved), CPU seconds and the pooled-vector cosine
to the fp32 export (min / mean), with the CPU's class and flags. On a VNNI CPU the saturation-related
variants change nothing by construction; run it on an AVX2 machine to see what they do there.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--passages", type=int, default=320)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()

    import numpy as np
    import onnxruntime as ort
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from rankkit.cpu import cpu_model, describe_cpu
    from rankkit.models.encoder_slots import EncoderSlot
    from rankkit.runtime import Runtime, load_for_inference
    from rankkit.runtime.export import prepare_export

    torch.set_num_threads(args.threads)
    model: Any = load_for_inference("repbert", None, Runtime("torch", "none", args.threads, "fp32"), "cpu").model
    slot: EncoderSlot = model.encoder_slots()[0]
    fp32 = prepare_export(slot, None)
    texts = []
    with gzip.open(ROOT / "examples/data/dl19/passages.dl19-pool.tsv.gz", "rt", encoding="utf-8") as handle:
        for line in handle:
            texts.append(line.rstrip("\n").split("\t", 1)[1])
            if len(texts) == args.passages:
                break
    texts.sort(key=len)
    batches = []
    for start in range(0, len(texts), args.batch):
        enc = model.tokenizer(texts[start:start + args.batch], truncation=True, max_length=256, padding=True,
                              return_tensors="np")
        batches.append({k: v.astype(np.int64) for k, v in enc.items()})

    def session(path: Path, level: Any = ort.GraphOptimizationLevel.ORT_ENABLE_ALL, **config: str) -> Any:
        options = ort.SessionOptions()
        options.graph_optimization_level = level
        options.intra_op_num_threads = args.threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        for key, value in config.items():
            options.add_session_config_entry(key, value)
        return ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])

    tmp = Path(tempfile.mkdtemp(prefix="rankkit-ort-int8-"))

    def quantized(name: str, **kwargs: Any) -> Path:
        out = tmp / f"{name}.onnx"
        quantize_dynamic(str(fp32), str(out), **kwargs)
        return out

    pc = quantized("qint8-pc", per_channel=True, weight_type=QuantType.QInt8)
    sessions: dict[str, Any] = {
        "fp32": session(fp32),
        "qint8-pc": session(pc),
        "qint8": session(quantized("qint8", per_channel=False, weight_type=QuantType.QInt8)),
        "qint8-pc-rr": session(quantized("qint8-pc-rr", per_channel=True, reduce_range=True, weight_type=QuantType.QInt8)),
        "quint8-pc": session(quantized("quint8-pc", per_channel=True, weight_type=QuantType.QUInt8)),
        "qint8-pc-constb": session(quantized("qint8-pc-constb", per_channel=True, weight_type=QuantType.QInt8,
                                             extra_options={"MatMulConstBOnly": True})),
        "qint8-pc-x64": session(pc, **{"session.x64quantprecision": "1"}),
        "qint8-pc-basic": session(pc, ort.GraphOptimizationLevel.ORT_ENABLE_BASIC),
    }

    def runner(s: Any) -> Callable[[], Any]:
        names = [i.name for i in s.get_inputs()]

        def run() -> Any:
            pooled = []
            for feed in batches:
                (hidden,) = s.run(None, {n: feed[n] for n in names})
                mask = feed["attention_mask"][..., None]
                pooled.append((hidden * mask).sum(1) / mask.sum(1))
            return np.concatenate(pooled)

        return run

    runs = {name: runner(s) for name, s in sessions.items()}
    for run in runs.values():
        run()  # warm-up
    wall: dict[str, list[float]] = {n: [] for n in runs}
    cpu: dict[str, list[float]] = {n: [] for n in runs}
    vectors: dict[str, Any] = {}
    for _ in range(args.rounds):
        for name, run in runs.items():
            c, w = time.process_time(), time.perf_counter()
            vectors[name] = run()
            wall[name].append(time.perf_counter() - w)
            cpu[name].append(time.process_time() - c)
    reference = vectors["fp32"]
    rows = []
    for name in runs:
        v = vectors[name]
        cos = (v * reference).sum(1) / (np.linalg.norm(v, axis=1) * np.linalg.norm(reference, axis=1))
        rows.append({"variant": name, "texts_per_s": len(texts) / statistics.median(wall[name]),
                     "cpu_s": statistics.median(cpu[name]), "cosine_min": float(cos.min()), "cosine_mean": float(cos.mean())})
    base = rows[1]["texts_per_s"]
    print(f"{cpu_model()}, {describe_cpu()}, onnxruntime {ort.__version__}, {args.threads} threads, {len(texts)} passages, "
          f"{args.rounds} interleaved rounds")
    print("| variant | texts/s | x qint8-pc | CPU s (median) | cosine to fp32 (min / mean) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['variant']} | {r['texts_per_s']:.1f} | {r['texts_per_s'] / base:.2f}x | {r['cpu_s']:.2f} | "
              f"{r['cosine_min']:.4f} / {r['cosine_mean']:.4f} |")
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
