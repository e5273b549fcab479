"""Full disks and failing writers: one line naming the output and the error, exit 1, the old output
intact, no temporary left, never a SIGBUS (docs/RELIABILITY.md, "When the machine fails").

Real full disks are small tmpfs mounts (root only: skipped elsewhere); the cases that need no mount
(``/dev/full``, library writers that raise) run everywhere.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pytest
from test_interrupts import has_temporary
from training_helpers import write_corpus, write_groups

from rankkit.errors import EnvironmentFailure
from rankkit.files import atomic_path, atomic_write, staging_dir
from rankkit.files import failures
from rankkit.formats import write_run

CHECKPOINTS = Path(__file__).parents[1] / "data" / "checkpoints-v0.1.0"
RANKKIT = str(Path(sys.executable).with_name("rankkit"))

needs_mount = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("mount") is None,
                                 reason="mounting a small tmpfs (a full disk) needs root")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Callable[[int], Path]]:
    """``small_disk(KIB)``: a fresh tmpfs of that size (a disk that fills), unmounted afterwards."""
    mounted: list[Path] = []

    def make(kib: int) -> Path:
        where = tmp_path / f"disk{len(mounted)}"
        where.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={kib}k,mode=0777", "tmpfs", str(where)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(where)
        return where

    yield make
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def fill(disk: Path, leave: int = 0) -> None:
    """Fill ``disk`` up to ``leave`` free bytes."""
    free = failures.free_bytes(disk) or 0
    with open(disk / "filler", "wb") as handle:
        try:
            handle.write(b"\0" * max(free - leave, 0))
        except OSError:
            pass


def assert_full_disk(result: Any, target: Path) -> None:
    """One line naming the output and ENOSPC, exit 1 (an environment failure), no traceback."""
    errors = [line for line in result.stderr.splitlines() if line.startswith("rankkit: error:")]
    assert result.code == 1, result.stderr
    assert len(errors) == 1 and result.stderr.strip().splitlines()[-1] == errors[0], result.stderr
    assert errors[0] == f"rankkit: error: cannot write {target}: No space left on device (ENOSPC)", errors[0]
    assert "Traceback" not in result.stderr


def test_dev_full_is_one_line(cli: Callable[..., Any], tmp_path: Path) -> None:
    """A stream output that cannot take the bytes (``/dev/full``): no mount needed."""
    write_run(tmp_path / "a.run", {"q": {"d1": 1.0, "d2": 0.5}}, "a")
    result = cli("fuse", "--method", "rrf", tmp_path / "a.run", tmp_path / "a.run", "-o", "/dev/full")
    assert_full_disk(result, Path("/dev/full"))


@needs_mount
def test_run_output_on_a_full_disk_keeps_the_old_file(cli: Callable[..., Any], tmp_path: Path,
                                                       small_disk: Callable[[int], Path]) -> None:
    runs = {f"q{q}": {f"d{d}": float(d) for d in range(300)} for q in range(40)}
    write_run(tmp_path / "a.run", runs, "a")
    disk = small_disk(64)
    target = disk / "fused.run"
    target.write_bytes(b"old run\n")
    fill(disk, leave=8192)
    result = cli("fuse", "--method", "rrf", tmp_path / "a.run", tmp_path / "a.run", "-o", target)
    assert_full_disk(result, target)
    assert target.read_bytes() == b"old run\n"
    assert not has_temporary(disk)


@needs_mount
def test_train_output_on_a_full_disk(cli: Callable[..., Any], tmp_path: Path,
                                     small_disk: Callable[[int], Path]) -> None:
    """The model's safetensors write (before: a safetensors traceback)."""
    groups = write_groups(tmp_path / "groups.jsonl", count=4)
    disk = small_disk(24)  # the tiny model's weights alone take ~40 KB
    out = disk / "model"
    result = cli("train", "--model", "mono", "--train", groups, "--backbone", CHECKPOINTS / "repbert", "--max-steps", 1,
                 "--batch-size", 2, "--group-size", 2, "--device", "cpu", "-o", out)
    assert_full_disk(result, out)
    assert not has_temporary(disk)


