"""Streamed, chunked, resumable corpus encoding into memory-mapped embedding files.

The corpus is cut into chunks of ``chunk_size`` consecutive documents (chunk ``c`` = documents
``c*C .. c*C+C-1``). Each chunk is encoded on its own (texts sorted by token length inside the
chunk so batches carry little padding, under :func:`torch.inference_mode`) and written to
``embeddings/chunk-NNNNNNNN.npy`` (float32 ``[n, dim]``, written through :func:`numpy.lib.format.open_memmap`
so it is never held twice) with its docids in ``chunk-NNNNNNNN.docids``. The ``.npy`` is renamed into
place last, so a chunk file that exists is complete: a re-run skips it (resume after a crash).
Memory holds one chunk at a time, whatever the corpus size.

``shard=(I, N)`` encodes only the chunks with ``c % N == I`` (every shard streams the corpus but
tokenises only its own chunks); :func:`rankkit.dense.faiss_index.merge_dense_shards` joins the
chunk files of all shards in chunk order, which is exactly the order of a one-pass encoding.

Under torchrun (``dist``, :mod:`rankkit.distributed`) the processes share one folder: the chunks
(of the shard) are dealt round-robin to the ranks, each encodes its own into the common
``embeddings/`` (a chunk is encoded exactly as one process would, so the files are byte-identical),
and rank 0 writes the manifest first and ``done.json`` last, once every rank has finished.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch

from rankkit.console import progress_bar
from rankkit.distributed import SINGLE, Dist
from rankkit.errors import InputError, RankkitError
from rankkit.files import atomic_path
from rankkit.files.limits import read_json
from rankkit.formats import atomic_write, iter_corpus
from rankkit.formats.corpus import count_documents
from rankkit.models.base import BiEncoder
from rankkit.runtime.session import InferenceSession

EMBEDDINGS = "embeddings"
MANIFEST = "manifest.json"
DONE = "done.json"
DEFAULT_CHUNK_SIZE = 8192


def chunk_name(chunk: int) -> str:
    return f"chunk-{chunk:08d}"


def parse_shard(shard: str | tuple[int, int] | None) -> tuple[int, int]:
    """``"I/N"`` (or ``(I, N)``) to ``(I, N)`` with 0 <= I < N; ``None`` is ``(0, 1)``."""
    if shard is None:
        return 0, 1
    if isinstance(shard, str):
        left, slash, right = shard.partition("/")
        try:
            index, count = int(left), int(right)
        except ValueError:
            raise RankkitError(f"--shard must look like I/N (e.g. 0/4), got {shard!r}") from None
        if not slash:
            raise RankkitError(f"--shard must look like I/N (e.g. 0/4), got {shard!r}")
    else:
        index, count = int(shard[0]), int(shard[1])
    if count < 1 or not 0 <= index < count:
        raise RankkitError(f"shard {index}/{count} is out of range: need 0 <= I < N")
    return index, count


@dataclass(frozen=True)
class EncodedChunks:
    """One shard's (or a whole run's) finished encoding."""

    folder: Path
    dim: int
    documents: int
    total_chunks: int
    total_documents: int
    chunks: list[int]


def _write_json(path: Path, data: dict[str, Any]) -> None:
    with atomic_write(path) as out:
        out.write(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _chunks(corpus: Path, chunk_size: int) -> Iterator[tuple[int, list[str], list[str] | None]]:
    """``(chunk, docids, texts)``; texts are parsed for every chunk (cheap next to encoding)."""
    docids: list[str] = []
    texts: list[str] = []
    chunk = 0
    for doc in iter_corpus(corpus):
        docids.append(doc.docid)
        texts.append(doc.contents)
        if len(docids) == chunk_size:
            yield chunk, docids, texts
            chunk, docids, texts = chunk + 1, [], []
    if docids:
        yield chunk, docids, texts


def encode_corpus(encoder: BiEncoder | InferenceSession, corpus: str | os.PathLike[str], folder: str | os.PathLike[str],
                  *, manifest: dict[str, Any], batch_size: int | None = None, chunk_size: int = DEFAULT_CHUNK_SIZE,
                  shard: tuple[int, int] = (0, 1), dist: Dist = SINGLE) -> EncodedChunks:
    """Encode ``corpus`` (or its shard) into ``folder/embeddings``; finished chunks are skipped.

    ``encoder`` is an inference session (``rankkit index`` builds one: device, numerics, batching; the next
    chunk is tokenised on a thread where it prefetches) or a bi-encoder run as it is (``batch_size`` texts a
    batch, 64 by default). ``manifest`` describes the encoder (model, checkpoint, hyper-parameters, backend); an
    existing embeddings folder made with a different manifest or chunk size is an error rather than a mix.
    Vectors are stored as float32 whatever the precision.
    """
    if (batch_size is not None and batch_size < 1) or chunk_size < 1:
        raise RankkitError("batch size and chunk size must be at least 1")
    session = encoder if isinstance(encoder, InferenceSession) else \
        InferenceSession.for_model(encoder, batch_size=batch_size or 64)
    if batch_size is not None:
        session.batching = session.batching.with_rows(batch_size)
    model = session.bi_encoder()
    corpus = Path(corpus)
    out = Path(folder) / EMBEDDINGS
    out.mkdir(parents=True, exist_ok=True)
    index, count = shard
    full_manifest = {**manifest, "dim": model.dim, "normalized": model.normalized, "chunk_size": chunk_size,
                     "shard": [index, count]}
    existing = out / MANIFEST
    if not dist.main:
        pass  # rank 0 checks or writes the manifest; the others wait for it at the barrier below
    elif existing.is_file():
        old = read_json(existing, within=out)
        new = json.loads(json.dumps(full_manifest))  # the JSON view (tuples become lists)
        if old != new:
            differ = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
            raise RankkitError(f"{out} holds embeddings made with other settings ({', '.join(differ)}); "
                               "remove it or pick another index folder")
    else:
        _write_json(existing, full_manifest)
    dist.barrier()

    total_docs = count_documents(corpus)
    total_chunks = -(-total_docs // chunk_size)
    mine = [c for c in range(total_chunks) if c % count == index]
    my_docs = sum(min(chunk_size, total_docs - c * chunk_size) for c in mine)
    here = {c for j, c in enumerate(mine) if dist.mine(j)}  # this process's chunks (all without torchrun)
    here_docs = sum(min(chunk_size, total_docs - c * chunk_size) for c in here)
    todo_docs = sum(min(chunk_size, total_docs - c * chunk_size) for c in here
                    if not (out / f"{chunk_name(c)}.npy").is_file())

    with progress_bar("doc") as bar:
        task = bar.add_task("encoding", total=here_docs, completed=here_docs - todo_docs)
        seen = [0]

        def todo() -> Iterator[tuple[tuple[int, list[str]], list[str]]]:
            for chunk, docids, texts in _chunks(corpus, chunk_size):
                seen[0] += len(docids)
                if chunk in here and not (out / f"{chunk_name(chunk)}.npy").is_file():
                    yield (chunk, docids), texts or []

        # The bar moves per batch: a chunk (8,192 documents by default) takes minutes on a CPU.
        for (chunk, docids), vectors in session.stream_encode(todo(), is_query=False,
                                                              on_batch=lambda n: bar.update(task, advance=n)):
            _write_chunk(out, chunk, docids, vectors)
        if seen[0] != total_docs:
            raise InputError(corpus, None, f"changed while encoding ({seen[0]} documents, expected {total_docs})")
    summary = EncodedChunks(Path(folder), model.dim, my_docs, total_chunks, total_docs, mine)
    dist.barrier()  # every rank's chunks are written
    if dist.main:
        absent = [c for c in mine if not (out / f"{chunk_name(c)}.npy").is_file()]
        if absent:
            raise RankkitError(f"{len(absent)} chunks of {out} were not encoded (first: {absent[0]})")
        _write_json(out / DONE, {"chunks": mine, "documents": my_docs, "total_chunks": total_chunks,
                                 "total_documents": total_docs})
    return summary


def _write_chunk(out: Path, chunk: int, docids: list[str], vectors: torch.Tensor) -> None:
    """Docids first, then the vectors, renamed into place (the completion mark).

    The vectors are written with ``write`` calls, not through a memory map: a full disk is then an
    error naming the chunk (exit 1), where a page of a map over unallocated blocks is a SIGBUS.
    """
    with atomic_write(out / f"{chunk_name(chunk)}.docids") as handle:
        for docid in docids:
            if any(ch in docid for ch in "\n\r"):
                raise RankkitError(f"document id {docid!r} contains a line break")
            handle.write(docid + "\n")
    with atomic_path(out / f"{chunk_name(chunk)}.npy", suffix=".npy") as tmp:
        np.save(tmp, np.ascontiguousarray(vectors.numpy(), dtype=np.float32))


def read_chunk(folder: Path, chunk: int) -> tuple[list[str], np.ndarray]:
    """``(docids, vectors)`` of a chunk; vectors stay memory-mapped (read-only)."""
    base = folder / EMBEDDINGS / chunk_name(chunk)
    vectors = np.load(f"{base}.npy", mmap_mode="r")
    docids = Path(f"{base}.docids").read_text(encoding="utf-8").splitlines()
    if len(docids) != vectors.shape[0]:
        raise RankkitError(f"{base}: {len(docids)} docids for {vectors.shape[0]} vectors; re-encode this chunk")
    return docids, vectors


def read_encoding(folder: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(manifest, done)`` of a finished embeddings folder."""
    emb = folder / EMBEDDINGS
    if not (emb / DONE).is_file():
        raise InputError(folder, None, "no finished dense encoding here (embeddings/done.json missing)")
    return read_json(emb / MANIFEST, within=emb), read_json(emb / DONE, within=emb)
