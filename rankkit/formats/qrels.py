"""TREC qrels: ``qid iter docid rel``, whitespace separated, optionally gzipped, ``#`` comments allowed."""

from __future__ import annotations

from typing import Mapping

from rankkit.errors import InputError
from rankkit.formats._files import PathLike, atomic_write, iter_lines

Qrels = dict[str, dict[str, int]]


def read_qrels(path: PathLike) -> Qrels:
    """Read judgments as ``{qid: {docid: relevance}}``; a repeated (qid, docid) is an error."""
    qrels: Qrels = {}
    for number, text in iter_lines(path, skip_comments=True):
        fields = text.split()
        if len(fields) != 4:
            raise InputError(path, number, f"expected 4 columns 'qid iter docid rel', found {len(fields)}")
        qid, _, docid, rel_text = fields
        try:
            rel = int(rel_text)
        except ValueError:
            raise InputError(path, number, f"relevance {rel_text!r} is not an integer") from None
        judged = qrels.setdefault(qid, {})
        if docid in judged:
            raise InputError(path, number, f"duplicate judgment of {docid!r} for query {qid!r}")
        judged[docid] = rel
    return qrels


def write_qrels(path: PathLike, qrels: Mapping[str, Mapping[str, int]]) -> None:
    """Write judgments atomically in TREC format (iteration column 0)."""
    with atomic_write(path) as out:
        for qid, judged in qrels.items():
            for docid, rel in judged.items():
                out.write(f"{qid} 0 {docid} {int(rel)}\n")
