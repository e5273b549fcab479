"""Atomic writing and gzip-aware reading shared by every format."""

from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Any

import pytest

from rankkit.errors import InputError
from rankkit.formats import atomic_write, open_text
from rankkit.files import iter_lines


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


def test_readers_drop_a_bom_and_refuse_non_utf8_with_the_line(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes(b"\xef\xbb\xbfq1 a\nq2 b\n")
    assert list(iter_lines(path)) == [(1, "q1 a"), (2, "q2 b")]
    with open_text(path) as handle:
        assert handle.read() == "q1 a\nq2 b\n"
    path.write_bytes(b"ok\nd\xff\n")
    with pytest.raises(InputError, match=r"f.txt:2: not valid UTF-8 \(byte 0xff at column 2\)"):
        list(iter_lines(path))
    with pytest.raises(InputError, match="f.txt: not valid UTF-8"):
        with open_text(path) as handle:
            handle.read()


def test_gzip_is_recognised_by_content(tmp_path: Path) -> None:
    plain = tmp_path / "plain.gz"
    plain.write_text("a\nb\n")
    assert list(iter_lines(plain)) == [(1, "a"), (2, "b")]
    packed = tmp_path / "packed.txt"
    packed.write_bytes(gzip.compress(b"a\nb\n"))
    assert list(iter_lines(packed)) == [(1, "a"), (2, "b")]
    truncated = tmp_path / "t.gz"
    truncated.write_bytes(gzip.compress(b"".join(b"line %d\n" % i for i in range(5000)))[:2000])
    with pytest.raises(InputError, match="t.gz: corrupt or truncated gzip data after line"):
        list(iter_lines(truncated))


def test_stale_temporaries_are_removed_live_ones_kept(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from rankkit.files import TEMP_MARK, remove_stale_temporaries

    target = tmp_path / "out.run"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    leftover = tmp_path / f".out.run{TEMP_MARK}{dead.stdout.strip()}-abcd1234"
    leftover.write_text("partial")
    other = tmp_path / f".other.run{TEMP_MARK}{dead.stdout.strip()}-abcd1234"  # another output's: not ours to judge
    other.write_text("partial")
    with atomic_write(target) as out:
        live = [p for p in tmp_path.iterdir() if p.name.startswith(f".out.run{TEMP_MARK}{os.getpid()}-")]
        assert len(live) == 1 and not leftover.exists()  # the dead process's leftover is gone
        assert remove_stale_temporaries(target) == []  # our own, locked temporary is kept
        out.write("done\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == [other.name, "out.run"]


def test_check_outputs_refuses_before_any_work(tmp_path: Path) -> None:
    from rankkit.errors import RankkitError
    from rankkit.files import check_outputs

    run = tmp_path / "run.txt"
    run.write_text("x\n")
    check_outputs([("--output", tmp_path / "new" / "out.txt")], [("RUN", run)])  # missing folders are created later
    check_outputs([("--output", "-")], [("RUN", run)])
    for outputs, inputs, message in [
        ([("--output", run)], [("RUN", run)], "is the input RUN"),
        ([("--output", tmp_path)], [], "is a directory"),
        ([("--output", run / "x")], [], "is not a directory"),
        ([("--output", tmp_path / "a"), ("--plot", tmp_path / "a")], [], "is the same file as --output"),
    ]:
        with pytest.raises(RankkitError, match=message):
            check_outputs(outputs, inputs)
    (tmp_path / "ix").mkdir()
    with pytest.raises(RankkitError, match="inside the input --index"):
        check_outputs([("--output", tmp_path / "ix" / "x")], [("--index", tmp_path / "ix")])
    link = tmp_path / "link"
    link.symlink_to(run)
    with pytest.raises(RankkitError, match="is the input RUN"):
        check_outputs([("--output", link)], [("RUN", run)])


@pytest.mark.parametrize("kind", ["staging_dir", "marked_temporary"])
def test_an_interrupt_just_after_creation_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         kind: str) -> None:
    """A signal raised in Python right after the temporary exists (as one that reaches the process through a
    JVM thread can be, the signal mask notwithstanding) still has it removed: its name was recorded first."""
    from rankkit.files import temporaries

    real_mkdir, real_open = os.mkdir, os.open

    def mkdir_then_interrupt(path: Any, mode: int = 0o777) -> None:
        real_mkdir(path, mode)
        raise KeyboardInterrupt

    def open_then_interrupt(path: Any, flags: int, mode: int = 0o777) -> int:
        fd = real_open(path, flags, mode)
        if flags & os.O_CREAT:
            os.close(fd)
            raise KeyboardInterrupt
        return fd

    target = tmp_path / "out" / "index"
    (tmp_path / "out").mkdir()
    if kind == "staging_dir":
        monkeypatch.setattr(temporaries.os, "mkdir", mkdir_then_interrupt)
        with pytest.raises(KeyboardInterrupt), temporaries.staging_dir(target):
            pass
    else:
        monkeypatch.setattr(temporaries.os, "open", open_then_interrupt)
        with pytest.raises(KeyboardInterrupt), temporaries.marked_temporary(target, target):
            pass
    monkeypatch.undo()
    assert os.listdir(tmp_path / "out") == []
