"""Where a corpus, topics or qrels come from: a file, a BEIR folder, or an ``irds:`` ``ir_datasets`` id.

Every command that takes a path to topics, qrels or a corpus passes it through one of
:func:`load_topics`, :func:`load_qrels` or :func:`resolve_corpus`, so all of them accept

* a file in any shape the format modules read (detected by content);
* a BEIR folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/test.tsv``; ``qrels/`` with a single
  split works too): the folder stands for the file of the kind asked for;
* ``irds:<dataset id>`` (``irds:beir/scifact/test``, ``irds:msmarco-passage/dev/small``): read
  through the ``ir_datasets`` package, which fetches and caches the data set itself. A corpus is
  written once to rankkit's cache (``$RANKKIT_CACHE_DIR/irds/``) as Pyserini JSONL, because
  indexing and the docid tables read files. A data set that cannot be fetched (no network, no
  such id) is a one-line error.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator

from rankkit.console import log, progress_bar
from rankkit.errors import InputError, RankkitError
from rankkit.files import PathLike, atomic_write, user_cache_root
from rankkit.formats.qrels import Qrels, read_qrels
from rankkit.formats.topics import TOPIC_FIELDS, Topics, check_topic_field, read_topics

IRDS_PREFIX = "irds:"
#: The files of a BEIR data set folder (each may also be gzipped).
BEIR_CORPUS, BEIR_QUERIES, BEIR_QRELS = "corpus.jsonl", "queries.jsonl", "qrels"


def is_irds(spec: PathLike) -> bool:
    """True for an ``irds:<dataset id>`` reference."""
    return str(spec).startswith(IRDS_PREFIX)


def _irds_id(spec: PathLike) -> str:
    dataset_id = str(spec)[len(IRDS_PREFIX):].strip()
    if not dataset_id:
        raise RankkitError(f"{spec!s}: expected irds:<ir_datasets id>, e.g. irds:beir/scifact/test")
    return dataset_id


def _irds_failed(spec: PathLike, err: BaseException) -> RankkitError:
    detail = " ".join(str(err).split()) or type(err).__name__
    return RankkitError(
        f"{spec!s}: cannot read this ir_datasets data set ({type(err).__name__}: {detail[:200]}); "
        "ir_datasets downloads into ~/.ir_datasets on first use, which needs network access "
        "(or the files placed there by hand); or pass a local file instead"
    )


def _irds_dataset(spec: PathLike, part: str) -> Any:
    """The ``ir_datasets`` data set of ``spec``, checked to provide ``part`` (docs, queries, qrels)."""
    dataset_id = _irds_id(spec)
    try:
        import ir_datasets
    except ImportError:
        raise RankkitError(f"{spec!s}: irds: ids need the ir_datasets package (pip install ir-datasets)") from None
    try:
        dataset = ir_datasets.load(dataset_id)
    except KeyError:
        raise RankkitError(f"{spec!s}: ir_datasets knows no data set {dataset_id!r} (see ir-datasets.com for the ids)") from None
    except Exception as err:  # noqa: BLE001 - ir_datasets raises anything on a failed fetch; one line for all
        raise _irds_failed(spec, err) from None
    if not getattr(dataset, f"has_{part}")():
        raise RankkitError(f"{spec!s}: this ir_datasets data set has no {part}")
    return dataset


def _irds_iter(spec: PathLike, items: Iterator[Any]) -> Iterator[Any]:
    """Iterate an ir_datasets stream, turning fetch failures (network, missing files) into one line."""
    try:
        yield from items
    except RankkitError:
        raise
    except Exception as err:  # noqa: BLE001
        raise _irds_failed(spec, err) from None


def _beir_file(folder: Path, name: str, what: str) -> Path:
    for candidate in (folder / name, folder / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    raise InputError(folder, None, f"is a directory without {name}; expected {what} file or a BEIR folder")


# ------------------------------------------------------------------------------------------- topics


def _query_text(spec: PathLike, query: Any, field: str | None) -> str:
    if field is None:
        return " ".join(str(query.default_text()).split())
    value = getattr(query, field, None)
    if not isinstance(value, str):
        have = [name for name in getattr(query, "_fields", ()) if name != "query_id"]
        raise RankkitError(f"{spec!s}: the queries have no {field!r} field; --topic-field takes one of: {', '.join(have)}")
    return " ".join(value.split())


def load_topics(spec: PathLike, field: str | None = None) -> Topics:
    """``{qid: text}`` from a topics file, a BEIR folder's ``queries.jsonl`` or ``irds:ID``'s queries.

    ``field`` picks a TREC topic's ``title`` (default), ``description`` or ``narrative`` (SGML files
    and ``irds:`` data sets with such fields).
    """
    if is_irds(spec):
        if field is not None:
            check_topic_field(field)
        dataset = _irds_dataset(spec, "queries")
        topics: Topics = {}
        for query in _irds_iter(spec, dataset.queries_iter()):
            qid = str(query.query_id)
            if qid in topics:
                raise RankkitError(f"{spec!s}: query {qid!r} appears twice")
            topics[qid] = _query_text(spec, query, field)
        return topics
    path = Path(spec)
    if path.is_dir():
        path = _beir_file(path, BEIR_QUERIES, "a topics")
    return read_topics(path, field)


# -------------------------------------------------------------------------------------------- qrels


def beir_qrels_file(folder: Path) -> Path:
    """A BEIR folder's qrels: ``qrels/test.tsv`` (BEIR's evaluation split), else its only split."""
    qrels_dir = folder / BEIR_QRELS
    if not qrels_dir.is_dir():
        raise InputError(folder, None, f"is a directory without {BEIR_QRELS}/; expected a qrels file or a BEIR folder")
    for name in ("test.tsv", "test.tsv.gz"):
        if (qrels_dir / name).is_file():
            return qrels_dir / name
    splits = sorted(p for p in qrels_dir.iterdir() if p.is_file() and re.search(r"\.tsv(\.gz)?$", p.name))
    if len(splits) == 1:
        return splits[0]
    names = ", ".join(p.name for p in splits) or "none"
    raise InputError(qrels_dir, None, f"no test.tsv and not exactly one split ({names}); pass the split's file")


def load_qrels(spec: PathLike) -> Qrels:
    """``{qid: {docid: rel}}`` from a qrels file (TREC or BEIR), a BEIR folder or ``irds:ID``'s qrels."""
    if is_irds(spec):
        dataset = _irds_dataset(spec, "qrels")
        qrels: Qrels = {}
        for qrel in _irds_iter(spec, dataset.qrels_iter()):
            qrels.setdefault(str(qrel.query_id), {})[str(qrel.doc_id)] = int(qrel.relevance)
        if not qrels:
            raise RankkitError(f"{spec!s}: the data set has no judgments")
        return qrels
    path = Path(spec)
    if path.is_dir():
        path = beir_qrels_file(path)
    return read_qrels(path)


