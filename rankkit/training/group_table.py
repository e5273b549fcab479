"""The group table of one training file: where each group's line lies, built once, on disk.

One streaming pass over a ``--train`` file writes, in a cache folder, each group's line's byte
offsets (and, for ids-only forms, 64-bit hashes of its qid and candidate docids);
:class:`GroupFile` then reads group ``j`` with two ``pread`` calls and one parse.
:mod:`rankkit.training.data` puts a run's files together.

Why byte offsets and not Arrow/``datasets`` memory-mapping: a group's line *is* its record (no
second copy of a 27 GB file in another format), the table costs 32 bytes a group plus 8 per
candidate id, it is built by the same strict readers every other file goes through (``FILE:LINE``
errors, UTF-8, BOM, gzip), and no dependency is added for it.

Pinned while training reads it: each group's line is read again when a step draws it, so a file
rewritten in place (same size, other text) would be trained on silently while the checkpoint records
the old file's SHA-256. The table keeps a 64-bit hash of every group's line, and
:meth:`GroupFile.__getitem__` checks the bytes it reads against it (and the file's size and
modification time against the table's): a change is one line naming the file and line, and the run
stops before writing a model.

The pass also validates every line (a bad line is an error before training starts, not at step
50,000), records each file's SHA-256 (the fingerprint resume checks), the longest candidate list
and whether every candidate carries a score (``--whole-lists``), and 64-bit hashes of each group's
qid and, for ids-only forms, of its candidates' docids, so that ``--teacher`` runs,
``--queries`` and ``--collection`` are checked against every group up front with vectorised
look-ups, never by loading the groups.

Where the table lives: ``$RANKKIT_CACHE_DIR`` (or ``~/.cache/rankkit``) ``/groups/<file name>.<hash
of its absolute path>.rkgroups/``, rebuilt when the file's size or modification time changes (its
SHA-256 is kept there, so a later run does not re-hash the file). A gzipped file is decompressed
into the table folder during the same pass (a gzip stream cannot be entered at an offset); a
stream (a FIFO, ``<(zcat ...)``) is copied into a table of this run only, removed at the end.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tempfile
from array import array
from pathlib import Path
from typing import IO, Any, Iterable, Iterator, Mapping, Sequence, overload

import numpy as np

from rankkit.console import log, progress_bar
from rankkit.docstore.corpus import is_writable_dir
from rankkit.errors import InputError, RankkitError
from rankkit.files import (
    GZIP_MAGIC, decode_line, install_cache_folder, is_stream, iter_raw_lines, open_binary, remove_tree, staging_dir,
    user_cache_root,
)
from rankkit.files.limits import read_json
from rankkit.formats.groups import TrainingGroup, file_shape, parse_line
from rankkit.formats.ids import docid_hash

TABLE_VERSION = 2  # 2: a hash of each group's line, checked when the line is read again (issue 38)
SUFFIX = ".rkgroups"
#: One group's place: its line's first byte, the byte after its newline, its line number, and the
#: index of its first candidate in the ``docids`` hashes (ids-only forms).
RECORD = np.dtype([("start", "<u8"), ("end", "<u8"), ("line", "<u8"), ("first", "<u8")])
#: Shapes whose texts come from ``--collection``/``--queries``.
ID_SHAPES = ("ids-jsonl", "ids")
#: Entries written per flush while building (memory while building stays flat).
FLUSH = 1 << 16
#: Hashes compared per vectorised membership check.
CHUNK = 1 << 20


def table_root(cache_dir: Path | None = None) -> Path:
    """The folder of every training file's group table."""
    return cache_dir if cache_dir is not None else user_cache_root() / "groups"


def table_dir(path: Path, cache_dir: Path | None = None) -> Path:
    """Where the group table of ``path`` lives: named by the file and a hash of its absolute path."""
    digest = hashlib.sha1(str(Path(path).resolve()).encode("utf-8")).hexdigest()[:12]
    return table_root(cache_dir) / f"{Path(path).name}.{digest}{SUFFIX}"


