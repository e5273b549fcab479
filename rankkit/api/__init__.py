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

from rankkit.api.evaluation import evaluate, experiment, write_run
from rankkit.api.inputs import Measures, Passages, PathLike, QrelsLike, Queries, RunLike
from rankkit.api.ranking import _load, dense_search, fuse, load_model, rerank, search
from rankkit.api.training import mine, train
from rankkit.formats import read_qrels, read_run, read_topics
from rankkit.formats.frames import from_frame, to_frame
from rankkit.formats.sources import load_qrels, load_topics

__all__ = ["Measures", "Passages", "PathLike", "QrelsLike", "Queries", "RunLike", "_load", "dense_search", "evaluate",
           "experiment", "from_frame", "fuse", "load_model", "load_qrels", "load_topics", "mine", "read_qrels",
           "read_run", "read_topics", "rerank", "search", "to_frame", "train", "write_run"]
