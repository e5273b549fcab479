"""``--backend auto`` and ``--precision auto`` at inference: a choice per CPU class and model family, from measurements.

:data:`TABLE` lists, per CPU class (:mod:`rankkit.cpu`) and model family, the backends to try,
fastest first, each with the speed-up and quality change that put it there and the machine (with
its CPU flags) it was measured on. :func:`choose` takes the first row whose backend is installed,
whose export builds and passes its check against torch, and, for a lossy row (int8, bf16), whose
outputs agree with torch fp32 on real text on *this* CPU (:func:`quality_check`: the bundled DL20
queries, passages and pairs; an int8 kernel that saturates on one CPU is caught there). Nothing
passes: torch fp32. For models under :data:`~rankkit.devices.AUTO_MIN_PARAMETERS` auto is torch fp32.

On CUDA the backend is torch, and ``--precision auto`` (with ``--backend auto`` or ``torch``) is decided on real
text: bf16 encoder weights where the model's outputs on the bundled DL20 texts keep fp32's within the band of
:mod:`rankkit.runtime.precision` (score correlation >= 0.999, pooled cosine mean >= 0.999), else TF32 matmuls
under the same check, else fp32; the log line names the choice and the measure (docs/RESULTS.md issue 36).

An explicit ``--backend`` wins; with it, ``--precision auto`` is bf16 where the CPU multiplies bf16
in hardware and the backend runs bf16 (torch autocast, OpenVINO), else fp32, and ``--quantize auto``
is none.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from torch import nn

from rankkit.console import log
from rankkit.cpu import cpu_class, describe_cpu, native_bf16
from rankkit.devices import AUTO_MIN_PARAMETERS
from rankkit.errors import RankkitError
from rankkit.files import atomic_write
from rankkit.models.base import BiEncoder, RankingModel
from rankkit.models.encoder_slots import EncoderSlot
from rankkit.runtime.adapter import OrtEncoder
from rankkit.runtime.cache import file_sha256
from rankkit.runtime.export import reference_output
from rankkit.runtime.registry import backend_names, get_backend
from rankkit.runtime.settings import AUTO, Runtime

#: Where each row's numbers come from.
AVX512_BF16_RUN = ("AMD EPYC, flags avx2 fma avx512f avx512_vnni avx512_bf16 (no AMX); bench/inference.py, DL19 BM25 "
                   "top-100: 2 threads, docs/RESULTS.md issue 16 (2026-11-23), and 1 thread on a Zen 5 EPYC "
                   "(family 26), 3 interleaved rounds, docs/RESULTS.md issue 26 (2026-11-27)")
AVX2_RUN = ("AMD EPYC Zen 3, 2 threads, flags avx2 fma (no VNNI, no AVX-512, no native bf16); 12 DL19 queries x "
            "BM25 top-100, interleaved over 3 rounds (issue 26's text); quality: docs/RESULTS.md issue 16 "
            "(Zen 3, DL19 top-20); and the AVX2 kernels of torch, ONNX Runtime and OpenVINO on a Zen 5 EPYC "
            "(bench/cpu_mask.py: CPUID answered without AVX-512, VNNI and BF16; flags seen avx2 fma), 2 threads, "
            "DL19 BM25 top-100, docs/RESULTS.md 4.10 (2026-11-27)")


DEMO_RUN = ("AMD EPYC, 2 threads, flags avx2 fma avx512f avx512_vnni avx512_bf16; `make demo` (dense index of the "
            "10,852-passage DL19 pool, retrieval, MatRank --encoder bi re-ranking); docs/RESULTS.md, issue 16, 2026-11-23")


@dataclass(frozen=True)
class Row:
    """One measured choice: on CPUs of class ``cpu``, models of ``family`` doing ``task`` run ``backend``
    ``quantize`` ``precision``."""

    cpu: str
    family: str  # "bi-encoder", "cross-encoder" (mono), "any" (every other re-ranker)
    task: str  # "rerank" (rerank, explain) or "encode" (index --kind dense, retrieve)
    backend: str
    quantize: str
    precision: str
    speed: str
    quality: str
    measured: str  # machine, CPU flags, benchmark and where its numbers are

    @property
    def runtime_name(self) -> str:
        return " ".join([self.backend] + ([self.quantize] if self.quantize != "none" else []) + [self.precision])


def _rows(cpu: str, family: str, task: str, measured: str, *rows: tuple[str, str, str, str, str]) -> list[Row]:
    return [Row(cpu, family, task, backend, quantize, precision, speed, quality, measured)
            for backend, quantize, precision, speed, quality in rows]


#: The lossless fallback of every class: the fp32 export, checked within 1e-4 of torch at every compile.
_OV_FP32_AVX512 = ("openvino", "none", "fp32", "1.32x torch fp32 bi / 1.14x mono re-ranking, 1.21x encoding",
                   "lossless (fp32 export checked within 1e-4 of torch)")
_OV_FP32_AVX2 = ("openvino", "none", "fp32", "1.27x torch fp32 bi / 1.20x mono re-ranking, 1.18x encoding",
                 "lossless (fp32 export checked within 1e-4 of torch)")
_NO_BF16 = " (its int8/fp32 kernels; bf16 unused; not measured on a CPU of this class)"

TABLE: tuple[Row, ...] = tuple(
    # No int8 row re-ranks any more (issue 41): every int8 path left the 0.005 nDCG@10 band on some out-of-domain
    # collection of docs/RESULTS.md, and a self-check on four queries cannot see a change that size:
    #   OpenVINO static int8 + bf16 (the zero-shot bi-encoder, VNNI/BF16 kernels): NPL -0.0085, TIME -0.0051;
    #   ONNX Runtime dynamic int8, a sequence at a time (VNNI kernels): CISI -0.0052 (MEDLINE -0.0047);
    #   the same on AVX2 kernels (vpmaddubsw saturation): NPL -0.0075; the DL19 CPU recipe's mono MEDLINE +0.0057.
    # They stay explicit choices (--quantize int8, int8-u8). bf16 and fp32 kept every collection measured.
    # AVX-512 with VNNI and native bf16 (and AMX CPUs, which have both).
    _rows("avx512-bf16", "bi-encoder", "rerank", AVX512_BF16_RUN,
          ("openvino", "none", "bf16", "2.36x torch fp32 re-ranking (2 threads), 3.66x (1 thread)",
           "DL19 nDCG@10 +0.0001; out of domain MEDLINE +0.0002, NPL +0.0000, TIME +0.0002, CISI +0.0003 "
           "(docs/RESULTS.md issue 41)"),
          _OV_FP32_AVX512)
    # Encoding a whole corpus: static int8 + bf16 moved the demo's dense retrieval over the DL19 pool by
    # -0.0067 nDCG@10 (outside the 0.005 band), bf16 alone by -0.0018.
    + _rows("avx512-bf16", "bi-encoder", "encode", DEMO_RUN,
            ("openvino", "none", "bf16", "2.08x torch fp32 encoding (2 threads), 3.77x (1 thread, Zen 5)",
             "dense retrieval over the DL19 pool nDCG@10 -0.0018 (ONNX Runtime int8: -0.0103)"), _OV_FP32_AVX512)
    + _rows("avx512-bf16", "cross-encoder", "rerank", AVX512_BF16_RUN,
            ("openvino", "none", "bf16", "2.03x torch fp32 re-ranking (2 threads), 3.77x (1 thread)",
             "DL19 nDCG@10 -0.0028 and +0.0002 (two monos); out of domain: docs/RESULTS.md issue 41"),
            _OV_FP32_AVX512)
    # Other re-rankers (MatRank, Set-Encoder, document models): the demo's MatRank --encoder bi moved -0.0002
    # nDCG@10 on OpenVINO bf16 and -0.0083 on static int8 + bf16 (left out).
    + _rows("avx512-bf16", "any", "rerank", DEMO_RUN,
            ("openvino", "none", "bf16", "2.03x mono re-ranking (bf16 kernels)", "MatRank nDCG@10 -0.0002 in the demo"),
            _OV_FP32_AVX512)
    # AVX-512 with VNNI, bf16 emulated: the fp32 rows of the AVX512-BF16 host (its int8 rows left, see above).
    + _rows("avx512-vnni", "bi-encoder", "rerank", AVX512_BF16_RUN + _NO_BF16, _OV_FP32_AVX512)
    + _rows("avx512-vnni", "bi-encoder", "encode", AVX512_BF16_RUN + _NO_BF16, _OV_FP32_AVX512)
    + _rows("avx512-vnni", "cross-encoder", "rerank", AVX512_BF16_RUN + _NO_BF16, _OV_FP32_AVX512)
    + _rows("avx512-vnni", "any", "rerank", AVX512_BF16_RUN + _NO_BF16, _OV_FP32_AVX512)
    # AVX2: OpenVINO fp32 (ONNX Runtime's dynamic int8 was 1.7-1.9x there but left the band out of domain, above;
    # OpenVINO's static int8 is slower than torch there).
    + _rows("avx2", "bi-encoder", "rerank", AVX2_RUN, _OV_FP32_AVX2)
    + _rows("avx2", "bi-encoder", "encode", AVX2_RUN, _OV_FP32_AVX2)
    + _rows("avx2", "cross-encoder", "rerank", AVX2_RUN, _OV_FP32_AVX2)
    + _rows("avx2", "any", "rerank", AVX2_RUN + " (measured on mono)", _OV_FP32_AVX2)
)
#: Classes without rows of their own use another class's rows (the measured order applies; speed-ups differ).
BORROWED = {"amx": "avx512-bf16", "avx512": "avx2"}
#: Where each class's numbers were measured, for log lines.
MEASURED_ON = {"avx512-bf16": "an AVX512-BF16 EPYC", "avx512-vnni": "an AVX512-BF16 EPYC",
               "avx2": "a Zen 3 AVX2 EPYC and on AVX2 kernels (bench/cpu_mask.py)"}

#: Agreement with torch fp32 on real text a lossy row must reach on this CPU: pooled-vector cosine (mean,
#: min) for encoders, Pearson correlation of the scores for score heads. int8 MiniLM measured 0.9943 mean,
#: 0.9775 min over 2,000 DL19 passages (onnx int8, AVX512-BF16 host); a saturating kernel falls far below.
MIN_COSINE_MEAN, MIN_COSINE, MIN_CORRELATION = 0.99, 0.95, 0.99
#: Bundled calibration inputs used by the check (every k-th, in file order).
QUALITY_INPUTS = 48


def family_of(model: nn.Module) -> str:
    """The table's family of ``model``: ``bi-encoder``, ``cross-encoder`` (mono) or ``any``."""
    if isinstance(model, BiEncoder):
        return "bi-encoder"
    return "cross-encoder" if getattr(model, "name", None) == "mono" else "any"


