"""``--backend openvino``: the checked ONNX export compiled by OpenVINO's CPU plug-in; fp32, bf16 or NNCF static int8.

``--precision fp32`` is checked against torch within :data:`~rankkit.runtime.export.TOLERANCE`
every time it is compiled (refused otherwise); ``bf16`` runs on CPUs with native bf16
(AVX512-BF16 or AMX; elsewhere OpenVINO keeps f32 and the log says so), its cosine to torch
logged. OpenVINO compiles the graph itself, so nothing beyond the ONNX file is cached.
``--quantize int8`` is NNCF's post-training static int8 (transformer preset), calibrated on the
bundled DL20 texts (:data:`CALIBRATION_FILE`), run in a child process
(:mod:`rankkit.runtime.openvino_quantize`) and saved as an OpenVINO IR beside the fp32 export.
"""

from __future__ import annotations

import importlib
import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from rankkit.console import log
from rankkit.errors import RankkitError
from rankkit.files import file_sha256, writing_to
from rankkit.runtime import openvino_quantize
from rankkit.runtime.registry import Availability, Backend, RuntimeSettings

# torch, the export machinery and the adapter load when a model is put on OpenVINO, not when the backend is
# declared: a command line checks --backend without them (issue 39).
if TYPE_CHECKING:
    from torch import nn

    from rankkit.models.encoder_slots import EncoderSlot
    from rankkit.runtime.adapter import OrtEncoder


