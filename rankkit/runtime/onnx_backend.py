"""``--backend onnx``: the checked ONNX export run by ONNX Runtime on the CPU, fp32 or dynamic int8.

``--quantize int8`` is ``onnxruntime.quantization.quantize_dynamic`` of the fp32 export
(per-channel QInt8 weights, dynamic uint8 activations), compared with the fp32 export on the probe
batches and its cosine logged when it is built; both are cached (:mod:`rankkit.runtime.cache`).

``--quantize int8-u8`` quantizes the weights to QUInt8 instead. ONNX Runtime multiplies uint8 activations by
int8 weights with ``vpmaddubsw`` on CPUs without VNNI (AVX2), whose 16-bit pair sums saturate; uint8 x uint8
products take another kernel, exact in 32 bits, about 10% slower. On the AVX2 kernels (``bench/cpu_mask.py``)
it agreed best with fp32 of the variants tried (``bench/probes/quality_gate.py``: mono's score correlation
on 254 DL20 texts 0.9912 against 0.9880 for int8; docs/RESULTS.md 4.10). ``--backend auto`` does not choose
it yet: on those kernels it moved the out-of-domain check (MEDLINE) by -0.0104 nDCG@10.
"""

from __future__ import annotations

import importlib
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from rankkit.console import log
from rankkit.errors import RankkitError
from rankkit.files import file_sha256, staging_dir, write_failure
from rankkit.runtime.registry import Availability, Backend, RuntimeSettings

# torch, the export machinery and the adapter load when a model is put on ONNX Runtime, not when the backend is
# declared: a command line checks --backend without them (issue 39).
if TYPE_CHECKING:
    from torch import nn

    from rankkit.models.encoder_slots import EncoderSlot


class OrtDynamicInt8:
    """ONNX Runtime's dynamic int8 of the fp32 export (per-channel weights: QInt8, or QUInt8 for ``int8-u8``)."""

    def __init__(self, kind: str = "int8") -> None:
        if kind not in ("int8", "int8-u8"):
            raise ValueError(f"unknown ONNX Runtime quantization {kind!r}")
        self.kind = kind
        self.suffix = f".{kind}.onnx"

    def problem(self, record: dict[str, Any]) -> str | None:
        return None

    def build(self, slot: EncoderSlot, fp32: Path, folder: Path, key: str) -> Path:
        """Dynamic int8 (per-channel weights) of the fp32 export; its cosine to fp32 is logged."""
        from onnxruntime.quantization import QuantType, quantize_dynamic

        from rankkit.runtime.cache import ExportRecord, commit_export, export_names
        from rankkit.runtime.export import check_against, quiet_logging, quiet_warnings, run_probe

        started = time.perf_counter()
        name, record_name = export_names(slot, key, self.suffix)
        # ONNX Runtime's quantizer writes side files beside its input (``<fp32>-inferred.onnx``, the shape-
        # inferred copy) and may leave them on a failure (a full disk): it works on a link to the fp32 export
        # in a marked staging folder of its own, removed with everything in it on any exit.
        with staging_dir(folder / f"{name}.build", shown=folder) as staging:
            source, tmp = staging / "fp32.onnx", staging / "quantized.onnx"
            try:
                _link_or_copy(fp32, source)
                with quiet_warnings(), quiet_logging():
                    weights = QuantType.QUInt8 if self.kind == "int8-u8" else QuantType.QInt8
                    quantize_dynamic(str(source), str(tmp), per_channel=True, weight_type=weights)
            except Exception as err:
                raise write_failure(err, folder, folder) or RankkitError(
                    f"cannot quantize {fp32} to {self.kind} ({type(err).__name__}: {' '.join(str(err).split())[:200]}); "
                    "use --quantize none") from None
            diff, cosine = check_against(slot, tmp, lambda feeds: run_probe(fp32, slot, feeds))
            record = ExportRecord(name, file_sha256(tmp), key, self.kind, diff, float(cosine.min()), float(cosine.mean()),
                                  time.perf_counter() - started)
            path = commit_export(tmp, folder, name, record, record_name)
        log(f"quantized {slot.name} to {self.kind} ({path}): pooled-vector cosine to fp32 min {record.cosine_min:.4f}, "
            f"mean {record.cosine_mean:.4f} on the probe batch")
        return path


def _link_or_copy(source: Path, target: Path) -> None:
    """``target`` as a hard link to ``source`` (same folder tree: no bytes copied), or a copy where links fail."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


class OnnxBackend(Backend):
    name = "onnx"
    engine = "ONNX Runtime"
    quantizations: ClassVar[dict[str, str]] = {"none": "fp32", "int8": "ONNX Runtime's dynamic int8",
                                               "int8-u8": "ONNX Runtime's dynamic int8, unsigned weights"}
    requires = ("onnxruntime", "onnx")
    install_hint = "pip install onnxruntime onnx (only --backend onnx needs it)"

    def available(self) -> Availability:
        """ONNX Runtime and onnx: versions and execution providers."""
        try:
            ort = importlib.import_module("onnxruntime")
        except Exception as err:
            return Availability(False, f"not importable ({' '.join(f'{type(err).__name__}: {err}'.split())[:200]})",
                                self.install_hint)
        from importlib import metadata

        providers = ", ".join(ort.get_available_providers())
        try:
            onnx = metadata.version("onnx")
        except metadata.PackageNotFoundError:
            return Availability(False, f"{ort.__version__} (providers {providers}); onnx not installed",
                                "pip install onnx (needed to export models)")
        return Availability(True, f"{ort.__version__}, onnx {onnx}; providers {providers}; "
                                  "backends: torch, onnx (fp32, int8, int8-u8)")

    def encoder(self, slot: EncoderSlot, runtime: RuntimeSettings, checkpoint: str | os.PathLike[str] | None,
                model: nn.Module) -> tuple[nn.Module, Path]:
        from rankkit.runtime.adapter import OrtEncoder
        from rankkit.runtime.export import new_session, prepare_export

        path = prepare_export(slot, checkpoint, OrtDynamicInt8(runtime.quantize) if runtime.quantize != "none" else None)
        session = new_session(path, runtime.threads)
        # Dynamic int8 scales each activation tensor by its own range: a sequence at a time, so a text's numbers
        # never depend on the texts batched with it (a bi-encoder's and a point-wise scorer's defining property).
        return OrtEncoder(session, slot, getattr(slot.module, "config", None), path.name,
                          per_sequence=runtime.quantize != "none"), path


__all__ = ["OnnxBackend", "OrtDynamicInt8"]
