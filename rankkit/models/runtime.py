"""Inference backends for a model's transformer encoder: torch, ONNX Runtime (fp32, int8) or OpenVINO (fp32, bf16).

``--backend onnx`` swaps each exportable encoder of a model (its :class:`EncoderSlot`) for an
:class:`OrtEncoder` with the same call signature: a Hugging Face encoder keeps being called as
``encoder(input_ids=..., attention_mask=..., token_type_ids=...)`` and answers with
``last_hidden_state``; a network called ``network(input_ids, attention_mask)`` that returns text
vectors (DenseTrans) keeps that call (an *export form* of it, the same computation written with
traceable shapes, is what gets exported, and it is checked against the network itself).
Everything around the encoder (tokenisation, pooling, heads such as MatRank's matrix or PARADE's
aggregators, scoring) stays the model's own torch code, so the inference drivers
(:mod:`rankkit.reranking`, :mod:`rankkit.dense`) do not change and the trainer is never involved.

Exports:

* built once per encoder weights: the key is a SHA-256 of the encoder's tensors, its structure
  (transformers config or the model's settings) and :data:`EXPORT_VERSION`, so a changed
  checkpoint gets a new export and an unchanged one reuses the old;
* stored beside a writable rankkit checkpoint (``CHECKPOINT/onnx/``), else in the cache folder
  (``$RANKKIT_CACHE_DIR`` or ``~/.cache/rankkit``, ``onnx/<key>/``), e.g. for the packaged MiniLM;
* written atomically (a temporary file renamed into place after the check) with a JSON record
  holding the file's SHA-256: a cached file that no longer matches it (truncated, edited) is
  reported and rebuilt, never loaded;
* checked when built: the fp32 export's outputs must equal torch's within :data:`TOLERANCE` on a
  fixed probe batch (padded rows, both segments), else the command refuses with the difference;
  the int8 export (``quantize_dynamic``, per-channel QInt8 weights, dynamic uint8 activations) is
  compared with the fp32 one and its cosine logged.

``--backend openvino`` runs the same checked ONNX export through OpenVINO's CPU plug-in
(``openvino.Core.compile_model``) at ``--precision fp32`` (checked against torch within
:data:`TOLERANCE` every time it is compiled, refused otherwise) or ``bf16`` (on CPUs with native
bf16, AVX512-BF16 or AMX; its cosine to torch is logged). OpenVINO compiles the graph itself, so
nothing beyond the ONNX file is cached.

Exported with torch's TorchScript exporter (``dynamo=False``, opset 17) with dynamic batch and
sequence axes; the encoder is wrapped so that its inputs are passed by keyword (transformers 5.x
refuses positional ones) and the torch side is in eval mode for the export and the reference.
A transformers encoder is exported with its ``eager`` attention (the same computation as the
default ``sdpa``): the SDPA export's boolean mask becomes ``Where``/``IsNaN`` nodes over every
attention matrix, which cost 16% of the int8 graph's time (ONNX Runtime's profiler on MiniLM), and
the eager graph re-ranks ~1.25x faster at int8 (docs/RESULTS.md, issue 16).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass
from types import SimpleNamespace
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch
from torch import nn

from rankkit.console import log
from rankkit.devices import PRECISIONS, check_precision
from rankkit.errors import RankkitError
from rankkit.files import (
    atomic_write, exclusive, file_sha256, scratch_path, user_cache_root, write_failure, writing_to,
)
from rankkit.models import openvino_quantize

BACKENDS = ("torch", "onnx", "openvino")
QUANTIZATIONS = ("none", "int8")
#: Bumped when the export procedure changes, so older cached exports are rebuilt.
EXPORT_VERSION = 2  # 2: transformers encoders exported with eager attention
OPSET = 17
#: Largest absolute difference allowed between torch's and the fp32 export's outputs on the probe batch.
TOLERANCE = 1e-4


@dataclass(frozen=True)
class Runtime:
    """How a model runs at inference time (``--backend``, ``--quantize``, ``--threads``, ``--precision``)."""

    backend: str = "torch"
    quantize: str = "none"
    threads: int | None = None
    precision: str = "fp32"

    def check(self, device: torch.device | None = None) -> None:
        """Refuse a combination that cannot run (one line, before any work)."""
        if self.backend not in BACKENDS:
            raise RankkitError(f"unknown backend {self.backend!r}; use {' or '.join(BACKENDS)}")
        if self.quantize not in QUANTIZATIONS:
            raise RankkitError(f"unknown quantization {self.quantize!r}; use {' or '.join(QUANTIZATIONS)}")
        if self.precision not in PRECISIONS:
            raise RankkitError(f"unknown precision {self.precision!r}; use {', '.join(PRECISIONS)}")
        if self.threads is not None and self.threads < 1:
            raise RankkitError(f"--threads must be at least 1, got {self.threads}")
        if self.quantize == "int8" and self.backend == "torch":
            raise RankkitError("--quantize int8 needs --backend onnx (ONNX Runtime's dynamic int8) or openvino "
                               "(NNCF's static int8)")
        if self.backend == "onnx" and self.precision != "fp32":
            raise RankkitError(f"--precision {self.precision} runs on --backend torch or openvino; --backend onnx "
                               "runs fp32 (or --quantize int8)")
        if self.backend == "openvino" and self.precision not in ("fp32", "bf16"):
            raise RankkitError(f"--backend openvino runs --precision fp32 or bf16, not {self.precision}")
        if self.backend != "torch":
            if device is not None and device.type != "cpu":
                raise RankkitError(f"--backend {self.backend} runs on the CPU; use --device cpu (or --backend torch "
                                   f"on {device.type})")
        elif device is not None:
            check_precision(self.precision, device)

    @property
    def torch_precision(self) -> str:
        """The autocast precision of the model's torch code: the backend's own on torch, else fp32
        (an exported encoder runs at its backend's precision; the heads around it stay fp32)."""
        return self.precision if self.backend == "torch" else "fp32"

    def describe(self) -> str:
        """``onnx int8, 2 threads`` style summary for log lines."""
        parts = [self.backend + (" int8" if self.quantize == "int8" else "")]
        if self.precision != "fp32":
            parts.append(self.precision)
        if self.threads is not None:
            parts.append(f"{self.threads} thread{'s' * (self.threads > 1)}")
        return ", ".join(parts)


@dataclass
class EncoderSlot:
    """One exportable encoder of a model: the module ``getattr(owner, attribute)``.

    ``call``: ``"hf"``, a transformers encoder called by keyword (``input_ids``, ``attention_mask``,
    ``token_type_ids``) whose ``.last_hidden_state`` ``[B, L, H]`` is read; ``"logits"``, a transformers
    ``*ForSequenceClassification`` called the same way whose ``.logits`` ``[B, labels]`` is read (``mono``,
    whose head is the classifier's own); or ``"vectors"``, a
    network called ``module(input_ids, attention_mask)`` returning ``[B, D]``. ``inputs`` are the
    graph's inputs, in order; ``structure`` identifies what the weights alone do not (a config, the
    model's settings); ``max_length`` and ``vocab_size`` bound the probe batches; ``export_form``,
    when given, is traced instead of the module (same weights, traceable shapes).
    """

    name: str
    owner: nn.Module
    attribute: str
    inputs: tuple[str, ...]
    structure: str
    max_length: int
    vocab_size: int
    call: str = "hf"
    export_form: nn.Module | None = None
    #: Inputs beyond token ids, mask and segments, derived from a probe batch (the Set-Encoder's layout).
    extra_inputs: Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]] | None = None

    @property
    def module(self) -> nn.Module:
        module = getattr(self.owner, self.attribute)
        assert isinstance(module, nn.Module)
        return module


