"""The checked ONNX export of an encoder slot: traced, checked against torch, stored in the cache.

Exported with torch's TorchScript exporter (``dynamo=False``, opset 17) with dynamic batch and
sequence axes; the encoder is wrapped so that its inputs are passed by keyword (transformers 5.x
refuses positional ones) and the torch side is in eval mode for the export and the reference.
A transformers encoder is exported with its ``eager`` attention (the same computation as the
default ``sdpa``): the SDPA export's boolean mask becomes ``Where``/``IsNaN`` nodes over every
attention matrix, which cost 16% of the int8 graph's time (ONNX Runtime's profiler on MiniLM), and
the eager graph re-ranks ~1.25x faster at int8 (docs/RESULTS.md, issue 16).

Checked when built: the fp32 export's outputs must equal torch's within :data:`TOLERANCE` on
fixed probe batches (padded rows, both segments, two shapes), else the command refuses with the
difference. A quantized variant is built from the fp32 export by its backend (a
:class:`Quantizer`) and compared with it. The ONNX export is run by ONNX Runtime for the checks,
whichever backend runs it afterwards.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Protocol, Sequence

import torch
from torch import nn

from rankkit.console import log
from rankkit.errors import RankkitError
from rankkit.files import exclusive, write_failure
from rankkit.models.encoder_slots import EncoderSlot
from rankkit.runtime.cache import (
    ExportRecord,
    cached_export,
    commit_export,
    export_folder,
    export_names,
    file_sha256,
    remove_stale,
    temporary_file,
    weights_key,
)

OPSET = 17
#: Largest absolute difference allowed between torch's and the fp32 export's outputs on the probe batch.
TOLERANCE = 1e-4
#: The fp32 export's file suffix.
FP32 = ".fp32.onnx"


class KeywordEncoder(nn.Module):
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


def reference_output(slot: EncoderSlot, feeds: dict[str, torch.Tensor]) -> torch.Tensor:
    module = slot.module
    module.eval()  # dropout off: a reference taken in train mode differs from any export
    with torch.inference_mode():
        return KeywordEncoder(module, slot)(*[feeds[n] for n in slot.inputs]).float()


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
            out = run_probe(path, slot, feeds) if isinstance(path, Path) else path(feeds).float()
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
        with torch.no_grad(), contextlib.redirect_stdout(None), quiet_warnings():
            torch.onnx.export(KeywordEncoder(module, slot), tuple(feeds[n] for n in slot.inputs), str(path),
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
def quiet_warnings() -> Iterator[None]:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@contextlib.contextmanager
def quiet_logging() -> Iterator[None]:
    """onnxruntime.quantization advises pre-processing through the root logger; rankkit's log says what matters."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)


def new_session(path: Path, threads: int | None, config: Mapping[str, str] | None = None) -> Any:
    """An ONNX Runtime CPU session over ``path`` (all graph optimisations; ``threads`` intra-op threads);
    ``config``: session config entries on top (the benchmark probes compare options on rankkit's own sessions).
    Threads default to torch's (the ONNX scorer, which has no torch, to the CPUs it may use)."""
    from rankkit.runtime.scorer import ort_session

    return ort_session(path, threads or torch.get_num_threads(), config)


def run_probe(path: Path, slot: EncoderSlot, feeds: dict[str, torch.Tensor]) -> torch.Tensor:
    session = new_session(path, 1)
    (out,) = session.run(None, {n: feeds[n].numpy() for n in slot.inputs})
    return torch.from_numpy(out).float()


def build_fp32(slot: EncoderSlot, folder: Path, key: str) -> Path:
    """Export, check against torch within :data:`TOLERANCE` (refuse otherwise), store; returns the path."""
    started = time.perf_counter()
    name, record_name = export_names(slot, key, FP32)
    with temporary_file(folder, ".onnx") as tmp:
        export_onnx(slot, tmp)
        diff, cosine = check_against(slot, tmp, lambda feeds: reference_output(slot, feeds))
        if not diff <= TOLERANCE:
            raise RankkitError(f"the ONNX export of {slot.name} differs from torch by {diff:.2e} (> {TOLERANCE:g}) "
                               "on the probe batch; refusing it: use --backend torch")
        record = ExportRecord(name, file_sha256(tmp), key, "none", diff, float(cosine.min()), float(cosine.mean()),
                              time.perf_counter() - started)
        path = commit_export(tmp, folder, name, record, record_name)
    log(f"exported {slot.name} to {path} (fp32; max difference to torch {diff:.1e} on the probe batch, "
        f"{record.seconds:.1f} s)")
    return path


class Quantizer(Protocol):
    """A backend's quantized variant of the fp32 export (ONNX Runtime's dynamic int8, NNCF's static int8)."""

    #: The record's ``quantize`` value and the file suffix (``.int8.onnx``, ``.ov-int8.xml``).
    kind: str
    suffix: str

    def problem(self, record: dict[str, Any]) -> str | None:
        """Why a cached variant with this record is stale (beyond its checksums), or None."""

    def build(self, slot: EncoderSlot, fp32: Path, folder: Path, key: str) -> Path:
        """Build, check and store the variant of the checked ``fp32`` export; returns its path."""


def prepare_export(slot: EncoderSlot, checkpoint: str | os.PathLike[str] | None,
                   quantizer: Quantizer | None = None) -> Path:
    """The checked export of ``slot``: fp32, or ``quantizer``'s variant of it, built now or reused from the cache."""
    key = weights_key(slot)
    folder = export_folder(checkpoint, key)  # in the cache, keyed by the weights: never inside the checkpoint
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise write_failure(err, folder) or RankkitError(
            f"cannot create the ONNX cache folder {folder}: {err.strerror or err} "
            "(set RANKKIT_CACHE_DIR to a writable folder)") from None
    if folder.is_symlink():  # what is built or removed there would land in the folder it points to
        raise RankkitError(f"the ONNX cache folder {folder} is a link (to {os.path.realpath(folder)}); refusing to "
                           "write or remove files through it: remove the link or set RANKKIT_CACHE_DIR")
    # Two processes on one cache: the second waits, then finds the first one's export.
    with exclusive(folder, "the export cache", wait=True, on_folder=True):
        remove_stale(folder, slot, key)
        fp32 = cached_export(folder, slot, key, FP32)
        if quantizer is None and fp32 is not None:
            return fp32
        if quantizer is not None:
            variant = cached_export(folder, slot, key, quantizer.suffix, quantizer.problem)
            if variant is not None:
                return variant
        if fp32 is None:
            fp32 = build_fp32(slot, folder, key)
        return fp32 if quantizer is None else quantizer.build(slot, fp32, folder, key)


__all__ = ["FP32", "OPSET", "TOLERANCE", "Quantizer", "check_against", "export_onnx", "new_session", "prepare_export",
           "probe_batch", "reference_output", "run_probe"]