@needs_mount
def test_step_checkpoint_on_a_full_disk(cli: Callable[..., Any], tmp_path: Path,
                                        small_disk: Callable[[int], Path]) -> None:
    """torch.save's zip writer (before: ``RuntimeError: [enforce fail at inline_container.cc]``)."""
    groups = write_groups(tmp_path / "groups.jsonl", count=4)
    disk = small_disk(120)  # room for the model files, not for the optimizer state beside them
    out = disk / "model"
    result = cli("train", "--model", "mono", "--train", groups, "--backbone", CHECKPOINTS / "repbert", "--max-steps", 2,
                 "--batch-size", 2, "--group-size", 2, "--device", "cpu", "--save-every", 1, "-o", out)
    assert result.code == 1, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("rankkit: error: cannot write ") and "(ENOSPC)" in line, result.stderr
    assert str(out) in line and "Traceback" not in result.stderr
    assert not has_temporary(disk)


@needs_mount
def test_dense_index_on_a_full_disk_is_no_sigbus(tmp_path: Path, small_disk: Callable[[int], Path]) -> None:
    """Encoded chunks (before: a memory map over a full tmpfs, SIGBUS, exit -7). In a child process:
    a SIGBUS would kill the test runner."""
    corpus = write_corpus(tmp_path / "corpus.jsonl", extra=600)
    disk = small_disk(32)
    index = disk / "ix"
    done = subprocess.run([RANKKIT, "index", "--kind", "dense", "--model", "repbert", "--checkpoint",
                           str(CHECKPOINTS / "repbert"), "--corpus", str(corpus), "--index", str(index),
                           "--chunk-size", "400"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 1, (done.returncode, done.stderr)
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("rankkit: error: cannot write ") and "(ENOSPC)" in line and str(index) in line, line
    assert "Traceback" not in done.stderr
    assert not has_temporary(disk)


@needs_mount
def test_merge_onto_a_full_disk(cli: Callable[..., Any], tmp_path: Path, small_disk: Callable[[int], Path]) -> None:
    """faiss' own writer (before: faiss' C++ message and traceback)."""
    corpus = write_corpus(tmp_path / "corpus.jsonl", extra=600)
    shards = []
    for i in range(2):
        shard = tmp_path / f"shard{i}"
        assert cli("index", "--kind", "dense", "--model", "repbert", "--checkpoint", CHECKPOINTS / "repbert",
                   "--corpus", corpus, "--index", shard, "--shard", f"{i}/2", "--chunk-size", 100).code == 0
        shards.append(shard)
    disk = small_disk(40)  # the docids fit, the 636 x 16 float32 index does not
    index = disk / "ix"
    result = cli("index", "--merge", *shards, "--index", index)
    assert result.code == 1, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("rankkit: error: cannot write ") and "(ENOSPC)" in line and str(index) in line, line
    assert "Traceback" not in result.stderr and not (index / "index.faiss").exists()
    assert not has_temporary(disk)


@needs_mount
def test_read_only_file_system_is_an_environment_failure(cli: Callable[..., Any], tmp_path: Path,
                                                         small_disk: Callable[[int], Path]) -> None:
    write_run(tmp_path / "a.run", {"q": {"d1": 1.0}}, "a")
    disk = small_disk(64)
    subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
    result = cli("fuse", "--method", "rrf", tmp_path / "a.run", tmp_path / "a.run", "-o", disk / "x.run")
    assert result.code == 1 and "Read-only file system (EROFS)" in result.stderr, result.stderr


@needs_mount
def test_memory_mapped_spill_reserves_its_space(small_disk: Callable[[int], Path]) -> None:
    """Frozen-encoder vectors that spill to disk allocate the file before mapping it: an error, not a SIGBUS."""
    from rankkit.models.cross_encoders.frozen_vectors import FrozenVectors

    disk = small_disk(64)
    with pytest.raises(EnvironmentFailure, match=r"No space left on device \(ENOSPC\)"):
        FrozenVectors(100_000, 32, memory_limit=0, spill_dir=disk)  # 12.8 MB on a 64 KB disk
    assert os.listdir(disk) == []


# -- no mount: writers that fail like a full disk ------------------------------------------------

def test_library_writer_errors_become_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The three shapes a library reports a full disk in: an errno in Rust's text (safetensors), the
    strerror in C++'s text (faiss), and nothing at all (torch's zip writer, told by the free space)."""
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    cases = [RuntimeError("Error while serializing: I/O error: No space left on device (os error 28)"),
             RuntimeError("Error: 'ret == (size * 4)' failed: write error in x: 1 != 4 (No space left on device)")]
    for error in cases:
        with pytest.raises(EnvironmentFailure, match=f"cannot write {target}: No space left on device"):
            with atomic_path(target) as tmp:
                tmp.write_bytes(b"partial")
                raise error
    bare = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534")
    with pytest.raises(RuntimeError, match="unexpected pos"):  # with room left: a real error, kept
        with atomic_path(target):
            raise bare
    monkeypatch.setattr(failures, "free_bytes", lambda folder: 0)
    with pytest.raises(EnvironmentFailure, match="No space left on device"):
        with atomic_path(target):
            raise bare
    assert target.read_bytes() == b"old" and not has_temporary(tmp_path)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG])
def test_os_errors_while_writing_name_the_output(code: int, tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old\n")
    with pytest.raises(EnvironmentFailure) as caught:
        with atomic_write(target) as handle:
            handle.write("new\n")
            raise OSError(code, os.strerror(code))
    assert str(caught.value) == f"cannot write {target}: {os.strerror(code)} ({errno.errorcode[code]})"
    assert caught.value.exit_code == 1
    with pytest.raises(EnvironmentFailure):
        with staging_dir(tmp_path / "folder") as folder:
            raise OSError(code, os.strerror(code), str(folder / "inner"))
    assert target.read_text() == "old\n" and not has_temporary(tmp_path)


def test_an_input_read_error_keeps_its_own_name(tmp_path: Path) -> None:
    """An OSError naming another file (an input) is not turned into a write failure of the output."""
    with pytest.raises(OSError) as caught:
        with atomic_write(tmp_path / "out.txt"):
            raise OSError(errno.EIO, "Input/output error", "/data/input.tsv")
    assert not isinstance(caught.value, EnvironmentFailure)


def test_atomic_path_companions_and_suffix(tmp_path: Path) -> None:
    """A writer that needs a file name and adds a companion file (OpenVINO's .xml + .bin)."""
    target = tmp_path / "model.xml"
    with atomic_path(target, suffix=".xml", companions=(".bin",)) as tmp:
        assert tmp.suffix == ".xml" and tmp.exists()
        tmp.write_text("<xml/>")
        tmp.with_suffix(".bin").write_bytes(b"weights")
    assert target.read_text() == "<xml/>" and (tmp_path / "model.bin").read_bytes() == b"weights"
    with pytest.raises(ValueError):
        with atomic_path(target, suffix=".xml", companions=(".bin",)) as tmp:
            tmp.with_suffix(".bin").write_bytes(b"half")
            raise ValueError("writer failed")
    assert (tmp_path / "model.bin").read_bytes() == b"weights" and not has_temporary(tmp_path)


def test_numpy_chunks_are_written_not_mapped(tmp_path: Path) -> None:
    """The dense encoder's chunk files come from write calls (errors, not SIGBUS) and read back equal."""
    import torch

    from rankkit.dense.encode import _write_chunk, read_chunk

    out = tmp_path / "embeddings"
    out.mkdir()
    vectors = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    _write_chunk(out, 0, ["a", "b", "c"], vectors)
    docids, read = read_chunk(tmp_path, 0)
    assert docids == ["a", "b", "c"] and np.array_equal(read, vectors.numpy())
    assert not has_temporary(tmp_path)
