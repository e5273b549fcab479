"""Runs, qrels, topics and passages as pandas DataFrames, with PyTerrier's and ir_measures' column names.

Reading (:func:`from_frame` and the ``*_from_frame`` functions) accepts either naming:

==========  ===================================  =================================
what        PyTerrier                            ir_measures
==========  ===================================  =================================
query id    ``qid``                              ``query_id``
document    ``docno`` (or ``docid``)             ``doc_id``
run score   ``score`` (or only ``rank``)         ``score``
label       ``label``                            ``relevance``
texts       ``query`` (topics), ``text`` (passages)
==========  ===================================  =================================

(PyTerrier's ``docid`` is its index's internal number and ``docno`` the document's id, so ``docno``
wins when a frame has both.) Ids become strings; scores must be finite numbers and labels
integers; a (query, document) pair given twice is an error. A run with only a ``rank`` column gets
the score ``-rank``, which keeps its order.

Writing (:func:`to_frame`) gives PyTerrier's names by default (``columns="ir_measures"`` for
ir_measures'): a run as ``qid, docno, score, rank`` (plus ``query`` when the query texts are given),
each query ranked 1..n the trec_eval way (score descending, ties by docid descending); qrels as
``qid, docno, label``; topics as ``qid, query``; passages as ``docno, text``.

pandas is not a dependency of rankkit: it is imported only inside these functions, when a frame is
passed (then it is loaded already) or asked for; without it, asking for a frame is a one-line error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping

from rankkit.errors import RankkitError, excerpt
from rankkit.formats.ids import all_valid, id_problem
from rankkit.formats.runs import Run, sort_ranking

if TYPE_CHECKING:
    import pandas

QID = ("qid", "query_id")
DOCNO = ("docno", "docid", "doc_id")
SCORE = ("score",)
RANK = ("rank",)
LABEL = ("label", "relevance")
QUERY = ("query",)
TEXT = ("text",)
KINDS = ("run", "qrels", "topics", "passages")
STYLES = ("pyterrier", "ir_measures")


def is_frame(value: object) -> bool:
    """True for a pandas DataFrame (or a subclass), without importing pandas."""
    return any(c.__name__ == "DataFrame" and c.__module__.split(".")[0] == "pandas" for c in type(value).__mro__)


def import_pandas(what: str) -> Any:
    """The pandas module, or a one-line error saying that ``what`` needs it."""
    try:
        import pandas
    except ImportError:
        raise RankkitError(f"{what} needs pandas, which is not installed (pip install pandas)") from None
    return pandas


def _row(frame: Any, i: int) -> Any:
    """The index label of row ``i`` as a plain Python value (``5``, not ``np.int64(5)``)."""
    label = frame.index[i]
    return label.item() if hasattr(label, "item") else label


def _columns(frame: Any) -> str:
    return ", ".join(str(c) for c in frame.columns) or "none"


def _check_frame(frame: Any, what: str) -> None:
    """A frame rankkit can read as one table: column names given once (``frame[name]`` of a name given twice
    is a frame, not a column), and at least one row (an empty run or qrels is no input; as an empty file)."""
    names = [str(c) for c in frame.columns]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise RankkitError(f"{what}: the DataFrame has {len(names) - len(set(names)) + len(twice)} columns named "
                           f"{twice[0]!r}; give each column once")
    if len(frame) == 0:
        raise RankkitError(f"{what}: the DataFrame has no rows (its columns: {_columns(frame)})")


def _column(frame: Any, names: tuple[str, ...], what: str, *, needed: bool = True) -> str | None:
    for name in names:
        if name in frame.columns:
            return name
    if needed:
        wanted = " or ".join(repr(n) for n in names)
        raise RankkitError(f"{what}: the DataFrame has no {wanted} column (its columns: {_columns(frame)})")
    return None


def _ids(frame: Any, column: str, what: str) -> list[str]:
    values = frame[column]
    missing = values.isna().to_numpy()
    if missing.any():
        raise RankkitError(f"{what}: row {_row(frame, int(missing.argmax()))!r} has no {column}")
    ids = [str(v) for v in values.tolist()]
    if not all_valid(ids):  # whitespace in an id: a run written from it would not read back (formats/ids.py)
        for i, value in enumerate(ids):
            problem = id_problem(value)
            if problem is not None:
                raise RankkitError(f"{what}: row {_row(frame, i)!r}: {column} {excerpt(value)} {problem}")
    return ids


def _numbers(frame: Any, column: str, what: str, *, integers: bool = False) -> list[Any]:
    import numpy as np
    import pandas

    raw = frame[column]
    values = pandas.to_numeric(raw, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    bad = ~np.isfinite(values)
    if integers:
        bad |= np.isfinite(values) & (values != np.floor(values))
    if bad.any():
        i = int(bad.argmax())
        need = "an integer" if integers else "a finite number"
        value = raw.iloc[i]
        value = value.item() if hasattr(value, "item") else value  # numpy's nan, not np.float64(nan)
        raise RankkitError(f"{what}: row {_row(frame, i)!r}: {column} {value!r} is not {need}")
    return values.astype(np.int64).tolist() if integers else values.tolist()


def _pairs(frame: Any, what: str, keys: tuple[list[str], list[str]], values: list[Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for i, (qid, docid, value) in enumerate(zip(*keys, values)):
        docs = out.get(qid)
        if docs is None:
            docs = out[qid] = {}
        if docid in docs:
            raise RankkitError(f"{what}: row {_row(frame, i)!r}: document {docid!r} of query {qid!r} appears twice")
        docs[docid] = value
    return out


def run_from_frame(frame: Any, what: str = "run") -> Run:
    """``{qid: {docid: score}}`` of a results frame (``qid``/``query_id``, ``docno``/``docid``/``doc_id``,
    ``score`` or only ``rank``); queries in the order they first appear."""
    _check_frame(frame, what)
    qid = _column(frame, QID, what)
    docno = _column(frame, DOCNO, what)
    score = _column(frame, SCORE, what, needed=False)
    if score is None:
        rank = _column(frame, RANK, what, needed=False)
        if rank is None:
            raise RankkitError(f"{what}: the DataFrame has no 'score' (or 'rank') column (its columns: {_columns(frame)})")
        scores = [-float(r) for r in _numbers(frame, rank, what)]
    else:
        scores = _numbers(frame, score, what)
    assert qid is not None and docno is not None
    return _pairs(frame, what, (_ids(frame, qid, what), _ids(frame, docno, what)), scores)


def qrels_from_frame(frame: Any, what: str = "qrels") -> dict[str, dict[str, int]]:
    """``{qid: {docid: label}}`` of a qrels frame (``qid``/``query_id``, ``docno``/``doc_id``, ``label``/``relevance``)."""
    _check_frame(frame, what)
    qid = _column(frame, QID, what)
    docno = _column(frame, DOCNO, what)
    label = _column(frame, LABEL, what)
    assert qid is not None and docno is not None and label is not None
    return _pairs(frame, what, (_ids(frame, qid, what), _ids(frame, docno, what)), _numbers(frame, label, what, integers=True))


def _texts(frame: Any, keys: tuple[str, ...], text: tuple[str, ...], what: str, noun: str) -> dict[str, str]:
    _check_frame(frame, what)
    key = _column(frame, keys, what)
    column = _column(frame, text, what)
    assert key is not None and column is not None
    ids = _ids(frame, key, what)
    out: dict[str, str] = {}
    for i, (name, value) in enumerate(zip(ids, frame[column].tolist())):
        if not isinstance(value, str):
            raise RankkitError(f"{what}: row {_row(frame, i)!r}: {column} of {noun} {name!r} is not a string: {value!r}")
        seen = out.setdefault(name, value)
        if seen != value:  # a results frame repeats each query's text on every row: only a conflict is wrong
            raise RankkitError(f"{what}: row {_row(frame, i)!r}: {noun} {name!r} has two different texts")
    return out


def topics_from_frame(frame: Any, what: str = "queries") -> dict[str, str]:
    """``{qid: query}`` of a frame with ``qid``/``query_id`` and ``query`` (a topics frame, or a results
    frame that carries the query text on each row)."""
    return _texts(frame, QID, QUERY, what, "query")


def passages_from_frame(frame: Any, what: str = "passages") -> dict[str, str]:
    """``{docid: text}`` of a frame with ``docno``/``docid``/``doc_id`` and ``text``."""
    return _texts(frame, DOCNO, TEXT, what, "document")


def frame_kind(frame: Any) -> str:
    """What a frame holds, from its columns: qrels (a label), run (a score or rank), topics or passages."""
    _check_frame(frame, "DataFrame")
    columns = set(frame.columns)
    if columns & set(LABEL):
        return "qrels"
    if columns & set(SCORE + RANK):
        return "run"
    if columns & set(QUERY) and columns & set(QID):
        return "topics"
    if columns & set(TEXT) and columns & set(DOCNO):
        return "passages"
    raise RankkitError(f"cannot tell what the DataFrame holds from its columns ({_columns(frame)}): a run has "
                       "qid, docno, score; qrels qid, docno, label; topics qid, query; passages docno, text")


def from_frame(frame: Any, kind: str | None = None) -> Any:
    """The dict form of a DataFrame: a run, qrels, topics or passages (``kind``; default: from the columns)."""
    if not is_frame(frame):
        raise RankkitError(f"from_frame takes a pandas DataFrame, got {type(frame).__name__}")
    kind = kind or frame_kind(frame)
    readers = {"run": run_from_frame, "qrels": qrels_from_frame, "topics": topics_from_frame,
               "passages": passages_from_frame}
    if kind not in readers:
        raise RankkitError(f"unknown kind {kind!r} (choose {', '.join(KINDS)})")
    return readers[kind](frame, kind)


def data_kind(data: Mapping[str, Any]) -> str:
    """What a dict holds, from its first entries: text values are topics, integer labels qrels, scores a run."""
    for value in data.values():
        if isinstance(value, str):
            return "topics"
        if isinstance(value, Mapping):
            for inner in value.values():
                return "qrels" if isinstance(inner, int) and not isinstance(inner, bool) else "run"
    return "run"


def _style(columns: str) -> bool:
    if columns not in STYLES:
        raise RankkitError(f"unknown column names {columns!r} (choose {', '.join(STYLES)})")
    return columns == "ir_measures"


def run_frame(run: Mapping[str, Mapping[str, float]] | Iterable[tuple[str, Mapping[str, float]]], *,
              queries: Mapping[str, str] | None = None, columns: str = "pyterrier") -> "pandas.DataFrame":
    """A run as a frame: ``qid, [query,] docno, score, rank`` (ir_measures: ``query_id, doc_id, score``),
    each query ranked 1..n the trec_eval way."""
    pandas = import_pandas("a run as a DataFrame")
    measures_style = _style(columns)
    qids: list[str] = []
    docnos: list[str] = []
    scores: list[float] = []
    ranks: list[int] = []
    items = run.items() if isinstance(run, Mapping) else run
    for qid, docs in items:
        ranking = sort_ranking(docs)
        qids += [qid] * len(ranking)
        docnos += [docid for docid, _ in ranking]
        scores += [float(score) for _, score in ranking]
        ranks += range(1, len(ranking) + 1)
    if measures_style:
        return pandas.DataFrame({"query_id": qids, "doc_id": docnos, "score": scores})
    data: dict[str, Any] = {"qid": qids}
    if queries is not None:
        data["query"] = [queries.get(q) for q in qids]
    data.update(docno=docnos, score=scores, rank=ranks)
    return pandas.DataFrame(data)


def to_frame(data: Mapping[str, Any], kind: str | None = None, *, queries: Mapping[str, str] | None = None,
             columns: str = "pyterrier") -> "pandas.DataFrame":
    """A run, qrels, topics or passages dict as a DataFrame (``kind``; default: from the values, see
    :func:`data_kind`; passages need ``kind="passages"``). ``queries`` adds a run's ``query`` column."""
    if is_frame(data):
        return data
    if not isinstance(data, Mapping):
        raise RankkitError(f"to_frame takes a run, qrels, topics or passages dict, got {type(data).__name__}")
    kind = kind or data_kind(data)
    if kind not in KINDS:
        raise RankkitError(f"unknown kind {kind!r} (choose {', '.join(KINDS)})")
    if kind == "run":
        return run_frame(data, queries=queries, columns=columns)
    pandas = import_pandas(f"{kind} as a DataFrame")
    measures_style = _style(columns)
    rows: list[tuple[Any, ...]]
    if kind == "qrels":
        rows = [(qid, docid, int(label)) for qid, docs in data.items() for docid, label in docs.items()]
        names = ["query_id", "doc_id", "relevance"] if measures_style else ["qid", "docno", "label"]
    elif kind == "topics":
        rows = list(data.items())
        names = ["query_id", "query"] if measures_style else ["qid", "query"]
    else:
        rows = list(data.items())
        names = ["doc_id", "text"] if measures_style else ["docno", "text"]
    return pandas.DataFrame({name: [row[i] for row in rows] for i, name in enumerate(names)})


__all__ = ["from_frame", "is_frame", "passages_from_frame", "qrels_from_frame", "run_frame", "run_from_frame",
           "to_frame", "topics_from_frame"]
