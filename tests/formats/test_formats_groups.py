"""Training-group JSONL: rankkit's shape and FlagEmbedding's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rankkit.errors import InputError
from rankkit.formats import Passage, TrainingGroup, read_groups, write_groups
from rankkit.formats.groups import text_docid


def test_round_trip(tmp_path: Path) -> None:
    group = TrainingGroup(
        "q1", "what is bm25", [Passage("d1", "a ranking function", 2)], [Passage("d9", "unrelated", score=11.5)]
    )
    write_groups(tmp_path / "g.jsonl", [group])
    (back,) = read_groups(tmp_path / "g.jsonl")
    assert back == group
    record = json.loads((tmp_path / "g.jsonl").read_text())
    assert record == {
        "qid": "q1",
        "query": "what is bm25",
        "pos": [{"docid": "d1", "text": "a ranking function", "label": 2}],
        "neg": [{"docid": "d9", "text": "unrelated", "score": 11.5}],
    }


def test_flagembedding_records(data_dir: Path) -> None:
    groups = read_groups(data_dir / "formats" / "flagembedding.head.jsonl")
    assert [g.qid for g in groups] == ["line1", "line2"]
    first = groups[0]
    assert first.query.startswith(")what was the immediate impact")
    assert len(first.pos) == 1 and first.pos[0].label == 1
    assert len(first.neg) == 25
    assert first.neg[0].docid == text_docid(first.neg[0].text)


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        ({"pos": ["x"]}, "missing 'query' text"),
        ({"query": "q"}, "missing 'pos' list"),
        ({"query": "q", "pos": []}, "group has no positive passage"),
        ({"query": "q", "pos": "x"}, "'pos' must be a list"),
        ({"query": "q", "pos": [{"text": "x"}]}, r"'pos\[0\]' needs 'docid' and 'text'"),
        ({"query": "q", "pos": [{"docid": 1, "text": "x", "label": "2"}]}, r"'pos\[0\].label' must be an integer"),
        ({"query": "q", "pos": ["x"], "neg": [{"docid": 1, "text": "y", "score": "hi"}]}, r"'neg\[0\].score'"),
    ],
)
def test_errors_name_line(tmp_path: Path, record: dict, problem: str) -> None:
    path = tmp_path / "g.jsonl"
    path.write_text(json.dumps({"query": "ok", "pos": ["fine"]}) + "\n" + json.dumps(record) + "\n")
    with pytest.raises(InputError, match=f"g.jsonl:2: {problem}"):
        read_groups(path)
