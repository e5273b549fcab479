#!/usr/bin/env python
"""What ``--backend auto``'s quality gate measures for ONNX Runtime int8 variants, on DL20 texts only.

    python bench/probes/quality_gate.py --mono CHECKPOINT [--threads 2]
    python bench/cpu_mask.py run -- python bench/probes/quality_gate.py --mono CHECKPOINT   # AVX2 kernels

The gate (:func:`rankkit.runtime.auto.quality_check`) compares a lossy session with torch fp32 on the
bundled DL20 calibration texts: pooled-vector cosine for encoders, score correlation for score heads. A
threshold must pass the int8 a CPU computes correctly and refuse a kernel that loses precision; this
probe prints, per model and variant, the measure on the gate's 48 texts and on every calibration input,
so the threshold can be set from DL20 alone (DL19 is the test set). ``qint8`` (per-tensor weights) is the
known-bad variant (pooled cosine min 0.91 on DL19 passages); ``qint8-pc`` is rankkit's int8.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mono", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import onnxruntime as ort
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from rankkit.cpu import cpu_model, describe_cpu
    from rankkit.errors import RankkitError
    from rankkit.runtime import Runtime, load_for_inference
    from rankkit.runtime import auto
    from rankkit.runtime.adapter import OrtEncoder
    from rankkit.runtime.export import new_session, prepare_export
    from rankkit.runtime.openvino_backend import calibration_feeds, model_tokenizer

    torch.set_num_threads(args.threads)
    tmp = Path(tempfile.mkdtemp(prefix="rankkit-gate-"))
    variants: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
        "qint8-pc": ({"per_channel": True, "weight_type": QuantType.QInt8}, {}),
        "qint8 (per tensor)": ({"per_channel": False, "weight_type": QuantType.QInt8}, {}),
        "qint8-pc-rr": ({"per_channel": True, "reduce_range": True, "weight_type": QuantType.QInt8}, {}),
        "qint8-pc-x64": ({"per_channel": True, "weight_type": QuantType.QInt8}, {"session.x64quantprecision": "1"}),
        "quint8-pc": ({"per_channel": True, "weight_type": QuantType.QUInt8}, {}),
    }
    print(f"{cpu_model()}, {describe_cpu()}, onnxruntime {ort.__version__}, {args.threads} threads")
    print("| model | variant | gate (48 DL20 texts) | every calibration input |")
    print("| --- | --- | --- | --- |")
    for name, checkpoint in (("repbert", None), ("mono", args.mono)):
        model: Any = load_for_inference(name, checkpoint, Runtime("torch", "none", args.threads, "fp32"), "cpu").model
        (slot,) = model.encoder_slots()
        tokenizer = model_tokenizer(model)
        fp32 = prepare_export(slot, checkpoint)
        count = len(calibration_feeds(slot, tokenizer))
        for variant, (quantize_options, session_options) in variants.items():
            path = tmp / f"{name}-{variant.split()[0]}.onnx"
            quantize_dynamic(str(fp32), str(path), **quantize_options)
            encoder = OrtEncoder(new_session(path, args.threads, session_options), slot, None, path.name)
            measures = []
            for inputs in (auto.QUALITY_INPUTS, count):
                auto.QUALITY_INPUTS = inputs
                try:
                    measures.append(auto.quality_check(slot, encoder, tokenizer))
                except RankkitError as err:
                    measures.append(f"REFUSED: {err}")
            auto.QUALITY_INPUTS = 48
            print(f"| {name} | {variant} | {measures[0]} | {measures[1]} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
