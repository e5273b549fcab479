"""Dense retrieval: encode queries in batches with the index's own model and search its faiss index.

:func:`iter_dense_search` yields each query's hits as its batch is searched, so a run of 502k
training queries x 1000 is written as it comes (``rankkit retrieve`` does) instead of held whole
(~80 GB); :func:`dense_search` collects them into a run for callers that want one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import faiss
import numpy as np

from rankkit.console import log, progress_bar
from rankkit.dense.faiss_index import apply_recorded_settings, load_bi_encoder, load_dense_index, set_max_lengths
from rankkit.errors import RankkitError
from rankkit.formats import Run, read_topics
from rankkit.models.base import BiEncoder
from rankkit.runtime import InferenceSession, Runtime


def dense_search(index_dir: str | os.PathLike[str], topics: str | os.PathLike[str] | Mapping[str, str],
                 k: int = 1000, nprobe: int | None = None, remove_query: bool = False, batch_size: int = 64,
                 *, device: str = "auto", model_name: str | None = None,
                 max_query_length: int | None = None, checkpoint: str | os.PathLike[str] | None = None,
                 runtime: Runtime | None = None) -> Run:
    """Top-``k`` documents per query by inner product, as a whole run (see :func:`iter_dense_search`)."""
    return dict(iter_dense_search(index_dir, topics, k, nprobe, remove_query, batch_size, device=device,
                                  model_name=model_name, max_query_length=max_query_length, checkpoint=checkpoint,
                                  runtime=runtime))


def iter_dense_search(index_dir: str | os.PathLike[str], topics: str | os.PathLike[str] | Mapping[str, str],
                      k: int = 1000, nprobe: int | None = None, remove_query: bool = False, batch_size: int = 64,
                      *, device: str = "auto", model_name: str | None = None,
                      max_query_length: int | None = None, checkpoint: str | os.PathLike[str] | None = None,
                      runtime: Runtime | None = None) -> Iterator[tuple[str, dict[str, float]]]:
    """``(qid, hits)``: the top-``k`` documents of each query by inner product (cosine for normalised
    models), in topic order, yielded as each batch of ``batch_size`` queries is searched.

    Everything is checked (index, model, options) before this returns; the search runs as the
    result is iterated.

    ``topics`` is a topics file or a ``{qid: text}`` mapping. The model and checkpoint recorded in
    the index's rankkit-index.json encode the queries, so queries and documents always share an
    encoder. ``nprobe`` (IVF indexes) defaults to the value recorded at build time (10).
    ``remove_query`` drops a hit whose docid equals the qid (collections that contain their own
    queries, e.g. Quora duplicate questions) while still returning ``k`` documents. ``model_name``, when given, must be the model
    the index was built with (the CLI's ``--model``): a mismatch is an error, not a silent swap.
    ``max_query_length`` overrides the query token limit recorded in the index. ``runtime``: the
    query encoder's backend, threads and precision (:mod:`rankkit.runtime`); all ``auto`` (the command's
    default) encodes the queries as the index's documents were.

    A Pyserini faiss index records no encoder: ``model_name`` and ``checkpoint`` (the query
    encoder it was built with: a rankkit checkpoint or a Hugging Face / sentence-transformers
    folder) are then required. For a rankkit index the encoder is the recorded one.
    """
    if k < 1:
        raise RankkitError(f"k must be at least 1, got {k}")
    if batch_size < 1:
        raise RankkitError(f"batch size must be at least 1, got {batch_size}")
    meta, index, docids = load_dense_index(index_dir)
    foreign = bool(meta.get("foreign"))
    if foreign:
        if model_name is None or checkpoint is None:
            raise RankkitError(f"{index_dir} is a Pyserini faiss index, which records no encoder: give the query "
                               "encoder it was built with (--model repbert --checkpoint DIR)")
        meta.update(model=model_name, checkpoint=str(checkpoint))
    elif checkpoint is not None:
        raise RankkitError(f"{index_dir} records its encoder ({meta.get('checkpoint') or 'zero-shot'}); "
                           "--checkpoint is for Pyserini indexes")
    if model_name is not None and model_name != meta["model"]:
        raise RankkitError(f"{index_dir} is a dense index built with --model {meta['model']}, not {model_name}; "
                           f"retrieve from it with --model {meta['model']}")
    queries = dict(topics) if isinstance(topics, Mapping) else read_topics(topics)
    if runtime is not None and (runtime.backend, runtime.quantize, runtime.precision) == ("auto",) * 3:
        # Queries are encoded as the index's documents were (recorded by the build; absent = torch fp32).
        recorded = meta.get("runtime") or {"backend": "torch", "quantize": "none", "precision": "fp32"}
        runtime = Runtime(recorded["backend"], recorded["quantize"], runtime.threads, recorded["precision"])
        log(f"--backend auto: {runtime.describe()}, as the index's documents were encoded")
    loaded = load_bi_encoder(str(meta["model"]), meta.get("checkpoint"), device, runtime)
    model, runtime = loaded.model, loaded.runtime
    assert isinstance(model, BiEncoder)
    apply_recorded_settings(model, meta.get("model_hparams", {}))
    # The query limit recorded at build time (it may override the model's), unless given here.
    recorded = meta.get("model_hparams", {}).get("max_query_length")
    set_max_lengths(model, max_query_length if max_query_length is not None else recorded)
    if model.dim != int(meta["dims"]) or (not foreign and model.normalized != bool(meta["normalized"])):
        raise RankkitError(f"{index_dir}: the model does not match the index ({model.dim} dims vs {meta['dims']})")
    ivf = None
    try:
        ivf = faiss.extract_index_ivf(index)
    except RuntimeError:
        ivf = None
    if ivf is not None:
        ivf.nprobe = int(nprobe if nprobe is not None else meta.get("faiss", {}).get("nprobe", 10))
    depth = min(k + (1 if remove_query else 0), index.ntotal)
    session = InferenceSession.of(loaded, batch_size=batch_size)
    return _searched(Path(index_dir), queries, session, index, docids, k, depth, remove_query, batch_size)


def _searched(index_dir: Path, queries: Mapping[str, str], session: InferenceSession, index: Any, docids: Sequence[str],
              k: int, depth: int, remove_query: bool, batch_size: int) -> Iterator[tuple[str, dict[str, float]]]:
    qids = list(queries)
    take = getattr(docids, "take", None) or (lambda rows: [docids[r] for r in rows])
    with progress_bar("q") as bar:
        task = bar.add_task("searching", total=len(qids))
        for start in range(0, len(qids), batch_size):
            batch = qids[start:start + batch_size]
            vectors = session.encode([queries[q] for q in batch], is_query=True)
            scores, rows = index.search(np.ascontiguousarray(vectors.numpy(), dtype=np.float32), depth)
            for qid, row_scores, row_ids in zip(batch, scores, rows):
                kept = row_ids >= 0  # IVF probes can return fewer than `depth` hits
                ids = take(row_ids[kept].tolist())
                hits: dict[str, float] = {}
                for docid, score in zip(ids, row_scores[kept].tolist()):
                    if remove_query and docid == qid:
                        continue
                    hits[docid] = float(score)
                    if len(hits) == k:
                        break
                yield qid, hits
            bar.update(task, advance=len(batch))
    log(f"searched {len(qids):,} queries in {index_dir} (top {k})")
