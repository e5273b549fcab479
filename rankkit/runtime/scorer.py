"""The ONNX scorer: ``rankkit rerank`` of a point-wise cross-encoder without importing torch or transformers.

A re-ranking command used to spend ~4-5 s importing torch and transformers before its first pair, whatever the
size of the job (issue 39: 5.3-5.7 s for 60 pairs of a tiny model, for 0.02 s of scoring). For ``mono`` with a
Hugging Face one-label sequence-classification head (what ``rankkit train --model mono`` writes and any
published cross-encoder folder is), the whole score is the classifier's logit, and the checked fp32 ONNX export
of ``--backend onnx`` (:mod:`rankkit.runtime.export`) already computes it end to end. This module runs that
export with ONNX Runtime, tokenises with the ``tokenizers`` library (the Rust tokenizer transformers' fast
tokenizers wrap) and batches with the model's own plan (:func:`rankkit.models.batching.plan_batches`, the CPU
rows of :class:`rankkit.runtime.session.InferenceSession`), building the pairs with the same code as the torch
model (:mod:`rankkit.models.pair_tokens`): the same rows, the same graph, the same numbers as ``--backend onnx``
through torch (tested byte for byte on the written run).

What it needs is found in the cache by a key over the checkpoint's files, the model options and the length
(:func:`scorer_key`): a :class:`ScorerRecord` (``<cache>/scorers/<key>.json``) naming the export and its
SHA-256, the model's tokenizer as its ``tokenizer.json`` and every tokenisation setting. The first run of a
checkpoint builds it with torch (:mod:`rankkit.runtime.scorer_build`: the export, checked against torch, and a
check that this tokenisation gives the model's own token ids on the bundled DL20 pairs); every later run imports
neither torch nor transformers. A hub id is its snapshot folder in the Hugging Face cache. Anything else (other
models, a quantization, bf16, CUDA, torchrun, no checkpoint) takes the torch path, unchanged.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence, TypeVar

import numpy as np

from rankkit.console import log
from rankkit.errors import RankkitError
from rankkit.files import atomic_write, file_sha256, user_cache_root
from rankkit.files.limits import read_json
from rankkit.models.canonical import back_indices, canonical_orders, to_canonical
from rankkit.models.batching import CPU_ROWS, Batching, BatchStats, pad_arrays, plan_batches
from rankkit.models.pair_tokens import assemble_pair, check_positions, clip_texts, segment_ids

K = TypeVar("K")

#: Bumped when what a record holds or how it is used changes (older records are then rebuilt).
SCORER_VERSION = 1
#: Files of a checkpoint folder that are not the model: the card and the training run's files beside it
#: (rankkit.models.card.TRAINING_FILES; a train.log still growing must not change the key).
NOT_MODEL_FILES = ("README.md", "metrics.csv", "training.png", "train.log")


def scorer_folder() -> Path:
    """``<cache>/scorers``: the records (and the tokenizers they name) of checkpoints scored by ONNX Runtime."""
    return user_cache_root() / "scorers"


@dataclass(frozen=True)
class ScorerRecord:
    """Everything the scorer needs of a checkpoint, written when it was built (JSON, in :func:`scorer_folder`)."""

    key: str
    model: str  # the rankkit model name (the run tag's default)
    export: str  # the checked fp32 ONNX export (rankkit.runtime.export)
    export_sha256: str
    tokenizer: str  # the model's tokenizer as tokenizers' JSON, beside this record
    tokenizer_sha256: str
    inputs: tuple[str, ...]  # the graph's inputs
    segments: bool  # whether the tokenizer gives segment ids (else zeros, as transformers does)
    truncation_side: str
    head_ids: tuple[int, ...]  # [CLS] (and an interaction token, where a model has one)
    sep_id: int
    pad_id: int
    max_query_length: int
    max_length: int  # the whole pair
    position_limit: int | None
    version: int = SCORER_VERSION
    #: The record's own file (not stored).
    path: str = field(default="", compare=False)

    def to_json(self) -> str:
        data = {k: v for k, v in asdict(self).items() if k != "path"}
        return json.dumps(data, indent=1, sort_keys=True) + "\n"

    @classmethod
    def read(cls, path: Path) -> "ScorerRecord":
        """The record at ``path``; a damaged or foreign one raises ValueError."""
        data = read_json(path, within=path.parent)
        names = {f.name for f in fields(cls)} - {"path"}
        if not isinstance(data, dict) or set(data) != names or data.get("version") != SCORER_VERSION:
            raise ValueError(f"{path} is not a rankkit scorer record of version {SCORER_VERSION}")
        data["inputs"] = tuple(data["inputs"])
        data["head_ids"] = tuple(data["head_ids"])
        return cls(**data, path=str(path))


# -- when the scorer applies ------------------------------------------------------------------------------------
def has_cuda_device() -> bool:
    """Whether an NVIDIA device is visible, found without importing torch (the torch path decides there)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    return Path("/dev/nvidiactl").exists() or Path("/proc/driver/nvidia/version").exists()