def line_hash(line: bytes) -> int:
    """A 64-bit hash of a group's line as read from the file (its bytes, line end included)."""
    return int.from_bytes(hashlib.blake2b(line, digest_size=8).digest(), "little")


def _read_header(folder: Path) -> dict[str, Any] | None:
    try:  # bounded: a cache folder is shared, and anything there may have been replaced
        header = read_json(folder / "header.json", within=folder)
    except (OSError, ValueError, RankkitError):
        return None
    return header if isinstance(header, dict) and header.get("version") == TABLE_VERSION else None


def fresh_header(folder: Path, path: Path) -> dict[str, Any] | None:
    """The table's header when it was built from the file as it is now (same size and mtime)."""
    header = _read_header(folder)
    if header is None:
        return None
    try:
        st = path.stat()
        if header.get("size") != st.st_size or header.get("mtime_ns") != st.st_mtime_ns:
            return None
        if header.get("text") == "copy" and (folder / "text").stat().st_size != header.get("text_size"):
            return None
    except OSError:
        return None
    return header


class _Hashed(io.RawIOBase):
    """Reads through to ``raw``, feeding every byte read to ``digest`` (the file's SHA-256 in the same pass)."""

    def __init__(self, raw: IO[bytes], digest: Any) -> None:
        self.raw, self.digest = raw, digest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        count = self.raw.readinto(buffer)  # type: ignore[attr-defined]
        if count:
            self.digest.update(memoryview(buffer)[:count])
        return count or 0


class _Column:
    """An array written to ``path`` in chunks (flat memory however long the file)."""

    def __init__(self, path: Path) -> None:
        self.handle = open(path, "wb")
        self.buffer = array("Q")
        self.count = 0

    def extend(self, values: Iterable[int]) -> None:
        self.buffer.extend(values)
        if len(self.buffer) >= FLUSH:
            self.flush()

    def flush(self) -> None:
        self.count += len(self.buffer)
        self.handle.write(self.buffer.tobytes())  # little-endian on every platform rankkit runs on
        self.buffer = array("Q")

    def close(self) -> None:
        self.flush()
        self.handle.close()


def _check_readable(path: Path) -> None:
    """One-line errors for a missing, unreadable or folder path (a stream is not opened: its bytes would be lost)."""
    if not is_stream(path) or not path.exists():
        open_binary(path).close()


def build_table(path: Path, folder: Path, *, copy_text: bool = False) -> dict[str, Any]:
    """One streaming pass over ``path``: validate every line, write the group table into ``folder``."""
    _check_readable(path)
    st = os.stat(path)
    digest = hashlib.sha256()
    raw = open(path, "rb")
    gz = raw.peek(2)[:2] == GZIP_MAGIC
    hashed = io.BufferedReader(_Hashed(raw, digest), 1 << 20)
    source: IO[bytes] = gzip.GzipFile(fileobj=hashed, mode="rb") if gz else hashed  # type: ignore[assignment]
    copy: IO[bytes] | None = open(folder / "text", "wb") if gz or copy_text else None
    groups, qids, docids = _Column(folder / "groups"), _Column(folder / "qids"), _Column(folder / "docids")
    lines = _Column(folder / "lines")
    shape: str | None = None
    offset = count = longest = candidates = 0
    all_scored = True
    try:
        with progress_bar("B", transient=True) as bar:
            task = bar.add_task(f"group table of {path.name}", total=st.st_size or None)
            for number, line in iter_raw_lines(path, source):
                if copy is not None:
                    copy.write(line)
                start, offset = offset, offset + len(line)
                text = decode_line(path, number, line)  # drops a BOM, refuses bytes that are not UTF-8
                if not text.strip():
                    continue
                if shape is None:
                    shape = file_shape(path, number, text)
                group = parse_line(path, number, text, shape)
                members = group.pos + group.neg
                groups.extend((start, offset, number, candidates))
                qids.extend((docid_hash(group.qid),))
                lines.extend((line_hash(line),))
                if shape in ID_SHAPES:
                    docids.extend(docid_hash(c.docid) for c in members)
                    candidates += len(members)
                longest = max(longest, len(members))
                all_scored = all_scored and all(c.score is not None for c in members)
                count += 1
                if count % 20000 == 0:
                    bar.update(task, completed=raw.tell())
            while hashed.read(1 << 20):  # bytes after the last gzip member still belong to the fingerprint
                pass
            bar.update(task, completed=st.st_size)
    finally:
        for column in (groups, qids, docids, lines):
            column.close()
        source.close()
        raw.close()
        if copy is not None:
            copy.close()
    if not count or shape is None:
        raise InputError(path, None, "file is empty")
    header = {
        "version": TABLE_VERSION, "path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
        "shape": shape, "groups": count, "candidates": candidates, "longest": longest, "all_scored": all_scored,
        "sha256": digest.hexdigest(), "text": "copy" if copy is not None else "file", "text_size": offset,
    }
    (folder / "header.json").write_text(json.dumps(header), encoding="utf-8")
    return header


