"""Training groups, JSONL, one query per line.

rankkit's own shape (what ``rankkit mine`` writes and ``rankkit train`` reads)::

    {"qid": str, "query": str,
     "pos": [{"docid": str, "text": str, "label": int}],
     "neg": [{"docid": str, "text": str, "score": float}]}

FlagEmbedding's ``{"query": str, "pos": [str], "neg": [str]}`` is read too: the qid becomes
``line<N>`` and docids are derived from the text, so the same passage keeps one id across lines.

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


@dataclass(frozen=True)
class Passage:
    """A positive (with its graded ``label``) or negative (with its first-stage ``score``) of a group."""

    docid: str
    text: str
    label: int = 0
    score: float | None = None


@dataclass
class TrainingGroup:
    """One query with its positives and negatives."""

    qid: str
    query: str
    pos: list[Passage] = field(default_factory=list)
    neg: list[Passage] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The rankkit JSONL record of this group."""
        return {
            "qid": self.qid,
            "query": self.query,
            "pos": [{"docid": p.docid, "text": p.text, "label": p.label,
                     **({} if p.score is None else {"score": p.score})} for p in self.pos],
            "neg": [
                {"docid": n.docid, "text": n.text, "score": n.score if n.score is not None else 0.0}
                for n in self.neg
            ],
        }


def text_docid(text: str) -> str:
    """A stable id for a passage known only by its text (FlagEmbedding records)."""
    return "h" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def _passages(path: PathLike, number: int, value: Any, key: str) -> list[Passage]:
    if not isinstance(value, list):
        raise InputError(path, number, f"'{key}' must be a list")
    out: list[Passage] = []
    for i, item in enumerate(value):
        if isinstance(item, str):
            out.append(Passage(text_docid(item), item, 1 if key == "pos" else 0))
            continue
        if not isinstance(item, dict) or not isinstance(item.get("text"), str) or "docid" not in item:
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
        out.append(Passage(str(item["docid"]), item["text"], label if key == "pos" else 0,
                           None if score is None else float(score)))
    return out


def parse_group(path: PathLike, number: int, line: str) -> TrainingGroup:
    """Parse one JSONL line in rankkit's or FlagEmbedding's shape."""
    record = parse_json_object(path, number, line)
    query = record.get("query")
    if not isinstance(query, str):
        raise InputError(path, number, "missing 'query' text")
    if "pos" not in record:
        raise InputError(path, number, "missing 'pos' list")
    qid = str(record["qid"]) if "qid" in record else f"line{number}"
    pos = _passages(path, number, record["pos"], "pos")
    neg = _passages(path, number, record.get("neg", []), "neg")
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


def iter_groups(path: PathLike) -> Iterator[TrainingGroup]:
    """Stream the training groups of a JSONL file or of MS MARCO text triples."""
    shape: str | None = None
    for number, line in iter_lines(path):
        if shape is None:
            shape = _shape(path, number, line)
            if shape == "ids":
                raise InputError(path, number, "qidpidtriples (qid, pid, pid) hold ids only: give the texts with "
                                 "--collection COLLECTION --queries QUERIES (rankkit train) or use rankkit mine --triples")
        if shape == "jsonl":
            yield parse_group(path, number, line)
        else:
            if line.lstrip().startswith("{"):
                raise InputError(path, number, "a JSON line in a file of MS MARCO triples")
            yield parse_text_triple(path, number, line)


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
