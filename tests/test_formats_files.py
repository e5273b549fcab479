"""Atomic writing and gzip-aware reading shared by every format."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from rankkit.errors import InputError
from rankkit.formats import atomic_write, open_text
from rankkit.formats._files import iter_lines


def test_atomic_write_leaves_nothing_on_error(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    with pytest.raises(RuntimeError):
        with atomic_write(target) as out:
            out.write("partial\n")
            raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []


def test_atomic_write_keeps_old_file_on_error(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old\n")
    with pytest.raises(KeyboardInterrupt):
        with atomic_write(target) as out:
            out.write("new\n")
            raise KeyboardInterrupt
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_gzip_output_is_deterministic_and_readable(tmp_path: Path) -> None:
    first, second = tmp_path / "a.txt.gz", tmp_path / "b.txt.gz"
    for path in (first, second):
        with atomic_write(path) as out:
            out.write("héllo\nworld\n")
    assert first.read_bytes() == second.read_bytes()
    assert gzip.decompress(first.read_bytes()).decode() == "héllo\nworld\n"
    with open_text(first) as handle:
        assert handle.read() == "héllo\nworld\n"


def test_iter_lines_numbers_skip_blank_and_comments(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("# header\na\n\n  \nb\r\n")
    assert list(iter_lines(path, skip_comments=True)) == [(2, "a"), (5, "b")]
    assert list(iter_lines(path))[0] == (1, "# header")


def test_empty_and_missing_files_are_input_errors(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(InputError, match="empty.txt: file is empty"):
        list(iter_lines(empty))
    with pytest.raises(InputError, match="nope.txt: no such file"):
        list(iter_lines(tmp_path / "nope.txt"))
    with pytest.raises(InputError, match="is a directory"):
        open_text(tmp_path)
