"""Reading and writing shared by every format module: strict UTF-8 lines in, safe outputs out.

Reading (:func:`iter_lines`, :func:`open_text`):

* gzip is recognised by its content (the two magic bytes), not by the name: a plain text file
  named ``*.gz`` is read as text, and a gzipped file with any name is decompressed;
* a UTF-8 byte-order mark at the start of a file is dropped (it would otherwise stick to the first
  id and make a phantom query);
* bytes that are not UTF-8 are refused with ``FILE:LINE`` (never replaced: ``d\\xff`` and ``d\\xfe``
  must not both become ``d\\ufffd``);
* a truncated or corrupt gzip stream is a one-line :class:`InputError` naming the file.

Writing (:func:`atomic_write`, :func:`staging_dir`, :func:`check_outputs`):

* a regular file is written to a hidden temporary beside it and renamed over it on success, so an
  interrupted command never leaves a partial output; a symlink is followed and its target file
  replaced (the link stays a link);
* ``-``, ``/dev/stdout``, a FIFO or any other non-regular file is written through (never renamed
  over);
* every temporary carries a name rankkit owns (``.NAME.rktmp-PID-RANDOM``) and holds an advisory
  lock while in use; the next write of the same output removes any such leftover whose lock is
  free and whose process is gone (a SIGKILL cannot run clean-up code, so the next run does it);
* :func:`check_outputs` refuses, before any work, an output that is a directory, sits under a
  regular file or in a read-only folder, or is the same file as an input.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import shutil
import signal
import stat
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import IO, Any, Iterable, Iterator, Sequence

from rankkit.errors import InputError, RankkitError

try:  # advisory locks tell a live writer's temporary from a killed one's (POSIX only)
    import fcntl
except ImportError:  # pragma: no cover - not on Linux/macOS
    fcntl = None  # type: ignore[assignment]

PathLike = str | os.PathLike[str]

GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = b"\xef\xbb\xbf"
#: Marks every temporary file or folder rankkit creates beside an output: ``.NAME.rktmp-PID-RANDOM``.
TEMP_MARK = ".rktmp-"
#: A leftover whose lock is free but whose PID is alive (PID reuse) is stale after this long.
STALE_AFTER_SECONDS = 3600.0
_GZIP_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile)


def user_cache_root() -> Path:
    """rankkit's cache folder: ``$RANKKIT_CACHE_DIR``, else ``${XDG_CACHE_HOME:-~/.cache}/rankkit``."""
    explicit = os.environ.get("RANKKIT_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rankkit"


# --------------------------------------------------------------------------------------- reading


def is_gzip(path: PathLike) -> bool:
    """True for files named ``*.gz`` (how writers decide to compress)."""
    return str(path).endswith(".gz")


def is_gzip_file(path: PathLike) -> bool:
    """True when the file at ``path`` starts with gzip's magic bytes (how readers decide)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(2) == GZIP_MAGIC
    except OSError:
        return False


class _OwningGzipFile(gzip.GzipFile):
    """A gzip reader over an already open file that also closes that file."""

    def __init__(self, raw: IO[bytes]) -> None:
        super().__init__(fileobj=raw, mode="rb")
        self._raw = raw

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._raw.close()


def open_binary(path: PathLike) -> IO[bytes]:
    """Open a file for reading as bytes, decompressing gzip content; one-line errors for the rest.

    The content is sniffed with ``peek`` so a FIFO (``<(zcat ...)``) loses no byte.
    """
    p = Path(path)
    try:
        raw = open(p, "rb")
    except FileNotFoundError:
        raise InputError(p, None, "no such file") from None
    except IsADirectoryError:
        raise InputError(p, None, "is a directory, expected a file") from None
    except OSError as err:
        raise InputError(p, None, f"cannot read: {err.strerror or err}") from None
    if p.is_dir():  # some platforms open folders without error
        raw.close()
        raise InputError(p, None, "is a directory, expected a file")
    try:
        magic = raw.peek(2)[:2]
    except OSError as err:
        raw.close()
        raise InputError(p, None, f"cannot read: {err.strerror or err}") from None
    if magic == GZIP_MAGIC:
        return _OwningGzipFile(raw)  # type: ignore[return-value]  # a BufferedReader over the gzip stream
    return raw


def _gzip_problem(err: BaseException, after: int) -> str:
    detail = " ".join(str(err).split()) or type(err).__name__
    where = f" after line {after}" if after else ""
    return f"corrupt or truncated gzip data{where} ({detail})"


def _utf8_problem(raw: bytes, err: UnicodeDecodeError, number: int) -> str:
    if number == 1 and raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return "looks like UTF-16 text; rankkit reads UTF-8 only (convert with iconv -f UTF-16 -t UTF-8)"
    return (
        f"not valid UTF-8 (byte 0x{raw[err.start]:02x} at column {err.start + 1}); "
        "rankkit reads UTF-8 text only"
    )


def iter_raw_lines(path: PathLike, handle: IO[bytes]) -> Iterator[tuple[int, bytes]]:
    """``(line_number, bytes)`` of an open binary handle, gzip failures turned into ``InputError``."""
    number = 0
    iterator = iter(handle)
    while True:
        try:
            raw = next(iterator)
        except StopIteration:
            return
        except _GZIP_ERRORS as err:
            raise InputError(path, None, _gzip_problem(err, number)) from None
        number += 1
        yield number, raw


def decode_line(path: PathLike, number: int, raw: bytes) -> str:
    """One line as text: BOM dropped on line 1, newline stripped, non-UTF-8 bytes refused with FILE:LINE."""
    if number == 1 and raw.startswith(UTF8_BOM):
        raw = raw[len(UTF8_BOM):]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(path, number, _utf8_problem(raw, err, number)) from None
    return text.rstrip("\r\n")


class _TextReader(io.TextIOWrapper):
    """Strict UTF-8 text over :func:`open_binary`, whose decoding and gzip errors are one-line ``InputError``s."""

    def __init__(self, buffer: IO[bytes], path: PathLike) -> None:
        # utf-8-sig drops a leading byte-order mark; newline="\n" keeps "\r" for callers to strip.
        super().__init__(buffer, encoding="utf-8-sig", errors="strict", newline="\n")  # type: ignore[arg-type]
        self._source = str(path)

    def _failed(self, err: Exception) -> InputError:
        if isinstance(err, UnicodeDecodeError):
            return InputError(self._source, None, f"not valid UTF-8 ({err.reason}); rankkit reads UTF-8 text only")
        return InputError(self._source, None, _gzip_problem(err, 0))

    def __next__(self) -> str:  # type: ignore[override]  # a text wrapper yields str
        try:
            return super().__next__()
        except (UnicodeDecodeError, *_GZIP_ERRORS) as err:
            raise self._failed(err) from None

    def readline(self, size: int = -1) -> str:  # type: ignore[override]
        try:
            return super().readline(size)
        except (UnicodeDecodeError, *_GZIP_ERRORS) as err:
            raise self._failed(err) from None

    def read(self, size: int | None = -1) -> str:
        try:
            return super().read(size)
        except (UnicodeDecodeError, *_GZIP_ERRORS) as err:
            raise self._failed(err) from None


def open_text(path: PathLike) -> IO[str]:
    """Open a (possibly gzipped) UTF-8 text file for reading, with one-line errors for every problem.

    Prefer :func:`iter_lines`, whose encoding errors also carry the line number.
    """
    return _TextReader(open_binary(path), path)


def iter_lines(path: PathLike, *, skip_comments: bool = False) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` with the newline stripped, skipping blank lines.

    ``skip_comments`` drops lines starting with ``#`` (trec_eval accepts them in qrels and runs).
    Raises :class:`InputError` for an empty file so every reader reports it the same way, and for
    bytes that are not UTF-8 or a damaged gzip stream (see the module docstring).
    """
    seen = False
    number = 0
    # Fast path: strict text decoding of whole chunks; only a decoding error pays for a byte-level
    # rescan that finds its line.
    with io.TextIOWrapper(open_binary(path), encoding="utf-8", errors="strict", newline="\n") as handle:
        lines = iter(handle)
        while True:
            try:
                line = next(lines)
            except StopIteration:
                break
            except UnicodeDecodeError as err:
                raise _locate_decode_error(path, err) from None
            except _GZIP_ERRORS as err:
                raise InputError(path, None, _gzip_problem(err, number)) from None
            number += 1
            if number == 1 and line.startswith("\ufeff"):
                line = line[1:]
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            if skip_comments and line.lstrip().startswith("#"):
                continue
            seen = True
            yield number, line
    if not seen:
        raise InputError(path, None, "file is empty")


def _locate_decode_error(path: PathLike, err: UnicodeDecodeError) -> InputError:
    """The ``FILE:LINE`` error of the first line that is not UTF-8 (the file is read again, as bytes)."""
    if not is_stream(path):
        with open_binary(path) as handle:
            for number, raw in iter_raw_lines(path, handle):
                decode_line(path, number, raw)  # raises at the first bad line
    return InputError(path, None, f"not valid UTF-8 ({err.reason}); rankkit reads UTF-8 text only")


def parse_json_object(path: PathLike, number: int, line: str) -> dict[str, Any]:
    """One JSONL line that must hold a JSON object, or an ``InputError`` naming file and line."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        raise InputError(path, number, f"invalid JSON: {err.msg}") from None
    except RecursionError:
        raise InputError(path, number, "invalid JSON: nested too deeply") from None
    if not isinstance(record, dict):
        raise InputError(path, number, "expected a JSON object")
    return record


# --------------------------------------------------------------------------------- temporaries


_DEFERRED = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


def _block_signals() -> object | None:
    """Hold back SIGINT/SIGTERM/SIGHUP (returns the previous mask, for :func:`_unblock_signals`).

    Between creating a temporary and entering the ``try`` that removes it, an interrupt would leave
    it behind; blocked signals stay pending and arrive, inside the ``try``, once unblocked.
    """
    if not hasattr(signal, "pthread_sigmask"):
        return None
    return signal.pthread_sigmask(signal.SIG_BLOCK, _DEFERRED)


def _unblock_signals(previous: object | None) -> None:
    if previous is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)  # type: ignore[arg-type]


def _temp_prefix(target: Path) -> str:
    # Cut long names so prefix + PID + random part stay under the 255-byte name limit.
    return f".{target.name[:180]}{TEMP_MARK}"


def _lock(fd: int) -> bool:
    """Take an exclusive advisory lock on ``fd`` without waiting; False if someone holds it."""
    if fcntl is None:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:  # a file system without locks: fall back on the PID check alone
        return True
    return True


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    except (OverflowError, ValueError):
        return False
    return True


def _is_stale(path: Path, pid: int) -> bool:
    """A leftover nobody holds: its lock is free and its process is gone (or it is very old)."""
    if pid == os.getpid():
        return False
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        if not _lock(fd):
            return False  # a live writer holds it
        age = time.time() - os.fstat(fd).st_mtime
    finally:
        os.close(fd)  # closing drops the probe's own lock
    return not _pid_alive(pid) or age > STALE_AFTER_SECONDS


def remove_tree(folder: Path, attempts: int = 100) -> None:
    """Remove a folder even while a thread (an interrupted Java indexer) still creates files in it."""
    for _ in range(attempts):
        shutil.rmtree(folder, ignore_errors=True)
        if not os.path.lexists(folder):
            return
        time.sleep(0.02)


def remove_stale_temporaries(target: PathLike) -> list[Path]:
    """Remove the leftovers of killed rankkit processes beside ``target``; returns what was removed.

    Only names carrying rankkit's temporary mark for this very output are considered, and only
    those whose lock is free and whose process no longer exists.
    """
    target = Path(target)
    prefix = _temp_prefix(target)
    removed: list[Path] = []
    try:
        entries = [entry.name for entry in os.scandir(target.parent) if entry.name.startswith(prefix)]
    except OSError:
        return removed
    for name in entries:
        pid_text = name[len(prefix):].split("-", 1)[0]
        if not pid_text.isdigit():
            continue
        path = target.parent / name
        if not _is_stale(path, int(pid_text)):
            continue
        if path.is_dir() and not path.is_symlink():
            remove_tree(path, attempts=5)
        else:
            with contextlib.suppress(OSError):
                path.unlink()
        if not os.path.lexists(path):
            removed.append(path)
    return removed


def temporary_path(target: PathLike) -> Path:
    """A fresh name beside ``target`` with rankkit's temporary mark (for moving something out of the way)."""
    target = Path(target)
    return target.parent / f"{_temp_prefix(target)}{os.getpid()}-{os.urandom(4).hex()}"


def _writable_dir(folder: Path) -> bool:
    """A folder we may create files in; a folder with no write bit counts as read-only even for root."""
    try:
        mode = folder.stat().st_mode
    except OSError:
        return False
    return stat.S_ISDIR(mode) and bool(mode & 0o222) and os.access(folder, os.W_OK | os.X_OK)


def _make_parent(folder: Path, shown: PathLike) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise RankkitError(f"cannot write {shown}: {_first_existing(folder)} is not a directory") from None
    except NotADirectoryError:
        raise RankkitError(f"cannot write {shown}: {_first_existing(folder)} is not a directory") from None
    except OSError as err:
        raise RankkitError(f"cannot write {shown}: cannot create folder {folder}: {err.strerror or err}") from None


@contextlib.contextmanager
def staging_dir(target: PathLike) -> Iterator[Path]:
    """A locked temporary folder beside ``target`` with rankkit's temporary mark, removed on any exit.

    Build into it, then rename what was built onto ``target``. Leftovers of killed earlier builds of
    the same target are removed first (see :func:`remove_stale_temporaries`).
    """
    target = Path(target)
    _make_parent(target.parent, target)
    remove_stale_temporaries(target)
    blocked = _block_signals()
    try:
        folder = Path(tempfile.mkdtemp(prefix=f"{_temp_prefix(target)}{os.getpid()}-", dir=target.parent))
        fd = os.open(folder, os.O_RDONLY)
    except OSError as err:
        _unblock_signals(blocked)
        raise RankkitError(f"cannot write {target}: {err.strerror or err} in {target.parent}") from None
    try:
        _unblock_signals(blocked)
        _lock(fd)
        yield folder
    finally:
        try:
            remove_tree(folder)
        finally:
            os.close(fd)


# ---------------------------------------------------------------------------------------- writing


def _first_existing(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists (as anything)."""
    current = path
    while not os.path.lexists(current) and current.parent != current:
        current = current.parent
    return current


def is_stream(path: PathLike) -> bool:
    """Outputs written through rather than renamed over: ``-``, ``/dev/*``, ``/proc/*``, FIFOs, devices."""
    text = str(path)
    if text == "-":
        return True
    if text.startswith(("/dev/", "/proc/")):
        return True
    try:
        mode = os.stat(text).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def _is_stdout(path: PathLike) -> bool:
    return str(path) in ("-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1")


@contextlib.contextmanager
def _text_writer(binary: IO[bytes], gzipped: bool) -> Iterator[IO[str]]:
    """UTF-8 text with ``\\n`` line ends over ``binary``, gzipped when asked (mtime 0 and no file
    name, so gzipped outputs are byte-identical between runs)."""
    if gzipped:
        with gzip.GzipFile(filename="", mode="wb", fileobj=binary, mtime=0) as raw:
            with io.TextIOWrapper(raw, encoding="utf-8", newline="\n") as handle:
                yield handle
    else:
        with io.TextIOWrapper(binary, encoding="utf-8", newline="\n") as handle:
            yield handle


@contextlib.contextmanager
def _write_through(path: PathLike) -> Iterator[IO[str]]:
    """Write into a stream output as it comes (a pipe cannot be renamed over, nor made atomic)."""
    if _is_stdout(path):
        sys.stdout.flush()
        yield sys.stdout
        sys.stdout.flush()
        return
    try:
        # Append: /dev/fd/N of a shell's `>>` must not be truncated; a FIFO or device does not care.
        binary = open(path, "ab")
    except OSError as err:
        raise RankkitError(f"cannot write {path}: {err.strerror or err}") from None
    with binary, _text_writer(binary, is_gzip(path)) as handle:
        yield handle


@contextlib.contextmanager
def atomic_write(path: PathLike) -> Iterator[IO[str]]:
    """Write a text file (gzipped if named ``*.gz``) through a temporary file renamed on success.

    An exception or interruption inside the block removes the temporary file and leaves any
    existing file at ``path`` untouched, so no half-written output is ever left behind. A symlink
    is followed (its target file is replaced); ``-``, ``/dev/stdout`` and FIFOs are written
    through. The yielded handle is a text wrapper whose ``.buffer`` takes bytes (figures).
    """
    if is_stream(path):
        with _write_through(path) as handle:
            yield handle
        return
    shown = Path(path)
    if shown.is_dir():
        raise RankkitError(f"cannot write {shown}: is a directory")
    # A symlink stays a link: the file it points to is what gets replaced.
    target = Path(os.path.realpath(shown))
    _make_parent(target.parent, shown)
    remove_stale_temporaries(target)
    blocked = _block_signals()
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f"{_temp_prefix(target)}{os.getpid()}-", dir=target.parent)
    except OSError as err:
        _unblock_signals(blocked)
        raise RankkitError(f"cannot write {shown}: {err.strerror or err} in {target.parent}") from None
    tmp = Path(tmp_name)
    try:
        _unblock_signals(blocked)  # a signal held back since mkstemp arrives here, inside the try
        # The lock lives on fd's open file description, held until after the rename: a concurrent
        # run's clean-up sees this temporary as in use, never as a leftover.
        _lock(fd)
        binary = io.open(fd, "wb", closefd=False)
        with binary, _text_writer(binary, is_gzip(target)) as handle:
            yield handle
        try:
            # An in-place rewrite keeps the file's permissions; a new file gets what open() would give.
            mode = stat.S_IMODE(os.stat(target).st_mode)
        except OSError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        os.close(fd)


# ------------------------------------------------------------------------------ output checks


def _identity(path: PathLike) -> tuple[Any, ...]:
    """What makes two paths the same file: device and inode when it exists, else the resolved path."""
    try:
        st = os.stat(path)
        return ("inode", st.st_dev, st.st_ino)
    except OSError:
        return ("path", os.path.realpath(path))


def check_output(path: PathLike, option: str = "--output") -> None:
    """Refuse, before any work, an output path that cannot be written (one line naming ``option``).

    Accepted: ``-`` and other stream outputs, a new or existing regular file (or a symlink to one)
    in a folder that exists or can be created. Refused: a directory, a path below a regular file,
    a read-only folder.
    """
    if is_stream(path):
        return
    shown = Path(path)
    if shown.is_dir():
        raise RankkitError(f"{option} {shown}: is a directory, expected a file")
    _check_parent(shown, option)


def _check_parent(shown: Path, option: str) -> None:
    """Refuse an output whose nearest existing ancestor (its parents are created) is no writable folder."""
    existing = _first_existing(Path(os.path.realpath(shown)).parent)
    if not existing.is_dir():
        raise RankkitError(f"{option} {shown}: {existing} is not a directory")
    if not _writable_dir(existing):
        raise RankkitError(f"{option} {shown}: folder {existing} is not writable")


def check_output_dir(path: PathLike, option: str = "--index") -> None:
    """Refuse, before any work, an output folder that is a file or whose parent cannot be written."""
    shown = Path(path)
    if os.path.lexists(shown) and not shown.is_dir():
        raise RankkitError(f"{option} {shown}: exists and is not a directory")
    _check_parent(shown, option)


def check_outputs(
    outputs: Sequence[tuple[str, PathLike | None]],
    inputs: Iterable[tuple[str, PathLike | None]] = (),
) -> None:
    """Check every output (see :func:`check_output`), that no two are the same file, and none is an input.

    ``outputs`` and ``inputs`` are ``(option, path)`` pairs; ``None`` paths are skipped. Pass only the
    inputs an output must not replace: an in-place rewrite of the same kind (``fuse A B -o A``,
    ``validate RUN --fix RUN``) reads its input whole before writing and is safe.
    Also removes stale temporaries of killed earlier runs beside each output.
    """
    given = [(option, path) for option, path in outputs if path is not None]
    for option, path in given:
        check_output(path, option)
    seen: dict[tuple[Any, ...], tuple[str, PathLike]] = {}
    for option, path in given:
        if is_stream(path):
            continue
        key = _identity(path)
        if key in seen:
            other, other_path = seen[key]
            raise RankkitError(f"{option} {path} is the same file as {other} {other_path}; give two different files")
        seen[key] = (option, path)
    for name, source in inputs:
        if source is None or str(source) == "-":
            continue
        key = _identity(source)
        if key in seen:
            option, path = seen[key]
            raise RankkitError(f"{option} {path} is the input {name} {source}; refusing to overwrite an input")
        if os.path.isdir(source):  # an input folder (an index): nothing may be written inside it
            inside = os.path.realpath(source) + os.sep
            for option, path in given:
                if not is_stream(path) and os.path.realpath(path).startswith(inside):
                    raise RankkitError(
                        f"{option} {path} is inside the input {name} {source}; refusing to write into an input"
                    )
    for _, path in given:
        if not is_stream(path):
            remove_stale_temporaries(Path(os.path.realpath(path)))


__all__ = [
    "PathLike", "TEMP_MARK", "atomic_write", "check_output", "check_output_dir", "check_outputs",
    "decode_line", "is_gzip", "is_gzip_file", "is_stream", "iter_lines", "iter_raw_lines", "open_binary",
    "open_text", "parse_json_object", "remove_stale_temporaries", "remove_tree", "staging_dir", "temporary_path",
]