def hf_slot(owner: nn.Module, attribute: str = "encoder", name: str = "encoder") -> EncoderSlot:
    """The slot of a transformers encoder held at ``owner.attribute`` (segment ids as an input when it has them)."""
    encoder = getattr(owner, attribute)
    config = encoder.config
    inputs: tuple[str, ...] = ("input_ids", "attention_mask")
    if int(getattr(config, "type_vocab_size", 0) or 0) > 0:
        inputs += ("token_type_ids",)
    # A model with a head (a sequence classifier) is exported whole: its base model is another module.
    call = "logits" if getattr(encoder, "base_model", encoder) is not encoder else "hf"
    return EncoderSlot(name, owner, attribute, inputs, config.to_json_string(use_diff=False),
                       int(getattr(config, "max_position_embeddings", 512)), int(config.vocab_size), call=call)


class OrtEncoder(nn.Module):
    """An ONNX Runtime session standing in for an encoder module, with the module's call signature.

    Holds no weights; a zero-size parameter keeps ``next(model.parameters())`` (the models' device
    lookup) working for models whose only weights were the encoder's. Runs on the CPU.
    """

    def __init__(self, session: Any, slot: EncoderSlot, config: Any, label: str) -> None:
        super().__init__()
        self.session = session
        self.call = slot.call
        self.input_names = [i.name for i in session.get_inputs()]
        self.input_types = [np.bool_ if i.type == "tensor(bool)" else np.int64 for i in session.get_inputs()]
        self.config = config
        self.label = label
        self.placeholder = nn.Parameter(torch.empty(0), requires_grad=False)

    def run(self, feeds: dict[str, torch.Tensor]) -> torch.Tensor:
        """The graph's single output for ``feeds`` (missing segment ids are zeros, as transformers does)."""
        ids = feeds["input_ids"]
        arrays = {}
        for name, kind in zip(self.input_names, self.input_types):
            value = feeds.get(name)
            if value is None:
                value = torch.zeros_like(ids)
            arrays[name] = value.detach().cpu().numpy().astype(kind, copy=False)
        (out,) = self.session.run(None, arrays)
        return torch.from_numpy(out)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        from transformers.modeling_outputs import BaseModelOutput, SequenceClassifierOutput

        if self.call == "vectors":
            return self.run({**dict(zip(self.input_names, args)), **kwargs})
        if args:
            raise TypeError("OrtEncoder takes its inputs by keyword (input_ids=, attention_mask=, ...)")
        feeds = {k: v for k, v in kwargs.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
        if self.call == "logits":
            return SequenceClassifierOutput(logits=self.run(feeds))
        return BaseModelOutput(last_hidden_state=self.run(feeds))

    def extra_repr(self) -> str:
        return self.label


class _KeywordEncoder(nn.Module):
    """Export wrapper: positional graph inputs passed on by keyword (transformers 5.x needs them so)."""

    def __init__(self, module: nn.Module, slot: EncoderSlot) -> None:
        super().__init__()
        self.module = module
        self.names = slot.inputs
        self.call = slot.call

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        if self.call == "vectors":
            vectors = self.module(*inputs)
            assert isinstance(vectors, torch.Tensor)
            return vectors
        out = self.module(**dict(zip(self.names, inputs)), return_dict=True)
        if self.call == "logits":
            return out.logits  # type: ignore[no-any-return]
        return out.last_hidden_state  # type: ignore[no-any-return]


# -- cache ---------------------------------------------------------------------------------------

def cache_root() -> Path:
    """rankkit's cache folder (:func:`rankkit.files.user_cache_root`)."""
    return user_cache_root()


def weights_key(slot: EncoderSlot) -> str:
    """SHA-256 (hex) of the encoder's tensors (names, dtypes, shapes, bytes), structure and export version."""
    digest = hashlib.sha256(f"rankkit-onnx-{EXPORT_VERSION}\0{slot.call}\0{','.join(slot.inputs)}\0".encode())
    digest.update(slot.structure.encode("utf-8"))
    for name, tensor in sorted(slot.module.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        digest.update(f"\0{name}\0{t.dtype}\0{tuple(t.shape)}\0".encode())
        digest.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


def export_folder(checkpoint: str | os.PathLike[str] | None, key: str) -> Path:
    """``CHECKPOINT/onnx`` for a writable rankkit checkpoint, else ``<cache>/onnx/<key[:16]>``."""
    if checkpoint is not None:
        folder = Path(checkpoint)
        if (folder / "rankkit.json").is_file() and os.access(folder, os.W_OK):
            return folder / "onnx"
    return cache_root() / "onnx" / key[:16]


def _temporary(folder: Path, suffix: str) -> contextlib.AbstractContextManager[Path]:
    """A marked, locked temporary file in ``folder`` (same file system as the final name), removed on
    any exit and, after a SIGKILL, by the next export into ``folder``; a full disk while it is written
    is one line naming ``folder`` (:func:`rankkit.files.scratch_path`)."""
    return scratch_path(folder / "export", suffix, shown=folder)


# -- export and checks ---------------------------------------------------------------------------

#: Row lengths of the probe batches: the export is traced on the first and checked on both, so a
#: shape baked into the graph (a batch size, a length) fails the check instead of a later run.
PROBE_LENGTHS = ((24, 17, 9, 3), (11, 6))


def probe_batch(slot: EncoderSlot, lengths: Sequence[int] = PROBE_LENGTHS[0]) -> dict[str, torch.Tensor]:
    """A fixed batch of random token ids (right padding; segment 1 in each row's second half)."""
    generator = torch.Generator().manual_seed(1234 + len(lengths))
    lengths = [min(n, slot.max_length) for n in lengths]
    width = max(lengths)
    ids = torch.randint(1, max(2, slot.vocab_size), (len(lengths), width), generator=generator)
    mask = torch.zeros_like(ids)
    segments = torch.zeros_like(ids)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
        segments[row, n // 2:n] = 1
    ids = ids * mask
    feeds = {"input_ids": ids, "attention_mask": mask}
    if "token_type_ids" in slot.inputs:
        feeds["token_type_ids"] = segments
    if slot.extra_inputs is not None:
        feeds.update(slot.extra_inputs(feeds))
    return feeds


def _reference(slot: EncoderSlot, feeds: dict[str, torch.Tensor]) -> torch.Tensor:
    module = slot.module
    module.eval()  # dropout off: a reference taken in train mode differs from any export
    with torch.inference_mode():
        return _KeywordEncoder(module, slot)(*[feeds[n] for n in slot.inputs]).float()


def _compare(reference: torch.Tensor, out: torch.Tensor, feeds: dict[str, torch.Tensor]) -> tuple[float, torch.Tensor]:
    """Largest absolute difference on real tokens, and each row's cosine of pooled vectors."""
    if reference.dim() == 2 and reference.shape[1] == 1:  # one logit per text: their agreement over the batch
        return float((reference - out).abs().max()), torch.nn.functional.cosine_similarity(reference.T, out.T, dim=-1)
    if reference.dim() == 2:  # text vectors
        return float((reference - out).abs().max()), torch.nn.functional.cosine_similarity(reference, out, dim=-1)
    mask = feeds["attention_mask"].unsqueeze(-1).to(reference.dtype)
    diff = float(((reference - out).abs() * mask).max())
    ref = (reference * mask).sum(1) / mask.sum(1)
    got = (out * mask).sum(1) / mask.sum(1)
    return diff, torch.nn.functional.cosine_similarity(ref, got, dim=-1)


def check_against(slot: EncoderSlot, path: Path | Callable[[dict[str, torch.Tensor]], torch.Tensor],
                  reference_of: Any) -> tuple[float, torch.Tensor]:
    """Largest difference and pooled cosines of the export at ``path`` (run by ONNX Runtime), or of a
    runner ``path(feeds)``, against ``reference_of(feeds)`` over every probe batch; a graph that
    cannot run a probe shape is refused."""
    worst, cosines = 0.0, []
    for lengths in PROBE_LENGTHS:
        feeds = probe_batch(slot, lengths)
        try:
            out = _run_probe(path, slot, feeds) if isinstance(path, Path) else path(feeds).float()
        except Exception as err:
            raise RankkitError(f"the ONNX export of {slot.name} fails on a batch of another shape "
                               f"({' '.join(str(err).split())[:160]}); use --backend torch") from None
        diff, cosine = _compare(reference_of(feeds), out, feeds)
        worst = max(worst, diff) if diff == diff else float("nan")
        cosines.append(cosine)
    return worst, torch.cat(cosines)


def export_onnx(slot: EncoderSlot, path: Path) -> None:
    """Export ``slot``'s module (eval mode) to ``path`` with dynamic batch and sequence axes."""
    module = slot.export_form if slot.export_form is not None else slot.module
    was_training = module.training
    module.eval()
    feeds = probe_batch(slot)
    attention = _eager_attention(module)
    dynamic = {name: {0: "batch", 1: "sequence"} for name in slot.inputs}
    dynamic["output"] = {0: "batch"} if slot.call in ("vectors", "logits") else {0: "batch", 1: "sequence"}
    try:
        with torch.no_grad(), contextlib.redirect_stdout(None), _quiet_warnings():
            torch.onnx.export(_KeywordEncoder(module, slot), tuple(feeds[n] for n in slot.inputs), str(path),
                              input_names=list(slot.inputs), output_names=["output"], dynamic_axes=dynamic,
                              opset_version=OPSET, do_constant_folding=True, dynamo=False)
    except Exception as err:
        raise write_failure(err, path.parent, path.parent) or RankkitError(
            f"cannot export {slot.name} to ONNX ({type(err).__name__}: {' '.join(str(err).split())[:200]}); "
            "use --backend torch") from None
    finally:
        module.train(was_training)
        if attention is not None:
            module.set_attn_implementation(attention)  # type: ignore[operator]


def _eager_attention(module: nn.Module) -> str | None:
    """Switch a transformers model to eager attention for the export; returns the implementation to restore."""
    config = getattr(module, "config", None)
    current = getattr(config, "_attn_implementation", None)
    if current is None or current == "eager" or not hasattr(module, "set_attn_implementation"):
        return None
    try:
        module.set_attn_implementation("eager")  # type: ignore[operator]
    except (ValueError, ImportError, AttributeError):
        return None  # an architecture without eager attention exports as it is (and is still checked)
    return str(current)


@contextlib.contextmanager
def _quiet_warnings() -> Iterator[None]:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@contextlib.contextmanager
def _quiet_logging() -> Iterator[None]:
    """onnxruntime.quantization advises pre-processing through the root logger; rankkit's log says what matters."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)


def new_session(path: Path, threads: int | None) -> Any:
    """An ONNX Runtime CPU session over ``path`` (all graph optimisations; ``threads`` intra-op threads)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = int(threads) if threads else torch.get_num_threads()
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only: its warnings would break rankkit's one-line output
    return ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])


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
        core = ov.Core()
        config = {"INFERENCE_PRECISION_HINT": "bf16" if precision == "bf16" else "f32",
                  "INFERENCE_NUM_THREADS": int(threads) if threads else torch.get_num_threads(),
                  "PERFORMANCE_HINT": "LATENCY", "ENABLE_CPU_PINNING": False}
        try:
            with _quiet_warnings():
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


def openvino_encoder(slot: EncoderSlot, path: Path, runtime: Runtime) -> OrtEncoder:
    """The checked fp32 export at ``path`` compiled by OpenVINO, checked against torch on the probe
    batches: within :data:`TOLERANCE` at fp32 or refused; at bf16 its pooled cosine is logged."""
    session = OpenVinoSession(path, runtime.threads, runtime.precision)
    int8 = path.suffix == ".xml"  # NNCF's static int8 IR: checked against fp32 when it was built
    encoder = OrtEncoder(session, slot, getattr(slot.module, "config", None),
                         f"{path.name} (OpenVINO {'int8, ' if int8 else ''}{session.precision})")
    diff, cosine = check_against(slot, encoder.run, lambda feeds: _reference(slot, feeds))
    if session.precision == "fp32" and not int8 and not diff <= TOLERANCE:
        raise RankkitError(f"OpenVINO's fp32 run of {slot.name} differs from torch by {diff:.2e} (> {TOLERANCE:g}) on "
                           "the probe batch; refusing it: use --backend onnx or torch")
    if runtime.precision == "bf16" and session.precision != "bf16":
        log("this CPU has no native bf16: OpenVINO runs fp32")
    log(f"OpenVINO {'int8 + ' if int8 else ''}{session.precision} {slot.name}: max difference to torch {diff:.1e}, "
        "pooled-vector cosine "
        f"min {float(cosine.min()):.5f}, mean {float(cosine.mean()):.5f} on the probe batch")
    return encoder


def _run_probe(path: Path, slot: EncoderSlot, feeds: dict[str, torch.Tensor]) -> torch.Tensor:
    session = new_session(path, 1)
    (out,) = session.run(None, {n: feeds[n].numpy() for n in slot.inputs})
    return torch.from_numpy(out).float()


@dataclass
class ExportRecord:
    """What was checked when an export was built (stored beside it as JSON)."""

    file: str
    sha256: str
    key: str
    quantize: str
    max_abs_diff: float  # fp32: against torch; int8: against the fp32 export
    cosine_min: float
    cosine_mean: float
    seconds: float
    bin_sha256: str | None = None  # OpenVINO IR: its weights file
    calibration: str | None = None  # static int8: the calibration set's checksum

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def _names(slot: EncoderSlot, key: str, quantize: str) -> tuple[str, str]:
    """File names of an export: ``.onnx`` (fp32, ONNX Runtime's int8) or ``.xml`` + ``.bin`` (OpenVINO's
    static int8, ``quantize="openvino-int8"``), and its record ``.json``."""
    if quantize == "openvino-int8":
        stem = f"{slot.name}-{key[:16]}.ov-int8"
        return stem + ".xml", stem + ".json"
    stem = f"{slot.name}-{key[:16]}.{'int8' if quantize == 'int8' else 'fp32'}"
    return stem + ".onnx", stem + ".json"


def _cached(folder: Path, slot: EncoderSlot, key: str, quantize: str) -> Path | None:
    """The cached export when present and intact; a damaged one is reported and removed (rebuilt)."""
    model_name, record_name = _names(slot, key, quantize)
    path, record_path = folder / model_name, folder / record_name
    if not path.exists() and not record_path.exists():
        return None
    problem = None
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
        if record.get("key") != key:
            problem = "its record names other weights"
        elif not path.is_file():
            problem = "the .onnx file is missing"
        elif file_sha256(path) != record.get("sha256"):
            problem = "its checksum does not match (truncated or changed)"
        elif path.suffix == ".xml" and (not path.with_suffix(".bin").is_file()
                                        or file_sha256(path.with_suffix(".bin")) != record.get("bin_sha256")):
            problem = "its weights (.bin) are missing or do not match"
        elif path.suffix == ".xml" and record.get("calibration") != file_sha256(CALIBRATION_FILE):
            problem = "it was calibrated on other inputs"
    except (OSError, ValueError, AttributeError):
        problem = "its record is missing or unreadable"
    if problem is None:
        return path
    log(f"cached export {path} is damaged ({problem}); rebuilding it")
    path.unlink(missing_ok=True)
    if path.suffix == ".xml":
        path.with_suffix(".bin").unlink(missing_ok=True)
    record_path.unlink(missing_ok=True)
    return None


def _remove_stale(folder: Path, slot: EncoderSlot, key: str) -> None:
    """Exports of this slot made from other weights (a re-trained checkpoint) are deleted."""
    for old in folder.glob(f"{slot.name}-*.*"):
        if old.name.startswith(f"{slot.name}-{key[:16]}."):
            continue
        if old.suffix in (".onnx", ".json", ".xml", ".bin"):
            old.unlink(missing_ok=True)


def _commit(tmp: Path, folder: Path, name: str, record: ExportRecord, record_name: str) -> Path:
    """Move a checked export into place, then its record (the record's presence marks it complete)."""
    final = folder / name
    with writing_to(folder, folder, owned=[tmp, final]):
        os.replace(tmp, final)
    with atomic_write(folder / record_name) as handle:
        handle.write(json.dumps(record.to_dict(), indent=2, sort_keys=True) + "\n")
    return final


def build_fp32(slot: EncoderSlot, folder: Path, key: str) -> Path:
    """Export, check against torch within :data:`TOLERANCE` (refuse otherwise), store; returns the path."""
    started = time.perf_counter()
    name, record_name = _names(slot, key, "none")
    with _temporary(folder, ".onnx") as tmp:
        export_onnx(slot, tmp)
        diff, cosine = check_against(slot, tmp, lambda feeds: _reference(slot, feeds))
        if not diff <= TOLERANCE:
            raise RankkitError(f"the ONNX export of {slot.name} differs from torch by {diff:.2e} (> {TOLERANCE:g}) "
                               "on the probe batch; refusing it: use --backend torch")
        record = ExportRecord(name, file_sha256(tmp), key, "none", diff, float(cosine.min()), float(cosine.mean()),
                              time.perf_counter() - started)
        path = _commit(tmp, folder, name, record, record_name)
    log(f"exported {slot.name} to {path} (fp32; max difference to torch {diff:.1e} on the probe batch, "
        f"{record.seconds:.1f} s)")
    return path


def build_int8(slot: EncoderSlot, fp32: Path, folder: Path, key: str) -> Path:
    """Dynamic int8 (per-channel QInt8 weights) of the fp32 export; its cosine to fp32 is logged."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    started = time.perf_counter()
    name, record_name = _names(slot, key, "int8")
    with _temporary(folder, ".onnx") as tmp:
        try:
            with _quiet_warnings(), _quiet_logging():
                quantize_dynamic(str(fp32), str(tmp), per_channel=True, weight_type=QuantType.QInt8)
        except Exception as err:
            raise write_failure(err, folder, folder) or RankkitError(
                f"cannot quantize {fp32} to int8 ({type(err).__name__}: {' '.join(str(err).split())[:200]}); "
                "use --quantize none") from None
        diff, cosine = check_against(slot, tmp, lambda feeds: _run_probe(fp32, slot, feeds))
        record = ExportRecord(name, file_sha256(tmp), key, "int8", diff, float(cosine.min()), float(cosine.mean()),
                              time.perf_counter() - started)
        path = _commit(tmp, folder, name, record, record_name)
    log(f"quantized {slot.name} to int8 ({path}): pooled-vector cosine to fp32 min {record.cosine_min:.4f}, "
        f"mean {record.cosine_mean:.4f} on the probe batch")
    return path


#: NNCF's calibration inputs (rankkit/models/calibration/PROVENANCE.txt): DL20 queries, passages and pairs.
CALIBRATION_FILE = Path(__file__).with_name("calibration") / "msmarco-dl20.tsv"


def calibration_texts() -> list[tuple[str, ...]]:
    """The calibration inputs: ``(query,)``, ``(passage,)`` and ``(query, passage)`` tuples, in file order."""
    rows = []
    for line in CALIBRATION_FILE.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            rows.append(tuple(line.split("\t")[1:]))
    return rows


def calibration_feeds(slot: EncoderSlot, tokenizer: Any, max_length: int = 256) -> list[dict[str, np.ndarray]]:
    """One unpadded example per calibration input, tokenized by the model's tokenizer (single texts
    and query-passage pairs alike: one encoder may see either), in the graph's input names."""
    samples = []
    length = min(max_length, slot.max_length)
    for texts in calibration_texts():
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
    started = time.perf_counter()
    name, record_name = _names(slot, key, "openvino-int8")
    samples = calibration_feeds(slot, tokenizer)
    with _temporary(folder, ".xml") as tmp, _temporary(folder, ".npz") as npz:
        tmp_bin = tmp.with_suffix(".bin")
        try:
            arrays: dict[str, Any] = {f"{i}/{k}": v for i, sample in enumerate(samples) for k, v in sample.items()}
            np.savez(npz, **arrays)
            log(f"calibrating static int8 of {slot.name} with NNCF on {len(samples)} inputs (once per checkpoint; "
                "about 20 s for a MiniLM-sized encoder)")
            # NNCF runs in a child process that dies with this one (rankkit/models/openvino_quantize.py says why).
            child = openvino_quantize.run(str(fp32), str(tmp), str(npz))
            if child.returncode != 0 or not tmp_bin.is_file():
                lines = [line for line in child.stderr.splitlines() if line.strip()]
                reason = lines[-1] if lines else f"exit code {child.returncode}"
                raise RankkitError(f"cannot quantize {fp32} with NNCF ({reason[:300]}); use --backend onnx --quantize int8")
            session = OpenVinoSession(tmp, 1, "fp32")
            runner = OrtEncoder(session, slot, None, tmp.name).run
            diff, cosine = check_against(slot, runner, lambda feeds: _run_probe(fp32, slot, feeds))
            del session, runner
            record = ExportRecord(name, file_sha256(tmp), key, "openvino-int8", diff, float(cosine.min()),
                                  float(cosine.mean()), time.perf_counter() - started, bin_sha256=file_sha256(tmp_bin),
                                  calibration=file_sha256(CALIBRATION_FILE))
            with writing_to(folder, folder, owned=[tmp_bin]):
                os.replace(tmp_bin, (folder / name).with_suffix(".bin"))
            path = _commit(tmp, folder, name, record, record_name)
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


