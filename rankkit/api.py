"""rankkit's Python API: every stage on in-memory structures, for notebooks and scripts.

The names here are also ``rankkit.<name>`` (imported on first use, so ``import rankkit`` stays
light). The structures are the ones the file formats read into:

* queries: ``{qid: text}``; passages: ``{docid: text}`` (or a corpus file / ``irds:`` id);
* a run: ``{qid: {docid: score}}`` (the ir_measures / pytrec_eval shape; rank = score order, ties
  by docid descending, as trec_eval);
* qrels: ``{qid: {docid: relevance}}``.

Example (a notebook-sized pipeline; README.md runs it in its tests)::

    import rankkit

    queries = {"q1": "when did the 1973 oil crisis begin"}
    passages = {"p1": "The 1973 oil crisis began in October 1973 ...", "p2": "The crisis had a major impact ..."}
    run = {"q1": {"p1": 1.0, "p2": 2.0}}  # a first-stage run, e.g. rankkit.search(...)
    reranked = rankkit.rerank("repbert", run, queries, passages)
    fused = rankkit.fuse([run, reranked], method="rrf")
    rankkit.evaluate(reranked, {"q1": {"p1": 1}}, ["RR@10", "nDCG@10"])  # {'RR@10': 1.0, 'nDCG@10': 1.0}

Nothing here touches ``os.environ`` or other libraries' logging (only the ``rankkit`` command
does), and errors are :class:`rankkit.errors.RankkitError` with the CLI's one-line messages.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from rankkit.errors import RankkitError
from rankkit.formats import read_qrels, read_run, read_topics, write_run
from rankkit.formats.runs import Run, sort_ranking
from rankkit.formats.sources import load_qrels, load_topics

if TYPE_CHECKING:
    from rankkit.models.base import RankingModel

PathLike = str | os.PathLike[str]
Queries = Mapping[str, str]


def _queries(queries: Queries | PathLike) -> dict[str, str]:
    return dict(queries) if isinstance(queries, Mapping) else load_topics(queries)


def search(index: PathLike, queries: Queries | PathLike, k: int = 1000, *, k1: float = 0.9, b: float = 0.4,
           rm3: bool = False, threads: int = 1) -> Run:
    """BM25 (Anserini, optionally + RM3) top-``k`` of each query over a ``rankkit index --kind bm25`` index.

    Also opens Lucene indexes Anserini/Pyserini built. ``queries`` is ``{qid: text}`` or a topics source.
    """
    from rankkit.lexical.search import Bm25Params, Bm25Searcher

    if k < 1:
        raise RankkitError(f"k must be at least 1, got {k}")
    params = Bm25Params(k1=k1, b=b, rm3=rm3)
    params.check()
    texts = _queries(queries)
    with Bm25Searcher(index, params) as searcher:
        hits = searcher.batch_search(list(texts.items()), k, threads)
    return {qid: dict(hits.get(qid, [])) for qid in texts}


def dense_search(index: PathLike, queries: Queries | PathLike, k: int = 1000, *, nprobe: int | None = None,
                 batch_size: int = 64, device: str = "auto") -> Run:
    """Top-``k`` of each query over a ``rankkit index --kind dense`` index (queries encoded by the index's model)."""
    from rankkit.dense import dense_search as search_dense

    return search_dense(index, _queries(queries), k=k, nprobe=nprobe, batch_size=batch_size, device=device)


def load_model(model: str, checkpoint: PathLike | None = None) -> RankingModel:
    """A re-ranking model: a ``rankkit train`` folder, a Hugging Face folder (zero-shot), or None (packaged default)."""
    from rankkit.runtime import load_for_inference

    return load_for_inference(model, checkpoint, device="cpu").model


def rerank(model: str | RankingModel, run: Mapping[str, Mapping[str, float]], queries: Queries | PathLike,
           passages: Mapping[str, str] | PathLike, *, checkpoint: PathLike | None = None, depth: int = 100,
           batch_size: int = 32, device: str = "cpu") -> Run:
    """Re-score each query's top ``depth`` candidates of ``run`` with ``model``; the rest follow in their order.

    ``model`` is a model name (``mono``, ``repbert``, ``matrank``, ... with ``checkpoint``) or a model
    from :func:`load_model`; ``passages`` is ``{docid: text}`` or a corpus (file, BEIR folder,
    ``irds:`` id). Scores are the model's; candidates below ``depth`` get scores below them, as
    ``rankkit rerank`` writes them.
    """
    import torch

    from rankkit.devices import pick_device
    from rankkit.reranking import merge_tail

    if depth < 1 or batch_size < 1:
        raise RankkitError("depth and batch_size must be at least 1")
    ranker = load_model(model, checkpoint) if isinstance(model, str) else model
    texts = _queries(queries)
    missing = [qid for qid in run if qid not in texts]
    if missing:
        raise RankkitError(f"query {missing[0]!r} of the run has no text ({len(missing)} such queries)")
    rankings = {qid: [docid for docid, _ in sort_ranking(docs)] for qid, docs in run.items()}
    heads = {qid: ranking[:depth] for qid, ranking in rankings.items()}
    wanted = sorted({docid for head in heads.values() for docid in head})
    passage_text = _passages(passages, wanted)
    ranker.to(pick_device(device))
    ranker.eval()
    qids = [qid for qid in run if heads[qid]]
    with torch.inference_mode():
        scores = ranker.rerank_scores([texts[qid] for qid in qids], [[passage_text[d] for d in heads[qid]] for qid in qids],
                                      batch_size)
    out: Run = {}
    scored = dict(zip(qids, scores))
    for qid in run:
        top = {docid: float(v) for docid, v in zip(heads[qid], scored[qid].tolist())} if qid in scored else {}
        out[qid] = merge_tail(top, rankings[qid][depth:])
    return out


def _passages(passages: Mapping[str, str] | PathLike, wanted: Sequence[str]) -> dict[str, str]:
    if isinstance(passages, Mapping):
        missing = [docid for docid in wanted if docid not in passages]
        if missing:
            raise RankkitError(f"passage {missing[0]!r} has no text ({len(missing)} such passages)")
        return {docid: passages[docid] for docid in wanted}
    from rankkit.docstore import open_docstore
    from rankkit.formats.sources import resolve_corpus

    with open_docstore(corpus=resolve_corpus(passages)) as store:
        return store.get_many(wanted)


def fuse(runs: Sequence[Mapping[str, Mapping[str, float]]], method: str = "rrf", *, k: int | None = 1000,
         depth: int | None = None, **options: Any) -> Run:
    """Fuse runs: ``rrf`` (``rrf_k``, ``weights``), ``combsum``/``combmnz`` (``norm``, ``weights``),
    ``interpolate`` (``alpha``, ``norm``) or ``alternate`` (RepBERT Eq. 6); see ``rankkit fuse --help``."""
    from rankkit.fusion import fuse as fuse_runs

    return fuse_runs(list(runs), method, k=k, depth=depth, **options)


def evaluate(run: Mapping[str, Mapping[str, float]], qrels: Mapping[str, Mapping[str, int]] | PathLike,
             measures: Sequence[str] | None = None, *, per_query: bool = False, complete: bool = False,
             ) -> dict[str, float] | dict[str, dict[str, float]]:
    """trec_eval-compatible scores of one run: ``{measure: mean}``, or ``{qid: {measure: value}}`` with ``per_query``.

    ``measures`` in ir_measures (``nDCG@10``, ``RR@10``) or trec_eval syntax (``ndcg_cut.10``,
    ``official``); default nDCG@10, RR@10, AP, R@1000. Means are over the queries in both the run
    and the qrels (trec_eval), or over every qrels query with ``complete`` (``-c``).
    """
    from rankkit.evaluation.evaluate import evaluate as evaluate_runs

    judged = {q: dict(d) for q, d in (qrels.items() if isinstance(qrels, Mapping) else load_qrels(qrels).items())}
    result = evaluate_runs(judged, {"run": {q: dict(d) for q, d in run.items()}}, list(measures) if measures else None,
                           complete=complete)
    scores = result.runs["run"]
    if per_query:
        return scores.per_query(result.labels)
    return {label: float(scores.aggregates[label]) for label in result.labels}


__all__ = ["dense_search", "evaluate", "fuse", "load_model", "load_qrels", "load_topics", "read_qrels", "read_run",
           "read_topics", "rerank", "search", "write_run"]