def scorer_model(model: nn.Module) -> bool:
    """Whether ``model`` is what the ONNX scorer runs (:mod:`rankkit.runtime.scorer`): ``mono`` with a one-label
    sequence-classification head and rankkit's pair truncation."""
    from rankkit.models.cross_encoders.pair_encoders import ClassifierPairEncoder

    pairs = getattr(model, "pairs", None)
    return (getattr(model, "name", None) == "mono" and isinstance(pairs, ClassifierPairEncoder) and pairs.labels == 1
            and pairs.truncation == "pair")


def rows_for(cls: str, family: str, task: str = "rerank") -> list[Row]:
    """The table's rows for CPU class ``cls``, ``family`` and ``task``, in preference order."""
    source = cls if any(r.cpu == cls for r in TABLE) else BORROWED.get(cls, cls)
    return [r for r in TABLE if r.cpu == source and r.family == family and r.task == task]


def explicit_precision(backend: str, device: torch.device, parameters: int) -> tuple[str, str]:
    """``--precision auto`` with an explicit backend: bf16 where the CPU has it natively and the backend runs it."""
    if device.type != "cpu":
        return "fp32", "GPU inference in bf16/fp16 is not measured yet (bench/gpu_suite.py)"
    if "bf16" not in get_backend(backend).precisions:
        return "fp32", f"--backend {backend} runs fp32"
    if not native_bf16():
        return "fp32", f"CPU {describe_cpu()} has no native bf16"
    if parameters < AUTO_MIN_PARAMETERS:
        return "fp32", f"{parameters:,} parameters, below {AUTO_MIN_PARAMETERS:,}"
    return "bf16", f"CPU {describe_cpu()} has native bf16"


