"""The Python API's retrieval, re-ranking and fusion: :func:`search`, :func:`dense_search`, :func:`load_model`,
:func:`rerank`, :func:`fuse`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from rankkit.api.inputs import (
    PathLike, Passages, Queries, RunLike, check_count, is_path, kind_error, passages_of, queries_of, run_of, run_out,
)
from rankkit.errors import RankkitError
from rankkit.formats.frames import is_frame, passages_from_frame, topics_from_frame
from rankkit.formats.runs import Run, sort_ranking

if TYPE_CHECKING:
    from rankkit.models.base import RankingModel


def search(index: PathLike, queries: Queries, k: int = 1000, *, k1: float = 0.9, b: float = 0.4,
           rm3: bool = False, threads: int = 1) -> Any:
    """BM25 (Anserini, optionally + RM3) top-``k`` of each query over a ``rankkit index --kind bm25`` index.

    Also opens Lucene indexes Anserini/Pyserini built. A DataFrame of queries gives a results
    DataFrame (``qid, query, docno, score, rank``), a dict or file a run dict.
    """
    from rankkit.lexical.search import Bm25Params, Bm25Searcher

    check_count(k, "k")
    check_count(threads, "threads")
    params = Bm25Params(k1=k1, b=b, rm3=rm3)
    params.check()
    texts, frame = queries_of(queries)
    with Bm25Searcher(index, params) as searcher:
        hits = searcher.batch_search(list(texts.items()), k, threads)
    run = {qid: dict(hits.get(qid, [])) for qid in texts}
    return run_out(run, frame, texts)


def dense_search(index: PathLike, queries: Queries, k: int = 1000, *, nprobe: int | None = None,
                 batch_size: int = 64, device: str = "auto", backend: str = "auto", quantize: str | None = None,
                 precision: str | None = None, threads: int | None = None) -> Any:
    """Top-``k`` of each query over a ``rankkit index --kind dense`` index (queries encoded by the index's
    model); a DataFrame of queries gives a results DataFrame. The query encoder runs as the index's documents
    were encoded (recorded in rankkit-index.json; ``backend="auto"``, as ``rankkit retrieve``), or on the
    ``backend``, ``quantize``, ``precision`` and ``threads`` given, as in :func:`load_model`."""
    from rankkit.dense import dense_search as search_dense

    check_count(k, "k")
    check_count(batch_size, "batch_size")
    texts, frame = queries_of(queries)
    runtime = _runtime(backend, quantize, precision, threads)
    run = search_dense(index, texts, k=k, nprobe=nprobe, batch_size=batch_size, device=device, runtime=runtime)
    return run_out(run, frame, texts)


def load_model(model: str, checkpoint: PathLike | None = None, *, backend: str = "torch", quantize: str | None = None,
               precision: str | None = None, threads: int | None = None, device: str = "cpu") -> RankingModel:
    """A re-ranking model: a ``rankkit train`` folder, a lightning-ir or Hugging Face folder (zero-shot), a hub id
    ``ORG/NAME[@REVISION]`` of any of them, or None (packaged default). ``load_model(...).rank(query, passages,
    top_k=10)`` ranks passages for one query.

    ``backend``, ``quantize``, ``precision`` and ``threads`` are ``rankkit rerank``'s options
    (:class:`rankkit.runtime.Runtime`): torch fp32 unless asked; ``backend="auto"`` chooses for this CPU as
    the command does (its int8/bf16 encoders are exported, checked and cached once), and on a backend other than
    torch an unset ``quantize``/``precision`` is ``auto`` too, as on the command line. The model keeps its
    inference session (:class:`rankkit.runtime.InferenceSession`: bf16 encoder weights on CUDA, autocast on the
    CPU, the batching), so ``rank`` and :func:`rerank` score as ``rankkit rerank`` does.
    """
    from rankkit.runtime import InferenceSession

    return InferenceSession.of(_load(model, checkpoint, backend, quantize, precision, threads, device)).model


def _load(model: str, checkpoint: PathLike | None, backend: str, quantize: str | None, precision: str | None,
          threads: int | None, device: str, sample: Any = None) -> Any:
    from rankkit.runtime import load_for_inference

    if not isinstance(model, str):
        raise kind_error("model", "a model name (mono, repbert, matrank, ...)", model)
    if checkpoint is not None and not is_path(checkpoint):
        raise kind_error("checkpoint", "a folder or a hub id (a path or a string)", checkpoint)
    if not isinstance(device, str):
        raise kind_error("device", "a string", device)
    runtime = _runtime(backend, quantize, precision, threads)
    return load_for_inference(model, checkpoint, runtime, device, sample=None if runtime.resolved else sample)


def _runtime(backend: str, quantize: str | None, precision: str | None, threads: int | None) -> Any:
    """The :class:`rankkit.runtime.Runtime` of the API's options: torch fp32 unless asked; on another backend
    what is not given is ``auto``, as on the command line."""
    from rankkit.runtime import Runtime

    for name, value in (("backend", backend), ("quantize", quantize), ("precision", precision)):
        if value is not None and not isinstance(value, str):
            raise kind_error(name, "a string", value)
    check_count(threads, "threads", optional=True)
    on_torch = backend == "torch"
    return Runtime(backend, quantize or ("none" if on_torch else "auto"), threads,
                   precision or ("fp32" if on_torch else "auto"))


def rerank(model: str | RankingModel, run: RunLike, queries: Queries | None = None, passages: Passages | None = None,
           *, checkpoint: PathLike | None = None, depth: int = 100, batch_size: int | None = None, device: str = "cpu",
           backend: str = "torch", quantize: str | None = None, precision: str | None = None,
           threads: int | None = None, show_progress: bool = True) -> Any:
    """Re-score each query's top ``depth`` candidates of ``run`` with ``model``; the rest follow in their order.

    ``model`` is a model name (``mono``, ``repbert``, ``matrank``, ... with ``checkpoint``) or a model
    from :func:`load_model`; ``passages`` is ``{docid: text}``, a corpus (file, BEIR folder, ``irds:``
    id) or a DataFrame (``docno, text``). A results DataFrame that carries ``query`` and ``text``
    columns (as PyTerrier's do) needs neither ``queries`` nor ``passages``. Scores are the model's;
    candidates below ``depth`` get scores below them, as ``rankkit rerank`` writes them. A DataFrame
    run gives a DataFrame (with the ``query`` column), a dict or file a dict.

    ``backend``, ``quantize``, ``precision`` and ``threads`` (a model given by name; :func:`load_model` for a
    loaded one) are ``rankkit rerank``'s: torch fp32 unless asked, ``backend="auto"`` as the command chooses.
    Queries are scored as the command scores them (in chunks of whole queries, in the model's inference session:
    ``batch_size`` pairs a forward pass at most, by default 32 on the CPU and a token budget on CUDA) under a
    progress bar of pairs (``show_progress``).
    """
    from rankkit.models.base import RankingModel
    from rankkit.reranking import merge_tail, score_lists
    from rankkit.runtime import InferenceSession

    check_count(depth, "depth")
    check_count(batch_size, "batch_size", optional=True)
    if not isinstance(model, (str, RankingModel)):
        raise kind_error("model", "a model name or a model from rankkit.load_model", model)
    scores_in, frame = run_of(run)
    if queries is None:
        if not (frame and "query" in run.columns):  # type: ignore[union-attr]
            raise RankkitError("rerank: no queries given, and the run is not a DataFrame with a 'query' column")
        texts = topics_from_frame(run, "run")
    else:
        texts, _ = queries_of(queries)
    missing = [qid for qid in scores_in if qid not in texts]
    if missing:
        raise RankkitError(f"query {missing[0]!r} of the run has no text ({len(missing)} such queries)")
    rankings = {qid: [docid for docid, _ in sort_ranking(docs)] for qid, docs in scores_in.items()}
    heads = {qid: ranking[:depth] for qid, ranking in rankings.items()}
    wanted = sorted({docid for head in heads.values() for docid in head})
    if passages is None:
        if not (frame and "text" in run.columns):  # type: ignore[union-attr]
            raise RankkitError("rerank: no passages given, and the run is not a DataFrame with a 'text' column")
        passage_text = passages_of(passages_from_frame(run, "run"), wanted)
    else:
        passage_text = passages_of(passages, wanted)
    qids = [qid for qid in scores_in if heads[qid]]
    if isinstance(model, str):
        from rankkit.runtime.auto import InputSample

        # auto's lossy choice is checked on these inputs' own first pairs (issue 41).
        sample = InputSample.of_lists([texts[q] for q in qids], [[passage_text[d] for d in heads[q]] for q in qids])
        session = InferenceSession.of(_load(model, checkpoint, backend, quantize, precision, threads, device, sample),
                                      batch_size=batch_size)
    else:
        if (backend, quantize, precision, threads) != ("torch", None, None, None):
            raise RankkitError("rerank: backend, quantize, precision and threads apply to a model given by name; "
                               "pass them to rankkit.load_model for a loaded one")
        session = _session_of(model, device, batch_size)
    scores = score_lists(session, [texts[qid] for qid in qids], [[passage_text[d] for d in heads[qid]] for qid in qids],
                         show_progress=show_progress)
    out: Run = {}
    scored = dict(zip(qids, scores))
    for qid in scores_in:
        top = {docid: float(v) for docid, v in zip(heads[qid], scored[qid].tolist())} if qid in scored else {}
        out[qid] = merge_tail(top, rankings[qid][depth:])
    return run_out(out, frame, texts)


def _session_of(model: RankingModel, device: str, batch_size: int | None) -> Any:
    """The session of a model from :func:`load_model` (its own, on its device), or one for a model built in Python
    (torch as it is, on ``device``)."""
    from rankkit.devices import pick_device
    from rankkit.runtime import InferenceSession

    owner = getattr(model.inference_context, "__self__", None)
    if isinstance(owner, InferenceSession) and owner.model is model:
        if batch_size is not None:
            owner.batching = owner.batching.with_rows(batch_size)
        return owner
    return InferenceSession.for_model(model, batch_size=batch_size, device=pick_device(device))




def fuse(runs: Sequence[RunLike], method: str = "rrf", *, k: int | None = 1000, depth: int | None = None,
         **options: Any) -> Any:
    """Fuse runs: ``rrf`` (``rrf_k``, ``weights``), ``combsum``/``combmnz`` (``norm``, ``weights``),
    ``interpolate`` (``alpha``, ``norm``) or ``alternate`` (RepBERT Eq. 6); see ``rankkit fuse --help``.
    A DataFrame among the runs gives a DataFrame."""
    from rankkit.fusion import fuse as fuse_runs

    if is_path(runs) or is_frame(runs) or not isinstance(runs, Sequence):
        raise kind_error("fuse: runs", "a list of runs", runs)
    check_count(k, "k", optional=True)
    check_count(depth, "depth", optional=True)
    loaded = [run_of(run, f"runs[{i}]") for i, run in enumerate(runs)]
    fused = fuse_runs([run for run, _ in loaded], method, k=k, depth=depth, **options)
    return run_out(fused, any(frame for _, frame in loaded))
