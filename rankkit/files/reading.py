"""Strict reading: UTF-8 lines in, one-line errors out.

* gzip is recognised by its content (the two magic bytes), not by the name: a plain text file
  named ``*.gz`` is read as text, and a gzipped file with any name is decompressed;
* a UTF-8 byte-order mark at the start of a file is dropped (it would otherwise stick to the first
  id and make a phantom query);
* bytes that are not UTF-8 are refused with ``FILE:LINE`` (never replaced: ``d\\xff`` and ``d\\xfe``
  must not both become ``d\\ufffd``);
* a truncated or corrupt gzip stream is a one-line :class:`InputError` naming the file.
"""

from __future__ import annotations

import gzip
import io
import json
import zlib
from pathlib import Path
from typing import IO, Any, Iterator

from rankkit.errors import InputError
from rankkit.files.paths import PathLike, is_stream


GZIP_MAGIC = b"\x1f\x8b"


UTF8_BOM = b"\xef\xbb\xbf"


_GZIP_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile)


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