def candidates(runtime: Runtime, model: RankingModel, device: torch.device,
               task: str = "rerank") -> list[tuple[Runtime, str]]:
    """The runtimes to try for ``runtime``'s ``auto`` parts, in order, each with why."""
    parameters = sum(p.numel() for p in model.parameters())
    threads = runtime.threads
    if device.type == "cuda" and runtime.backend in (AUTO, "torch") and runtime.quantize in (AUTO, "none"):
        return cuda_candidates(runtime)
    if runtime.backend != AUTO:
        chosen, why = (runtime.precision, "as given") if runtime.precision != AUTO else \
            explicit_precision(runtime.backend, device, parameters)
        return [(Runtime(runtime.backend, "none" if runtime.quantize == AUTO else runtime.quantize, threads, chosen),
                 f"--precision auto: {why}")]
    quantize: str | None = None if runtime.quantize == AUTO else runtime.quantize
    precision: str | None = None if runtime.precision == AUTO else runtime.precision
    torch_runs = quantize in (None, "none")
    safe = [(Runtime("torch", "none", threads, precision or "fp32"), "")] if torch_runs else []
    if parameters < AUTO_MIN_PARAMETERS and torch_runs and precision is None:
        small = [(safe[0][0], f"{parameters:,} parameters: below {AUTO_MIN_PARAMETERS:,}, a backend's one-time export "
                              "costs more than it saves")]
        if task == "rerank" and scorer_model(model) and get_backend("onnx").available().ok:
            # The ONNX scorer's model (rankkit.runtime.scorer): the export is built once per checkpoint, and
            # every later `rankkit rerank` of it starts in ~0.4 s instead of ~4 s of torch and transformers
            # imports (issue 39). The CLI and this path run the same graph on the same batches: the same numbers.
            from rankkit.runtime.scorer import auto_reason

            return [(Runtime("onnx", "none", threads, "fp32"), auto_reason(AUTO_MIN_PARAMETERS))] + small
        return small
    cls, family = cpu_class(), family_of(model)
    out = []
    for row in rows_for(cls, family, task):
        if quantize not in (None, row.quantize) or precision not in (None, row.precision):
            continue
        borrowed = f", rows of class {BORROWED[cls]}" if cls in BORROWED else ""
        out.append((Runtime(row.backend, row.quantize, threads, row.precision),
                    f"{family} {task}, CPU {describe_cpu()}{borrowed}: {row.speed}, {row.quality}, measured on "
                    f"{MEASURED_ON.get(row.cpu, row.cpu)} (rankkit doctor; docs/RESULTS.md)"))
    if not torch_runs:  # --quantize int8 with --backend auto: then every backend that runs it, in registry order
        out += [(Runtime(b, quantize or "none", threads, precision or "fp32"), f"--quantize {quantize}: --backend {b}")
                for b in backend_names() if _runs(b, quantize or "none", precision or "fp32")
                and all(r.backend != b for r, _ in out)]
        return out
    reason = "no row of the table fits" if out else f"no measured row for {family} {task} on CPU class {cls}"
    return out + [(safe[0][0], f"{reason}: torch")]


