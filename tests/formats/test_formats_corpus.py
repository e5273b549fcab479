"""Corpora in every accepted shape, streamed."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from rankkit.errors import InputError
from rankkit.formats import Document, iter_corpus, write_corpus


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        ({"id": 1, "contents": "pyserini style"}, ("1", "pyserini style")),
        ({"_id": "b1", "title": "Title", "text": "body"}, ("b1", "Title body")),
        ({"_id": "b2", "title": "", "text": "body only"}, ("b2", "body only")),
        ({"docid": "d", "text": "docid text"}, ("d", "docid text")),
    ],
)
def test_jsonl_shapes(tmp_path: Path, record: dict, expected: tuple[str, str]) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_text(json.dumps(record) + "\n")
    (doc,) = iter_corpus(path)
    assert (doc.docid, doc.contents) == expected
    assert doc.line == 1


def test_tsv_and_gzip(tmp_path: Path) -> None:
    path = tmp_path / "collection.tsv.gz"
    with gzip.open(path, "wt") as out:
        out.write("7\tfirst passage\n8\tsecond\twith tab\n")
    assert [(d.docid, d.text) for d in iter_corpus(path)] == [("7", "first passage"), ("8", "second\twith tab")]


def test_iter_corpus_is_lazy(tmp_path: Path) -> None:
    path = tmp_path / "c.tsv"
    path.write_text("1\tok\nbroken line\n")
    stream = iter_corpus(path)
    assert next(stream).docid == "1"  # the bad second line is not read yet
    with pytest.raises(InputError, match="c.tsv:2: expected 'id<TAB>text'"):
        next(stream)


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"contents": "x"}', "c.jsonl:1: missing document id"),
        ('{"id": "1"}', "c.jsonl:1: missing document text"),
        ('{"id": "1", "contents": 3}', "c.jsonl:1: document text and title must be strings"),
        ("[1, 2]", "c.jsonl:1: expected a JSON object"),
        ("{oops", "c.jsonl:1: invalid JSON"),
    ],
)
def test_jsonl_errors(tmp_path: Path, line: str, problem: str) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(InputError, match=problem):
        list(iter_corpus(path))


def test_write_corpus_round_trip(tmp_path: Path) -> None:
    docs = [Document("1", "body", "Title"), Document("2", "ünïcode")]
    assert write_corpus(tmp_path / "out.jsonl", iter(docs)) == 2
    assert [(d.docid, d.contents) for d in iter_corpus(tmp_path / "out.jsonl")] == [("1", "Title body"), ("2", "ünïcode")]
