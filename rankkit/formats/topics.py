"""Topics (queries): ``qid<TAB>text`` TSV, or JSONL with ``qid``/``query_id``/``_id`` and ``text``/``query``."""

from __future__ import annotations

from typing import Iterator, Mapping

from rankkit.errors import InputError
from rankkit.formats._files import PathLike, atomic_write, iter_lines, parse_json_object

Topics = dict[str, str]

QID_KEYS = ("qid", "query_id", "_id")
TEXT_KEYS = ("text", "query")


def _is_jsonl(path: PathLike, first_line: str) -> bool:
    name = str(path).removesuffix(".gz")
    return name.endswith((".jsonl", ".json")) or first_line.lstrip().startswith("{")


def _pick(record: dict, keys: tuple[str, ...]) -> object | None:
    for key in keys:
        if key in record:
            return record[key]
    return None


def iter_topics(path: PathLike) -> Iterator[tuple[str, str]]:
    """Stream ``(qid, text)`` pairs; ids are always strings."""
    for _, qid, text in _iter_numbered(path):
        yield qid, text


def _iter_numbered(path: PathLike) -> Iterator[tuple[int, str, str]]:
    jsonl: bool | None = None
    for number, line in iter_lines(path):
        if jsonl is None:
            jsonl = _is_jsonl(path, line)
        if jsonl:
            record = parse_json_object(path, number, line)
            qid, text = _pick(record, QID_KEYS), _pick(record, TEXT_KEYS)
            if qid is None:
                raise InputError(path, number, "missing query id (one of 'qid', 'query_id', '_id')")
            if not isinstance(text, str):
                raise InputError(path, number, "missing query text (one of 'text', 'query')")
            yield number, str(qid), text
        else:
            qid, tab, text = line.partition("\t")
            if not tab or not qid.strip():
                raise InputError(path, number, "expected 'qid<TAB>text'")
            yield number, qid.strip(), text.strip()


def read_topics(path: PathLike) -> Topics:
    """Read all topics; a repeated qid is an error."""
    topics: Topics = {}
    for number, qid, text in _iter_numbered(path):
        if qid in topics:
            raise InputError(path, number, f"query {qid!r} appears twice")
        topics[qid] = text
    return topics


def write_topics(path: PathLike, topics: Mapping[str, str]) -> None:
    """Write topics atomically as ``qid<TAB>text`` (tabs and newlines in text become spaces)."""
    with atomic_write(path) as out:
        for qid, text in topics.items():
            out.write(f"{qid}\t{' '.join(text.split())}\n")
