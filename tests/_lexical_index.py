"""One BM25 index of tests/data/corpus_small per test process, shared by the modules that need one.

Building takes ~1-2 s once the JVM runs; a session fixture in each test module calls
:func:`small_index`, which builds on first use and caches the folder until the process exits.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

DATA = Path(__file__).parent / "data" / "corpus_small"
CORPUS = DATA / "passages.tsv.gz"
TOPICS = DATA / "topics.tsv"
QRELS = DATA / "qrels.txt"
DOCUMENTS = 2013


@functools.lru_cache(maxsize=None)
def small_index() -> Path:
    """The index (with document vectors, so RM3 works) of the 2,013-passage corpus."""
    from rankkit.lexical.index import build_bm25_index

    root = Path(tempfile.mkdtemp(prefix="rankkit-test-index-"))
    atexit.register(shutil.rmtree, root, True)
    report = build_bm25_index(CORPUS, root / "index", threads=2, docvectors=True)
    assert report.indexed == DOCUMENTS
    return root / "index"
