"""NNCF static int8 of an OpenVINO-readable model, run in a child process by :mod:`rankkit.runtime.openvino_backend`.

    python -m rankkit.runtime.openvino_quantize FP32_ONNX OUT_XML SAMPLES_NPZ

The quantizer runs apart from the caller's process: NNCF's imports (scikit-learn, its logging and
progress output) and its calibration memory stay out of a long-lived Python session. (A suspicion
that NNCF's state broke a later training run's forked DataLoader workers was not borne out: that
came from forking after OpenVINO had started its thread pools; see tests/conftest.py.)
``SAMPLES_NPZ`` holds the calibration examples as arrays named ``<index>/<input name>``; the IR
(``OUT_XML`` and its ``.bin``) is written for the parent to check.

The child never outlives its parent (:func:`run`): on Linux the kernel is asked for SIGKILL when the
parent dies (``PR_SET_PDEATHSIG``, so a SIGKILLed ``rankkit`` takes its calibration child with it)
between ``fork`` and ``exec``, before the child's first instruction (the setting survives ``exec``;
armed by the child itself it came only after its imports, seconds in which a killed parent's child
ran on); and the parent kills it on any interruption (SIGTERM, Ctrl-C) before its own clean-up runs.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from collections import defaultdict
from typing import Any, Callable

#: The parent's process id, passed to the child so it can tell that the parent died before the
#: death signal was armed.
PARENT_ENV = "RANKKIT_QUANTIZE_PARENT"


def run(fp32: str, out_xml: str, samples_npz: str) -> subprocess.CompletedProcess[str]:
    """Quantize in a child process (``python -m rankkit.runtime.openvino_quantize``) tied to this one."""
    args = [sys.executable, "-m", "rankkit.runtime.openvino_quantize", fp32, out_xml, samples_npz]
    child = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, PARENT_ENV: str(os.getpid())}, preexec_fn=death_signal_hook())
    try:
        _, errors = child.communicate()
    except BaseException:  # SIGTERM/Ctrl-C (rankkit.errors.Terminated) or any failure: no orphan
        child.kill()
        child.wait()
        raise
    return subprocess.CompletedProcess(args, child.returncode, None, errors)


def death_signal_hook() -> Callable[[], None] | None:
    """A ``preexec_fn`` that arms ``PR_SET_PDEATHSIG`` (SIGKILL) in the forked child before it executes the
    new program, and exits if the parent is already gone; None off Linux or without ``prctl``.

    ``prctl`` is looked up here, in the parent: the hook itself only calls it (nothing is imported or
    allocated between ``fork`` and ``exec``)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # pragma: no cover - no prctl: the child's own arming still applies
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os._exit(1)  # the parent died between fork and the arming

    return arm


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies; exit now if it already has."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - no prctl: the parent's kill still applies
        return
    parent = os.environ.get(PARENT_ENV)
    if parent is not None and parent.isdigit() and os.getppid() != int(parent):
        os._exit(1)  # the parent died before the death signal was armed


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
    _die_with_parent()
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
