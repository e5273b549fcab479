"""Training groups, JSONL, one query per line.

rankkit's own shape (what ``rankkit mine`` writes and ``rankkit train`` reads)::

    {"qid": str, "query": str,
     "pos": [{"docid": str, "text": str, "label": int}],
     "neg": [{"docid": str, "text": str, "score": float}]}

FlagEmbedding's ``{"query": str, "pos": [str], "neg": [str]}`` is read too: the qid becomes
``line<N>`` and docids are derived from the text, so the same passage keeps one id across lines.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from rankkit.errors import InputError
from rankkit.formats._files import PathLike, atomic_write, iter_lines, parse_json_object


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


def iter_groups(path: PathLike) -> Iterator[TrainingGroup]:
    """Stream the training groups of a JSONL file."""
    for number, line in iter_lines(path):
        yield parse_group(path, number, line)


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
