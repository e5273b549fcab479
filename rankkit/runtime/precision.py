"""How torch computes a model's numbers on its device: weights' dtype, autocast, TF32 (:class:`Numerics`).

``--precision`` on the torch backend means:

==========  ================================================  =====================================
precision   CPU                                               CUDA
==========  ================================================  =====================================
fp32        fp32 weights, fp32 matmuls                        the same (TF32 off)
tf32        (refused: CUDA only)                              fp32 weights, TF32 matmuls (named, never silent)
bf16        fp32 weights under bf16 autocast                  the encoders' weights in bf16 (below)
fp16        (refused: CUDA only)                              the encoders' weights in fp16 (below)
==========  ================================================  =====================================

On CUDA a half precision puts the *weights* in the precision they run in: each encoder a model declares
(:meth:`~rankkit.models.base.RankingModel.encoder_slots`) is cast to bf16/fp16, except a sequence classifier's
own head (BERT's ``classifier``), which stays fp32 and receives its input in fp32, so scores keep fp32's
resolution (a bf16 score of 5 has a step of 0.03: ties); the encoder's outputs are handed to rankkit's heads
in fp32. Measured on an H200 (docs/RESULTS.md issue 36): bf16 weights re-rank 25 % faster than fp32 weights
under autocast. A model that declares no encoder runs under autocast instead, as before.

Halving the weights can move scores: ``--precision auto`` on CUDA takes bf16 only where the model's outputs on
the bundled DL20 texts agree with fp32 within :data:`MIN_HALF_CORRELATION` / :data:`MIN_HALF_COSINE`
(:func:`half_check`, run before the weights are cast for good), else TF32 under the same check, else fp32.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Iterator

import torch
from torch import nn

from rankkit.errors import RankkitError
from rankkit.models.base import RankingModel
from rankkit.models.encoder_slots import EncoderSlot

#: What a half precision must keep on real text against fp32 (the quality band of issue 36: score
#: correlation >= 0.999; pooled vectors: cosine mean >= 0.999 and min >= 0.99).
MIN_HALF_CORRELATION, MIN_HALF_COSINE_MEAN, MIN_HALF_COSINE = 0.999, 0.999, 0.99
HALF_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True)
class Numerics:
    """How torch runs a loaded model: ``weights`` the encoders' dtype (None: fp32), ``autocast`` a dtype to
    autocast to (None: off), ``tf32`` whether fp32 matmuls may use TF32."""

    weights: torch.dtype | None = None
    autocast: torch.dtype | None = None
    tf32: bool = False

    def describe(self) -> str:
        parts = []
        if self.weights is not None:
            parts.append(f"{str(self.weights).removeprefix('torch.')} encoder weights")
        if self.autocast is not None:
            parts.append(f"{str(self.autocast).removeprefix('torch.')} autocast")
        if self.tf32:
            parts.append("TF32 matmuls")
        return ", ".join(parts) or "fp32"

    @contextlib.contextmanager
    def running(self, device: torch.device) -> Iterator[None]:
        """Autocast and the TF32 switches for the duration (restored after: they are process-wide)."""
        with contextlib.ExitStack() as stack:
            if self.autocast is not None:
                stack.enter_context(torch.autocast(device_type=device.type, dtype=self.autocast))
            if device.type == "cuda":
                matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
                torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = self.tf32
                stack.callback(_restore_tf32, matmul, cudnn)
            yield


def _restore_tf32(matmul: bool, cudnn: bool) -> None:
    torch.backends.cuda.matmul.allow_tf32 = matmul
    torch.backends.cudnn.allow_tf32 = cudnn


def check_device_precision(precision: str, device: torch.device) -> None:
    """Refuse a precision the device cannot run (one line, before any work)."""
    if precision in ("tf32", "fp16") and device.type != "cuda":
        raise RankkitError(f"--precision {precision} needs a CUDA device; use bf16 or fp32 on the CPU")


def slots_of(model: nn.Module) -> list[EncoderSlot] | None:
    """The model's declared encoders, or None for a model that declares none."""
    try:
        slots = model.encoder_slots()  # type: ignore[operator]
    except (RankkitError, AttributeError, TypeError):
        return None
    return list(slots) or None


