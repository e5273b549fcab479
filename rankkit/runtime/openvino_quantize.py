"""NNCF static int8 of an OpenVINO-readable model, run in a child process by :mod:`rankkit.runtime.openvino_backend`.

    python -m rankkit.runtime.openvino_quantize FP32_ONNX OUT_XML SAMPLES_NPZ

The quantizer runs apart from the caller's process: NNCF's imports (scikit-learn, its logging and
progress output) and its calibration memory stay out of a long-lived Python session. (A suspicion
that NNCF's state broke a later training run's forked DataLoader workers was not borne out: that
came from forking after OpenVINO had started its thread pools; see tests/conftest.py.)
``SAMPLES_NPZ`` holds the calibration examples as arrays named ``<index>/<input name>``; the IR
(``OUT_XML`` and its ``.bin``) is written for the parent to check.
"""

from __future__ import annotations

import logging
import sys
from collections import defaultdict
from typing import Any


def quantize(fp32: str, out_xml: str, samples_npz: str) -> None:
    """Post-training static int8 (NNCF's transformer preset) of ``fp32`` on the samples, saved at ``out_xml``."""
    import nncf
    import numpy as np
    import openvino as ov

    nncf.set_log_level(logging.ERROR)
    arrays = np.load(samples_npz)
    grouped: dict[int, dict[str, Any]] = defaultdict(dict)
    for key in arrays.files:
        index, name = key.split("/", 1)
        grouped[int(index)][name] = arrays[key]
    samples = [grouped[i] for i in sorted(grouped)]
    quantized = nncf.quantize(ov.Core().read_model(fp32), nncf.Dataset(samples),
                              model_type=nncf.ModelType.TRANSFORMER, subset_size=len(samples))
    ov.save_model(quantized, out_xml, compress_to_fp16=False)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m rankkit.runtime.openvino_quantize FP32_ONNX OUT_XML SAMPLES_NPZ", file=sys.stderr)
        return 2
    try:
        quantize(*argv)
    except Exception as err:  # noqa: BLE001 - one line for the parent, which refuses the backend
        print(f"NNCF quantization failed: {type(err).__name__}: {' '.join(str(err).split())[:300]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
