"""The teacher run held as arrays (rankkit.training.teacher_run): the same scores as the run read into a dict,
exact under 64-bit key collisions, and the run's errors at FILE:LINE."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import rankkit.training.teacher_run as teacher_run
from rankkit.errors import InputError
from rankkit.formats import read_run
from rankkit.training.sampling import TeacherScores
from rankkit.training.teacher_run import TeacherRun


def random_run(path: Path, queries: int = 40, depth: int = 30, seed: int = 3) -> dict[str, dict[str, float]]:
    rng = random.Random(seed)
    lines = []
    for q in range(queries):
        docids = rng.sample(range(5000), depth)
        for rank, d in enumerate(docids, start=1):
            lines.append(f"q{q} Q0 d{d} {rank} {rng.uniform(-30, 30):.9g} t\n")
    rng.shuffle(lines)  # queries need not be contiguous
    path.write_text("".join(lines))
    return read_run(path)


def dict_scores(run: dict[str, dict[str, float]], qid: str, docids: list[str]) -> list[float]:
    """The dict-of-dicts semantics the table replaces: absent members at the query's minimum - 1."""
    docs = run.get(qid, {})
    floor = min(docs.values()) - 1.0 if docs else 0.0
    return [docs.get(d, floor) for d in docids]


def probes(run: dict[str, dict[str, float]]) -> list[tuple[str, list[str]]]:
    rng = random.Random(9)
    out = [(qid, list(docs)[:7] + ["absent", f"d{rng.randrange(5000)}"]) for qid, docs in run.items()]
    return out + [("no-such-query", ["d1", "d2"]), ("q0", [])]


def test_same_scores_as_the_run_read_whole(tmp_path: Path) -> None:
    run = random_run(tmp_path / "teacher.run")
    for table in (TeacherRun.read(tmp_path / "teacher.run"), TeacherRun.from_mapping(run)):
        assert len(table) == sum(len(d) for d in run.values()) and set(table.qids()) == set(run)
        for qid, docids in probes(run):
            assert table.scores(qid, docids) == dict_scores(run, qid, docids)  # exactly: float64 as read
    assert TeacherScores(run).scores("q1", ["absent"]) == dict_scores(run, "q1", ["absent"])


def test_three_column_msmarco_runs(tmp_path: Path) -> None:
    path = tmp_path / "ms.tsv"
    path.write_text("1\t7\t1\n1\t8\t2\n2\t7\t1\n")
    table = TeacherRun.read(path)
    assert table.scores("1", ["8", "7", "9"]) == [0.5, 1.0, -0.5]


def test_equal_keys_are_resolved_exactly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = random_run(tmp_path / "teacher.run", queries=12, depth=20)
    real = teacher_run.pair_key
    monkeypatch.setattr(teacher_run, "pair_key", lambda qid, docid: real(qid, docid) % 7)  # 240 pairs, 7 keys
    table = TeacherRun.read(tmp_path / "teacher.run")
    assert table.exact and len(table) == 240
    for qid, docids in probes(run):
        assert table.scores(qid, docids) == dict_scores(run, qid, docids)


@pytest.mark.parametrize("weak", [False, True])
def test_a_duplicate_pair_is_reported_where_read_run_reports_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                weak: bool) -> None:
    if weak:  # every pair shares a key: the second pass must still find the true duplicate
        monkeypatch.setattr(teacher_run, "pair_key", lambda qid, docid: 1)
    path = tmp_path / "dup.run"
    path.write_text("q1 Q0 a 1 3.0 t\nq1 Q0 b 2 2.0 t\nq2 Q0 a 1 1.0 t\nq1 Q0 b 3 1.0 t\nq1 Q0 a 4 0.5 t\n")
    with pytest.raises(InputError) as expected:
        read_run(path)
    with pytest.raises(InputError) as got:
        TeacherRun.read(path)
    assert str(got.value) == str(expected.value) and ":4:" in str(got.value)


def test_bad_lines_are_file_line_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.run"
    path.write_text("q1 Q0 a 1 3.0 t\nq1 Q0 b 2 nan t\n")
    with pytest.raises(InputError, match=r"bad.run:2: score nan is not finite"):
        TeacherRun.read(path)
