"""``--backend``, ``--quantize``, ``--threads`` and ``--precision``: declared once, shared by the inference commands.

``rerank``, ``explain``, ``index --kind dense`` and ``retrieve`` (query encoding) take them; the
values become a :class:`rankkit.runtime.Runtime` (validated when made, before any work), and the
command loads its model with :func:`rankkit.runtime.load_for_inference` (the one device rule).
"""

from __future__ import annotations

from typing import Any, Optional

import typer

from rankkit.cli.app import MAX_COUNT, int_range

PANEL = "Inference backend"


def backend_option(default: Optional[str] = "auto") -> Any:
    return typer.Option(default, "--backend", rich_help_panel=PANEL,
                        help="auto (the fastest backend measured for this CPU and model whose quality check passes "
                             "here; `rankkit doctor` shows it, the log says why); torch; onnx (ONNX Runtime on the "
                             "CPU) or openvino (OpenVINO on the CPU): both run an ONNX export built once per "
                             "checkpoint, checked against torch, cached.")


def quantize_option(default: Optional[str] = "auto") -> Any:
    return typer.Option(default, "--quantize", rich_help_panel=PANEL,
                        help="auto (as --backend auto chooses; none with an explicit backend), none, or int8: with --backend "
                             "onnx, ONNX Runtime's dynamic int8 (weights per channel); int8-u8: the same with unsigned "
                             "weights (u8 x u8 products: more exact on CPUs without VNNI, ~10% slower; --backend onnx); "
                             "with --backend openvino, NNCF's static int8 calibrated on bundled MS MARCO text (built "
                             "once, ~20 s for MiniLM, cached).")


def precision_option(default: Optional[str] = "auto") -> Any:
    return typer.Option(default, "--precision", rich_help_panel=PANEL,
                        help="auto (CPU: bf16 where the CPU multiplies bf16 in hardware and the backend runs it, else "
                             "fp32; CUDA: bf16 encoder weights where the model keeps fp32's scores on real text, else "
                             "tf32, else fp32; the log says which and why), fp32, bf16 (torch: autocast on the CPU, "
                             "bf16 encoder weights on CUDA; openvino: bf16 inference on CPUs with native bf16); "
                             "fp16 and tf32 (fp32 weights, TF32 matmuls): torch on CUDA only.")


def max_tokens_option() -> Any:
    return typer.Option(None, "--max-tokens", rich_help_panel=PANEL, callback=int_range(1, MAX_COUNT),
                        help="Padded tokens per forward pass at most (rows x padded length): short inputs travel in "
                             "large batches, long ones in small ones [default: 32,768 on CUDA, where lengths are also "
                             "rounded up to multiples of 8 and the next chunk is prepared on a thread; none on the CPU].")


def threads_option() -> Any:
    return typer.Option(None, "--threads", rich_help_panel=PANEL, callback=int_range(1),
                        help="Intra-op threads of torch and ONNX Runtime (default: torch's, the CPU cores).")


def runtime_of(backend: Optional[str], quantize: Optional[str], threads: Optional[int], precision: Optional[str]) -> Any:
    """The :class:`~rankkit.runtime.Runtime` of the given options (``None``: the default)."""
    from rankkit.runtime import Runtime

    return Runtime(backend or "auto", quantize or "auto", threads, precision or "auto")


def device_for(device: Optional[str], runtime: Any) -> str:
    """The device name for ``--device`` under ``runtime`` (:func:`rankkit.runtime.device_name`: ``auto`` is
    the CPU for a backend that runs only there; an explicit device the backend cannot use is refused)."""
    from rankkit.runtime import device_name

    return device_name(device, runtime)