# ------------------------------------------------------------------------------------------- corpus


def irds_corpus_path(spec: PathLike) -> Path:
    """Where the corpus of ``irds:ID`` is (or will be) written in rankkit's cache."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "__", _irds_id(spec))
    return user_cache_root() / "irds" / safe / "corpus.jsonl"


def _doc_text(doc: Any) -> tuple[str, str]:
    """``(title, text)`` of an ir_datasets document (title empty when the data set has none)."""
    title = getattr(doc, "title", "")
    text = getattr(doc, "text", None)
    if isinstance(text, str):
        return (title if isinstance(title, str) else ""), text
    return "", str(doc.default_text())


def resolve_corpus(spec: PathLike) -> Path:
    """A corpus file for ``spec``: the file itself, a BEIR folder's ``corpus.jsonl``, or ``irds:ID``'s
    documents written once to rankkit's cache as Pyserini JSONL (``{"id", "contents"}``)."""
    if is_irds(spec):
        target = irds_corpus_path(spec)
        if target.is_file():
            return target
        dataset = _irds_dataset(spec, "docs")
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            total = dataset.docs_count()
        except Exception:  # noqa: BLE001 - a count is a nicety; some data sets compute it by fetching
            total = None
        log(f"writing the documents of {spec!s} once to {target}")
        with atomic_write(target) as out, progress_bar("doc") as bar:
            task = bar.add_task(f"{spec!s} documents", total=total)
            for doc in _irds_iter(spec, dataset.docs_iter()):
                title, text = _doc_text(doc)
                contents = f"{title} {text}".strip() if title else text
                out.write(json.dumps({"id": str(doc.doc_id), "contents": contents}, ensure_ascii=False) + "\n")
                bar.advance(task)
        return target
    path = Path(spec)
    if path.is_dir():
        return _beir_file(path, BEIR_CORPUS, "a corpus")
    return path


__all__ = ["IRDS_PREFIX", "TOPIC_FIELDS", "beir_qrels_file", "irds_corpus_path", "is_irds", "load_qrels", "load_topics",
           "resolve_corpus"]