def cuda_candidates(runtime: Runtime) -> list[tuple[Runtime, str]]:
    """On CUDA: the precision given, or (``auto``) bf16 (fp16 on a GPU without bf16), TF32, fp32, each of the
    first two kept only if :func:`rankkit.runtime.precision.half_check` passes on real text."""
    from rankkit.runtime.precision import MIN_HALF_CORRELATION

    if runtime.precision != AUTO:
        return [(Runtime("torch", "none", runtime.threads, runtime.precision), "as given")]
    half = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    band = f"where it keeps fp32's scores on real text (correlation >= {MIN_HALF_CORRELATION})"
    return [(Runtime("torch", "none", runtime.threads, half), f"CUDA: {half} encoder weights {band}"),
            (Runtime("torch", "none", runtime.threads, "tf32"), f"CUDA: TF32 matmuls, fp32 weights, {band}"),
            (Runtime("torch", "none", runtime.threads, "fp32"), "CUDA: fp32 (no faster precision kept the band)")]


def _runs(backend: str, quantize: str, precision: str) -> bool:
    return quantize in get_backend(backend).quantizations and precision in get_backend(backend).precisions


def quality_check(slot: EncoderSlot, encoder: nn.Module, tokenizer: Any) -> str:
    """Agreement of ``encoder`` (a lossy backend's session) with the torch module in ``slot`` on real text
    (the bundled DL20 calibration inputs through ``tokenizer``; probe batches without one). Returns the
    measure; raises :class:`RankkitError` when it is below the thresholds of this module."""
    from rankkit.runtime.precision import agreement, check_feeds

    feeds, where = check_feeds(slot, tokenizer, QUALITY_INPUTS)
    assert isinstance(encoder, OrtEncoder)
    references = [reference_output(slot, feed) for feed in feeds]
    outputs = [encoder.run(feed).float() for feed in feeds]
    return agreement(slot, feeds, references, outputs, where, min_correlation=MIN_CORRELATION,
                     min_cosine_mean=MIN_COSINE_MEAN, min_cosine=MIN_COSINE)


