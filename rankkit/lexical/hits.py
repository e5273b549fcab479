"""Anserini's hits without a Java call per hit: one JSON string per query, parsed in C.

Through pyjnius, ``SimpleSearcher.batch_search`` costs ~40-55 us of CPU per returned hit, almost
none of it searching: Anserini loads each hit's whole stored Lucene document (the raw passage
text, a decompressed stored-fields block) only to read its docid (``ScoredDocs.fromTopDocs``), and
Python then builds a proxy object and makes two Java calls per hit under the GIL. Its thread pool
also ignores the ``threads`` argument (Anserini 1.7.1 uses ``newWorkStealingPool()``: all cores).

:class:`TopHits` computes the very same ranking from Lucene directly, as ``SimpleSearcher`` does for
an index written by Lucene 9 or later:

1. the query from Anserini's ``BagOfWordsQueryGenerator`` over the searcher's own analyzer;
2. ``IndexSearcher.search(query, k, SimpleSearcher.BREAK_SCORE_TIES_BY_DOCID, true)``: BM25, ties
   by docid; each hit's docid is its sort value (the ``id`` doc value), so no stored document is read;
3. the ``TopFieldDocs`` serialised by Jackson (in Anserini's jar) into one compact JSON string
   ``[[score, [base64 id bytes, length, offset]]] ...``: one Java call per query, no proxy per hit;
4. Anserini's ``ScoreTiesAdjusterReranker`` applied in NumPy, bit for bit (its bytecode in
   Anserini 1.7.1: ``(float) (Math.round((double) s * 10000.0) / 10000.0)``, then within a tie,
   ``s -= 1e-6f * dup`` in float arithmetic, where a tie is ``previous - s <= 1e-4f``).

The Java work (search, serialisation) runs with the GIL released, so :meth:`TopHits.iter_search`
scales with threads; what is left in Python is a C ``json.loads`` and a base64 decode per hit.
Tests check docids and scores equal pyserini's ``LuceneSearcher`` on the same index.
"""

from __future__ import annotations

import binascii
import json
import threading
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from rankkit.lexical import java

Hits = list[tuple[str, float]]

_ROUND = np.float32(1e-4)
_NUDGE = np.float32(1e-6)


def adjust_ties(scores: Iterable[float]) -> list[float]:
    """Anserini's ``ScoreTiesAdjusterReranker`` on float32 scores (best first), as float64 values."""
    raw = np.asarray(list(scores), dtype=np.float32)
    out = (np.floor(raw.astype(np.float64) * 10000.0 + 0.5) / 10000.0).astype(np.float32)
    n = out.size
    # tie[i - 1]: hit i ties with hit i - 1 while hit i - 1 is not nudged (its own dup is 0).
    tie = ~(out[:-1] - out[1:] > _ROUND)
    starts = np.flatnonzero(tie[1:] & ~tie[:-1]) + 2
    if n > 1 and tie[0]:
        starts = np.concatenate([[1], starts])
    ends = np.flatnonzero(tie[:-1] & ~tie[1:]) + 2
    if n > 1 and tie[-1]:
        ends = np.concatenate([ends, [n]])
    i = 0
    for start, end in zip(starts.tolist(), ends.tolist()):
        if start < i:  # inside a run that the scalar step below already carried on
            continue
        # Within a block of ties every nudge only narrows the gap, so all of it stays tied: dup = 1, 2, ...
        out[start:end] = out[start:end] - _NUDGE * np.arange(1, end - start + 1, dtype=np.float32)
        i, dup = end, end - start
        # Past the block the nudged last hit may still be within 1e-4 of the next one: the run goes on.
        while i < n and not out[i - 1] - out[i] > _ROUND:
            dup += 1
            out[i] = out[i] - _NUDGE * np.float32(dup)
            i += 1
    return out.astype(np.float64).tolist()


def _ignore_type(mapper: Any, name: str) -> None:
    mapper.configOverride(java.autoclass("java.lang.Class").forName(name)).setIsIgnoredType(
        java.autoclass("java.lang.Boolean")("true"))  # a Java Boolean: pyjnius turns Python's True into an Integer


def scored_docs_mapper() -> Any:
    """A Jackson ``ObjectMapper`` writing ``batch_search``'s ``Map<qid, ScoredDoc[]>`` as ``{qid: [[docid, score]]}``
    (the Lucene documents left out): the RM3 and Lucene 8 path, still one Java call per batch."""
    klass = java.autoclass("java.lang.Class")
    shape = java.autoclass("com.fasterxml.jackson.annotation.JsonFormat$Shape")
    form = java.autoclass("com.fasterxml.jackson.annotation.JsonFormat$Value")
    ignore = java.autoclass("com.fasterxml.jackson.annotation.JsonIgnoreProperties$Value")
    feature = java.autoclass("com.fasterxml.jackson.databind.MapperFeature")
    mapper = java.autoclass("com.fasterxml.jackson.databind.ObjectMapper")()
    mapper.configure(feature.SORT_PROPERTIES_ALPHABETICALLY, True)  # docid, score
    override = mapper.configOverride(klass.forName("io.anserini.search.ScoredDoc"))
    override.setIgnorals(ignore.forIgnoredProperties("lucene_docid", "lucene_document"))
    override.setFormat(form.forShape(shape.ARRAY))
    _ignore_type(mapper, "org.apache.lucene.document.Document")
    return mapper


def float32(value: float) -> float:
    """A Java float printed by Jackson (shortest round-trip digits) back to its exact value."""
    return float(np.float32(value))