class OpenVinoSession:
    """An OpenVINO CPU compiled model behind the two calls :class:`OrtEncoder` makes of an ONNX Runtime
    session (``get_inputs()``, ``run(None, feeds)``), so one wrapper serves both backends.

    ``precision``: ``bf16`` asks the CPU plug-in for bf16 inference (native on AVX512-BF16 and AMX
    CPUs; elsewhere OpenVINO keeps f32, and :attr:`precision` says which ran); ``fp32`` pins f32
    (OpenVINO's own default is bf16 where the CPU has it). Threads are not pinned to cores, so
    parallel one-thread jobs do not land on the same core.
    """

    def __init__(self, path: Path, threads: int | None, precision: str) -> None:
        try:
            import openvino as ov
        except ImportError:
            raise RankkitError("--backend openvino needs OpenVINO (pip install openvino); or use --backend onnx") from None
        import torch

        from rankkit.runtime.export import quiet_warnings

        core = ov.Core()
        config = {"INFERENCE_PRECISION_HINT": "bf16" if precision == "bf16" else "f32",
                  "INFERENCE_NUM_THREADS": int(threads) if threads else torch.get_num_threads(),
                  "PERFORMANCE_HINT": "LATENCY", "ENABLE_CPU_PINNING": False}
        try:
            with quiet_warnings():
                self.compiled = core.compile_model(core.read_model(str(path)), "CPU", config)
        except Exception as err:
            raise RankkitError(f"OpenVINO cannot compile {path} ({type(err).__name__}: "
                               f"{' '.join(str(err).split())[:200]}); use --backend onnx") from None
        self.request = self.compiled.create_infer_request()
        ran = self.compiled.get_property("INFERENCE_PRECISION_HINT")
        self.precision = "bf16" if "bf16" in str(ran) or "bfloat16" in str(ran) else "fp32"
        self.inputs = [SimpleNamespace(name=port.get_any_name(),
                                       type="tensor(bool)" if port.get_element_type() == ov.Type.boolean
                                       else "tensor(int64)") for port in self.compiled.inputs]

    def get_inputs(self) -> list[SimpleNamespace]:
        return self.inputs

    def run(self, outputs: None, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        self.request.infer(feeds)
        return [np.array(self.request.get_output_tensor(0).data, dtype=np.float32, copy=True)]


def openvino_encoder(slot: EncoderSlot, path: Path, runtime: RuntimeSettings) -> OrtEncoder:
    """The checked fp32 export at ``path`` compiled by OpenVINO, checked against torch on the probe
    batches: within :data:`~rankkit.runtime.export.TOLERANCE` at fp32 or refused; at bf16 its pooled cosine is logged."""
    from rankkit.runtime import export
    from rankkit.runtime.adapter import OrtEncoder
    from rankkit.runtime.export import check_against, reference_output

    session = OpenVinoSession(path, runtime.threads, runtime.precision)
    int8 = path.suffix == ".xml"  # NNCF's static int8 IR: checked against fp32 when it was built
    encoder = OrtEncoder(session, slot, getattr(slot.module, "config", None),
                         f"{path.name} (OpenVINO {'int8, ' if int8 else ''}{session.precision})")
    diff, cosine = check_against(slot, encoder.run, lambda feeds: reference_output(slot, feeds))
    if session.precision == "fp32" and not int8 and not diff <= export.TOLERANCE:
        raise RankkitError(f"OpenVINO's fp32 run of {slot.name} differs from torch by {diff:.2e} (> {export.TOLERANCE:g}) on "
                           "the probe batch; refusing it: use --backend onnx or torch")
    if runtime.precision == "bf16" and session.precision != "bf16":
        log("this CPU has no native bf16: OpenVINO runs fp32")
    log(f"OpenVINO {'int8 + ' if int8 else ''}{session.precision} {slot.name}: max difference to torch {diff:.1e}, "
        "pooled-vector cosine "
        f"min {float(cosine.min()):.5f}, mean {float(cosine.mean()):.5f} on the probe batch")
    return encoder


#: NNCF's calibration inputs (rankkit/runtime/calibration/PROVENANCE.txt): DL20 queries, passages and pairs.
CALIBRATION_FILE = Path(__file__).with_name("calibration") / "msmarco-dl20.tsv"


def calibration_texts() -> list[tuple[str, ...]]:
    """The calibration inputs: ``(query,)``, ``(passage,)`` and ``(query, passage)`` tuples, in file order."""
    rows = []
    for line in CALIBRATION_FILE.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            rows.append(tuple(line.split("\t")[1:]))
    return rows


#: The long-passage, out-of-domain half of auto's quality check (issue 41; never used to calibrate int8).
CHECK_FILE = Path(__file__).with_name("calibration") / "long-passages.tsv"


def check_texts() -> list[tuple[str, ...]]:
    """The check set's inputs: ``(passage,)`` and ``(question, passage)`` tuples from SQuAD, PubMedQA and MedQuAD,
    up to ~500 words (calibration/PROVENANCE.txt)."""
    return [tuple(line.split("\t")[1:]) for line in CHECK_FILE.read_text(encoding="utf-8").splitlines()
            if line and not line.startswith("#")]


def calibration_feeds(slot: EncoderSlot, tokenizer: Any, max_length: int = 256,
                      rows: list[tuple[str, ...]] | None = None) -> list[dict[str, np.ndarray]]:
    """One unpadded example per calibration input (or per tuple of ``rows``), tokenized by the model's tokenizer
    (single texts and query-passage pairs alike: one encoder may see either), in the graph's input names."""
    import torch

    samples = []
    length = min(max_length, slot.max_length)
    for texts in rows if rows is not None else calibration_texts():
        encoded = tokenizer(*texts, truncation=True, max_length=length)
        feeds = {"input_ids": torch.tensor([encoded["input_ids"]])}
        feeds["attention_mask"] = torch.ones_like(feeds["input_ids"])
        if "token_type_ids" in slot.inputs:
            segments = encoded.get("token_type_ids")
            feeds["token_type_ids"] = torch.tensor([segments]) if segments is not None else torch.zeros_like(feeds["input_ids"])
        if slot.extra_inputs is not None:
            feeds.update(slot.extra_inputs(feeds))
        samples.append({name: feeds[name].numpy() for name in slot.inputs})  # the graph's inputs, by name
    return samples


class NncfStaticInt8:
    """NNCF's post-training static int8 of the fp32 export, calibrated through the model's tokenizer."""

    kind = "openvino-int8"
    suffix = ".ov-int8.xml"

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def problem(self, record: dict[str, Any]) -> str | None:
        if record.get("calibration") != file_sha256(CALIBRATION_FILE):
            return "it was calibrated on other inputs"
        return None

    def build(self, slot: EncoderSlot, fp32: Path, folder: Path, key: str) -> Path:
        return build_openvino_int8(slot, fp32, folder, key, self.tokenizer)


def build_openvino_int8(slot: EncoderSlot, fp32: Path, folder: Path, key: str, tokenizer: Any) -> Path:
    """NNCF post-training static int8 (transformer preset) of the fp32 export, calibrated on
    :data:`CALIBRATION_FILE`, saved as an OpenVINO IR; its cosine to the fp32 export is logged."""
    try:
        import nncf  # noqa: F401 - imported here only to refuse early; the child process runs it
        import openvino  # noqa: F401
    except ImportError:
        raise RankkitError("--backend openvino --quantize int8 needs NNCF and OpenVINO (pip install nncf openvino); "
                           "or use --backend onnx --quantize int8") from None
    if tokenizer is None:
        raise RankkitError(f"--backend openvino --quantize int8 calibrates {slot.name} on text, and this model has no "
                           "tokenizer; use --backend onnx --quantize int8")
    from rankkit.runtime.adapter import OrtEncoder
    from rankkit.runtime.cache import ExportRecord, commit_export, export_names, temporary_file
    from rankkit.runtime.export import check_against, run_probe

    started = time.perf_counter()
    name, record_name = export_names(slot, key, NncfStaticInt8.suffix)
    samples = calibration_feeds(slot, tokenizer)
    with temporary_file(folder, ".xml") as tmp, temporary_file(folder, ".npz") as npz:
        tmp_bin = tmp.with_suffix(".bin")
        try:
            arrays: dict[str, Any] = {f"{i}/{k}": v for i, sample in enumerate(samples) for k, v in sample.items()}
            np.savez(npz, **arrays)
            log(f"calibrating static int8 of {slot.name} with NNCF on {len(samples)} inputs (once per checkpoint; "
                "about 20 s for a MiniLM-sized encoder)")
            # NNCF runs in a child process (rankkit/runtime/openvino_quantize.py says why).
            child = openvino_quantize.run(str(fp32), str(tmp), str(npz))
            if child.returncode != 0 or not tmp_bin.is_file():
                lines = [line for line in child.stderr.splitlines() if line.strip()]
                reason = lines[-1] if lines else f"exit code {child.returncode}"
                raise RankkitError(f"cannot quantize {fp32} with NNCF ({reason[:300]}); use --backend onnx --quantize int8")
            session = OpenVinoSession(tmp, 1, "fp32")
            runner = OrtEncoder(session, slot, None, tmp.name).run
            diff, cosine = check_against(slot, runner, lambda feeds: run_probe(fp32, slot, feeds))
            del session, runner
            record = ExportRecord(name, file_sha256(tmp), key, "openvino-int8", diff, float(cosine.min()),
                                  float(cosine.mean()), time.perf_counter() - started, bin_sha256=file_sha256(tmp_bin),
                                  calibration=file_sha256(CALIBRATION_FILE))
            with writing_to(folder, folder, owned=[tmp_bin]):
                os.replace(tmp_bin, (folder / name).with_suffix(".bin"))
            path = commit_export(tmp, folder, name, record, record_name)
        finally:
            tmp_bin.unlink(missing_ok=True)
    log(f"quantized {slot.name} to static int8 with NNCF ({path}, {len(samples)} calibration inputs): pooled-vector "
        f"cosine to fp32 min {record.cosine_min:.4f}, mean {record.cosine_mean:.4f} on the probe batch")
    return path


def model_tokenizer(model: nn.Module) -> Any:
    """The tokenizer a model (or one of its modules) holds, or None."""
    for module in model.modules():
        tokenizer = vars(module).get("tokenizer")
        if tokenizer is not None and callable(tokenizer):
            return tokenizer
    return None


class OpenVinoBackend(Backend):
    name = "openvino"
    engine = "OpenVINO"
    quantizations: ClassVar[dict[str, str]] = {"none": "fp32 or bf16", "int8": "NNCF's static int8"}
    precisions = ("fp32", "bf16")
    requires = ("openvino",)
    install_hint = "pip install openvino (only --backend openvino needs it)"

    def available(self) -> Availability:
        """OpenVINO's version, whether this CPU runs bf16 natively, and whether NNCF (static int8) is there."""
        try:
            ov = importlib.import_module("openvino")
            capabilities = [str(c) for c in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")]
        except Exception as err:
            return Availability(False, f"not importable ({' '.join(f'{type(err).__name__}: {err}'.split())[:200]})",
                                self.install_hint)
        from importlib import metadata

        bf16 = "bf16 native" if "BF16" in capabilities else "no native bf16 (--precision bf16 runs fp32)"
        try:
            static = f"NNCF {metadata.version('nncf')} (--quantize int8)"
        except metadata.PackageNotFoundError:
            static = "no NNCF (--quantize int8 on openvino needs pip install nncf)"
        return Availability(True, f"{ov.__version__.split('-')[0]}; CPU {', '.join(capabilities)}; {bf16}; {static}")

    def encoder(self, slot: EncoderSlot, runtime: RuntimeSettings, checkpoint: str | os.PathLike[str] | None,
                model: nn.Module) -> tuple[nn.Module, Path]:
        from rankkit.runtime.export import prepare_export

        # OpenVINO's int8 is NNCF's static int8, calibrated on text through the model's tokenizer.
        quantizer = NncfStaticInt8(model_tokenizer(model)) if runtime.quantize == "int8" else None
        path = prepare_export(slot, checkpoint, quantizer)
        return openvino_encoder(slot, path, runtime), path


__all__ = ["CALIBRATION_FILE", "NncfStaticInt8", "OpenVinoBackend", "OpenVinoSession", "calibration_feeds",
           "calibration_texts", "model_tokenizer", "openvino_encoder"]
