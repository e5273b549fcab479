"""Qrels: TREC ``qid iter docid rel`` or BEIR's 3-column TSV with a header, optionally gzipped.

The shape is read from the first line: 4 columns is TREC (``#`` comments allowed); 3 columns is
BEIR's ``qrels/*.tsv`` (``query-id<TAB>corpus-id<TAB>score``), which must start with its header (a
first line of 3 columns none of which is an integer), so that a TREC line missing a column is never
mistaken for one. One file holds one shape.
"""

from __future__ import annotations

from typing import Mapping

from rankkit.errors import InputError
from rankkit.files import PathLike, atomic_write, iter_lines

Qrels = dict[str, dict[str, int]]

_SHAPES = {4: "4 columns 'qid iter docid rel'", 3: "3 columns 'query-id corpus-id score' (BEIR qrels)"}


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def read_qrels(path: PathLike) -> Qrels:
    """Read judgments as ``{qid: {docid: relevance}}``; a repeated (qid, docid) is an error."""
    qrels: Qrels = {}
    columns = 0
    for number, text in iter_lines(path, skip_comments=True):
        fields = text.split()
        if not columns:
            if len(fields) == 3 and not any(_is_int(field) for field in fields):
                columns = 3
                continue  # BEIR's header line, 'query-id corpus-id score'
            if len(fields) != 4:
                raise InputError(path, number, f"expected {_SHAPES[4]}, found {len(fields)} (a BEIR qrels file "
                                 "has 3 columns and starts with the header 'query-id corpus-id score')")
            columns = 4
        if len(fields) != columns:
            raise InputError(path, number, f"expected {_SHAPES[columns]} as on the first line, found {len(fields)}")
        if columns == 4:
            qid, _, docid, rel_text = fields
        else:
            qid, docid, rel_text = fields
        try:
            rel = int(rel_text)
        except ValueError:
            raise InputError(path, number, f"relevance {rel_text!r} is not an integer") from None
        judged = qrels.setdefault(qid, {})
        if docid in judged:
            raise InputError(path, number, f"duplicate judgment of {docid!r} for query {qid!r}")
        judged[docid] = rel
    if columns == 3 and not qrels:
        raise InputError(path, None, "BEIR qrels file has a header but no judgment")
    return qrels


def write_qrels(path: PathLike, qrels: Mapping[str, Mapping[str, int]]) -> None:
    """Write judgments atomically in TREC format (iteration column 0)."""
    with atomic_write(path) as out:
        for qid, judged in qrels.items():
            for docid, rel in judged.items():
                out.write(f"{qid} 0 {docid} {int(rel)}\n")