def prepare_export(slot: EncoderSlot, quantize: str, checkpoint: str | os.PathLike[str] | None,
                   tokenizer: Any = None) -> Path:
    """The checked export of ``slot`` (fp32, ONNX Runtime's ``int8`` or OpenVINO's static
    ``openvino-int8``, which calibrates with ``tokenizer``), built now or reused from the cache."""
    key = weights_key(slot)
    folder = export_folder(checkpoint, key)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise RankkitError(f"cannot create the ONNX cache folder {folder}: {err.strerror or err} "
                           "(set RANKKIT_CACHE_DIR to a writable folder)") from None
    with exclusive(folder, "the export cache", wait=True, on_folder=True):
        _remove_stale(folder, slot, key)
        fp32 = _cached(folder, slot, key, "none")
        if quantize == "none" and fp32 is not None:
            return fp32
        if quantize in ("int8", "openvino-int8"):
            int8 = _cached(folder, slot, key, quantize)
            if int8 is not None:
                return int8
        if fp32 is None:
            fp32 = build_fp32(slot, folder, key)
        if quantize == "openvino-int8":
            return build_openvino_int8(slot, fp32, folder, key, tokenizer)
        return fp32 if quantize == "none" else build_int8(slot, fp32, folder, key)


def use_runtime(model: nn.Module, runtime: Runtime, *, checkpoint: str | os.PathLike[str] | None = None,
                device: torch.device | None = None) -> list[Path]:
    """Put ``model`` on ``runtime``: threads set, and with ``--backend onnx``/``openvino`` its encoders
    swapped for checked ONNX Runtime sessions / OpenVINO compiled models of the (built or reused)
    ONNX export. Returns the export files in use.

    ``checkpoint`` is where the weights came from (exports are kept beside a writable rankkit
    checkpoint). A model without an exportable encoder refuses ``--backend onnx`` in one line.
    """
    runtime.check(device)
    if runtime.threads is not None:
        torch.set_num_threads(runtime.threads)
    if runtime.backend == "torch":
        return []
    slots: Sequence[EncoderSlot] = model.encoder_slots()  # type: ignore[operator]
    model.eval()
    used = []
    for slot in slots:
        module = slot.module
        if isinstance(module, OrtEncoder):
            raise RankkitError(f"{slot.name} already runs on {module.label}")
        if runtime.backend == "openvino":
            static = runtime.quantize == "int8"  # OpenVINO's int8 is NNCF's static int8, calibrated on text
            path = prepare_export(slot, "openvino-int8" if static else runtime.quantize, checkpoint,
                                  model_tokenizer(model) if static else None)
            encoder = openvino_encoder(slot, path, runtime)
        else:
            path = prepare_export(slot, runtime.quantize, checkpoint)
            encoder = OrtEncoder(new_session(path, runtime.threads), slot, getattr(module, "config", None), path.name)
        setattr(slot.owner, slot.attribute, encoder)
        used.append(path)
    engine = "OpenVINO" if runtime.backend == "openvino" else "ONNX Runtime"
    log(f"running {', '.join(s.name for s in slots)} on {engine} ({runtime.describe()}): "
        + ", ".join(str(p) for p in used))
    return used


__all__ = ["BACKENDS", "EXPORT_VERSION", "QUANTIZATIONS", "TOLERANCE", "EncoderSlot", "OpenVinoSession", "OrtEncoder", "Runtime",
           "cache_root", "export_folder", "hf_slot", "new_session", "prepare_export", "probe_batch", "use_runtime",
           "weights_key"]
