"""TREC qrels and topics (TSV and JSONL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rankkit.errors import InputError
from rankkit.formats import read_qrels, read_topics, write_qrels, write_topics


def test_read_qrels_graded_with_comments(tmp_path: Path) -> None:
    path = tmp_path / "qrels.txt"
    path.write_text("# judged by NIST\n001 0 d1 2\n001 0 d2 0\n7 Q0 d1 -1\n")
    assert read_qrels(path) == {"001": {"d1": 2, "d2": 0}, "7": {"d1": -1}}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("1 0 d1\n", "qrels.txt:1: expected 4 columns"),
        ("1 0 d1 1\n1 0 d2 yes\n", "qrels.txt:2: relevance 'yes' is not an integer"),
        ("1 0 d1 1\n1 0 d1 2\n", "qrels.txt:2: duplicate judgment of 'd1' for query '1'"),
    ],
)
def test_qrels_errors(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "qrels.txt"
    path.write_text(text)
    with pytest.raises(InputError, match=problem):
        read_qrels(path)


def test_qrels_round_trip(tmp_path: Path) -> None:
    qrels = {"q1": {"a": 3, "b": 0}, "q2": {"c": 1}}
    write_qrels(tmp_path / "q.gz", qrels)
    assert read_qrels(tmp_path / "q.gz") == qrels


def test_topics_tsv(tmp_path: Path) -> None:
    path = tmp_path / "topics.tsv"
    path.write_text("0012\twhat is  bm25?\n13\tdense\tretrieval\n")
    assert read_topics(path) == {"0012": "what is  bm25?", "13": "dense\tretrieval"}


@pytest.mark.parametrize("key", ["qid", "query_id", "_id"])
@pytest.mark.parametrize("text_key", ["text", "query"])
def test_topics_jsonl_keys(tmp_path: Path, key: str, text_key: str) -> None:
    path = tmp_path / "topics.jsonl"
    path.write_text(f'{{"{key}": 5, "{text_key}": "five"}}\n')
    assert read_topics(path) == {"5": "five"}


@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        ("t.tsv", "no tab here\n", "t.tsv:1: expected 'qid<TAB>text'"),
        ("t.tsv", "1\ta\n1\tb\n", "t.tsv:2: query '1' appears twice"),
        ("t.jsonl", '{"qid": "1", "text": "a"}\n{"qid": 2\n', "t.jsonl:2: invalid JSON"),
        ("t.jsonl", '{"text": "a"}\n', "t.jsonl:1: missing query id"),
        ("t.jsonl", '{"qid": "1"}\n', "t.jsonl:1: missing query text"),
    ],
)
def test_topics_errors(tmp_path: Path, name: str, text: str, problem: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError, match=problem):
        read_topics(path)


def test_topics_round_trip_flattens_whitespace(tmp_path: Path) -> None:
    write_topics(tmp_path / "t.tsv", {"1": "a\tb\nc"})
    assert read_topics(tmp_path / "t.tsv") == {"1": "a b c"}
