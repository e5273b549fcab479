"""Strict reading: UTF-8 lines in, one-line errors out.

* gzip is recognised by its content (the two magic bytes), not by the name: a plain text file
  named ``*.gz`` is read as text, and a gzipped file with any name is decompressed;
* a UTF-8 byte-order mark at the start of a file is dropped (it would otherwise stick to the first
  id and make a phantom query);
* bytes that are not UTF-8 are refused with ``FILE:LINE`` (never replaced: ``d\\xff`` and ``d\\xfe``
  must not both become ``d\\ufffd``);
* a truncated or corrupt gzip stream is a one-line :class:`InputError` naming the file;
* no line is read whole past :func:`max_line` characters (64 Mi, ``RANKKIT_MAX_LINE`` to change):
  a file without line breaks (a gzip bomb named like a run) is refused with ``FILE:LINE`` after
  that much, never read until memory runs out;
* JSON text that decodes to lone surrogates (``"\\ud800"``), which no UTF-8 writer or tokenizer can
  take, is refused with ``FILE:LINE`` (:func:`parse_json_object`).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import zlib
from pathlib import Path
from typing import IO, Any, Iterator

from rankkit.errors import InputError
from rankkit.files.paths import PathLike, is_stream


GZIP_MAGIC = b"\x1f\x8b"

#: The longest line any reader accepts, in characters (bytes for raw readers), unless
#: ``RANKKIT_MAX_LINE`` says otherwise: far past any real document (MS MARCO's longest is ~3 MB).
MAX_LINE = 64 << 20
MAX_LINE_ENV = "RANKKIT_MAX_LINE"


def max_line() -> int:
    """The line-length limit in force (:data:`MAX_LINE`, or ``$RANKKIT_MAX_LINE`` when a positive integer)."""
    text = os.environ.get(MAX_LINE_ENV, "")
    return int(text) if text.isdigit() and int(text) > 0 else MAX_LINE


#: Blank (or skipped comment) lines a reader goes through before it takes a file for a flood of them: more
#: than this many and more than the file's lines of data so far (2 GB of newlines, 9 MB gzipped, is two
#: billion lines that no reader should walk one by one; a real file's blank lines are few).
BLANK_FLOOD = 1_000_000


def blank_flood(path: PathLike, number: int, blank: int, kept: int) -> InputError:
    return InputError(path, number, f"{blank:,} blank lines and {kept:,} lines of data so far: a flood of empty lines, "
                                    "not a file of records; refusing to read on")


def line_too_long(path: PathLike, number: int | None, limit: int) -> InputError:
    return InputError(path, number, f"line longer than {limit:,} characters (a file without line breaks?); "
                                    f"refusing to read it whole (set {MAX_LINE_ENV} to allow longer lines)")


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
    """``(line_number, bytes)`` of an open binary handle, gzip failures turned into ``InputError``;
    a line past :func:`max_line` bytes is refused (never read whole)."""
    number = blank = 0
    limit = max_line()
    readline = handle.readline
    while True:
        try:
            raw = readline(limit + 2)
        except _GZIP_ERRORS as err:
            raise InputError(path, None, _gzip_problem(err, number)) from None
        if not raw:
            return
        number += 1
        if len(raw) > limit and len(raw.rstrip(b"\r\n")) > limit:
            raise line_too_long(path, number, limit)
        if raw.isspace():  # still yielded (callers count byte offsets); only a flood of them is refused
            blank += 1
            if blank > BLANK_FLOOD and 2 * blank > number:
                raise blank_flood(path, number, blank, number - blank)
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
        self._number = self._blank = 0
        self._limit = max_line()

    def _failed(self, err: Exception) -> InputError:
        if isinstance(err, UnicodeDecodeError):
            return InputError(self._source, None, f"not valid UTF-8 ({err.reason}); rankkit reads UTF-8 text only")
        return InputError(self._source, None, _gzip_problem(err, 0))

    def __next__(self) -> str:  # type: ignore[override]  # a text wrapper yields str
        try:
            line = super().readline(self._limit + 2)  # bounded: iteration would read a line whole
        except (UnicodeDecodeError, *_GZIP_ERRORS) as err:
            raise self._failed(err) from None
        if not line:
            raise StopIteration
        self._number += 1
        if len(line) > self._limit and len(line.rstrip("\r\n")) > self._limit:
            raise line_too_long(self._source, self._number, self._limit)
        if line.isspace():
            self._blank += 1
            if self._blank > BLANK_FLOOD and 2 * self._blank > self._number:
                raise blank_flood(self._source, self._number, self._blank, self._number - self._blank)
        return line

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
    number = skipped = 0
    limit = max_line()
    # Fast path: strict text decoding of whole chunks; only a decoding error pays for a byte-level
    # rescan that finds its line. readline(size) rather than iteration: no line is read whole past
    # the limit.
    with io.TextIOWrapper(open_binary(path), encoding="utf-8", errors="strict", newline="\n") as handle:
        readline = handle.readline
        while True:
            try:
                line = readline(limit + 2)
            except UnicodeDecodeError as err:
                raise _locate_decode_error(path, err) from None
            except _GZIP_ERRORS as err:
                raise InputError(path, None, _gzip_problem(err, number)) from None
            if not line:
                break
            number += 1
            if len(line) > limit and len(line.rstrip("\r\n")) > limit:
                raise line_too_long(path, number, limit)
            if number == 1 and line.startswith("\ufeff"):
                line = line[1:]
            line = line.rstrip("\r\n")
            if not line.strip() or skip_comments and line.lstrip().startswith("#"):
                skipped += 1
                if skipped > BLANK_FLOOD and 2 * skipped > number:
                    raise blank_flood(path, number, skipped, number - skipped)
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
    except ValueError as err:  # an integer of over 4,300 digits
        raise InputError(path, number, f"invalid JSON: {' '.join(str(err).split())[:100]}") from None
    if not isinstance(record, dict):
        raise InputError(path, number, "expected a JSON object")
    if "\\ud" in line or "\\uD" in line:  # only an escape can make a surrogate: the text itself is UTF-8
        check_encodable(path, number, record)
    return record


def check_encodable(path: PathLike, number: int | None, value: Any) -> None:
    """Refuse strings that cannot be written as UTF-8 (lone surrogates from ``\\ud800`` escapes)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as err:
                raise InputError(path, number, f"text holds a lone surrogate (\\u{ord(item[err.start]):04x}), "
                                               "which is not Unicode text; fix the escape") from None
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
