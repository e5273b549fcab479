"""The Python API's inputs in any form: paths, dicts, DataFrames, checked and converted (rankkit.api's docstring
lists the forms); the stages' modules share them."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Mapping, Sequence, Union

from rankkit.errors import RankkitError
from rankkit.formats import read_run
from rankkit.formats.frames import is_frame, passages_from_frame, qrels_from_frame, run_frame, run_from_frame, topics_from_frame
from rankkit.formats.runs import Run
from rankkit.formats.sources import load_qrels, load_topics

if TYPE_CHECKING:
    import pandas

PathLike = Union[str, "os.PathLike[str]"]
Queries = Union[Mapping[str, str], PathLike, "pandas.DataFrame"]
Passages = Union[Mapping[str, str], PathLike, "pandas.DataFrame"]
RunLike = Union[Mapping[str, Mapping[str, float]], PathLike, "pandas.DataFrame"]
QrelsLike = Union[Mapping[str, Mapping[str, int]], PathLike, "pandas.DataFrame"]
#: A measure name (``nDCG@10``, ``ndcg_cut.10``), an ir_measures measure (``ir_measures.nDCG@10``) or a list of them.
Measures = Union[str, Any, Sequence[Any], None]


def is_path(value: object) -> bool:
    return isinstance(value, (str, os.PathLike))


def kind_error(what: str, expected: str, value: object) -> RankkitError:
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


def run_of(value: object, what: str = "run") -> tuple[Run, bool]:
    """``(run dict, given as a DataFrame)`` of a run in any form."""
    if is_frame(value):
        return run_from_frame(value, what), True
    if is_path(value):
        return read_run(value), False  # type: ignore[arg-type]
    if isinstance(value, Mapping):
        return _nested(value, what, integer=False), False
    raise kind_error(what, RUN_FORMS, value)


def qrels_of(value: object, what: str = "qrels") -> tuple[dict[str, dict[str, int]], bool]:
    if is_frame(value):
        return qrels_from_frame(value, what), True
    if is_path(value):
        return load_qrels(value), False  # type: ignore[arg-type]
    if isinstance(value, Mapping):
        return _nested(value, what, integer=True), False
    raise kind_error(what, QRELS_FORMS, value)


def texts_of(value: Mapping[Any, Any], what: str) -> dict[str, str]:
    out = {}
    for key, text in value.items():
        if not isinstance(text, str):
            raise RankkitError(f"{what}: the text of {key!r} is a {type(text).__name__}, expected a string")
        out[str(key)] = text
    return out


def queries_of(value: object, what: str = "queries") -> tuple[dict[str, str], bool]:
    if is_frame(value):
        return topics_from_frame(value, what), True
    if is_path(value):
        return load_topics(value), False  # type: ignore[arg-type]
    if isinstance(value, Mapping):
        return texts_of(value, what), False
    raise kind_error(what, QUERIES_FORMS, value)


def measure_list(measures: Measures) -> list[str] | None:
    """The measures as names: one measure or a list of them, each a name (``nDCG@10``, ``ndcg_cut.10``) or an
    ir_measures measure object (``ir_measures.nDCG@10``); a wrong one is named with its position."""
    if measures is None:
        return None
    from rankkit.evaluation.measures import measure_text

    if isinstance(measures, str) or not isinstance(measures, (Sequence, set, frozenset)):
        try:
            return [measure_text(measures)]
        except RankkitError as err:
            raise RankkitError(f"measures: {err}; or a list of measures") from None
    out = []
    for i, measure in enumerate(measures):
        try:
            out.append(measure_text(measure))
        except RankkitError as err:
            raise RankkitError(f"measures[{i}]: {err}") from None
    return out


def check_count(value: object, name: str, minimum: int = 1, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise RankkitError(f"{name} must be an integer of at least {minimum}, got {value!r}")


def run_out(run: Run, frame: bool, queries: Mapping[str, str] | None = None) -> Any:
    return run_frame(run, queries=queries) if frame else run


def passages_of(passages: object, wanted: Sequence[str]) -> dict[str, str]:
    if is_frame(passages):
        passages = passages_from_frame(passages)
    if isinstance(passages, Mapping):
        missing = [docid for docid in wanted if docid not in passages]
        if missing:
            raise RankkitError(f"passage {missing[0]!r} has no text ({len(missing)} such passages)")
        return texts_of({docid: passages[docid] for docid in wanted}, "passages")
    if not is_path(passages):
        raise kind_error("passages", PASSAGES_FORMS, passages)
    from rankkit.docstore import open_docstore
    from rankkit.formats.sources import resolve_corpus

    with open_docstore(corpus=resolve_corpus(passages)) as store:  # type: ignore[arg-type]
        return store.get_many(wanted)


def pandas_module(what: str) -> Any:
    from rankkit.formats.frames import import_pandas

    return import_pandas(what)