def safetensors_parameters(folder: Path) -> int | None:
    """Parameters in the folder's ``*.safetensors`` files, from their headers (no tensor is read); None when there
    are none or a header is unreadable."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    total = 0
    try:
        for path in files:
            with path.open("rb") as handle:
                size = struct.unpack("<Q", handle.read(8))[0]
                if size > 100_000_000:
                    return None
                header = json.loads(handle.read(size))
            for name, entry in header.items():
                if name != "__metadata__":
                    total += int(np.prod(entry["shape"], dtype=np.int64))
    except (OSError, ValueError, KeyError, TypeError, RecursionError, MemoryError, struct.error):
        return None  # the torch path's loader says what is wrong with it, in one line
    return total


def classifier_folder(folder: Path) -> bool:
    """A one-label ``*ForSequenceClassification`` folder with a fast tokenizer, as rankkit's mono writes it (or
    a published cross-encoder): what the scorer can run. Read from its JSON files only."""
    # Bounded reads (size and depth): a hostile folder (a link to /dev/zero, JSON nested 200k deep) is left to the
    # torch path, which refuses it in one line.
    try:
        config = read_json(folder / "config.json")
        settings = read_json(folder / "rankkit.json") if os.path.lexists(folder / "rankkit.json") else {}
    except (OSError, ValueError, RecursionError, RankkitError):
        return False
    if not isinstance(config, dict) or not isinstance(settings, dict):
        return False
    architectures = config.get("architectures") or []
    # transformers' reading: num_labels, else one per id2label entry, else its default of two.
    labels = config.get("num_labels", len(config["id2label"]) if isinstance(config.get("id2label"), dict) else 2)
    hparams = settings.get("hparams", {})
    if not isinstance(hparams, dict):
        return False
    return (settings.get("model", "mono") == "mono" and hparams.get("hf_head", True) is not False
            and any(str(a).endswith("ForSequenceClassification") for a in architectures) and labels == 1
            and not str(config.get("model_type", "")).startswith("rankkit-")
            and hparams.get("encoder", "cross") == "cross" and hparams.get("truncation", "pair") == "pair"
            and (folder / "tokenizer.json").is_file() and any(folder.glob("*.safetensors")))


def scorer_applies(model: str, checkpoint: str | os.PathLike[str] | None, runtime: Any, device: str | None, *,
                   small: int | None = None) -> str | None:
    """Why ``rankkit rerank`` with these options does *not* take the scorer, or None when it does.

    It does for ``mono`` from a checkpoint folder (a hub id's snapshot too) of a one-label classifier on the CPU,
    one process, with ``--backend onnx`` (fp32), or ``--backend auto`` for a model of fewer than ``small`` parameters (auto's
    choice for those: :func:`rankkit.runtime.auto.candidates`; default :data:`rankkit.devices.AUTO_MIN_PARAMETERS`)
    where ONNX Runtime is installed and no GPU is seen.
    """
    import importlib.util

    from rankkit import devices

    if model != "mono":
        return f"model {model!r} is not a point-wise cross-encoder"
    if checkpoint is None or not Path(checkpoint).is_dir():
        return "not a checkpoint folder"
    if os.environ.get("WORLD_SIZE", "1").strip() not in ("", "1"):
        return "torchrun"
    if runtime.quantize not in ("auto", "none") or runtime.precision not in ("auto", "fp32"):
        return "a quantization or precision the scorer does not run"
    if runtime.backend not in ("auto", "onnx") or (device or "auto") not in ("auto", "cpu"):
        return "another backend or device"
    if importlib.util.find_spec("onnxruntime") is None or importlib.util.find_spec("tokenizers") is None:
        return "ONNX Runtime or tokenizers not installed"
    folder = Path(checkpoint)
    if not classifier_folder(folder):
        return "not a one-label sequence classifier with a fast tokenizer"
    if runtime.backend == "auto":
        if (device or "auto") == "auto" and has_cuda_device():
            return "a GPU is present (auto runs torch there)"
        parameters = safetensors_parameters(folder)
        if parameters is None or parameters >= (devices.AUTO_MIN_PARAMETERS if small is None else small):
            return "auto chooses by the measured table for models of this size"
    return None


def auto_reason(threshold: int) -> str:
    """Why ``--backend auto`` runs a one-label cross-encoder under ``threshold`` parameters on onnx fp32: said by
    :func:`rankkit.runtime.auto.candidates` and, for the run that never imports auto, by the scorer's opener."""
    return (f"a one-label cross-encoder under {threshold:,} parameters: ONNX Runtime on the checked fp32 export "
            "(lossless within 1e-4 of torch; `rankkit rerank` then runs it without importing torch)")


def scorer_key(checkpoint: str | os.PathLike[str], model: str, settings: Mapping[str, Any],
               max_length: int | None) -> str:
    """SHA-256 (hex) of what decides the scores: every model file of the checkpoint folder (names and bytes), the
    model name, its inference-time settings, the length and :data:`SCORER_VERSION`."""
    from rankkit.runtime.cache import EXPORT_VERSION

    digest = hashlib.sha256(f"rankkit-scorer-{SCORER_VERSION}-{EXPORT_VERSION}\0{model}\0{max_length}\0".encode())
    digest.update(json.dumps(dict(settings), sort_keys=True, default=str).encode("utf-8"))
    for path in sorted(Path(checkpoint).iterdir()):
        if path.is_file() and path.name not in NOT_MODEL_FILES and not path.name.startswith("."):
            digest.update(f"\0{path.name}\0{file_sha256(path)}".encode())
    return digest.hexdigest()


def record_path(key: str) -> Path:
    return scorer_folder() / f"{key[:32]}.json"


def find_record(key: str) -> ScorerRecord | None:
    """The record of ``key`` when it and the files it names are intact (their SHA-256 match), else None (rebuilt
    through torch; a damaged export is found and rebuilt there too)."""
    path = record_path(key)
    if not path.is_file():
        return None
    try:
        record = ScorerRecord.read(path)
        intact = (record.key == key and file_sha256(Path(record.tokenizer)) == record.tokenizer_sha256
                  and file_sha256(Path(record.export)) == record.export_sha256)
    except (OSError, ValueError, TypeError, RankkitError):
        intact = False
    if not intact:
        log(f"the scorer record {path} or a file it names is missing or changed; rebuilding it")
        return None
    return record


def write_record(record: ScorerRecord) -> Path:
    path = record_path(record.key)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as handle:
        handle.write(record.to_json())
    return path


# -- the scorer -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CpuDevice:
    """Where the scorer runs, read as the torch path's ``session.device`` is (``.type``, ``str()``)."""

    type: str = "cpu"

    def __str__(self) -> str:
        return self.type


CPU = CpuDevice()


def default_threads() -> int:
    """Intra-op threads when not told, as torch counts them: ``OMP_NUM_THREADS`` when set (parallel jobs on few
    cores set it to 1), else the CPUs this process may run on. (ONNX Runtime's results do not depend on it: bitwise
    equal at 1 and 2 threads on the MiniLM mono's export, measured.)"""
    given = os.environ.get("OMP_NUM_THREADS", "").strip()
    if given.isdigit() and int(given) > 0:
        return int(given)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def ort_session(path: str | os.PathLike[str], threads: int | None, config: Mapping[str, str] | None = None) -> Any:
    """An ONNX Runtime CPU session over ``path``: every graph optimisation, ``threads`` intra-op threads (default:
    :func:`default_threads`), errors only in its log (its warnings would break rankkit's one-line output);
    ``config``: session config entries on top. Every ONNX Runtime session of rankkit is made here."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = int(threads) if threads else default_threads()
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    for key, value in (config or {}).items():
        options.add_session_config_entry(key, value)
    return ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])


class PairTokenizer:
    """The pairs of a record's model, tokenised by the ``tokenizers`` library as the torch model tokenises them."""

    def __init__(self, record: ScorerRecord) -> None:
        from tokenizers import Tokenizer

        self.record = record
        self.max_length = record.max_length
        self.tokenizer = Tokenizer.from_file(record.tokenizer)
        self.tokenizer.no_padding()

    def set_max_length(self, max_length: int) -> None:
        """Inference-time length of the whole pair (``rerank --max-length``), as the torch model checks it."""
        if max_length < self.record.max_query_length + 3 + len(self.record.head_ids):
            raise RankkitError(f"--max-length {max_length} leaves no room for the passage")
        self.max_length = int(max_length)

    def _tokenize(self, texts: Sequence[str], max_length: int) -> list[list[int]]:
        """Token ids without special tokens, cut to ``max_length`` (rankkit.models.inputs.tokenize's call of a fast
        tokenizer: truncation on its Rust tokenizer, no padding)."""
        if not texts:
            return []
        self.tokenizer.enable_truncation(max_length, strategy="longest_first", direction=self.record.truncation_side)
        return [list(e.ids) for e in self.tokenizer.encode_batch(clip_texts(texts, max_length),
                                                                  add_special_tokens=False)]

    def pair_rows(self, queries: Sequence[str], texts: Sequence[str]) -> list[tuple[list[int], int]]:
        """Each pair's token ids and query-part length (CrossPairEncoder._ids with ``pair`` truncation)."""
        unique = sorted(set(queries))
        query_ids = dict(zip(unique, self._tokenize(unique, self.record.max_query_length)))
        passage_ids = self._tokenize(list(texts), self.max_length - 3)
        return [assemble_pair(self.record.head_ids, query_ids[q], d, self.record.sep_id, self.max_length)
                for q, d in zip(queries, passage_ids)]


class PairScorer(PairTokenizer):
    """A one-label cross-encoder's checked ONNX export, tokenised and batched as the torch model does: the
    ``model`` of a :class:`ScorerSession` (a name, an inference length, scores of pairs)."""

    def __init__(self, record: ScorerRecord, threads: int | None = None) -> None:
        super().__init__(record)
        self.name = record.model
        self.session = ort_session(record.export, threads)
        self.feeds = [(i.name, np.bool_ if i.type == "tensor(bool)" else np.int64) for i in self.session.get_inputs()]

    def feeds_of(self, rows: Sequence[tuple[list[int], int]], width: int) -> dict[str, np.ndarray]:
        """The graph's inputs for tokenised pairs padded to ``width`` (missing segment ids are zeros)."""
        check_positions(max((len(ids) for ids, _ in rows), default=0), self.record.position_limit)
        input_ids, mask = pad_arrays([ids for ids, _ in rows], width, self.record.pad_id)
        values = {"input_ids": input_ids, "attention_mask": mask}
        values["token_type_ids"] = (segment_ids([head for _, head in rows], mask) if self.record.segments
                                    else np.zeros_like(input_ids))
        return {name: values[name].astype(kind, copy=False) for name, kind in self.feeds}

    def run(self, feeds: Mapping[str, np.ndarray]) -> np.ndarray:
        """The logit of each row (float32)."""
        (logits,) = self.session.run(None, dict(feeds))
        return np.asarray(logits, dtype=np.float32)[:, 0]


@dataclass
class ScorerSession:
    """:class:`rankkit.runtime.session.InferenceSession`'s re-ranking calls over a :class:`PairScorer`, so
    :func:`rankkit.reranking.rerank_run` drives either: scores of each query's candidates, the CPU's batches
    (``rows`` a pass, longest first), statistics for the last log line."""

    model: PairScorer
    batching: Batching = field(default_factory=lambda: Batching(CPU_ROWS))
    stats: BatchStats = field(default_factory=BatchStats)
    seconds: float = 0.0
    device: Any = field(default_factory=lambda: CPU)

    @classmethod
    def of(cls, record: ScorerRecord, *, threads: int | None = None, batch_size: int | None = None,
           max_tokens: int | None = None) -> "ScorerSession":
        session = cls(PairScorer(record, threads), Batching(batch_size or CPU_ROWS, max_tokens))
        log(f"scoring with {record.export} on ONNX Runtime (fp32; the ONNX scorer, without torch; record "
            f"{record.path})")
        return session

    def scores(self, queries: Sequence[str], candidates: Sequence[Sequence[str]],
               on_work: Callable[[int, int], None] | None = None) -> list[np.ndarray]:
        """Each query's scores of its candidate texts (float64), pairs of all queries batched together."""
        started = time.perf_counter()
        try:
            # Each list in its canonical order, as the torch model scores a permutation-invariant model's lists
            # (point-wise scores are): the same rows in the same batches, so the same numbers.
            orders = canonical_orders(candidates)
            lists = to_canonical(candidates, orders)
            flat_q = [q for q, texts in zip(queries, lists) for _ in texts]
            flat_t = [t for texts in lists for t in texts]
            rows = self.model.pair_rows(flat_q, flat_t)
            scores = np.empty(len(rows), dtype=np.float32)
            done = 0
            for batch in plan_batches([len(ids) for ids, _ in rows], self.batching, self.model.record.position_limit):
                chosen = [rows[i] for i in batch.rows]
                scores[batch.rows] = self.model.run(self.model.feeds_of(chosen, batch.width))
                self.stats.add(len(chosen), sum(len(ids) for ids, _ in chosen), batch.width)
                done += len(chosen)
                if on_work is not None:
                    on_work(done, len(rows))
            out, start = [], 0
            for texts, order in zip(candidates, orders):
                values = scores[start:start + len(texts)].astype(np.float64)
                out.append(values[back_indices(order, texts)] if len(texts) else values)
                start += len(texts)
            return out
        finally:
            self.seconds += time.perf_counter() - started

    def stream_scores(self, chunks: Iterable[tuple[K, Sequence[str], Sequence[Sequence[str]]]],
                      on_work: Callable[[K, int], Callable[[int, int], None] | None] | None = None
                      ) -> Iterator[tuple[K, list[np.ndarray]]]:
        """``(key, scores)`` for each ``(key, queries, candidates)`` chunk, in order."""
        for key, queries, candidates in chunks:
            listener = on_work(key, sum(len(c) for c in candidates)) if on_work is not None else None
            yield key, self.scores(queries, candidates, listener)

    def describe(self) -> str:
        return f"onnx (the ONNX scorer) on cpu (fp32; batches of {self.batching.describe()})"

    def summary(self) -> str:
        return self.stats.summary(self.seconds)


__all__ = ["NOT_MODEL_FILES", "SCORER_VERSION", "CpuDevice", "PairScorer", "PairTokenizer", "ScorerRecord",
           "ScorerSession", "auto_reason", "classifier_folder", "find_record", "has_cuda_device",
           "ort_session", "record_path", "safetensors_parameters", "scorer_applies", "scorer_folder", "scorer_key",
           "write_record"]