def _build_into(path: Path, final: Path) -> dict[str, Any]:
    """Build in a locked temporary sibling folder, then rename it into place (never a half-built table)."""
    with staging_dir(final) as tmp:
        header = build_table(path, tmp)
        try:
            install_cache_folder(tmp, final)
        except OSError:
            raced = fresh_header(final, path)
            if raced is None:  # another process won the race with a fresh table: use it
                raise
            return raced
    return header


def ensure_table(path: Path, cache_dir: Path | None = None) -> Path:
    """The folder of a fresh group table of ``path`` (built once; rebuilt when the file changed)."""
    final = table_dir(path, cache_dir)
    if fresh_header(final, path) is not None:
        return final
    root = final.parent
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise RankkitError(f"cannot create the training-data table cache {root}: {err.strerror or err}; "
                           "set RANKKIT_CACHE_DIR to a writable folder") from None
    if not is_writable_dir(root):
        raise RankkitError(f"the training-data table cache {root} is not writable; set RANKKIT_CACHE_DIR to a "
                           "writable folder")
    _check_readable(path)  # a missing file is reported before any log line
    log(f"indexing {path} (once: each group's byte offset, in {final})")
    _build_into(path, final)
    return final


class GroupFile(Sequence[TrainingGroup]):
    """The groups of one training file, each parsed from its line when asked for.

    Reads with ``os.pread`` (no shared file position), so forked ``--workers`` processes may use
    the same object.
    """

    def __init__(self, path: Path, folder: Path, header: Mapping[str, Any], *, temporary: bool = False) -> None:
        self.path, self.folder, self.header = Path(path), folder, dict(header)
        self.shape: str = header["shape"]
        self.size: int = int(header["groups"])
        self._owner = os.getpid() if temporary else None
        text = folder / "text" if header["text"] == "copy" else self.path
        self._groups: int | None = None
        self._lines: int | None = None
        self._text: int | None = None
        try:
            self._groups = os.open(folder / "groups", os.O_RDONLY)
            self._lines = os.open(folder / "lines", os.O_RDONLY)
            self._text = os.open(text, os.O_RDONLY)
            st = os.fstat(self._text)
            #: What the text read from must stay: the indexed file's size and mtime (a copy's: its own).
            self._pin = ((st.st_size, st.st_mtime_ns) if header["text"] == "copy"
                         else (int(header["size"]), int(header["mtime_ns"])))
            self._check_pin(None)
        except BaseException:
            self.close()
            raise

    @classmethod
    def open(cls, path: Path, cache_dir: Path | None = None) -> "GroupFile":
        """The group file of ``path``: its cached table (built when missing or stale), or a table of
        this run only for a stream."""
        path = Path(path)
        if is_stream(path) and not path.is_file():
            folder = Path(tempfile.mkdtemp(prefix="rankkit-groups-"))
            try:
                return cls(path, folder, build_table(path, folder, copy_text=True), temporary=True)
            except BaseException:
                remove_tree(folder)
                raise
        folder = ensure_table(path, cache_dir)
        header = fresh_header(folder, path)
        if header is None:  # the file changed while its table was being built
            raise InputError(path, None, "changed while it was being indexed; run again")
        return cls(path, folder, header)

    @property
    def ids_only(self) -> bool:
        """Its texts come from ``--collection``/``--queries``."""
        return self.shape in ID_SHAPES

    @property
    def record(self) -> dict[str, Any]:
        """What the checkpoint records of this file (``rankkit.json``, resume keys)."""
        return {"path": str(self.path), "sha256": self.header["sha256"], "groups": self.size}

    def __len__(self) -> int:
        return self.size

    def place(self, index: int) -> tuple[int, int, int, int]:
        """``(start, end, line, first candidate)`` of group ``index``."""
        assert self._groups is not None, "closed"
        raw = os.pread(self._groups, RECORD.itemsize, RECORD.itemsize * index)
        start, end, line, first = np.frombuffer(raw, dtype=RECORD)[0].tolist()
        return start, end, line, first

    @overload
    def __getitem__(self, index: int) -> TrainingGroup: ...

    @overload
    def __getitem__(self, index: slice) -> list[TrainingGroup]: ...

    def __getitem__(self, index: int | slice) -> TrainingGroup | list[TrainingGroup]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self.size))]
        index = int(index)
        if index < 0:
            index += self.size
        if not 0 <= index < self.size:
            raise IndexError(index)
        start, end, line, _ = self.place(index)
        assert self._text is not None and self._lines is not None, "closed"
        raw = os.pread(self._text, end - start, start)
        self._check_pin(line)
        expected = int.from_bytes(os.pread(self._lines, 8, 8 * index), "little")
        if line_hash(raw) != expected:
            raise self._changed(line, "the group on this line is not the one indexed when training started")
        return parse_line(self.path, line, decode_line(self.path, line, raw), self.shape)

    def _check_pin(self, line: int | None) -> None:
        """Refuse a file whose size or modification time is no longer that of the file indexed."""
        assert self._text is not None, "closed"
        st = os.fstat(self._text)
        if (st.st_size, st.st_mtime_ns) != self._pin:
            raise self._changed(line, f"its size or modification time changed ({self._pin[0]:,} -> {st.st_size:,} "
                                      "bytes)")

    def _changed(self, line: int | None, why: str) -> InputError:
        return InputError(self.path, line, f"changed while training read it ({why}); the run stops without writing "
                                           "a model: train again on a file that stays as it is")

    def hashes(self, name: str) -> Iterator[tuple[int, np.ndarray]]:
        """``(position, chunk)`` of the ``qids`` (one per group) or ``docids`` hashes, read in chunks."""
        with open(self.folder / name, "rb") as handle:
            position = 0
            while True:
                chunk = np.frombuffer(handle.read(8 * CHUNK), dtype="<u8")
                if not chunk.size:
                    return
                yield position, chunk
                position += chunk.size

    def group_of_candidate(self, k: int) -> int:
        """The group holding candidate hash ``k`` (an error path: a scan of the records)."""
        with open(self.folder / "groups", "rb") as handle:
            base = 0
            while True:
                block = np.frombuffer(handle.read(RECORD.itemsize * CHUNK), dtype=RECORD)
                if not block.size:
                    return self.size - 1
                after = np.nonzero(block["first"] > k)[0]
                if after.size:
                    return base + int(after[0]) - 1
                base += block.size

    def close(self) -> None:
        for fd in ("_groups", "_lines", "_text"):
            if getattr(self, fd, None) is not None:
                os.close(getattr(self, fd))
                setattr(self, fd, None)
        if self._owner == os.getpid():
            remove_tree(self.folder)
            self._owner = None


def needs_texts_error(file: GroupFile) -> InputError:
    what = "qidpidtriples (qid, pid, pid)" if file.shape == "ids" else "ids-only groups (no 'query')"
    return InputError(file.path, None, f"{what} need --collection COLLECTION and --queries QUERIES (they hold ids, "
                      "the texts come from there)")


