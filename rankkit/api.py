"""rankkit's Python API: every stage on in-memory structures, for notebooks and scripts.

The names here are also ``rankkit.<name>`` (imported on first use, so ``import rankkit`` stays
light). Every function takes its inputs in any of three forms:

* a path (a TREC run, qrels or topics file, a corpus, a BEIR folder) or an ``irds:`` id;
* a dict: queries ``{qid: text}``, passages ``{docid: text}``, a run ``{qid: {docid: score}}`` (the
  ir_measures / pytrec_eval shape; rank = score order, ties by docid descending, as trec_eval),
  qrels ``{qid: {docid: relevance}}``;
* a pandas DataFrame with PyTerrier's or ir_measures' column names (``qid``/``query_id``,
  ``docno``/``docid``/``doc_id``, ``score``, ``rank``, ``query``, ``text``, ``label``/``relevance``;
  :mod:`rankkit.formats.frames`).

Runs come back as DataFrames when a DataFrame went in, as dicts otherwise (:func:`to_frame` and
:func:`from_frame` convert either way); the argument order is always ``run, qrels``. pandas is
not a dependency: it is imported only when a DataFrame is passed or asked for (:func:`experiment`,
:func:`to_frame`).

Example (README.md runs a longer one in its tests)::

    import rankkit

    queries = {"q1": "when did the 1973 oil crisis begin"}
    passages = {"p1": "The 1973 oil crisis began in October 1973 ...", "p2": "The crisis had a major impact ..."}
    run = {"q1": {"p1": 1.0, "p2": 2.0}}  # a first-stage run, e.g. rankkit.search(...)
    reranked = rankkit.rerank("repbert", run, queries, passages)
    fused = rankkit.fuse([run, reranked], method="rrf")
    rankkit.evaluate(reranked, {"q1": {"p1": 1}}, ["RR@10", "nDCG@10"])  # {'RR@10': 1.0, 'nDCG@10': 1.0}
    rankkit.experiment([run, reranked], {"q1": {"p1": 1}}, ["nDCG@10"], names=["bm25", "mono"], baseline=0)

Nothing here touches ``os.environ`` or other libraries' logging (only the ``rankkit`` command
does), and every mistake of the caller is a :class:`rankkit.errors.RankkitError` with the CLI's
one-line message.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, Union

from rankkit.errors import RankkitError
from rankkit.formats import read_qrels, read_run, read_topics
from rankkit.formats import write_run as write_run_file
from rankkit.formats.frames import (
    from_frame, is_frame, passages_from_frame, qrels_from_frame, run_frame, run_from_frame, to_frame, topics_from_frame,
)
from rankkit.formats.runs import Run, sort_ranking
from rankkit.formats.sources import load_qrels, load_topics

if TYPE_CHECKING:
    import pandas

    from rankkit.models.base import RankingModel
    from rankkit.training.config import StepInfo, TrainResult

PathLike = Union[str, "os.PathLike[str]"]
Queries = Union[Mapping[str, str], PathLike, "pandas.DataFrame"]
Passages = Union[Mapping[str, str], PathLike, "pandas.DataFrame"]
RunLike = Union[Mapping[str, Mapping[str, float]], PathLike, "pandas.DataFrame"]
QrelsLike = Union[Mapping[str, Mapping[str, int]], PathLike, "pandas.DataFrame"]
Measures = Union[str, Sequence[str], None]


# -- inputs in any form ------------------------------------------------------------------------


def _is_path(value: object) -> bool:
    return isinstance(value, (str, os.PathLike))


def _kind_error(what: str, expected: str, value: object) -> RankkitError:
    return RankkitError(f"{what} must be {expected}; got {type(value).__name__}")


RUN_FORMS = "a TREC run file, a {qid: {docid: score}} dict or a DataFrame with qid, docno and score columns"
QRELS_FORMS = "a qrels file (or irds: id), a {qid: {docid: label}} dict or a DataFrame with qid, docno and label columns"
QUERIES_FORMS = "a topics file (or irds: id), a {qid: text} dict or a DataFrame with qid and query columns"
PASSAGES_FORMS = "a corpus (file, BEIR folder or irds: id), a {docid: text} dict or a DataFrame with docno and text columns"


def _number(what: str, qid: str, docid: str, value: object, integer: bool) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise RankkitError(f"{what}: query {qid!r}, document {docid!r}: {value!r} is not a number")
    number = float(value)  # type: ignore[arg-type]
    if number != number or number in (float("inf"), float("-inf")):
        raise RankkitError(f"{what}: query {qid!r}, document {docid!r}: {value!r} is not a finite number")
    if integer:
        if not number.is_integer():
            raise RankkitError(f"{what}: query {qid!r}, document {docid!r}: label {value!r} is not an integer")
        return int(number)
    return number


def _nested(value: Mapping[Any, Any], what: str, integer: bool) -> dict[str, dict[str, Any]]:
    """A checked copy of a ``{qid: {docid: number}}`` dict, ids as strings."""
    out: dict[str, dict[str, Any]] = {}
    shape = "{docid: label}" if integer else "{docid: score}"
    for qid, docs in value.items():
        if not isinstance(docs, Mapping):
            raise RankkitError(f"{what}: query {qid!r} maps to a {type(docs).__name__}, expected {shape}")
        key = str(qid)
        if key in out:
            raise RankkitError(f"{what}: query {key!r} appears twice (ids are compared as strings)")
        out[key] = {str(d): _number(what, key, str(d), v, integer) for d, v in docs.items()}
        if len(out[key]) != len(docs):
            raise RankkitError(f"{what}: query {key!r} has a document twice (ids are compared as strings)")
    return out


def _run(value: object, what: str = "run") -> tuple[Run, bool]:
    """``(run dict, given as a DataFrame)`` of a run in any form."""
    if is_frame(value):
        return run_from_frame(value, what), True
    if _is_path(value):
        return read_run(value), False  # type: ignore[arg-type]
    if isinstance(value, Mapping):
        return _nested(value, what, integer=False), False
    raise _kind_error(what, RUN_FORMS, value)


def _qrels(value: object, what: str = "qrels") -> tuple[dict[str, dict[str, int]], bool]:
    if is_frame(value):
        return qrels_from_frame(value, what), True
    if _is_path(value):
        return load_qrels(value), False  # type: ignore[arg-type]
    if isinstance(value, Mapping):
        return _nested(value, what, integer=True), False
    raise _kind_error(what, QRELS_FORMS, value)


def _texts(value: Mapping[Any, Any], what: str) -> dict[str, str]:
    out = {}
    for key, text in value.items():
        if not isinstance(text, str):
            raise RankkitError(f"{what}: the text of {key!r} is a {type(text).__name__}, expected a string")
        out[str(key)] = text
    return out


def _queries(value: object, what: str = "queries") -> tuple[dict[str, str], bool]:
    if is_frame(value):
        return topics_from_frame(value, what), True
    if _is_path(value):
        return load_topics(value), False  # type: ignore[arg-type]
    if isinstance(value, Mapping):
        return _texts(value, what), False
    raise _kind_error(what, QUERIES_FORMS, value)


def _measures(measures: Measures) -> list[str] | None:
    if measures is None:
        return None
    if isinstance(measures, str):
        return [measures]
    if not isinstance(measures, Sequence) or not all(isinstance(m, str) for m in measures):
        raise _kind_error("measures", "a measure name or a list of them (nDCG@10, RR@10, map, ...)", measures)
    return list(measures)


def _count(value: object, name: str, minimum: int = 1, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise RankkitError(f"{name} must be an integer of at least {minimum}, got {value!r}")


def _run_out(run: Run, frame: bool, queries: Mapping[str, str] | None = None) -> Any:
    return run_frame(run, queries=queries) if frame else run


# -- the stages ----------------------------------------------------------------------------------


def search(index: PathLike, queries: Queries, k: int = 1000, *, k1: float = 0.9, b: float = 0.4,
           rm3: bool = False, threads: int = 1) -> Any:
    """BM25 (Anserini, optionally + RM3) top-``k`` of each query over a ``rankkit index --kind bm25`` index.

    Also opens Lucene indexes Anserini/Pyserini built. A DataFrame of queries gives a results
    DataFrame (``qid, query, docno, score, rank``), a dict or file a run dict.
    """
    from rankkit.lexical.search import Bm25Params, Bm25Searcher

    _count(k, "k")
    _count(threads, "threads")
    params = Bm25Params(k1=k1, b=b, rm3=rm3)
    params.check()
    texts, frame = _queries(queries)
    with Bm25Searcher(index, params) as searcher:
        hits = searcher.batch_search(list(texts.items()), k, threads)
    run = {qid: dict(hits.get(qid, [])) for qid in texts}
    return _run_out(run, frame, texts)


def dense_search(index: PathLike, queries: Queries, k: int = 1000, *, nprobe: int | None = None,
                 batch_size: int = 64, device: str = "auto", backend: str = "auto", quantize: str | None = None,
                 precision: str | None = None, threads: int | None = None) -> Any:
    """Top-``k`` of each query over a ``rankkit index --kind dense`` index (queries encoded by the index's
    model); a DataFrame of queries gives a results DataFrame. The query encoder runs as the index's documents
    were encoded (recorded in rankkit-index.json; ``backend="auto"``, as ``rankkit retrieve``), or on the
    ``backend``, ``quantize``, ``precision`` and ``threads`` given, as in :func:`load_model`."""
    from rankkit.dense import dense_search as search_dense

    _count(k, "k")
    _count(batch_size, "batch_size")
    texts, frame = _queries(queries)
    runtime = _runtime(backend, quantize, precision, threads)
    run = search_dense(index, texts, k=k, nprobe=nprobe, batch_size=batch_size, device=device, runtime=runtime)
    return _run_out(run, frame, texts)


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
        raise _kind_error("model", "a model name (mono, repbert, matrank, ...)", model)
    if checkpoint is not None and not _is_path(checkpoint):
        raise _kind_error("checkpoint", "a folder or a hub id (a path or a string)", checkpoint)
    if not isinstance(device, str):
        raise _kind_error("device", "a string", device)
    runtime = _runtime(backend, quantize, precision, threads)
    return load_for_inference(model, checkpoint, runtime, device, sample=None if runtime.resolved else sample)


def _runtime(backend: str, quantize: str | None, precision: str | None, threads: int | None) -> Any:
    """The :class:`rankkit.runtime.Runtime` of the API's options: torch fp32 unless asked; on another backend
    what is not given is ``auto``, as on the command line."""
    from rankkit.runtime import Runtime

    for name, value in (("backend", backend), ("quantize", quantize), ("precision", precision)):
        if value is not None and not isinstance(value, str):
            raise _kind_error(name, "a string", value)
    _count(threads, "threads", optional=True)
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

    _count(depth, "depth")
    _count(batch_size, "batch_size", optional=True)
    if not isinstance(model, (str, RankingModel)):
        raise _kind_error("model", "a model name or a model from rankkit.load_model", model)
    scores_in, frame = _run(run)
    if queries is None:
        if not (frame and "query" in run.columns):  # type: ignore[union-attr]
            raise RankkitError("rerank: no queries given, and the run is not a DataFrame with a 'query' column")
        texts = topics_from_frame(run, "run")
    else:
        texts, _ = _queries(queries)
    missing = [qid for qid in scores_in if qid not in texts]
    if missing:
        raise RankkitError(f"query {missing[0]!r} of the run has no text ({len(missing)} such queries)")
    rankings = {qid: [docid for docid, _ in sort_ranking(docs)] for qid, docs in scores_in.items()}
    heads = {qid: ranking[:depth] for qid, ranking in rankings.items()}
    wanted = sorted({docid for head in heads.values() for docid in head})
    if passages is None:
        if not (frame and "text" in run.columns):  # type: ignore[union-attr]
            raise RankkitError("rerank: no passages given, and the run is not a DataFrame with a 'text' column")
        passage_text = _passages(passages_from_frame(run, "run"), wanted)
    else:
        passage_text = _passages(passages, wanted)
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
    return _run_out(out, frame, texts)


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


def _passages(passages: object, wanted: Sequence[str]) -> dict[str, str]:
    if is_frame(passages):
        passages = passages_from_frame(passages)
    if isinstance(passages, Mapping):
        missing = [docid for docid in wanted if docid not in passages]
        if missing:
            raise RankkitError(f"passage {missing[0]!r} has no text ({len(missing)} such passages)")
        return _texts({docid: passages[docid] for docid in wanted}, "passages")
    if not _is_path(passages):
        raise _kind_error("passages", PASSAGES_FORMS, passages)
    from rankkit.docstore import open_docstore
    from rankkit.formats.sources import resolve_corpus

    with open_docstore(corpus=resolve_corpus(passages)) as store:  # type: ignore[arg-type]
        return store.get_many(wanted)


def fuse(runs: Sequence[RunLike], method: str = "rrf", *, k: int | None = 1000, depth: int | None = None,
         **options: Any) -> Any:
    """Fuse runs: ``rrf`` (``rrf_k``, ``weights``), ``combsum``/``combmnz`` (``norm``, ``weights``),
    ``interpolate`` (``alpha``, ``norm``) or ``alternate`` (RepBERT Eq. 6); see ``rankkit fuse --help``.
    A DataFrame among the runs gives a DataFrame."""
    from rankkit.fusion import fuse as fuse_runs

    if _is_path(runs) or is_frame(runs) or not isinstance(runs, Sequence):
        raise _kind_error("fuse: runs", "a list of runs", runs)
    _count(k, "k", optional=True)
    _count(depth, "depth", optional=True)
    loaded = [_run(run, f"runs[{i}]") for i, run in enumerate(runs)]
    fused = fuse_runs([run for run, _ in loaded], method, k=k, depth=depth, **options)
    return _run_out(fused, any(frame for _, frame in loaded))


def evaluate(run: RunLike, qrels: QrelsLike, measures: Measures = None, *, per_query: bool = False,
             complete: bool = False, max_docs: int | None = None, rel_level: int | None = None) -> Any:
    """trec_eval-compatible scores of one run: ``{measure: mean}``, or each query's with ``per_query``.

    ``measures`` in ir_measures (``nDCG@10``, ``RR@10``) or trec_eval syntax (``ndcg_cut.10``,
    ``official``); default nDCG@10, RR@10, AP, R@1000. Means are over the queries in both the run
    and the qrels (trec_eval), or over every qrels query with ``complete`` (``-c``); ``max_docs`` is
    ``-M``, ``rel_level`` ``-l``. ``per_query`` gives ``{qid: {measure: value}}``, or a DataFrame
    ``qid, measure, value`` when the run or qrels was a DataFrame. For several runs, significance
    tests and a table, see :func:`experiment`.
    """
    from rankkit.evaluation.evaluate import evaluate as evaluate_runs
    from rankkit.evaluation.evaluate import warn_left_out

    scores_in, run_frame_given = _run(run)
    judged, qrels_frame_given = _qrels(qrels)
    result = evaluate_runs({"run": scores_in}, judged, _measures(measures), complete=complete, max_docs=max_docs,
                           rel_level=rel_level)
    warn_left_out(result)  # as rankkit eval: queries the averages leave out are said, on stderr
    scores = result.runs["run"]
    if not per_query:
        return {label: float(scores.aggregates[label]) for label in result.labels}
    values = scores.per_query(result.labels)
    if not (run_frame_given or qrels_frame_given):
        return values
    pandas = _pandas("evaluate(per_query=True) of DataFrames")
    rows = [(qid, label, value) for qid, row in values.items() for label, value in row.items()]
    return pandas.DataFrame(rows, columns=["qid", "measure", "value"])


def _pandas(what: str) -> Any:
    from rankkit.formats.frames import import_pandas

    return import_pandas(what)


def _named_runs(runs: object, names: Sequence[str] | None) -> dict[str, Run]:
    """``{name: run}`` of the runs given to :func:`experiment`, named as ``rankkit eval`` names files."""
    if isinstance(runs, Mapping) and runs and all(_is_path(r) or is_frame(r) or isinstance(r, Mapping) and (
            not r or all(isinstance(d, Mapping) for d in r.values())) for r in runs.values()):
        items: list[tuple[str | None, object]] = [(str(name), run) for name, run in runs.items()]
        if names is not None:
            raise RankkitError("experiment: runs given as {name: run} are named already; leave out names=")
    elif _is_path(runs) or is_frame(runs) or isinstance(runs, Mapping):
        items = [(None, runs)]  # one run
    elif isinstance(runs, Sequence):
        items = [(None, run) for run in runs]
    else:
        raise _kind_error("experiment: runs", "a list of runs, or {name: run}", runs)
    if not items:
        raise RankkitError("experiment: no run to evaluate")
    if names is not None:
        if isinstance(names, str) or not isinstance(names, Sequence) or len(names) != len(items):
            raise RankkitError(f"experiment: names= must give one name per run ({len(items)})")
        items = [(str(name), run) for name, (_, run) in zip(names, items)]
    named: dict[str, Run] = {}
    for i, (name, run) in enumerate(items):
        label = name if name is not None else str(run) if _is_path(run) else f"run{i + 1}"
        if label in named:
            raise RankkitError(f"experiment: two runs are named {label!r}; give names=")
        named[label] = _run(run, f"run {label!r}")[0]
    return named


def experiment(runs: Sequence[RunLike] | Mapping[str, RunLike], qrels: QrelsLike, measures: Measures = None, *,
               names: Sequence[str] | None = None, baseline: int | str | None = None, test: str = "randomization",
               correction: str = "holm", alpha: float = 0.05, permutations: int = 10000, seed: int = 0,
               per_query: bool = False, complete: bool = False, max_docs: int | None = None,
               rel_level: int | None = None, as_frame: bool = True) -> Any:
    """``rankkit eval``'s table of several runs as a DataFrame: one row per run (the baseline first), a
    column per measure, and with a ``baseline`` (an index into ``runs`` or a name) the paired tests.

    ``runs`` is a list (names: ``names=``, else a file's path, else ``run1``, ``run2``, ...) or
    ``{name: run}``, each run in any form (path, dict, DataFrame). With a baseline every other run
    gets, per measure ``M``, the columns ``M delta``, ``M p_t``, ``M p_t_adjusted``,
    ``M p_randomization``, ``M p_randomization_adjusted`` and ``M significant`` (marked by ``test``:
    ``randomization``, ``t`` or ``both``; ``correction``: ``holm``, ``bonferroni`` or ``none`` over all
    runs x measures), exactly the numbers of ``rankkit eval --format json`` (the same code computes
    them). ``per_query`` returns the per-query frame instead (``name, qid, measure, value``), as
    PyTerrier's ``perquery``; ``as_frame=False`` returns the JSON structure itself (no pandas needed).
    """
    from rankkit.evaluation.evaluate import evaluate as evaluate_runs
    from rankkit.evaluation.evaluate import warn_left_out
    from rankkit.evaluation.measures import parse_measures
    from rankkit.evaluation.report import to_json

    _count(permutations, "permutations")
    _count(seed, "seed", minimum=0)
    if as_frame:
        _pandas("rankkit.experiment (as_frame=False returns plain dicts)")
    specs = parse_measures(_measures(measures), rel_level=rel_level)
    named = _named_runs(_with_baseline_file(runs, baseline, names), names)
    judged, _ = _qrels(qrels)
    result = evaluate_runs(named, judged, specs, complete=complete, max_docs=max_docs, rel_level=rel_level)
    warn_left_out(result)  # as rankkit eval: queries the averages leave out are said, on stderr
    significance = None
    if baseline is not None:
        from rankkit.evaluation.significance import compare

        significance = compare(result, _baseline_name(baseline, list(named)), test=test, permutations=permutations,
                               seed=seed, correction=correction, alpha=alpha)
    data = to_json(result, per_query=per_query, significance=significance)
    if not as_frame:
        return data
    pandas = _pandas("rankkit.experiment")
    if per_query:
        rows = [(name, qid, label, value) for name, entry in data.items()
                for qid, values in entry["per_query"].items() for label, value in values.items()]
        return pandas.DataFrame(rows, columns=["name", "qid", "measure", "value"])
    table: dict[str, list[Any]] = {"name": list(data)}
    for label in result.labels:
        table[label] = [entry[label] for entry in data.values()]
    if significance is not None:
        for label in result.labels:
            tests = [entry.get("significance", {}).get(label) for entry in data.values()]
            if not any(tests):
                continue  # a counter (num_ret, ...): not tested
            for field in ("delta", "p_t", "p_t_adjusted", "p_randomization", "p_randomization_adjusted"):
                table[f"{label} {field}"] = [None if t is None else t[field] for t in tests]
            table[f"{label} significant"] = [None if t is None else t["significant"] for t in tests]
    frame = pandas.DataFrame(table)
    for column in frame.columns:
        if column.endswith(" significant"):
            frame[column] = frame[column].astype("boolean")  # True/False, <NA> for the baseline
        elif column != "name" and frame[column].dtype == object:
            frame[column] = frame[column].astype(float)  # a measure without any value (all None)
    return frame


def _with_baseline_file(runs: object, baseline: object, names: Sequence[str] | None) -> object:
    """As ``rankkit eval -b FILE``: a baseline file that is not among the (unnamed) runs is added to them, first."""
    if names is not None or isinstance(runs, Mapping) or not isinstance(baseline, (str, os.PathLike)) \
            or not Path(baseline).is_file():
        return runs
    listed = [runs] if _is_path(runs) or is_frame(runs) else list(runs) if isinstance(runs, Sequence) else None
    if listed is None or str(baseline) in [str(r) for r in listed if _is_path(r)]:
        return runs
    return [baseline, *listed]


def _baseline_name(baseline: int | str, names: list[str]) -> str:
    if isinstance(baseline, bool) or not isinstance(baseline, (int, str, os.PathLike)):
        raise _kind_error("experiment: baseline", "a run's index or name", baseline)
    if isinstance(baseline, int):
        if not -len(names) <= baseline < len(names):
            raise RankkitError(f"experiment: baseline={baseline} is not the index of one of the {len(names)} runs")
        return names[baseline]
    if str(baseline) not in names:
        raise RankkitError(f"experiment: baseline {str(baseline)!r} is not among the runs ({', '.join(names)})")
    return str(baseline)


def write_run(path: PathLike, run: RunLike, tag: str = "rankkit", *, k: int | None = None) -> int:
    """Write a run (dict or DataFrame) as a TREC run file, sorted the trec_eval way; returns the lines written."""
    scores_in, _ = _run(run)
    if not isinstance(tag, str) or not tag or any(ch.isspace() for ch in tag):
        raise RankkitError(f"run tag must be one non-empty word, got {tag!r}")
    _count(k, "k", optional=True)
    return write_run_file(path, scores_in, tag, k=k)


def train(model: str | None = None, train: PathLike | Sequence[PathLike] | None = None, output: PathLike | None = None,
          *, config: PathLike | None = None, collection: PathLike | None = None, queries: PathLike | None = None,
          callbacks: Sequence[Callable[[StepInfo], None]] = (), **settings: Any) -> TrainResult:
    """Train a model as ``rankkit train`` does, with the same settings under their Python names.

    ``settings`` are ``rankkit train``'s options (``epochs``, ``max_steps``, ``batch_size``, ``lr``,
    ``dev``, ``report_to``, ... the fields of :class:`rankkit.training.TrainConfig`, same defaults) and
    the model's own settings (``rankkit train --model NAME --help``: ``encoder="bi"``, ...), each
    checked against its declared type. ``config`` is a TOML recipe (``recipes/*.toml``); arguments
    given here override it. ``callbacks`` run after every optimiser step with a
    :class:`~rankkit.training.StepInfo`. Returns where the model went, its steps and metrics; the
    folder holds the model, ``train.log``, ``metrics.csv`` and ``training.png``.
    """
    from rankkit.training import train as run_training
    from rankkit.training.settings import API, api_settings, finish_config, merge_recipe, model_options, model_spec

    if model is not None:
        settings["model"] = model
    if train is not None:
        settings["train"] = train
    if output is not None:
        settings["output"] = output
    if collection is not None:
        settings["collection"] = collection
    if queries is not None:
        settings["queries"] = queries
    values, given, own = api_settings(settings)
    values, file_options, recipe = merge_recipe(values, given, None if config is None else Path(config))
    cls = model_spec(values)
    options = {**model_options(cls, file_options, str(config)), **model_options(cls, own, API)}
    return run_training(finish_config(values, options, recipe), callbacks)


__all__ = ["dense_search", "evaluate", "experiment", "from_frame", "fuse", "load_model", "load_qrels", "load_topics",
           "read_qrels", "read_run", "read_topics", "rerank", "search", "to_frame", "train", "write_run"]