#: Texts each property check scores (a query and this many passages of the bundled calibration set).
PROPERTY_TEXTS = 12
#: Cosine a text's vector must keep between being encoded in a batch and alone (float rounding of a lossless or
#: statically quantized backend stays above it; a per-batch quantization scale falls to 0.989).
MIN_BATCH_COSINE = 0.9995


def property_check(model: RankingModel) -> str:
    """The properties the model's papers state, checked on the backend it now runs (issue 37): a
    permutation-invariant model gives bit-identical scores to a list and its reverse; a bi-encoder encodes a text
    the same (cosine >= :data:`MIN_BATCH_COSINE`) in a batch and alone. Returns what was checked; raises
    :class:`RankkitError` naming the broken property."""
    from rankkit.models.base import BiEncoder
    from rankkit.runtime.openvino_backend import calibration_texts

    from rankkit.runtime.openvino_backend import model_tokenizer

    singles = [t[0] for t in calibration_texts() if len(t) == 1][: PROPERTY_TEXTS + 1]
    tokenizer = model_tokenizer(model)
    if tokenizer is not None:  # short texts: the properties are about order and batches, and positions may be few
        cut = tokenizer(singles, add_special_tokens=False, truncation=True, max_length=16)["input_ids"]
        singles = tokenizer.batch_decode([ids[: 8 if i == 0 else 16] for i, ids in enumerate(cut)])
    query, passages = singles[0], singles[1:]
    done = []
    with torch.inference_mode():
        if model.permutation_invariant:
            forward = model.rerank_scores([query], [passages], 4)[0]
            backward = model.rerank_scores([query], [passages[::-1]], 4)[0].flip(0)
            if not torch.equal(forward, backward):
                raise RankkitError(f"breaks permutation invariance (a list and its reverse differ by "
                                   f"{float((forward - backward).abs().max()):.2e})")
            done.append("permutation-invariant")
        if isinstance(model, BiEncoder):
            together = model.encode(passages, is_query=False, batch_size=len(passages))
            alone = torch.cat([model.encode([p], is_query=False) for p in passages])
            cosine = float(torch.nn.functional.cosine_similarity(together, alone, dim=-1).min())
            if not cosine >= MIN_BATCH_COSINE:
                raise RankkitError(f"makes a text's vector depend on its batch (cosine {cosine:.4f} batched vs alone, "
                                   f"< {MIN_BATCH_COSINE})")
            done.append(f"batch-independent (cosine {cosine:.4f})")
    return ", ".join(done)


#: The self-check on the user's own input (issue 41): the run's first queries, at most this many candidates each
#: (64 pairs: a few seconds of torch fp32 for MiniLM on 2 cores, paid once per export, CPU and input length).
SAMPLE_QUERIES, SAMPLE_DEPTH, SAMPLE_TEXTS = 4, 16, 48
#: What a lossy row must keep on that sample against torch fp32, averaged over its queries: Kendall's tau and top-10
#: agreement. A guard against gross drift, not a measure of a 0.005 nDCG change (four queries cannot resolve one):
#: every int8 and bf16 row measured on MEDLINE, NPL, CISI and TIME kept a mean tau of 0.93 or more there
#: (docs/RESULTS.md issue 41).
MIN_SAMPLE_TAU, MIN_SAMPLE_TOP10 = 0.85, 0.85


