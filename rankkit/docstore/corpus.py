"""Text by docid from a corpus file, through an on-disk docid -> byte-offset table.

The table is built on first use (one streaming pass; memory ~24 bytes per document while
building, nothing per document afterwards: lookups binary-search a memory-mapped array) and
cached in a folder named ``<corpus file name>.<hash of its absolute path>.rkoffsets``, never
beside the user's data:

* under an explicit ``cache_dir`` (``rankkit mine --cache-dir``);
* otherwise under the user cache directory, ``$RANKKIT_CACHE_DIR`` or
  ``${XDG_CACHE_HOME:-~/.cache}/rankkit``, in ``docstore/``.

The folder holds ``table`` (a header recording the corpus's size and mtime, then the sorted 64-bit
docid hashes and their byte offsets) and, for a **gzipped** corpus, ``text``: a decompressed copy
made during the same pass, because a gzip stream cannot be entered at an offset. The table is
rebuilt when the corpus's size or modification time changes. A lookup re-reads the line at the
offset, parses it with the corpus reader and checks its docid, so a hash collision can never return
the wrong passage. Duplicate docids in a corpus are an error (file:line), found while building, as
are bytes that are not UTF-8. A table is built in a locked temporary folder (rankkit's temporary
mark, :func:`rankkit.files.staging_dir`) renamed into place; one left by a killed build is
removed by the next build.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import stat
from array import array
from pathlib import Path
from typing import IO, Callable, Iterable

import numpy as np

from rankkit.console import log, progress_bar
from rankkit.docstore.base import DocStore, Missing, MissingDocumentsError, docid_hash
from rankkit.errors import InputError, RankkitError
from rankkit.files import (
    UTF8_BOM, decode_line, exclusive, install_cache_folder, is_gzip_file, iter_raw_lines, max_line, staging_dir,
    user_cache_root,
)
from rankkit.formats.corpus import Document, is_jsonl_corpus, parse_json_document, parse_tsv_document

MAGIC = b"RKDOCS01"
TABLE_VERSION = 1
SUFFIX = ".rkoffsets"

Parser = Callable[[str | os.PathLike[str], int, str], Document]


def _cache_key(corpus: Path) -> str:
    digest = hashlib.sha1(str(corpus.resolve()).encode("utf-8")).hexdigest()[:12]
    return f"{corpus.name}.{digest}{SUFFIX}"


def is_writable_dir(folder: Path) -> bool:
    """A folder we may create files in.

    Besides ``os.access``, a folder with no write bit at all counts as read-only even for root (who
    ``os.access`` always allows), so shared read-only data folders are never written into.
    """
    try:
        mode = folder.stat().st_mode
    except OSError:
        return False
    return stat.S_ISDIR(mode) and bool(mode & 0o222) and os.access(folder, os.W_OK | os.X_OK)


def table_locations(corpus: Path, cache_dir: Path | None = None) -> list[Path]:
    """Where the table of ``corpus`` may live, in the order they are tried."""
    folder = cache_dir if cache_dir is not None else user_cache_root() / "docstore"
    return [folder / _cache_key(corpus)]


def default_table_dir(corpus: Path, cache_dir: Path | None = None) -> Path:
    """The folder a new table of ``corpus`` would be built in (never beside the corpus)."""
    return table_locations(corpus, cache_dir)[0]


def _read_header(table: Path) -> tuple[dict, int] | None:
    """The table's JSON header and the byte offset of its arrays, or None if it is not a valid table."""
    try:
        with open(table, "rb") as handle:
            if handle.read(8) != MAGIC:
                return None
            length = int.from_bytes(handle.read(8), "little")
            header = json.loads(handle.read(length).decode("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(header, dict) or header.get("version") != TABLE_VERSION:
        return None
    return header, 16 + length


def _is_fresh(folder: Path, corpus: Path) -> bool:
    found = _read_header(folder / "table")
    if found is None:
        return False
    header, _ = found
    st = corpus.stat()
    if header.get("corpus_size") != st.st_size or header.get("corpus_mtime_ns") != st.st_mtime_ns:
        return False
    if header.get("text") == "text":
        try:
            return (folder / "text").stat().st_size == header.get("text_size")
        except OSError:
            return False
    return True


def _parser(corpus: Path) -> Parser:
    return parse_json_document if is_jsonl_corpus(corpus) else parse_tsv_document


def _line_at(handle: IO[bytes], offset: int, corpus: Path) -> str:
    """The text of the line starting at ``offset`` (line 1, at offset 0, may start with a BOM)."""
    handle.seek(offset)
    raw = handle.readline(max_line() + 2)  # bounded: the file may have changed since the table was built
    if offset == 0 and raw.startswith(UTF8_BOM):
        raw = raw[len(UTF8_BOM):]
    try:
        return raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        raise InputError(corpus, None, "not valid UTF-8 (changed since its docid table was built?)") from None


def _docid_at(handle: IO[bytes], offset: int, corpus: Path, parse: Parser) -> str:
    return parse(corpus, 0, _line_at(handle, offset, corpus)).docid


def build_table(corpus: Path, folder: Path) -> dict:
    """Build the table of ``corpus`` into ``folder`` (which must exist and be empty); returns its header."""
    parse = _parser(corpus)
    st = corpus.stat()
    gz = is_gzip_file(corpus)  # by content: a plain file named .gz is read as text
    hashes, offsets, lines = array("Q"), array("Q"), array("Q")
    raw = open(corpus, "rb")
    copy: IO[bytes] | None = open(folder / "text", "wb") if gz else None
    source: IO[bytes] = gzip.GzipFile(fileobj=raw, mode="rb") if gz else raw  # type: ignore[assignment]
    offset = 0
    try:
        with progress_bar("B", transient=True) as bar:
            task = bar.add_task(f"docid table of {corpus.name}", total=st.st_size)
            for number, line in iter_raw_lines(corpus, source):
                if copy is not None:
                    copy.write(line)
                start, offset = offset, offset + len(line)
                text = decode_line(corpus, number, line)  # drops a BOM, refuses non-UTF-8 bytes
                if text.strip():
                    doc = parse(corpus, number, text)
                    hashes.append(docid_hash(doc.docid))
                    offsets.append(start)
                    lines.append(number)
                if number % 20000 == 0:
                    bar.update(task, completed=raw.tell())
            bar.update(task, completed=st.st_size)
    finally:
        source.close()
        raw.close()
        if copy is not None:
            copy.close()
    if not hashes:
        raise InputError(corpus, None, "file is empty")
    keys = np.frombuffer(hashes, dtype=np.uint64)
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    offs = np.frombuffer(offsets, dtype=np.uint64)[order]
    _check_duplicates(
        corpus,
        folder / "text" if gz else corpus,
        keys,
        offs,
        np.frombuffer(lines, dtype=np.uint64)[order],
        parse,
    )
    header = {
        "version": TABLE_VERSION,
        "corpus": str(corpus.resolve()),
        "corpus_size": st.st_size,
        "corpus_mtime_ns": st.st_mtime_ns,
        "format": "jsonl" if is_jsonl_corpus(corpus) else "tsv",
        "documents": int(keys.size),
        "text": "text" if gz else "corpus",
        "text_size": offset,
        "hash": "blake2b-64",
    }
    blob = json.dumps(header).encode("utf-8")
    blob += b" " * (-len(blob) % 8)  # keep the arrays 8-byte aligned for memory mapping
    with open(folder / "table", "wb") as out:
        out.write(MAGIC + len(blob).to_bytes(8, "little") + blob)
        out.write(keys.astype("<u8").tobytes())
        out.write(offs.astype("<u8").tobytes())
    return header


def _check_duplicates(
    corpus: Path, text: Path, keys: np.ndarray, offs: np.ndarray, lines: np.ndarray, parse: Parser
) -> None:
    """Raise on a docid that occurs twice; equal hashes of different docids (collisions) are fine."""
    same = np.nonzero(keys[1:] == keys[:-1])[0]
    if same.size == 0:
        return
    with open(text, "rb") as handle:
        seen: dict[tuple[int, str], int] = {}
        for i in np.unique(np.concatenate([same, same + 1])).tolist():
            docid = _docid_at(handle, int(offs[i]), corpus, parse)
            line = int(lines[i])
            earlier = seen.setdefault((int(keys[i]), docid), line)
            if earlier != line:
                first, second = sorted((earlier, line))
                raise InputError(corpus, second, f"duplicate document id {docid!r} (first on line {first})")


def _build_into(corpus: Path, final: Path) -> None:
    """Build in a locked temporary sibling folder and rename it into place (no half-built table is ever used)."""
    with staging_dir(final) as tmp:
        build_table(corpus, tmp)
        try:
            install_cache_folder(tmp, final)
        except OSError:
            if not _is_fresh(final, corpus):  # another process raced us and won with a fresh table: use it
                raise


class CorpusDocStore(DocStore):
    """Passage text by docid from a corpus file (JSONL/BEIR/TSV, optionally gzipped)."""

    def __init__(self, corpus: Path, cache_dir: Path | None = None) -> None:
        if not corpus.exists():
            raise InputError(corpus, None, "no such file")
        if corpus.is_dir():
            raise InputError(corpus, None, "is a directory, expected a corpus file")
        self.path = corpus
        self.source = str(corpus)
        self._parse = _parser(corpus)
        self.table_dir = self._locate(corpus, cache_dir)
        header, start = _read_header(self.table_dir / "table") or ({}, 0)
        self.documents = int(header["documents"])
        data = np.memmap(
            self.table_dir / "table", dtype="<u8", mode="r", offset=start, shape=(2 * self.documents,)
        )
        self._keys = data[: self.documents]
        self._offsets = data[self.documents :]
        text = self.table_dir / "text" if header["text"] == "text" else corpus
        self._handle: IO[bytes] = open(text, "rb")
        st = os.fstat(self._handle.fileno())
        # Pinned while it is read (a long rerank, ids-only training): the corpus indexed, or its copy.
        self._pin = ((st.st_size, st.st_mtime_ns) if header["text"] == "text"
                     else (header.get("corpus_size"), header.get("corpus_mtime_ns")))
        self._check_pin()

    def _check_pin(self) -> None:
        """Refuse a corpus rewritten since its table was built: its lines are read by byte offset."""
        st = os.fstat(self._handle.fileno())
        if (st.st_size, st.st_mtime_ns) != self._pin:
            raise InputError(self.path, None, "changed while it was read (its size or modification time is not that "
                                              "of the file indexed); run again on a corpus that stays as it is")

    @staticmethod
    def _locate(corpus: Path, cache_dir: Path | None) -> Path:
        locations = table_locations(corpus, cache_dir)
        for folder in locations:
            if _is_fresh(folder, corpus):
                return folder
        target = locations[0]
        folder = target.parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise RankkitError(
                f"cannot create the docid table cache {folder}: {err.strerror or err}; give --cache-dir DIR"
            ) from None
        if not is_writable_dir(folder):
            raise RankkitError(f"the docid table cache {folder} is not writable; give --cache-dir DIR")
        # One builder per table: a second process waits, then finds the table built (never moves a
        # table away while the first one opens it).
        with exclusive(target, "the docid table", wait=True):
            if _is_fresh(target, corpus):
                return target
            if target.exists():
                log(f"{corpus} changed since its docid table was built; rebuilding {target}")
            else:
                log(f"building the docid table of {corpus} in {target} (once)")
            _build_into(corpus, target)
        return target

    def __len__(self) -> int:
        return self.documents

    def _read(self, offset: int) -> Document:
        return self._parse(self.path, 0, _line_at(self._handle, offset, self.path))

    def holds(self, hashes: np.ndarray) -> np.ndarray:
        """Which docid hashes (:func:`~rankkit.formats.ids.docid_hash`) the table holds, vectorised.

        A membership test without reading the corpus (training checks every id of its groups up
        front this way); a hash collision can only make an absent docid look present, and the
        look-up of its text still checks the docid.
        """
        at = np.minimum(np.searchsorted(self._keys, hashes), max(self.documents - 1, 0))
        return np.asarray(self._keys[at] == hashes) if self.documents else np.zeros(len(hashes), dtype=bool)

    def get_many(self, docids: Iterable[str], *, missing: Missing = "error") -> dict[str, str]:
        """Texts by docid; reads in file order so a batch costs one forward sweep over the corpus."""
        wanted = list(dict.fromkeys(docids))
        if not wanted:
            return {}
        keys = np.fromiter((docid_hash(d) for d in wanted), dtype=np.uint64, count=len(wanted))
        lo = np.searchsorted(self._keys, keys, side="left")
        hi = np.searchsorted(self._keys, keys, side="right")
        requests: list[tuple[int, str]] = []
        for docid, first, last in zip(wanted, lo.tolist(), hi.tolist()):
            requests.extend((int(self._offsets[j]), docid) for j in range(first, last))
        requests.sort()
        self._check_pin()
        found: dict[str, str] = {}
        for offset, docid in requests:
            if docid not in found:
                doc = self._read(offset)
                if doc.docid == docid:  # guards against hash collisions
                    found[docid] = doc.contents
        if len(found) < len(wanted) and missing == "error":
            raise MissingDocumentsError([d for d in wanted if d not in found], str(self.path))
        return {d: found[d] for d in wanted if d in found}

    def close(self) -> None:
        self._handle.close()
