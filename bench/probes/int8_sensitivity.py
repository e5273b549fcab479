#!/usr/bin/env python
"""Which MatMuls of a model lose most under ONNX Runtime's dynamic int8, measured on DL20 texts only.

    python bench/probes/int8_sensitivity.py --mono CHECKPOINT [--model mono] [--threads 2] [--keep 8]
    python bench/cpu_mask.py run -- python bench/probes/int8_sensitivity.py --mono CHECKPOINT   # AVX2 kernels

For every weight MatMul ``quantize_dynamic`` would quantize, the probe quantizes all the others (per channel,
QInt8, as ``--quantize int8``) and measures the gate's agreement with torch fp32
(:func:`rankkit.runtime.auto.quality_check`: score correlation for a score head, pooled cosine for an encoder)
on every bundled DL20 calibration input. The MatMuls whose fp32 copy helps most are then kept in fp32
greedily, 1..``--keep`` of them, each step re-measured on the gate's 48 texts and on all inputs. DL19 (the
test set) is not read.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mono", type=Path, default=None, help="a checkpoint (of --model)")
    parser.add_argument("--model", default="mono")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--keep", type=int, default=8, help="greedy fp32 MatMuls to try, at most")
    parser.add_argument("--output", type=Path, default=None, help="also write the measures here as JSON")
    args = parser.parse_args()

    import onnx
    import onnxruntime as ort
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from rankkit.cpu import cpu_model, describe_cpu
    from rankkit.errors import RankkitError
    from rankkit.runtime import Runtime, auto, load_for_inference
    from rankkit.runtime.adapter import OrtEncoder
    from rankkit.runtime.export import new_session, prepare_export
    from rankkit.runtime.openvino_backend import calibration_feeds, model_tokenizer

    torch.set_num_threads(args.threads)
    tmp = Path(tempfile.mkdtemp(prefix="rankkit-sensitivity-"))
    model: Any = load_for_inference(args.model, args.mono, Runtime("torch", "none", args.threads, "fp32"), "cpu").model
    (slot,) = model.encoder_slots()
    tokenizer = model_tokenizer(model)
    fp32 = prepare_export(slot, args.mono)
    graph = onnx.load(str(fp32)).graph
    weights = {i.name for i in graph.initializer}
    matmuls = [n.name for n in graph.node if n.op_type in ("MatMul", "Gemm") and any(i in weights for i in n.input)]
    count = len(calibration_feeds(slot, tokenizer))
    print(f"{cpu_model()}, {describe_cpu()}, onnxruntime {ort.__version__}, {args.threads} threads; "
          f"{args.model} {args.mono}: {len(matmuls)} weight MatMuls; {count} DL20 calibration inputs", flush=True)

    def measure(excluded: list[str], *inputs: int) -> list[float]:
        """The check's measure of int8 with ``excluded`` kept in fp32 (quantized once), on each count of inputs."""
        path = tmp / "variant.onnx"
        quantize_dynamic(str(fp32), str(path), per_channel=True, weight_type=QuantType.QInt8,
                         nodes_to_exclude=list(excluded))
        encoder = OrtEncoder(new_session(path, args.threads), slot, None, path.name)
        gate_inputs, measures = auto.QUALITY_INPUTS, []
        for number in inputs:
            auto.QUALITY_INPUTS = number
            try:
                text = auto.quality_check(slot, encoder, tokenizer)
            except RankkitError as err:
                text = str(err)
            finally:
                auto.QUALITY_INPUTS = gate_inputs
            # "score correlation 0.9878 on ..." or "pooled cosine to torch fp32 mean 0.9925, min ..."
            words = text.replace(",", "").split()
            measures.append(float(words[2] if words[0] == "score" else words[6]))
        return measures

    every_gate, every = measure([], auto.QUALITY_INPUTS, count)
    print(f"all quantized: {every:.4f} on {count} inputs", flush=True)
    single: dict[str, float] = {}
    for number, name in enumerate(matmuls, 1):
        (single[name],) = measure([name], count)
        print(f"  [{number}/{len(matmuls)}] fp32 {name}: {single[name]:.4f} ({single[name] - every:+.4f})", flush=True)
    order = sorted(matmuls, key=lambda n: -single[n])
    greedy = []
    print(f"| MatMuls kept in fp32 | gate ({auto.QUALITY_INPUTS} DL20 texts) | every calibration input |")
    print("| --- | --- | --- |")
    print(f"| none | {every_gate:.4f} | {every:.4f} |")
    for k in range(1, args.keep + 1):
        kept = order[:k]
        gate, every_input = measure(kept, auto.QUALITY_INPUTS, count)
        greedy.append({"kept": kept, "gate": gate, "all": every_input})
        print(f"| {k}: {kept[-1]} | {gate:.4f} | {every_input:.4f} |", flush=True)
    if args.output:
        args.output.write_text(json.dumps({"cpu": describe_cpu(), "all_quantized": every, "single": single,
                                           "greedy": greedy}, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
