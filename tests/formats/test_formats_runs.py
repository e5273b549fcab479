"""TREC run reading, streaming and trec_eval-ordered writing."""

from __future__ import annotations

from pathlib import Path

import pytest

from rankkit.errors import InputError
from rankkit.formats import iter_run_queries, read_run, sort_ranking, write_run
from rankkit.formats.runs import read_run_tag


def write(tmp_path: Path, text: str, name: str = "run.txt") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_read_run_keeps_string_ids_and_whitespace_columns(tmp_path: Path) -> None:
    path = write(tmp_path, "001 Q0 007 1   2.5 tag\n001\tQ0\t8 2 1.5\ttag\n# comment\n2 Q0 007 1 -1e3 tag\n")
    run = read_run(path)
    assert run == {"001": {"007": 2.5, "8": 1.5}, "2": {"007": -1000.0}}
    assert all(isinstance(q, str) for q in run)
    assert read_run_tag(path) == "tag"


def test_sort_ranking_is_trec_eval_order() -> None:
    ranking = sort_ranking({"a": 1.0, "c": 2.0, "b": 2.0, "d": 0.5})
    assert [docid for docid, _ in ranking] == ["c", "b", "a", "d"]


def test_write_run_sorts_and_ranks(tmp_path: Path) -> None:
    out = tmp_path / "out.run"
    n = write_run(out, {"q2": {"x": 1.0, "z": 3.0, "y": 3.0}, "q1": {"a": 0.1}}, "mytag")
    assert n == 4
    assert out.read_text().splitlines() == [
        "q2 Q0 z 1 3.0 mytag",
        "q2 Q0 y 2 3.0 mytag",
        "q2 Q0 x 3 1.0 mytag",
        "q1 Q0 a 1 0.1 mytag",
    ]


def test_write_run_truncates_and_round_trips_scores(tmp_path: Path) -> None:
    out = tmp_path / "out.run.gz"
    scores = {f"d{i}": 1.0 / (i + 3) for i in range(10)}
    write_run(out, {"q": scores}, k=4)
    back = read_run(out)
    assert list(back["q"]) == ["d0", "d1", "d2", "d3"]
    assert back["q"]["d1"] == scores["d1"]  # exact float round trip


def test_write_run_accepts_a_stream(tmp_path: Path) -> None:
    out = tmp_path / "out.run"
    write_run(out, ((q, {"d": 1.0}) for q in ["b", "a"]))
    assert [line.split()[0] for line in out.read_text().splitlines()] == ["b", "a"]


def test_write_run_rejects_bad_tag(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_run(tmp_path / "x", {"q": {"d": 1.0}}, "two words")


def test_read_run_depth_uses_trec_eval_order(tmp_path: Path) -> None:
    path = write(tmp_path, "q Q0 a 3 1.0 t\nq Q0 b 1 5.0 t\nq Q0 c 2 5.0 t\n")
    assert list(read_run(path, depth=2)["q"]) == ["c", "b"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("q Q0 d 1 1.0\n", "run.txt:1: expected 6 columns"),
        ("q Q0 d 1 1.0 t\nq Q0 e 2 high t\n", "run.txt:2: score 'high' is not a number"),
        ("q Q0 d one 1.0 t\n", "run.txt:1: rank 'one' is not an integer"),
        ("q Q0 d 1 1.0 t\nq Q0 d 2 0.5 t\n", "run.txt:2: duplicate document 'd' for query 'q'"),
        ("q Q0 d 1 nan t\n", "run.txt:1: score nan is not finite"),
        ("", "run.txt: file is empty"),
    ],
)
def test_read_run_errors_name_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(InputError) as err:
        read_run(path)
    assert str(err.value).startswith(str(path.parent / message))
    assert "\n" not in str(err.value)


def test_iter_run_queries_streams_sorted(tmp_path: Path) -> None:
    path = write(tmp_path, "q1 Q0 a 1 1.0 t\nq1 Q0 b 2 2.0 t\nq2 Q0 c 1 1.0 t\n")
    assert list(iter_run_queries(path)) == [("q1", [("b", 2.0), ("a", 1.0)]), ("q2", [("c", 1.0)])]


def test_iter_run_queries_rejects_split_query(tmp_path: Path) -> None:
    path = write(tmp_path, "q1 Q0 a 1 1.0 t\nq2 Q0 c 1 1.0 t\nq1 Q0 b 2 2.0 t\n")
    with pytest.raises(InputError, match=r"run.txt:3: lines of query 'q1' are not contiguous"):
        list(iter_run_queries(path))


def test_reads_trec_eval_suite_run(data_dir: Path) -> None:
    run = read_run(data_dir / "formats" / "results.head.test")
    assert set(run) == {"301"} and len(run["301"]) == 20
