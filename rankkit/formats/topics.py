"""Topics (queries): ``qid<TAB>text`` TSV, JSONL with ``qid``/``query_id``/``_id`` and ``text``/``query``,
or TREC SGML topic files (``<top> <num> Number: 301 <title> ... <desc> ... <narr> ...``, robust04 /
terabyte style), read by content: a file whose first line is ``<top>`` is SGML, one whose first line
starts with ``{`` (or whose name ends in ``.jsonl``/``.json``) is JSONL, anything else TSV.
"""

from __future__ import annotations

import re
from typing import Iterator, Mapping

from rankkit.errors import InputError, RankkitError
from rankkit.files import PathLike, atomic_write, iter_lines, parse_json_object
from rankkit.formats.ids import check_id

Topics = dict[str, str]

#: The fields of a TREC topic that ``--topic-field`` can pick (SGML tags ``title``, ``desc``, ``narr``).
TOPIC_FIELDS: tuple[str, ...] = ("title", "description", "narrative")
_SGML_TAGS = {"num": "num", "title": "title", "desc": "description", "narr": "narrative"}
_TAG_OF = {"title": "title", "description": "desc", "narrative": "narr"}
_SGML_LABELS = {"num": "Number:", "description": "Description:", "narrative": "Narrative:", "title": "Topic:"}
_TAG = re.compile(r"<(/?)([A-Za-z]+)>")


def check_topic_field(field: str | None) -> str:
    """``field`` (default ``title``) if it is one of :data:`TOPIC_FIELDS`, else a one-line error."""
    chosen = field or "title"
    if chosen not in TOPIC_FIELDS:
        raise RankkitError(f"--topic-field must be one of {', '.join(TOPIC_FIELDS)}, got {field!r}")
    return chosen

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


def iter_topics(path: PathLike, field: str | None = None) -> Iterator[tuple[str, str]]:
    """Stream ``(qid, text)`` pairs; ids are always strings.

    ``field`` picks the text of a TREC SGML topic (``title``, the default, ``description`` or
    ``narrative``); TSV and JSONL topics have one text, so any other field is an error for them.
    """
    for _, qid, text in _iter_numbered(path, field):
        yield qid, text


def _iter_numbered(path: PathLike, field: str | None = None) -> Iterator[tuple[int, str, str]]:
    chosen = check_topic_field(field)
    jsonl: bool | None = None
    lines = iter_lines(path)
    for number, line in lines:
        if jsonl is None:
            if line.strip().lower() == "<top>":
                yield from _iter_sgml(path, number, lines, chosen)
                return
            if line.lstrip().startswith("<"):
                raise InputError(path, number, "markup that is not TREC SGML topics (those start with a line "
                                 "'<top>'); rankkit reads SGML topics, 'qid<TAB>text' TSV or JSONL")
            if chosen != "title":
                raise InputError(path, None, f"--topic-field {chosen} needs TREC SGML topics (<top> ... <{_TAG_OF[chosen]}>); "
                                 "this file has one text per query")
            jsonl = _is_jsonl(path, line)
        if jsonl:
            record = parse_json_object(path, number, line)
            qid, text = _pick(record, QID_KEYS), _pick(record, TEXT_KEYS)
            if qid is None:
                raise InputError(path, number, "missing query id (one of 'qid', 'query_id', '_id')")
            if not isinstance(text, str):
                raise InputError(path, number, "missing query text (one of 'text', 'query')")
            yield number, check_id(str(qid), "query id", path, number), text
        else:
            qid, tab, text = line.partition("\t")
            if not tab or not qid.strip():
                raise InputError(path, number, "expected 'qid<TAB>text'")
            yield number, check_id(qid.strip(), "query id", path, number), text.strip()


def _iter_sgml(path: PathLike, first: int, lines: Iterator[tuple[int, str]], field: str
               ) -> Iterator[tuple[int, str, str]]:
    """TREC SGML topics: each ``<top>`` ... ``</top>`` block gives ``(line of <top>, num, chosen field)``.

    A field's text runs from its tag to the next tag and is joined into one line; the labels
    ``Number:``, ``Description:``, ``Narrative:`` (and ``Topic:`` in some title lines) are dropped.
    """
    start: int | None = first
    fields: dict[str, list[str]] = {}
    current: str | None = None
    for number, line in lines:
        pos = 0
        for match in _TAG.finditer(line):
            if current is not None and start is not None:
                fields[current].append(line[pos:match.start()])
            closing, name = match.group(1), match.group(2).lower()
            pos = match.end()
            if name == "top" and not closing:
                if start is not None:
                    raise InputError(path, number, "<top> inside another topic (missing </top>)")
                start, fields, current = number, {}, None
            elif name == "top":
                if start is None:
                    raise InputError(path, number, "</top> without <top>")
                yield _sgml_topic(path, start, fields, field)
                start, current = None, None
            elif closing:
                current = None
            elif start is None:
                raise InputError(path, number, f"<{name}> outside a <top> ... </top> block")
            else:
                current = _SGML_TAGS.get(name, name)
                fields[current] = []
        if current is not None and start is not None:
            fields[current].append(line[pos:])
        elif start is None and line[pos:].strip():
            raise InputError(path, number, f"text outside a <top> ... </top> block: {line.strip()[:40]!r}")
    if start is not None:
        raise InputError(path, start, "topic is not closed by </top>")


def _sgml_topic(path: PathLike, line: int, fields: dict[str, list[str]], field: str) -> tuple[int, str, str]:
    def text(name: str) -> str:
        words = " ".join(fields.get(name, [])).split()
        label = _SGML_LABELS.get(name)
        if label and words and words[0].lower() == label.lower():
            words = words[1:]
        return " ".join(words)

    qid = text("num")
    if not qid:
        raise InputError(path, line, "topic has no <num> (expected '<num> Number: 301')")
    check_id(qid, "query id (<num>)", path, line)
    value = text(field)
    if not value:
        raise InputError(path, line, f"topic {qid!r} has no <{_TAG_OF[field]}> text "
                         f"for --topic-field {field}")
    return line, qid, value


def read_topics(path: PathLike, field: str | None = None) -> Topics:
    """Read all topics; a repeated qid is an error. ``field``: see :func:`iter_topics`."""
    topics: Topics = {}
    for number, qid, text in _iter_numbered(path, field):
        if qid in topics:
            raise InputError(path, number, f"query {qid!r} appears twice")
        topics[qid] = text
    return topics


def write_topics(path: PathLike, topics: Mapping[str, str]) -> None:
    """Write topics atomically as ``qid<TAB>text`` (tabs and newlines in text become spaces)."""
    with atomic_write(path) as out:
        for qid, text in topics.items():
            out.write(f"{qid}\t{' '.join(text.split())}\n")
