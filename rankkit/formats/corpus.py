"""Corpora, streamed one document at a time.

Accepted, each optionally gzipped:

* JSONL ``{"id", "contents"}`` (Pyserini's JsonCollection),
* JSONL BEIR ``{"_id", "title", "text"}`` (title and text joined by a space),
* JSONL ``{"docid", "text"}``,
* TSV ``id<TAB>text`` (MS MARCO collection style).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterator

from rankkit.errors import InputError
from rankkit.files import PathLike, atomic_write, iter_lines, parse_json_object
from rankkit.formats.ids import check_id

ID_KEYS = ("id", "_id", "docid", "doc_id", "pid")


@dataclass(frozen=True)
class Document:
    """One corpus entry; ``line`` is its 1-based line in the source file."""

    docid: str
    text: str
    title: str = ""
    line: int = 0

    @property
    def contents(self) -> str:
        """Title and text as one string, the form indexed and shown to models."""
        return f"{self.title} {self.text}".strip() if self.title else self.text


def is_jsonl_corpus(path: PathLike) -> bool:
    """JSON lines by name (``.jsonl``/``.json``, gzipped or not); anything else is read as TSV."""
    return str(path).removesuffix(".gz").endswith((".jsonl", ".json"))


def parse_json_document(path: PathLike, number: int, line: str) -> Document:
    """Parse one JSONL corpus line in any of the accepted shapes."""
    record = parse_json_object(path, number, line)
    docid = next((record[k] for k in ID_KEYS if k in record), None)
    if docid is None:
        raise InputError(path, number, "missing document id (one of 'id', '_id', 'docid')")
    if "contents" in record:
        text, title = record["contents"], ""
    elif "text" in record:
        text, title = record["text"], record.get("title") or ""
    else:
        raise InputError(path, number, "missing document text ('contents' or 'text')")
    if not isinstance(text, str) or not isinstance(title, str):
        raise InputError(path, number, "document text and title must be strings")
    return Document(check_id(str(docid), "document id", path, number), text, title, number)


def parse_tsv_document(path: PathLike, number: int, line: str) -> Document:
    """Parse one ``id<TAB>text`` line (further tabs stay in the text)."""
    docid, tab, text = line.partition("\t")
    if not tab or not docid.strip():
        raise InputError(path, number, "expected 'id<TAB>text'")
    return Document(check_id(docid.strip(), "document id", path, number), text, "", number)


def count_documents(corpus: PathLike) -> int:
    """Non-blank lines of the corpus file (one document each), counted without parsing (progress totals).

    Read as every reader reads (:func:`iter_lines`), so bytes that are not UTF-8 are reported with
    their line here too, and an empty file is an error."""
    return sum(1 for _ in iter_lines(corpus))


def iter_corpus(path: PathLike) -> Iterator[Document]:
    """Stream the documents of a corpus file; memory use does not grow with its size."""
    parse = parse_json_document if is_jsonl_corpus(path) else parse_tsv_document
    for number, line in iter_lines(path):
        yield parse(path, number, line)


def write_corpus(path: PathLike, documents: Iterator[Document] | list[Document]) -> int:
    """Write documents atomically as Pyserini JsonCollection JSONL (``id``, ``contents``)."""
    count = 0
    with atomic_write(path) as out:
        for doc in documents:
            out.write(json.dumps({"id": doc.docid, "contents": doc.contents}, ensure_ascii=False) + "\n")
            count += 1
    return count
