"""Dense indexes: encode a corpus with a bi-encoder and build a faiss index over the vectors.

An index folder holds::

    rankkit-index.json   how it was built: kind "dense", model, checkpoint, dims, metric, faiss
                         kind and parameters, corpus, counts (written last: its presence = done)
    index.faiss          the faiss index (ids are row numbers)
    docids.txt           row number -> docid, one per line
    embeddings/          the chunk files of :mod:`rankkit.dense.encode` (kept: the index can be
                         rebuilt with other faiss settings without re-encoding)

Scores are inner products. Cosine models (DenseTrans, a normalised RepBERT) store unit vectors,
so the inner product is their cosine; the metadata records ``normalized``.

faiss kinds: ``flat`` (exact inner product, ``IndexFlatIP``) and ``ivfpq`` (``IndexIVFPQ`` with an
inner-product coarse quantiser; defaults nlist 2000, m 16 sub-quantisers of 8 bits, nprobe 10 at
search). faiss needs about 39 training points per centroid: when the corpus is too small, nlist
(and, below 39 * 2^bits documents, the PQ bits) are reduced automatically, with a log line.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence, overload

import faiss
import numpy as np
import torch

from rankkit.console import log, progress_bar
from rankkit.dense import encode as enc
from rankkit.distributed import SINGLE, Dist
from rankkit.errors import InputError, RankkitError
from rankkit.files import atomic_path, staging_dir
from rankkit.files.temporaries import publish_folder
from rankkit.formats import atomic_write, iter_corpus
from rankkit.indexes import MANIFEST_NAME, new_manifest, read_manifest, write_manifest
from rankkit.models.base import BiEncoder
from rankkit.runtime import InferenceSession, LoadedModel, Runtime, load_for_inference

DENSE_KINDS = ("dense", "dense-shard")
INDEX_FILE = "index.faiss"
DOCIDS = "docids.txt"
FAISS_KINDS = ("flat", "ivfpq")
MIN_POINTS_PER_CENTROID = 39  # faiss' own threshold for a trustworthy k-means
TRAIN_POINTS_PER_LIST = 100
ADD_BATCH = 65536
TRAIN_SEED = 1234


def effective_ivfpq(num_vectors: int, nlist: int, pq_bits: int) -> tuple[int, int]:
    """``(nlist, pq_bits)`` a corpus of ``num_vectors`` can train (both reduced when too small)."""
    if nlist < 1 or pq_bits < 1:
        raise RankkitError("nlist and PQ bits must be at least 1")
    lists = max(1, min(nlist, num_vectors // MIN_POINTS_PER_CENTROID))
    bits = min(pq_bits, int(math.floor(math.log2(max(1, num_vectors / MIN_POINTS_PER_CENTROID)))))
    if bits < 1:
        raise RankkitError(
            f"{num_vectors} documents are too few to train product quantisation (need at least "
            f"{2 * MIN_POINTS_PER_CENTROID}); use --faiss flat"
        )
    return lists, bits


def new_index(dim: int, kind: str, nlist: int, pq_m: int, pq_bits: int) -> faiss.Index:
    """An empty inner-product faiss index of ``kind``."""
    if kind == "flat":
        return faiss.IndexFlatIP(dim)
    if kind == "ivfpq":
        if dim % pq_m:
            raise RankkitError(f"PQ sub-quantisers m={pq_m} must divide the vector size {dim}")
        quantizer = faiss.IndexFlatIP(dim)
        # faiss' Python wrapper keeps a reference to the quantiser inside the index object.
        return faiss.IndexIVFPQ(quantizer, dim, nlist, pq_m, pq_bits, faiss.METRIC_INNER_PRODUCT)
    raise RankkitError(f"unknown faiss kind {kind!r}; known: {', '.join(FAISS_KINDS)}")


def _iter_vectors(sources: Sequence[tuple[Path, int]]) -> Iterator[tuple[list[str], np.ndarray]]:
    for folder, chunk in sources:
        yield enc.read_chunk(folder, chunk)


def _training_sample(sources: Sequence[tuple[Path, int]], total: int, size: int, dim: int) -> np.ndarray:
    """A deterministic uniform sample of ``size`` rows across all chunks (never the whole corpus)."""
    if size >= total:
        picks = np.arange(total)
    else:
        picks = np.sort(np.random.default_rng(TRAIN_SEED).choice(total, size=size, replace=False))
    sample = np.empty((len(picks), dim), dtype=np.float32)
    offset = 0
    filled = 0
    for _, vectors in _iter_vectors(sources):
        n = vectors.shape[0]
        lo, hi = np.searchsorted(picks, [offset, offset + n])
        if hi > lo:
            sample[filled:filled + hi - lo] = vectors[picks[lo:hi] - offset]
            filled += hi - lo
        offset += n
    return sample


def build_from_chunks(sources: Sequence[tuple[Path, int]], out: Path, *, dim: int, total: int, faiss_kind: str,
                      nlist: int, pq_m: int, pq_bits: int) -> dict[str, Any]:
    """Build ``out/index.faiss`` and ``out/docids.txt`` from chunk files in order; returns faiss settings."""
    settings: dict[str, Any] = {"kind": faiss_kind}
    if faiss_kind == "ivfpq":
        lists, bits = effective_ivfpq(total, nlist, pq_bits)
        if lists != nlist:
            log(f"nlist reduced from {nlist} to {lists}: {total:,} documents train at most "
                f"{total // MIN_POINTS_PER_CENTROID} lists ({MIN_POINTS_PER_CENTROID} points each)")
        if bits != pq_bits:
            log(f"PQ bits reduced from {pq_bits} to {bits}: {total:,} documents are too few for "
                f"{2 ** pq_bits} centroids per sub-quantiser")
        settings.update({"nlist": lists, "nlist_requested": nlist, "pq_m": pq_m, "pq_bits": bits,
                         "pq_bits_requested": pq_bits, "nprobe": 10})
        index = new_index(dim, faiss_kind, lists, pq_m, bits)
        sample = _training_sample(sources, total, max(lists, 2 ** bits) * TRAIN_POINTS_PER_LIST, dim)
        log(f"training IVFPQ on {len(sample):,} vectors")
        index.train(sample)
        del sample
    else:
        index = new_index(dim, faiss_kind, nlist, pq_m, pq_bits)
    out.mkdir(parents=True, exist_ok=True)
    added = 0
    with atomic_write(out / DOCIDS) as handle, progress_bar("vec") as bar:
        task = bar.add_task(f"adding to faiss ({faiss_kind})", total=total)
        for docids, vectors in _iter_vectors(sources):
            for start in range(0, vectors.shape[0], ADD_BATCH):
                index.add(np.ascontiguousarray(vectors[start:start + ADD_BATCH], dtype=np.float32))
                bar.advance(task, min(ADD_BATCH, vectors.shape[0] - start))
            handle.write("".join(d + "\n" for d in docids))
            added += len(docids)
    if added != total:
        raise RankkitError(f"expected {total} vectors, found {added}; re-encode")
    write_faiss_index(index, out / INDEX_FILE)
    return settings


def write_faiss_index(index: faiss.Index, path: Path) -> None:
    """``faiss.write_index`` through rankkit's atomic layer, its bytes passed to a Python file: faiss'
    own file writer prints a failed ``fclose`` (a full disk) and carries on, which would leave a
    truncated index in place; here every write error raises, and is one line naming ``path``."""
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        writer = faiss.PyCallbackIOWriter(handle.write)  # type: ignore[attr-defined]  # in faiss, not its stubs
        faiss.write_index(index, writer)
        del writer  # flushes faiss' buffer into the file before it is closed


def _manifest(model_name: str, checkpoint: str | os.PathLike[str] | None, model: BiEncoder) -> dict[str, Any]:
    """The encoder's record: a hub model as ``ORG/NAME@COMMIT`` (so queries are encoded by exactly that
    commit, from the cache) with its provenance, a local folder as its absolute path."""
    source = model.source
    hub = source is not None and source.repo_id is not None and source.commit is not None
    reference = None if checkpoint is None else source.pinned if hub and source is not None \
        else str(Path(checkpoint).resolve())
    return {
        "model": model_name,
        "checkpoint": reference,
        **({"checkpoint_source": source.provenance()} if hub and source is not None else {}),
        "hparams": model.hparams,
    }


def build_dense_index(model_name: str, checkpoint: str | os.PathLike[str] | None, corpus: str | os.PathLike[str],
                      index_dir: str | os.PathLike[str], faiss_kind: str = "flat", nlist: int = 2000,
                      pq_m: int = 16, pq_bits: int = 8, batch_size: int | None = None,
                      shard: str | tuple[int, int] | None = None, *, chunk_size: int = enc.DEFAULT_CHUNK_SIZE,
                      max_tokens: int | None = None,
                      device: str = "auto", max_query_length: int | None = None,
                      max_doc_length: int | None = None,
                      settings: Mapping[str, Any] | None = None, runtime: Runtime | None = None,
                      dist: Dist = SINGLE) -> dict[str, Any]:
    """Encode ``corpus`` with ``model_name`` (from ``checkpoint``, or zero-shot when ``None``) and index it.

    With ``shard="I/N"`` (N > 1) only shard I is encoded into ``index_dir`` (a shard folder, not
    searchable); :func:`merge_dense_shards` then builds the index from all shard folders. Re-running
    after an interruption skips the chunks already encoded. ``max_query_length``/``max_doc_length``
    override the model's token limits (e.g. a zero-shot model on a symmetric task, where queries are
    as long as documents); they are recorded in ``model_hparams`` and retrieval uses them.
    ``settings`` sets the model's inference-time settings (repbert's ``pooling``, ``query_prefix``,
    ``doc_prefix``: e.g. E5's prefixes on a zero-shot backbone), recorded in ``model_hparams`` too.
    ``runtime`` picks the encoder's backend (:mod:`rankkit.runtime`); it is recorded, and a
    resumed encoding must use the same one. ``batch_size`` (texts a forward pass; 64 on the CPU, as many as
    ``max_tokens`` allows on CUDA) and ``max_tokens`` set the inference session's batches. Under torchrun pass ``dist``
    (:func:`rankkit.distributed.init_distributed`): the processes split the chunks, rank 0 builds
    the faiss index and writes the manifest, and the folder is byte-identical to a one-process
    build (tested). Returns the rankkit-index.json content.
    """
    if faiss_kind not in FAISS_KINDS:
        raise RankkitError(f"unknown faiss kind {faiss_kind!r}; known: {', '.join(FAISS_KINDS)}")
    index, count = enc.parse_shard(shard)
    folder = Path(index_dir)
    if not Path(corpus).exists():  # before anything is written into the index folder
        raise InputError(corpus, None, "no such file or directory")
    if faiss_kind == "ivfpq" and count == 1:
        effective_ivfpq(enc.count_documents(corpus), nlist, pq_bits)  # fail before hours of encoding
    sample = None
    if runtime is not None and not runtime.resolved:  # auto's lossy choice is checked on this corpus's own texts
        from rankkit.runtime.auto import SAMPLE_TEXTS, InputSample

        sample = InputSample.of_texts([doc.contents for doc, _ in zip(iter_corpus(corpus), range(SAMPLE_TEXTS))])
    loaded = load_bi_encoder(model_name, checkpoint, dist.device if dist.active else device, runtime, sample)
    model, runtime = loaded.model, loaded.runtime
    assert isinstance(model, BiEncoder)
    # 64 texts a batch on the CPU (the encoding default since the first release); a token budget on CUDA.
    session = InferenceSession.of(loaded, batch_size=batch_size or (None if loaded.device.type == "cuda" else 64),
                                  max_tokens=max_tokens)
    set_max_lengths(model, max_query_length, max_doc_length)
    for name, value in (settings or {}).items():
        model.override(name, value)
    if faiss_kind == "ivfpq" and model.dim % pq_m:
        raise RankkitError(f"PQ sub-quantisers m={pq_m} must divide the vector size {model.dim}")
    manifest = _manifest(model_name, checkpoint, model)
    numerics = runtime.numerics()
    if numerics != {"backend": "torch", "quantize": "none", "precision": "fp32"}:
        # What computed the vectors; left out for the default so that earlier encodings still resume.
        manifest["runtime"] = numerics
    done = enc.encode_corpus(session, corpus, folder, manifest=manifest, chunk_size=chunk_size, shard=(index, count),
                             dist=dist)
    log(f"encoded with {session.describe()}: {session.summary()}")
    requested = {"kind": faiss_kind, "nlist": nlist, "pq_m": pq_m, "pq_bits": pq_bits}
    meta = new_manifest(
        "dense" if count == 1 else "dense-shard", Path(corpus),
        {"faiss": faiss_kind, "nlist": nlist, "pq_m": pq_m, "pq_bits": pq_bits, "batch_size": session.batching.rows,
         "chunk_size": chunk_size, "shard": [index, count]},
        model=model_name, checkpoint=manifest["checkpoint"],
        **({"checkpoint_source": manifest["checkpoint_source"]} if "checkpoint_source" in manifest else {}),
        model_hparams=model.hparams, dims=model.dim,
        metric="inner_product", normalized=model.normalized, documents=done.documents,
        total_documents=done.total_documents, chunk_size=chunk_size, chunks=done.total_chunks,
        shard=[index, count], faiss_requested=requested, runtime=numerics,
    )
    if not dist.main:
        dist.barrier()  # rank 0 builds the index and writes the manifest
        return meta
    if count == 1:
        sources = [(folder, c) for c in range(done.total_chunks)]
        meta["faiss"] = build_from_chunks(sources, folder, dim=model.dim, total=done.total_documents,
                                          faiss_kind=faiss_kind, nlist=nlist, pq_m=pq_m, pq_bits=pq_bits)
        log(f"dense index of {done.total_documents:,} documents ({model.dim} dims, {faiss_kind}) in {folder}")
    else:
        log(f"encoded shard {index}/{count} ({done.documents:,} documents) into {folder}; "
            "build the index with `rankkit index --merge` once every shard is done")
    write_manifest(folder, meta)
    dist.barrier()
    return meta


def merge_dense_shards(dirs: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str], *,
                       faiss_kind: str | None = None, nlist: int | None = None, pq_m: int | None = None,
                       pq_bits: int | None = None) -> dict[str, Any]:
    """Build one index in ``out`` from the shard folders of a sharded :func:`build_dense_index`.

    Chunks are read in corpus order, so the result is the index a one-pass build would make.
    faiss settings default to those the shards were asked for.
    """
    if not dirs:
        raise RankkitError("no shard folders to merge")
    folders = [Path(d) for d in dirs]
    metas = [read_manifest(f, kinds=DENSE_KINDS) for f in folders]
    encodings = [enc.read_encoding(f) for f in folders]
    first = metas[0]
    for folder, meta in zip(folders, metas):
        for key in ("model", "checkpoint", "model_hparams", "dims", "normalized", "chunk_size", "chunks",
                    "total_documents", "runtime"):
            if meta.get(key) != first.get(key):
                raise RankkitError(f"shards disagree on {key}: {folders[0]} vs {folder}")
    owner: dict[int, Path] = {}
    for folder, (_, done) in zip(folders, encodings):
        for chunk in done["chunks"]:
            owner.setdefault(int(chunk), folder)
    total_chunks = int(first["chunks"])
    missing = [c for c in range(total_chunks) if c not in owner]
    if missing:
        raise RankkitError(f"{len(missing)} of {total_chunks} chunks are missing (first: {missing[0]}); "
                           "encode every shard before merging")
    requested = dict(first.get("faiss_requested", {}))
    kind = faiss_kind or requested.get("kind", "flat")
    target = Path(out)
    # Built in a marked staging folder and moved in, manifest last: an interrupted merge leaves no
    # half-built index (SIGTERM: nothing; SIGKILL: a leftover the next merge removes).
    with staging_dir(target) as staging:
        built = staging / "index"
        meta = _merge_into(built, owner, total_chunks, first, folders, requested, kind, nlist, pq_m, pq_bits)
        publish_folder(built, target, last=MANIFEST_NAME)
    log(f"merged {len(folders)} shards into {target} ({meta['documents']:,} documents)")
    return meta


def _merge_into(built: Path, owner: Mapping[int, Path], total_chunks: int, first: Mapping[str, Any],
                folders: Sequence[Path], requested: Mapping[str, Any], kind: str, nlist: int | None, pq_m: int | None,
                pq_bits: int | None) -> dict[str, Any]:
    settings = build_from_chunks(
        [(owner[c], c) for c in range(total_chunks)], built, dim=int(first["dims"]),
        total=int(first["total_documents"]), faiss_kind=kind, nlist=nlist or int(requested.get("nlist", 2000)),
        pq_m=pq_m or int(requested.get("pq_m", 16)), pq_bits=pq_bits or int(requested.get("pq_bits", 8)),
    )
    options = {**first.get("options", {}), "faiss": kind, "shard": [0, 1]}
    options.update({k: v for k, v in (("nlist", nlist), ("pq_m", pq_m), ("pq_bits", pq_bits)) if v is not None})
    meta = new_manifest(
        "dense", first["corpus"], options,
        **{key: first[key] for key in ("model", "checkpoint", "model_hparams", "dims", "metric", "normalized",
                                       "chunk_size", "chunks")},
        **({"checkpoint_source": first["checkpoint_source"]} if "checkpoint_source" in first else {}),
        documents=int(first["total_documents"]), total_documents=int(first["total_documents"]), shard=[0, 1],
        faiss=settings, faiss_requested=dict(requested), merged_from=[str(f.resolve()) for f in folders],
    )
    write_manifest(built, meta)
    return meta


def load_bi_encoder(model_name: str, checkpoint: str | os.PathLike[str] | None,
                    device: str | torch.device = "auto", runtime: Runtime | None = None, sample: Any = None) -> LoadedModel:
    """A bi-encoder for dense encoding (rankkit checkpoint, HF folder zero-shot, or ``None``) on ``device``
    and ``runtime`` (:func:`rankkit.runtime.load_for_inference`; ``auto`` is the CPU for a CPU backend)."""
    from rankkit.models import get_model_class

    if not issubclass(get_model_class(model_name), BiEncoder):
        raise RankkitError(f"model {model_name!r} is not a bi-encoder: dense indexes need one (repbert, densetrans)")
    return load_for_inference(model_name, checkpoint, runtime, device, task="encode", sample=sample)


def set_max_lengths(model: BiEncoder, max_query_length: int | None = None,
                    max_doc_length: int | None = None) -> None:
    """Override a loaded model's query/document token limits (``None`` keeps the model's own)."""
    if "max_positions" in model.hparams:  # DenseTrans: learned positions, [CLS] takes one
        lowest, limit = 1, int(model.hparams["max_positions"]) - 1
    else:  # BERT-like: the limit counts [CLS] and [SEP]
        config = getattr(getattr(model, "encoder", None), "config", None)
        lowest, limit = 2, int(getattr(config, "max_position_embeddings", 512))
    for name, value in (("max_query_length", max_query_length), ("max_doc_length", max_doc_length)):
        if value is None:
            continue
        option = "--" + name.replace("_", "-")
        if int(value) < lowest:
            raise RankkitError(f"{option} must be at least {lowest} for {model.name}, got {value}")
        if int(value) > limit:
            raise RankkitError(f"{option} {value} exceeds the {model.name} model's {limit} positions")
        setattr(model, name, int(value))
        setattr(model.config, name, int(value))


def apply_recorded_settings(model: BiEncoder, hparams: Mapping[str, Any]) -> None:
    """Give a reloaded model the inference-time settings recorded at build time (``rerank_flag``
    settings such as prefixes and pooling, which a zero-shot model would otherwise re-derive)."""
    for spec in model.config_class.specs():
        if spec.rerank_flag and spec.name in hparams and model.hparams.get(spec.name) != hparams[spec.name]:
            model.override(spec.name, hparams[spec.name])


class DocidList(Sequence[str]):
    """Row number -> docid of a docids file, held as its bytes and line offsets: ~10 bytes a docid
    (8.8M MS MARCO ids: ~150 MB) instead of a Python string each (~600 MB)."""

    def __init__(self, path: Path) -> None:
        data = path.read_bytes()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(path, data.count(b"\n", 0, err.start) + 1, "not valid UTF-8") from None
        ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == ord("\n"))
        if data and not data.endswith(b"\n"):
            ends = np.append(ends, len(data))
        self._data = data
        self._starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64)
        self._ends = ends.astype(np.int64)

    def __len__(self) -> int:
        return int(self._ends.size)

    def take(self, rows: Sequence[int]) -> list[str]:
        """The docids of several rows at once (one NumPy gather, no per-row array indexing)."""
        picked = np.asarray(rows, dtype=np.int64)
        data = self._data
        out = [data[a:b].decode("utf-8") for a, b in zip(self._starts[picked].tolist(), self._ends[picked].tolist())]
        return [d[:-1] if d.endswith("\r") else d for d in out]

    @overload
    def __getitem__(self, row: int) -> str: ...

    @overload
    def __getitem__(self, row: slice) -> list[str]: ...

    def __getitem__(self, row: int | slice) -> str | list[str]:
        if isinstance(row, slice):
            return [self[i] for i in range(*row.indices(len(self)))]
        text = self._data[int(self._starts[row]):int(self._ends[row])].decode("utf-8")
        return text[:-1] if text.endswith("\r") else text


def load_dense_index(index_dir: str | os.PathLike[str]) -> tuple[dict[str, Any], faiss.Index, Sequence[str]]:
    """``(metadata, faiss index, docids)`` of a finished dense index folder, rankkit's or Pyserini's.

    A Pyserini faiss folder (``index`` + ``docid``, no manifest) gets ``dims`` from the index; it
    records no encoder, so its queries need one given (:func:`rankkit.dense.dense_search`'s
    ``checkpoint``).
    """
    folder = Path(index_dir)
    meta = read_manifest(folder, kinds=("dense",))
    foreign = meta.get("foreign") == "pyserini-faiss"
    index_file, docid_file = (folder / "index", folder / "docid") if foreign else (folder / INDEX_FILE, folder / DOCIDS)
    try:
        index = faiss.read_index(str(index_file))
    except RuntimeError as err:  # faiss reports unreadable or truncated files as RuntimeError
        message = " ".join(str(err).split())
        raise InputError(index_file, None, f"not a readable faiss index ({message[:160]})") from None
    if foreign:
        if index.metric_type != faiss.METRIC_INNER_PRODUCT:
            raise InputError(index_file, None, "not an inner-product faiss index (rankkit scores by inner product)")
        meta.update(dims=int(index.d), metric="inner_product")
    docids = DocidList(docid_file)
    if len(docids) != index.ntotal:
        raise RankkitError(f"{folder}: {len(docids)} docids for {index.ntotal} vectors; rebuild the index")
    return meta, index, docids