def _head_children(module: nn.Module) -> list[nn.Module]:
    """A sequence classifier's own head (the children beside its base model); none for a bare encoder."""
    base = getattr(module, "base_model", module)
    if base is module:
        return []
    return [child for child in module.children() if child is not base and any(True for _ in child.parameters())]


def _float_inputs(_module: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args)


def _float_outputs(_module: nn.Module, _args: Any, output: Any) -> Any:
    if isinstance(output, torch.Tensor):
        return output.float() if output.is_floating_point() else output
    if isinstance(output, tuple) and not hasattr(output, "keys"):
        return type(output)(_float_outputs(_module, _args, o) for o in output)
    if hasattr(output, "keys"):  # a transformers ModelOutput: set items in place (attributes follow)
        for key in list(output.keys()):
            value = output[key]
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                output[key] = value.float()
    return output


def cast_encoders(model: RankingModel, dtype: torch.dtype) -> list[str]:
    """Cast each declared encoder of ``model`` to ``dtype`` in place (a classifier's head stays fp32 and gets fp32
    input; the encoder's outputs come back fp32). Returns the encoders' names; raises when the model declares none."""
    slots = slots_of(model)
    if slots is None:
        raise RankkitError(f"model {model.name!r} declares no encoder to cast")
    for slot in slots:
        module = slot.module
        module.to(dtype)
        for head in _head_children(module):
            head.float()
            head.register_forward_pre_hook(_float_inputs)
        module.register_forward_hook(_float_outputs)
    return [s.name for s in slots]


def _outputs(slot: EncoderSlot, feeds: list[dict[str, torch.Tensor]], device: torch.device) -> list[torch.Tensor]:
    """The slot's outputs (scores ``[B, 1]``, hidden states ``[B, L, H]`` or vectors ``[B, D]``) on each feed, fp32."""
    from rankkit.runtime.export import reference_output

    module = slot.module
    out = []
    with torch.inference_mode():
        for feed in feeds:
            out.append(reference_output(slot, {k: v.to(device) for k, v in feed.items()}).float().cpu())
    del module
    return out


def agreement(slot: EncoderSlot, feeds: list[dict[str, torch.Tensor]], reference: list[torch.Tensor],
              got: list[torch.Tensor], where: str, *, min_correlation: float, min_cosine_mean: float,
              min_cosine: float) -> str:
    """How far ``got`` is from ``reference`` (one tensor a feed): score correlation for one score a text, pooled
    cosine otherwise. Returns the measure; raises :class:`RankkitError` below the thresholds."""
    scores_ref, scores_got, cosines = [], [], []
    for feed, ref, out in zip(feeds, reference, got):
        if ref.dim() == 2 and ref.shape[1] == 1:
            scores_ref.append(ref[:, 0])
            scores_got.append(out[:, 0])
            continue
        if ref.dim() == 3:
            mask = feed["attention_mask"].unsqueeze(-1).to(ref.dtype)
            ref, out = (ref * mask).sum(1) / mask.sum(1), (out * mask).sum(1) / mask.sum(1)
        cosines.append(torch.nn.functional.cosine_similarity(ref, out, dim=-1))
    if scores_ref:
        ref_all, got_all = torch.cat(scores_ref).double(), torch.cat(scores_got).double()
        correlation = float(torch.corrcoef(torch.stack([ref_all, got_all]))[0, 1])
        measure = f"score correlation {correlation:.4f} on {where}"
        if not correlation >= min_correlation:
            raise RankkitError(f"{measure} (< {min_correlation})")
        return measure
    cosine = torch.cat(cosines)
    measure = f"pooled cosine to torch fp32 mean {float(cosine.mean()):.4f}, min {float(cosine.min()):.4f} on {where}"
    if not (float(cosine.mean()) >= min_cosine_mean and float(cosine.min()) >= min_cosine):
        raise RankkitError(f"{measure} (needs mean >= {min_cosine_mean}, min >= {min_cosine})")
    return measure