def _json_mapper() -> Any:
    """A Jackson ``ObjectMapper`` writing ``TopFieldDocs`` as ``{"scoreDocs": [[[score, [b64, length, offset]]], ...]}``."""
    klass = java.autoclass("java.lang.Class")
    shape = java.autoclass("com.fasterxml.jackson.annotation.JsonFormat$Shape")
    form = java.autoclass("com.fasterxml.jackson.annotation.JsonFormat$Value")
    ignore = java.autoclass("com.fasterxml.jackson.annotation.JsonIgnoreProperties$Value")
    feature = java.autoclass("com.fasterxml.jackson.databind.MapperFeature")
    mapper = java.autoclass("com.fasterxml.jackson.databind.ObjectMapper")()
    mapper.configure(feature.SORT_PROPERTIES_ALPHABETICALLY, True)  # BytesRef: bytes, length, offset
    for name, ignored, as_array in (("org.apache.lucene.search.FieldDoc", ("doc", "score", "shardIndex"), True),
                                    ("org.apache.lucene.util.BytesRef", ("valid",), True),
                                    ("org.apache.lucene.search.TopFieldDocs", ("fields", "totalHits"), False)):
        override = mapper.configOverride(klass.forName(name))
        override.setIgnorals(ignore.forIgnoredProperties(*ignored))
        if as_array:
            override.setFormat(form.forShape(shape.ARRAY))
    return mapper


def _path(folder: Path) -> Any:
    """A ``java.nio.file.Path`` (absolute: the JVM resolves relative paths against where it started)."""
    return java.autoclass("java.io.File")(str(Path(folder).resolve())).toPath()


def index_major_version(index_dir: Path) -> int:
    """The Lucene major version that created the index (8 for Pyserini's older prebuilt indexes)."""
    directory = java.autoclass("org.apache.lucene.store.FSDirectory").open(_path(index_dir))
    try:
        infos = java.autoclass("org.apache.lucene.index.SegmentInfos").readLatestCommit(directory)
        return int(infos.getIndexCreatedVersionMajor())
    finally:
        directory.close()


class TopHits:
    """BM25 top-k of ``SimpleSearcher`` (no RM3) over a Lucene 9+ index, one Java string per query."""

    def __init__(self, index_dir: Path, searcher: Any, k1: float, b: float) -> None:
        from jnius import cast

        self._directory = java.autoclass("org.apache.lucene.store.FSDirectory").open(_path(index_dir))
        self._reader = java.autoclass("org.apache.lucene.index.DirectoryReader").open(self._directory)
        self._searcher = java.autoclass("org.apache.lucene.search.IndexSearcher")(
            cast("org.apache.lucene.index.IndexReader", self._reader))
        self._searcher.setSimilarity(java.autoclass("org.apache.lucene.search.similarities.BM25Similarity")(
            float(k1), float(b)))
        self._sort = java.autoclass("io.anserini.search.SimpleSearcher").BREAK_SCORE_TIES_BY_DOCID
        self._generator = java.autoclass("io.anserini.search.query.BagOfWordsQueryGenerator")()
        self._analyzer = searcher.get_analyzer()
        self._field = java.autoclass("io.anserini.index.Constants").CONTENTS
        self._mapper = _json_mapper()

    def search(self, text: str, k: int) -> Hits:
        """The top ``k`` ``(docid, score)`` of one query, best first (callable from several threads)."""
        query = self._generator.buildQuery(self._field, self._analyzer, text)
        top = self._searcher.search(query, int(k), self._sort, True)
        docs = json.loads(self._mapper.writeValueAsString(top))["scoreDocs"]
        a2b = binascii.a2b_base64
        docids = [a2b(ref)[offset:offset + length].decode("utf-8") for ((_, (ref, length, offset)),) in docs]
        return list(zip(docids, adjust_ties(float(d[0][0]) for d in docs)))

    def iter_search(self, queries: Iterable[tuple[str, str]], k: int, threads: int) -> Iterator[tuple[str, Hits]]:
        """``(qid, hits)`` of each query, in the given order, searched by ``threads`` threads.

        At most ``4 * threads`` results wait to be taken, so a caller writing them as they come
        holds a few queries' hits, not the run.
        """
        if threads <= 1:
            for qid, text in queries:
                yield qid, self.search(text, k)
            return
        source = iter(enumerate(queries))
        lock = threading.Lock()
        done: dict[int, tuple[str, Hits] | BaseException] = {}
        ready = threading.Condition()
        room = threading.Semaphore(4 * threads)
        stop = threading.Event()

        def work() -> None:
            import jnius

            try:
                while not stop.is_set():
                    room.acquire()
                    with lock:
                        item = next(source, None)
                    if item is None:
                        room.release()
                        return
                    position, (qid, text) = item
                    try:
                        result: tuple[str, Hits] | BaseException = (qid, self.search(text, k))
                    except BaseException as err:  # handed to the caller, in order
                        result = err
                    with ready:
                        done[position] = result
                        ready.notify_all()
            finally:
                with ready:
                    ready.notify_all()
                jnius.detach()  # a thread that touched Java must detach before it ends

        workers = [threading.Thread(target=work, name=f"bm25-search-{n}", daemon=True) for n in range(threads)]
        for worker in workers:
            worker.start()
        try:
            position = 0
            while True:
                with ready:
                    while position not in done and not all(not w.is_alive() for w in workers):
                        ready.wait(0.5)
                    if position not in done:
                        return
                    result = done.pop(position)
                room.release()
                if isinstance(result, BaseException):
                    raise result
                yield result
                position += 1
        finally:
            stop.set()
            for _ in workers:
                room.release()
            for worker in workers:
                worker.join()

    def close(self) -> None:
        self._reader.close()
        self._directory.close()


__all__ = ["Hits", "TopHits", "adjust_ties", "float32", "index_major_version", "scored_docs_mapper"]
