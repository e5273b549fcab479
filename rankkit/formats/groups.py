"""Training groups, JSONL, one query per line.

rankkit's own shape (what ``rankkit mine`` writes and ``rankkit train`` reads)::

    {"qid": str, "query": str,
     "pos": [{"docid": str, "text": str, "label": int}],
     "neg": [{"docid": str, "text": str, "score": float}]}

FlagEmbedding's ``{"query": str, "pos": [str], "neg": [str]}`` is read too: the qid becomes
``line<N>`` and docids are derived from the text, so the same passage keeps one id across lines.

**Ids-only groups** (what ``rankkit mine --ids-only`` writes) hold no text at all, only what a
group is made of (qid, docids, labels, scores)::

    {"qid": str, "pos": [{"docid": str, "label": int}], "neg": [{"docid": str, "score": float}]}

Their texts come from a collection and queries at training time (``rankkit train --collection
--queries``, through the docid table), so 502k queries x 32 candidates is a file of a few hundred
MB instead of ~12 GB. A record without ``"query"`` is ids-only; its candidates must then carry no
``"text"`` (in the parsed :class:`TrainingGroup`, ``query`` and every ``text`` are ``None``).

MS MARCO's text triples (``query<TAB>positive<TAB>negative``, ``triples.train.small.tsv``) are read
as one group per line the same way. MS MARCO's ``qidpidtriples`` (``qid<TAB>pid<TAB>pid``: three
fields without spaces) hold ids only: :func:`iter_id_triples` reads them, and the texts come from a
collection and queries (``rankkit train --collection --queries``, ``rankkit mine --triples``).
The shape is read from the first line: ``{`` is JSONL, 3 tab-separated fields are triples.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from rankkit.errors import InputError
from rankkit.files import PathLike, atomic_write, iter_lines, parse_json_object
from rankkit.formats.ids import check_id


@dataclass(frozen=True)
class Passage:
    """A positive (with its graded ``label``) or negative (with its first-stage ``score``) of a group.

    ``text`` is ``None`` in an ids-only group: it is looked up by ``docid`` when the passage is used.
    """

    docid: str
    text: str | None
    label: int = 0
    score: float | None = None


@dataclass
class TrainingGroup:
    """One query with its positives and negatives (``query`` ``None`` in an ids-only group)."""

    qid: str
    query: str | None
    pos: list[Passage] = field(default_factory=list)
    neg: list[Passage] = field(default_factory=list)

    @property
    def ids_only(self) -> bool:
        """True when the texts are to be looked up (``--collection``/``--queries``)."""
        return self.query is None

    def without_texts(self) -> "TrainingGroup":
        """The ids-only form of this group (what ``rankkit mine --ids-only`` writes)."""
        return TrainingGroup(self.qid, None, [Passage(p.docid, None, p.label, p.score) for p in self.pos],
                             [Passage(n.docid, None, n.label, n.score) for n in self.neg])

    def to_json(self) -> dict[str, Any]:
        """The rankkit JSONL record of this group (ids-only when it holds no texts)."""
        def text(p: Passage) -> dict[str, str]:
            return {} if p.text is None else {"text": p.text}

        return {
            "qid": self.qid,
            **({} if self.query is None else {"query": self.query}),
            "pos": [{"docid": p.docid, **text(p), "label": p.label,
                     **({} if p.score is None else {"score": p.score})} for p in self.pos],
            "neg": [
                {"docid": n.docid, **text(n), "score": n.score if n.score is not None else 0.0}
                for n in self.neg
            ],
        }


def text_docid(text: str) -> str:
    """A stable id for a passage known only by its text (FlagEmbedding records)."""
    return "h" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def _passages(path: PathLike, number: int, value: Any, key: str, ids_only: bool = False) -> list[Passage]:
    if not isinstance(value, list):
        raise InputError(path, number, f"'{key}' must be a list")
    out: list[Passage] = []
    for i, item in enumerate(value):
        if ids_only:
            if not isinstance(item, dict) or "docid" not in item:
                raise InputError(path, number, f"'{key}[{i}]' needs a 'docid' (a group without 'query' holds ids only)")
            if "text" in item:
                raise InputError(path, number, f"'{key}[{i}]' has a 'text', but a group without 'query' holds ids only "
                                 "(texts from --collection/--queries); give both texts or neither")
        elif isinstance(item, str):
            out.append(Passage(text_docid(item), item, 1 if key == "pos" else 0))
            continue
        elif not isinstance(item, dict) or not isinstance(item.get("text"), str) or "docid" not in item:
            raise InputError(path, number, f"'{key}[{i}]' needs 'docid' and 'text' (or be a plain string)")
        label = 0
        if key == "pos":
            label = item.get("label", 1)
            if not isinstance(label, int) or isinstance(label, bool):
                raise InputError(path, number, f"'pos[{i}].label' must be an integer")
        score = item.get("score")
        if score is not None and (not isinstance(score, (int, float)) or isinstance(score, bool)
                                  or not math.isfinite(score)):
            raise InputError(path, number, f"'{key}[{i}].score' must be a finite number")
        docid = check_id(str(item["docid"]), f"'{key}[{i}].docid'", path, number)
        out.append(Passage(docid, None if ids_only else item["text"], label if key == "pos" else 0,
                           None if score is None else float(score)))
    return out


def parse_group(path: PathLike, number: int, line: str) -> TrainingGroup:
    """Parse one JSONL line in rankkit's (with texts or ids only) or FlagEmbedding's shape."""
    record = parse_json_object(path, number, line)
    query = record.get("query")
    ids_only = "query" not in record
    if ids_only:
        if "qid" not in record:
            raise InputError(path, number, "missing 'query' text (or, for a group of ids only, its 'qid')")
    elif not isinstance(query, str):
        raise InputError(path, number, "'query' must be a text")
    if "pos" not in record:
        raise InputError(path, number, "missing 'pos' list")
    qid = check_id(str(record["qid"]), "'qid'", path, number) if "qid" in record else f"line{number}"
    pos = _passages(path, number, record["pos"], "pos", ids_only)
    neg = _passages(path, number, record.get("neg", []), "neg", ids_only)
    if not pos:
        raise InputError(path, number, "group has no positive passage")
    return TrainingGroup(qid, query, pos, neg)


def _triple(path: PathLike, number: int, line: str) -> list[str]:
    fields = line.split("\t")
    if len(fields) != 3 or not all(field.strip() for field in fields):
        raise InputError(path, number, f"expected 3 tab-separated fields (MS MARCO triples), found {len(fields)}")
    return [field.strip() for field in fields]


def is_id_triple(fields: list[str]) -> bool:
    """``qid pid pid`` (qidpidtriples) rather than texts: no field holds a space."""
    return not any(any(ch.isspace() for ch in field) for field in fields)


def _shape(path: PathLike, number: int, line: str) -> str:
    if line.lstrip().startswith("{"):
        return "jsonl"
    if line.count("\t") == 2:
        return "ids" if is_id_triple(_triple(path, number, line)) else "text"
    raise InputError(path, number, "expected a JSON object per line (training groups) or 3 tab-separated fields "
                     "(MS MARCO triples: query, positive, negative; or qidpidtriples: qid, pid, pid)")


def parse_text_triple(path: PathLike, number: int, line: str) -> TrainingGroup:
    """One ``query<TAB>positive<TAB>negative`` line as a group (qid ``line<N>``, docids from the text)."""
    query, positive, negative = _triple(path, number, line)
    return TrainingGroup(f"line{number}", query, [Passage(text_docid(positive), positive, 1)],
                         [Passage(text_docid(negative), negative, 0)])


def is_id_triples_file(path: PathLike) -> bool:
    """True when the first line of ``path`` is a ``qid<TAB>pid<TAB>pid`` triple (needs a collection and queries)."""
    number, line = next(iter_lines(path))
    return _shape(path, number, line) == "ids"


def iter_id_triples(path: PathLike) -> Iterator[tuple[int, str, str, str]]:
    """``(line, qid, positive pid, negative pid)`` of a qidpidtriples file."""
    for number, line in iter_lines(path):
        fields = _triple(path, number, line)
        if not is_id_triple(fields):
            raise InputError(path, number, "expected 'qid<TAB>pid<TAB>pid' (ids without spaces) as on the first line")
        yield number, fields[0], fields[1], fields[2]


def id_triple_group(qid: str, positive: str, negative: str) -> TrainingGroup:
    """One qidpidtriple as an ids-only group (texts from ``--collection``/``--queries``)."""
    return TrainingGroup(qid, None, [Passage(positive, None, 1)], [Passage(negative, None, 0)])


def parse_id_triple(path: PathLike, number: int, line: str) -> TrainingGroup:
    """One ``qid<TAB>pid<TAB>pid`` line as an ids-only group."""
    fields = _triple(path, number, line)
    if not is_id_triple(fields):
        raise InputError(path, number, "expected 'qid<TAB>pid<TAB>pid' (ids without spaces) as on the first line")
    return id_triple_group(*fields)


#: The shapes of a training file, as :func:`file_shape` names them.
SHAPES = ("jsonl", "ids-jsonl", "text", "ids")


def file_shape(path: PathLike, number: int, line: str) -> str:
    """The shape of a training file from its first line: ``jsonl`` (groups with texts), ``ids-jsonl``
    (ids-only groups), ``text`` (MS MARCO text triples) or ``ids`` (qidpidtriples)."""
    shape = _shape(path, number, line)
    if shape == "jsonl" and parse_group(path, number, line).ids_only:
        return "ids-jsonl"
    return shape


def parse_line(path: PathLike, number: int, line: str, shape: str) -> TrainingGroup:
    """Parse one line of a training file of ``shape`` (:func:`file_shape`); every line must share it."""
    if shape in ("jsonl", "ids-jsonl"):
        group = parse_group(path, number, line)
        if group.ids_only != (shape == "ids-jsonl"):
            raise InputError(path, number, "a group with texts in a file of ids-only groups (no 'query'), or the "
                             "other way round: a file holds one form")
        return group
    if line.lstrip().startswith("{"):
        raise InputError(path, number, "a JSON line in a file of MS MARCO triples")
    return parse_text_triple(path, number, line) if shape == "text" else parse_id_triple(path, number, line)


def iter_groups(path: PathLike, *, ids: bool = False) -> Iterator[TrainingGroup]:
    """Stream the training groups of a JSONL file or of MS MARCO text triples.

    Ids-only groups and qidpidtriples come with ``query`` and texts ``None``; qidpidtriples are
    refused unless ``ids`` (the caller then looks the texts up).
    """
    shape: str | None = None
    for number, line in iter_lines(path):
        if shape is None:
            shape = file_shape(path, number, line)
            if shape == "ids" and not ids:
                raise InputError(path, number, "qidpidtriples (qid, pid, pid) hold ids only: give the texts with "
                                 "--collection COLLECTION --queries QUERIES (rankkit train) or use rankkit mine --triples")
        yield parse_line(path, number, line, shape)


def read_groups(path: PathLike) -> list[TrainingGroup]:
    """All training groups of a file."""
    return list(iter_groups(path))


def write_groups(path: PathLike, groups: Iterable[TrainingGroup]) -> int:
    """Write groups atomically as rankkit JSONL; returns how many were written."""
    count = 0
    with atomic_write(path) as out:
        for group in groups:
            out.write(json.dumps(group.to_json(), ensure_ascii=False) + "\n")
            count += 1
    return count