def check_feeds(slot: EncoderSlot, tokenizer: Any, count: int) -> tuple[list[dict[str, torch.Tensor]], str]:
    """``count`` bundled DL20 texts (queries, passages, pairs) and the long-passage check set (SQuAD, PubMedQA,
    MedQuAD passages and pairs up to the model's length, at most 512 tokens: issue 41) as the slot's inputs, one
    text a feed."""
    from rankkit.runtime.export import PROBE_LENGTHS, probe_batch
    from rankkit.runtime.openvino_backend import calibration_feeds, check_texts

    if tokenizer is None:
        return [probe_batch(slot, lengths) for lengths in PROBE_LENGTHS], "the probe batches (no tokenizer)"
    samples = calibration_feeds(slot, tokenizer)
    step = max(1, len(samples) // count)
    feeds = [{k: torch.from_numpy(v) for k, v in s.items()} for s in samples[::step][:count]]
    long = calibration_feeds(slot, tokenizer, max_length=512, rows=check_texts())
    feeds += [{k: torch.from_numpy(v) for k, v in s.items()} for s in long]
    return feeds, f"{len(feeds) - len(long)} bundled DL20 texts and {len(long)} long out-of-domain ones"


def half_check(model: RankingModel, precision: str, device: torch.device, tokenizer: Any, count: int) -> str:
    """Run ``model``'s encoders on real text in fp32 and in ``precision`` (bf16/fp16 weights, or TF32) and compare
    (:func:`agreement` with this module's thresholds). The model is left in fp32 whatever the outcome (the half
    copy is made and dropped here). Returns the measure; raises :class:`RankkitError` when it is out of band."""
    import copy

    slots = slots_of(model)
    if slots is None:
        raise RankkitError(f"model {model.name!r} declares no encoder to check")
    measures = []
    for slot in slots:
        feeds, where = check_feeds(slot, tokenizer, count)
        reference = _outputs(slot, feeds, device)
        original = slot.module
        if precision == "tf32":
            with Numerics(tf32=True).running(device):
                got = _outputs(slot, feeds, device)
        else:
            half = copy.deepcopy(original).to(HALF_DTYPES[precision])
            for head in _head_children(half):
                head.float()
                head.register_forward_pre_hook(_float_inputs)
            half.register_forward_hook(_float_outputs)
            setattr(slot.owner, slot.attribute, half)
            try:
                got = _outputs(slot, feeds, device)
            finally:
                setattr(slot.owner, slot.attribute, original)
                del half
        measures.append(agreement(slot, feeds, reference, got, where, min_correlation=MIN_HALF_CORRELATION,
                                  min_cosine_mean=MIN_HALF_COSINE_MEAN, min_cosine=MIN_HALF_COSINE))
    return "; ".join(measures)


def apply_numerics(model: RankingModel, backend: str, precision: str, device: torch.device) -> Numerics:
    """Put ``model`` in the numerics of ``precision`` on ``device`` (casting its encoders' weights for a half
    precision on CUDA) and return them. Other backends than torch run their own precision in their encoders; the
    torch parts around them stay fp32."""
    check_device_precision(precision, device)
    if backend != "torch" or precision == "fp32":
        return Numerics()
    if precision == "tf32":
        return Numerics(tf32=True)
    dtype = HALF_DTYPES[precision]
    if device.type != "cuda":
        return Numerics(autocast=dtype)  # the CPU's bf16: autocast over fp32 weights, as measured for auto
    if slots_of(model) is None:
        return Numerics(autocast=dtype)
    cast_encoders(model, dtype)
    return Numerics(weights=dtype)


__all__ = ["HALF_DTYPES", "MIN_HALF_CORRELATION", "MIN_HALF_COSINE", "MIN_HALF_COSINE_MEAN", "Numerics", "agreement",
           "apply_numerics", "cast_encoders", "check_device_precision", "check_feeds", "half_check", "slots_of"]
