"""Text by docid from the raw documents a ``rankkit index --kind bm25`` index stores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from rankkit.docstore.base import DocStore, Missing, MissingDocumentsError
from rankkit.errors import RankkitError
from rankkit.lexical import java
from rankkit.lexical.index import resolved_options
from rankkit.indexes import read_manifest


def raw_contents(raw: str) -> str:
    """The passage text in a stored raw JsonCollection document (``{"id", "contents"}``)."""
    try:
        record: Any = json.loads(raw)
    except (ValueError, RecursionError):
        raise RankkitError("a stored raw document is not JSON; was the index built by rankkit?") from None
    contents = record.get("contents") if isinstance(record, dict) else None
    if not isinstance(contents, str):
        raise RankkitError("a stored raw document has no 'contents'; was the index built by rankkit?")
    try:
        contents.encode("utf-8")
    except UnicodeEncodeError:
        raise RankkitError("a stored raw document holds a lone surrogate (not Unicode text); "
                           "was the index built by rankkit?") from None
    return contents


class IndexDocStore(DocStore):
    """Passage text by docid from a BM25 index (Anserini's stored ``raw`` field)."""

    def __init__(self, index_dir: Path) -> None:
        manifest = read_manifest(index_dir, kinds=("bm25",))
        if not resolved_options(index_dir, manifest).get("store_raw", False):
            raise RankkitError(f"index {index_dir} stores no raw text; give the corpus file instead")
        self.path = index_dir
        self.source = f"index {index_dir}"
        # Absolute: the JVM resolves relative paths against the directory it started in.
        self._searcher = java.autoclass("io.anserini.search.SimpleSearcher")(str(Path(index_dir).resolve()))
        self._size = int(self._searcher.get_total_num_docs())

    def __len__(self) -> int:
        return self._size

    def get_many(self, docids: Iterable[str], *, missing: Missing = "error") -> dict[str, str]:
        """Texts by docid, one Lucene term lookup each (about 10-20 microseconds)."""
        found: dict[str, str] = {}
        absent: list[str] = []
        for docid in dict.fromkeys(docids):
            raw = self._searcher.doc_raw(docid)
            if raw is None:
                absent.append(docid)
            else:
                found[docid] = raw_contents(raw)
        if absent and missing == "error":
            raise MissingDocumentsError(absent, self.source)
        return found

    def close(self) -> None:
        if self._searcher is not None:
            self._searcher.close()
            self._searcher = None
