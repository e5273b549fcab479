#!/usr/bin/env python
"""ONNX Runtime int8 variants re-ranking DL19's BM25 top-100: nDCG@10, score agreement with torch fp32, pairs/s.

    python bench/probes/ort_int8_rerank_variants.py --mono CHECKPOINT [--threads 2] [--rounds 1] [--queries 43]
    python bench/cpu_mask.py run -- python bench/probes/ort_int8_rerank_variants.py --mono CHECKPOINT  # AVX2 kernels

``ort_int8_variants.py`` compares the variants by pooled-vector cosine; this probe asks what a user sees:
each variant stands in for the encoder of rankkit's zero-shot bi-encoder (``repbert``) and of a ``mono``
checkpoint, re-ranks DL19's BM25 top-100 through ``rerank_scores`` (as ``rankkit rerank`` does), and is
scored by nDCG@10 and by the Pearson correlation of its scores with torch fp32's. Variants (each a
``quantize_dynamic`` of the model's checked fp32 export, or a session option on rankkit's graph):

* ``qint8-pc``: rankkit's ``--quantize int8`` (QInt8 weights per channel, uint8 activations);
* ``qint8-pc-rr``: ``reduce_range`` (7-bit weights: ``vpmaddubsw``'s 16-bit sums cannot saturate);
* ``qint8-pc-x64``: rankkit's graph with ``session.x64quantprecision`` (on CPUs without VNNI, ONNX Runtime
  multiplies u8 x u8 where a weight needs 8 bits);
* ``quint8-pc``: QUInt8 weights (u8 x u8 throughout);
* ``qint8-pc-fp32xK`` (with ``--sensitivity``, mono only): rankkit's int8 with the K MatMuls that
  ``int8_sensitivity.py`` found most sensitive on DL20 kept in fp32 (``nodes_to_exclude``).

``--models`` and ``--variants`` pick a subset.

On a VNNI CPU the saturation-related variants change nothing by construction; under ``bench/cpu_mask.py`` the
libraries run their AVX2 kernels (the same integer arithmetic as an AVX2-only CPU).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mono", type=Path, required=True, help="a trained mono checkpoint")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--queries", type=int, default=None, help="first N DL19 queries (default: all 43)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--output", type=Path, default=None, help="also write the rows here as JSON")
    parser.add_argument("--models", default="repbert,mono", help="which of repbert, mono to measure")
    parser.add_argument("--sensitivity", type=Path, default=None,
                        help="mono: also int8 with the first 1..--keep greedy fp32 MatMuls of this "
                             "bench/probes/int8_sensitivity.py JSON (chosen on DL20)")
    parser.add_argument("--keep", default="1,2", help="with --sensitivity: how many fp32 MatMuls, comma-separated")
    parser.add_argument("--variants", default="qint8-pc,qint8-pc-rr,qint8-pc-x64,quint8-pc")
    args = parser.parse_args()

    import numpy as np
    import onnxruntime as ort
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from inference import chunks, dl19_candidates, interleaved_rounds, ndcg10
    from rankkit.cpu import cpu_model, describe_cpu
    from rankkit.runtime import Runtime, load_for_inference
    from rankkit.runtime.adapter import OrtEncoder
    from rankkit.runtime.export import new_session, prepare_export

    torch.set_num_threads(args.threads)
    qids, queries, docids, passages = dl19_candidates(100, args.queries)
    parts = chunks([len(p) for p in passages])
    pairs = sum(len(p) for p in passages)
    tmp = Path(tempfile.mkdtemp(prefix="rankkit-ort-rerank-"))

    def scorer(model: Any) -> Callable[[], list[list[float]]]:
        model.rerank_scores(queries[:1], [passages[0][:8]], batch_size=args.batch_size)  # warm-up

        def score() -> list[list[float]]:
            out: list[list[float]] = []
            for a, b in parts:
                out += [s.tolist() for s in model.rerank_scores(queries[a:b], passages[a:b], batch_size=args.batch_size)]
            return out

        return score

    rows: list[dict[str, Any]] = []
    for label, name, checkpoint in (("bi-encoder (repbert, zero-shot)", "repbert", None), ("mono", "mono", args.mono)):
        if name not in args.models.split(","):
            continue
        torch_model = load_for_inference(name, checkpoint, Runtime("torch", "none", args.threads, "fp32"), "cpu").model
        slots = torch_model.encoder_slots()
        if len(slots) != 1:
            raise SystemExit(f"{name}: {len(slots)} encoder slots; the probe swaps one")
        fp32 = prepare_export(slots[0], checkpoint)
        variants = {
            "qint8-pc": ({"per_channel": True, "weight_type": QuantType.QInt8}, {}),
            "qint8-pc-rr": ({"per_channel": True, "reduce_range": True, "weight_type": QuantType.QInt8}, {}),
            "qint8-pc-x64": ({"per_channel": True, "weight_type": QuantType.QInt8},
                             {"session.x64quantprecision": "1"}),
            "quint8-pc": ({"per_channel": True, "weight_type": QuantType.QUInt8}, {}),
        }
        variants = {k: v for k, v in variants.items() if k in args.variants.split(",")}
        if args.sensitivity and name == "mono":
            greedy = json.loads(args.sensitivity.read_text(encoding="utf-8"))["greedy"]
            for keep in (int(k) for k in args.keep.split(",")):
                variants[f"qint8-pc-fp32x{keep}"] = ({"per_channel": True, "weight_type": QuantType.QInt8,
                                                      "nodes_to_exclude": greedy[keep - 1]["kept"]}, {})
        systems = {"torch fp32": scorer(torch_model)}
        for variant, (quantize_options, session_options) in variants.items():
            path = tmp / f"{name}-{variant}.onnx"
            quantize_dynamic(str(fp32), str(path), **quantize_options)  # type: ignore[arg-type]
            model = load_for_inference(name, checkpoint, Runtime("onnx", "int8", args.threads, "fp32"), "cpu").model
            encoders = [m for m in model.modules() if isinstance(m, OrtEncoder)]
            assert len(encoders) == 1, encoders
            encoders[0].session = new_session(path, args.threads, session_options)  # rankkit's session, + options
            systems[variant] = scorer(model)
        measured = interleaved_rounds(systems, args.rounds)
        reference = np.concatenate([np.asarray(s) for s in measured["torch fp32"]["value"]])
        base = pairs / measured["torch fp32"]["seconds"]
        for system, result in measured.items():
            scores = np.concatenate([np.asarray(s) for s in result["value"]])
            rows.append({"model": label, "system": system, "pairs_per_s": pairs / result["seconds"],
                         "x_torch": pairs / result["seconds"] / base, "cpu_s": result["cpu_s"],
                         "ndcg10": ndcg10(qids, docids, result["value"]),
                         "correlation": float(np.corrcoef(reference, scores)[0, 1])})
            print(f"  {label:32} {system:14} {rows[-1]['pairs_per_s']:7.1f} pairs/s  nDCG@10 {rows[-1]['ndcg10']:.4f}"
                  f"  r {rows[-1]['correlation']:.4f}", file=sys.stderr, flush=True)
        del systems, measured

    print(f"{cpu_model()}, {describe_cpu()}, onnxruntime {ort.__version__}, {args.threads} threads, "
          f"{len(qids)} DL19 queries x BM25 top-100 ({pairs} pairs), {args.rounds} interleaved round(s)")
    print("| model | system | pairs/s | x torch fp32 | CPU s | nDCG@10 | Δ nDCG@10 | score r to torch fp32 |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        reference_row = next(r for r in rows if r["model"] == row["model"] and r["system"] == "torch fp32")
        print(f"| {row['model']} | {row['system']} | {row['pairs_per_s']:.1f} | {row['x_torch']:.2f}x | "
              f"{row['cpu_s']:.1f} | {row['ndcg10']:.4f} | {row['ndcg10'] - reference_row['ndcg10']:+.4f} | "
              f"{row['correlation']:.4f} |")
    if args.output:
        args.output.write_text(json.dumps({"cpu": describe_cpu(), "rows": rows}, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
