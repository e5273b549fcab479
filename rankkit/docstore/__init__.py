"""Passage text by docid, for every stage after the first (re-ranking, mining, training).

One entry point, :func:`open_docstore`, over two backends:

* :class:`CorpusDocStore` reads a corpus file (any format :func:`rankkit.formats.iter_corpus`
  reads) through an on-disk docid -> byte-offset table, built on first use and cached
  (see :mod:`rankkit.docstore.corpus` for where, and how gzipped corpora are handled);
* :class:`IndexDocStore` reads the raw text a ``rankkit index --kind bm25`` index stores.

Both return the text a model sees (:attr:`rankkit.formats.Document.contents`: title and text).
"""

from __future__ import annotations

from pathlib import Path

from rankkit.docstore.base import DocStore, MissingDocumentsError
from rankkit.docstore.corpus import CorpusDocStore, default_table_dir
from rankkit.docstore.index import IndexDocStore
from rankkit.errors import RankkitError
from rankkit.files import PathLike


def open_docstore(
    corpus: PathLike | None = None,
    index: PathLike | None = None,
    cache_dir: PathLike | None = None,
) -> DocStore:
    """Open passage text by docid from a corpus file or from a BM25 index's stored raw text.

    Exactly one of ``corpus`` and ``index`` is given. ``cache_dir`` places a corpus's offset table
    there instead of beside the corpus (or the user cache directory when that is read-only).
    """
    if (corpus is None) == (index is None):
        raise RankkitError("give the passage text source as a corpus file or a BM25 index (exactly one)")
    if corpus is not None:
        return CorpusDocStore(Path(corpus), cache_dir=Path(cache_dir) if cache_dir is not None else None)
    return IndexDocStore(Path(index))  # type: ignore[arg-type]


__all__ = [
    "CorpusDocStore",
    "DocStore",
    "IndexDocStore",
    "MissingDocumentsError",
    "default_table_dir",
    "open_docstore",
]