@dataclass(frozen=True)
class InputSample:
    """A few of the run's own inputs for auto's self-check (issue 41): queries with their candidate texts
    (re-ranking) or texts (encoding). Build one with :meth:`of_lists` or :meth:`of_texts`."""

    queries: tuple[str, ...] = ()
    candidates: tuple[tuple[str, ...], ...] = ()
    texts: tuple[str, ...] = ()

    @classmethod
    def of_lists(cls, queries: Sequence[str], candidates: Sequence[Sequence[str]]) -> "InputSample":
        """The first :data:`SAMPLE_QUERIES` queries with their first :data:`SAMPLE_DEPTH` candidates (two at least)."""
        chosen = [(q, tuple(c[:SAMPLE_DEPTH])) for q, c in zip(queries, candidates) if len(c) >= 2][:SAMPLE_QUERIES]
        return cls(tuple(q for q, _ in chosen), tuple(c for _, c in chosen))

    @classmethod
    def of_texts(cls, texts: Sequence[str]) -> "InputSample":
        return cls(texts=tuple(texts[:SAMPLE_TEXTS]))

    def __bool__(self) -> bool:
        return bool(self.candidates or self.texts)

    def shape(self, tokenizer: Any) -> str:
        """The sample's token lengths, rounded up to 64 (median and longest): what the cached result is keyed by,
        so a run of other lengths is checked again."""
        texts = list(self.texts) or [t for c in self.candidates for t in c]
        if tokenizer is None or not texts:
            return f"{len(texts)} texts"
        lengths = sorted(len(ids) for ids in tokenizer(texts, truncation=True, max_length=512)["input_ids"])
        up = lambda n: -(-n // 64) * 64  # noqa: E731
        return f"median {up(lengths[len(lengths) // 2])}, longest {up(lengths[-1])} tokens"


def kendall_tau(a: Sequence[float], b: Sequence[float]) -> float:
    """Kendall's tau-b of two score lists (1: the same order; ties count as neither agreeing nor not)."""
    concordant = discordant = ties_a = ties_b = 0
    for i in range(len(a)):
        for j in range(i + 1, len(a)):
            x, y = (a[i] > a[j]) - (a[i] < a[j]), (b[i] > b[j]) - (b[i] < b[j])
            if x == 0 and y == 0:
                continue
            if x == 0:
                ties_a += 1
            elif y == 0:
                ties_b += 1
            elif x == y:
                concordant += 1
            else:
                discordant += 1
    denominator = ((concordant + discordant + ties_a) * (concordant + discordant + ties_b)) ** 0.5
    return (concordant - discordant) / denominator if denominator else 1.0


def top_agreement(a: Sequence[float], b: Sequence[float], k: int = 10) -> float:
    """Share of the first list's top ``k`` that is also the second's (positions break ties)."""
    k = min(k, len(a))
    top = lambda s: {i for i, _ in sorted(enumerate(s), key=lambda p: (-p[1], p[0]))[:k]}  # noqa: E731
    return len(top(a) & top(b)) / k if k else 1.0


def sample_check(model: RankingModel, torch_modules: Sequence[tuple[EncoderSlot, nn.Module]],
                 sample: InputSample) -> str:
    """The model on its new backend against the same model on torch fp32 (``torch_modules`` swapped back for the
    reference) on the run's own ``sample``: per query Kendall's tau and top-10 agreement of the two rankings
    (re-ranking), or the cosine of each text's vector (encoding). Returns the measure; raises
    :class:`RankkitError` when a query (or text) is outside the band."""
    from rankkit.models.base import BiEncoder

    lossy = [(slot, slot.module) for slot, _ in torch_modules]

    def on(modules: Sequence[tuple[EncoderSlot, nn.Module]]) -> None:
        for slot, module in modules:
            setattr(slot.owner, slot.attribute, module)

    with torch.inference_mode():
        if sample.texts:
            assert isinstance(model, BiEncoder)
            got = model.encode(list(sample.texts), is_query=False)
            on(torch_modules)
            try:
                reference = model.encode(list(sample.texts), is_query=False)
            finally:
                on(lossy)
            cosine = torch.nn.functional.cosine_similarity(got, reference, dim=-1)
            measure = (f"on {len(sample.texts)} of this input's texts: cosine to torch fp32 mean "
                       f"{float(cosine.mean()):.4f}, min {float(cosine.min()):.4f}")
            if not (float(cosine.mean()) >= MIN_COSINE_MEAN and float(cosine.min()) >= MIN_COSINE):
                raise RankkitError(f"{measure} (needs mean >= {MIN_COSINE_MEAN}, min >= {MIN_COSINE})")
            return measure
        queries, lists = list(sample.queries), [list(c) for c in sample.candidates]
        got_scores = model.rerank_scores(queries, lists, 16)
        on(torch_modules)
        try:
            reference_scores = model.rerank_scores(queries, lists, 16)
        finally:
            on(lossy)
    taus = [kendall_tau(r.tolist(), g.tolist()) for r, g in zip(reference_scores, got_scores)]
    tops = [top_agreement(r.tolist(), g.tolist()) for r, g in zip(reference_scores, got_scores)]
    pairs = sum(len(c) for c in lists)
    tau, top = sum(taus) / len(taus), sum(tops) / len(tops)
    measure = (f"on this input's first {len(lists)} queries ({pairs} pairs): Kendall's tau to torch fp32 mean "
               f"{tau:.3f} (min {min(taus):.3f}), top-10 agreement mean {top:.2f}")
    if not (tau >= MIN_SAMPLE_TAU and top >= MIN_SAMPLE_TOP10):
        raise RankkitError(f"{measure} (needs means of tau >= {MIN_SAMPLE_TAU}, top-10 >= {MIN_SAMPLE_TOP10})")
    return measure


def checked(path: Path, runtime: Runtime, tokenizer: Any, check: Any, what: str = "quality") -> str:
    """``check()``'s measure, remembered beside the export (``<export>.checks.json``) for this export file,
    runtime, CPU, thresholds and ``what`` (the self-check adds its input's shape), so later commands on the same
    checkpoint skip it; a failure is remembered too."""
    import hashlib
    import json

    from rankkit.runtime.openvino_backend import CHECK_FILE

    stat = path.stat()
    key = hashlib.sha256(json.dumps([path.name, stat.st_size, stat.st_mtime_ns, runtime.backend, runtime.quantize,
                                     runtime.precision, describe_cpu(), QUALITY_INPUTS, file_sha256(CHECK_FILE),
                                     MIN_COSINE_MEAN, MIN_COSINE,
                                     MIN_CORRELATION, type(tokenizer).__name__, getattr(tokenizer, "vocab_size", None)]
                                    + ([] if what == "quality" else [what, MIN_SAMPLE_TAU, MIN_SAMPLE_TOP10]
                                       )).encode()).hexdigest()[:16]
    store = path.with_name(path.name + ".checks.json")
    try:
        known = json.loads(store.read_text(encoding="utf-8"))
        assert isinstance(known, dict)
    except (OSError, ValueError, AssertionError):
        known = {}
    entry = known.get(key)
    if not (isinstance(entry, dict) and isinstance(entry.get("measure"), str)):
        try:
            entry = {"measure": check(), "passed": True}
        except RankkitError as err:
            entry = {"measure": str(err), "passed": False}
        known[key] = entry
        try:  # best effort: a read-only folder only means the check runs again next time
            with atomic_write(store) as out:
                out.write(json.dumps(known, indent=1, sort_keys=True) + "\n")
        except (OSError, RankkitError):
            pass
    elif entry.get("passed"):
        entry = {**entry, "measure": entry["measure"] + " (checked before)"}
    if not entry.get("passed"):
        raise RankkitError(str(entry["measure"]))
    return str(entry["measure"])


def try_runtime(model: RankingModel, runtime: Runtime, checkpoint: str | os.PathLike[str] | None,
                lossy: bool) -> tuple[list[Path], list[str]]:
    """Swap ``model``'s encoders for ``runtime``'s sessions, each checked on real text when ``lossy``; the
    model is changed only when every slot passes. Returns the exports and the checks' measures."""
    from rankkit.runtime.openvino_backend import model_tokenizer

    backend = get_backend(runtime.backend)
    if not backend.available().ok:
        raise RankkitError(f"{backend.engine} is not installed ({backend.install_hint})")
    if runtime.threads is not None:
        torch.set_num_threads(runtime.threads)
    if not backend.swaps_encoders:
        if lossy and runtime.precision != "fp32":  # torch on CUDA: the half precision checked before it is applied
            from rankkit.runtime.precision import half_check

            return [], [half_check(model, runtime.precision, model.device, model_tokenizer(model), QUALITY_INPUTS)]
        return [], []
    slots: Sequence[EncoderSlot] = model.encoder_slots()
    model.eval()
    swapped, measures, tokenizer = [], [], model_tokenizer(model)
    for slot in slots:
        encoder, path = backend.encoder(slot, runtime, checkpoint, model)
        if lossy:
            measures.append(checked(path, runtime, tokenizer, functools.partial(quality_check, slot, encoder, tokenizer)))
        swapped.append((slot, encoder, path))
    originals = [(slot, slot.module) for slot, _, _ in swapped]
    for slot, encoder, _ in swapped:
        setattr(slot.owner, slot.attribute, encoder)
    if lossy:  # auto's own choice must keep what the model's papers state, or it is not taken
        try:
            kept = property_check(model)
        except RankkitError:
            for slot, module in originals:
                setattr(slot.owner, slot.attribute, module)
            raise
        if kept:
            measures.append(kept)
    log(f"running {', '.join(s.name for s in slots)} on {backend.engine} ({runtime.describe()}): "
        + ", ".join(str(p) for _, _, p in swapped))
    return [p for _, _, p in swapped], measures


def choose(model: RankingModel, runtime: Runtime, device: torch.device, checkpoint: str | os.PathLike[str] | None,
           task: str = "rerank", sample: InputSample | Callable[[], InputSample | None] | None = None
           ) -> tuple[Runtime, list[Path]]:
    """Resolve ``runtime``'s ``auto`` parts for ``model`` doing ``task`` on ``device`` and put the model on
    the choice (logged). With a ``sample`` of the run's own inputs, a lossy choice must also keep torch fp32's
    rankings on it (:func:`sample_check`, remembered per export, CPU and the sample's lengths), or the next row
    runs; a callable ``sample`` is read only when a lossy row needs it."""
    asked = "--backend auto" if runtime.backend == AUTO else f"--backend {runtime.backend}"
    options = candidates(runtime, model, device, task)
    if not options:
        raise RankkitError(f"no backend runs --quantize {runtime.quantize} --precision {runtime.precision} on {device}")
    cuda_auto = device.type == "cuda" and runtime.precision == AUTO
    for number, (candidate, why) in enumerate(options):
        last = number == len(options) - 1
        # Only auto's own choices are checked on text: an explicit --backend/--quantize/--precision is the user's.
        lossy = (runtime.backend == AUTO and (candidate.quantize != "none"
                                              or (candidate.precision != "fp32" and candidate.backend != "torch"))
                 or (cuda_auto and candidate.precision != "fp32"))
        torch_modules = [(slot, slot.module) for slot in _slots(model)]
        try:
            exports, measures = try_runtime(model, candidate, checkpoint, lossy)
            if lossy and exports and runtime.backend == AUTO and callable(sample):
                sample = sample()
            if lossy and isinstance(sample, InputSample) and sample and exports and runtime.backend == AUTO:
                from rankkit.runtime.openvino_backend import model_tokenizer

                tokenizer = model_tokenizer(model)
                try:
                    measures.append(checked(exports[0], candidate, tokenizer,
                                            functools.partial(sample_check, model, torch_modules, sample),
                                            what=f"{task} sample, {sample.shape(tokenizer)}"))
                except RankkitError:
                    for slot, module in torch_modules:
                        setattr(slot.owner, slot.attribute, module)
                    raise
        except RankkitError as err:
            if last or (runtime.backend != AUTO and not cuda_auto):
                raise
            log(f"{asked}: not {candidate.describe()} ({err})")
            continue
        check = f"; checked here: {'; '.join(measures)}" if measures else ""
        log(f"{asked}: {candidate.describe()} ({why}{check})")
        return candidate, exports
    raise AssertionError("the last candidate raises or returns")  # pragma: no cover


def _slots(model: RankingModel) -> list[EncoderSlot]:
    try:
        return list(model.encoder_slots())
    except RankkitError:
        return []


def summary(family: str, task: str = "rerank", device: torch.device | None = None) -> str:
    """What ``--backend auto`` tries first for ``family`` and ``task`` on this machine (``rankkit doctor``),
    without building anything: the first row whose backend is installed."""
    if device is not None and device.type != "cpu":
        return ("torch with bf16 encoder weights where the model keeps fp32's scores on 48 DL20 texts (correlation "
                ">= 0.999), else TF32, else fp32; memory-efficient attention, token-budget batches (docs/RESULTS.md "
                "issue 36, an H200)")
    cls = cpu_class()
    for row in rows_for(cls, family, task):
        if get_backend(row.backend).available().ok:
            where = f"rows of class {BORROWED[cls]}; " if cls in BORROWED else ""
            return (f"{row.runtime_name} ({where}{row.speed}; {row.quality}; measured on "
                    f"{MEASURED_ON.get(row.cpu, row.cpu)}), after a quality check on real text")
    return f"torch fp32 (no measured row for CPU class {cls})"


__all__ = ["BORROWED", "MIN_CORRELATION", "MIN_COSINE", "MIN_COSINE_MEAN", "MIN_SAMPLE_TAU", "MIN_SAMPLE_TOP10",
           "SAMPLE_DEPTH", "SAMPLE_QUERIES", "SAMPLE_TEXTS", "TABLE", "InputSample", "Row", "candidates", "choose",
           "cuda_candidates", "kendall_tau", "sample_check", "top_agreement",
           "explicit_precision", "family_of", "property_check", "quality_check", "rows_for", "summary", "try_runtime"]
