"""``rankkit retrieve --model bm25``: Anserini's BM25 (and BM25+RM3) through ``SimpleSearcher``.

This is the same Java searcher pyserini's ``LuceneSearcher`` wraps (same ``set_bm25``,
``set_rm3`` and multithreaded ``batch_search`` calls), reached through pyserini's class bridge
without importing ``pyserini.search`` (see :mod:`rankkit.lexical.java`); a test checks that
docids and scores equal ``LuceneSearcher``'s on the same index.

The hits come back as one JSON string per query (:mod:`rankkit.lexical.hits`), not as a Java
object per hit: BM25 on an index written by Lucene 9+ (every ``rankkit index``) is Lucene's top-k
with Anserini's tie handling, searched by ``--threads`` threads; RM3 and Lucene 8 indexes go
through Anserini's ``batch_search`` (which uses every core whatever ``--threads`` says).
Results are written as they come, so memory holds a few queries, not the run.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from rankkit.console import progress_bar, warn
from rankkit.errors import RankkitError
from rankkit.files import PathLike, atomic_write
from rankkit.formats.runs import format_ranking
from rankkit.formats.topics import read_topics
from rankkit.lexical import java, pool
from rankkit.lexical.hits import Hits, TopHits, float32, index_major_version, scored_docs_mapper
from rankkit.lexical.index import default_threads, resolved_options
from rankkit.indexes import read_manifest

#: Queries per Anserini ``batch_search`` call on the RM3 / Lucene 8 path.
BATCH = 256


@dataclass(frozen=True)
class Bm25Params:
    """BM25 (Robertson et al.) with Anserini's MS MARCO defaults, optionally with RM3 feedback.

    RM3 (Abdul-Jaleel et al. 2004; Anserini's implementation): expand the query with the
    ``fb_terms`` heaviest terms of the top ``fb_docs`` documents' relevance model, mixed with the
    original query at weight ``original_weight``, then search again.
    """

    k1: float = 0.9
    b: float = 0.4
    rm3: bool = False
    fb_terms: int = 10
    fb_docs: int = 10
    original_weight: float = 0.5

    def check(self) -> None:
        """Reject values BM25/RM3 cannot use, one line each."""
        if self.k1 < 0:
            raise RankkitError(f"--k1 must be >= 0, got {self.k1}")
        if not 0 <= self.b <= 1:
            raise RankkitError(f"--b must be in [0, 1], got {self.b}")
        if self.rm3:
            if self.fb_terms < 1 or self.fb_docs < 1:
                raise RankkitError("--fb-terms and --fb-docs must be at least 1")
            if not 0 <= self.original_weight <= 1:
                raise RankkitError(f"--original-weight must be in [0, 1], got {self.original_weight}")

    def runtag(self) -> str:
        """A default run tag naming the model."""
        return "bm25_rm3" if self.rm3 else "bm25"


def check_index(index_dir: Path, params: Bm25Params) -> dict[str, Any]:
    """The manifest of a BM25 index that can serve ``params`` (one-line errors otherwise); starts no JVM."""
    params.check()
    manifest = read_manifest(index_dir, kinds=("bm25",))
    if params.rm3 and not resolved_options(index_dir, manifest).get("docvectors"):
        how = ("rebuild it with `rankkit index --kind bm25 --docvectors`" if not manifest.get("foreign")
               else "rebuild it with Pyserini's --storeDocvectors")
        raise RankkitError(f"RM3 needs document vectors, and index {index_dir} was built without them; {how}")
    return manifest


class Bm25Searcher:
    """BM25 over a rankkit BM25 index. Use as a context manager, or call :meth:`close`."""

    def __init__(self, index_dir: PathLike, params: Bm25Params = Bm25Params()) -> None:
        self.index_dir = Path(index_dir)
        self.manifest = check_index(self.index_dir, params)
        self.params = params
        # Absolute: the JVM resolves relative paths against the directory it started in, not the current one.
        self._searcher: Any = java.autoclass("io.anserini.search.SimpleSearcher")(str(self.index_dir.resolve()))
        self._searcher.set_bm25(float(params.k1), float(params.b))
        if params.rm3:
            # As pyserini's LuceneSearcher.set_rm3 on an index with document vectors (collection None).
            self._searcher.set_rm3(
                None, int(params.fb_terms), int(params.fb_docs), float(params.original_weight), False, True
            )
        self._lists = java.autoclass("java.util.ArrayList")
        # Lucene's top-k with Anserini's tie handling, one JSON string per query (rankkit.lexical.hits);
        # RM3 (a reranker cascade) and Lucene 8 indexes (no docid sort values) keep Anserini's batch_search.
        self._top: TopHits | None = None
        if not params.rm3 and index_major_version(self.index_dir.resolve()) >= 9:
            self._top = TopHits(self.index_dir.resolve(), self._searcher, params.k1, params.b)
        self._mapper: Any = None

    @property
    def num_docs(self) -> int:
        """Documents in the index."""
        return int(self._searcher.get_total_num_docs())

    def search(self, query: str, k: int = 1000) -> Hits:
        """Top ``k`` ``(docid, score)`` of one query, best first."""
        if self._top is not None:
            return self._top.search(query, k)
        return self._anserini_batch([("q", query)], k, 1).get("q", [])

    def batch_search(
        self, queries: Sequence[tuple[str, str]], k: int = 1000, threads: int = 1
    ) -> dict[str, Hits]:
        """Top ``k`` of each ``(qid, query)``, searched by ``threads`` threads."""
        return dict(self.iter_search(queries, k, threads))

    def iter_search(self, queries: Iterable[tuple[str, str]], k: int = 1000,
                    threads: int = 1) -> Iterator[tuple[str, Hits]]:
        """``(qid, hits)`` of each ``(qid, query)`` in order, as they are found (a few queries in memory)."""
        if self._top is not None:
            yield from self._top.iter_search(queries, k, threads)
            return
        batch: list[tuple[str, str]] = []
        for item in queries:
            batch.append(item)
            if len(batch) == BATCH:
                results = self._anserini_batch(batch, k, threads)
                yield from ((qid, results.get(qid, [])) for qid, _ in batch)
                batch = []
        if batch:
            results = self._anserini_batch(batch, k, threads)
            yield from ((qid, results.get(qid, [])) for qid, _ in batch)

    def _anserini_batch(self, queries: Sequence[tuple[str, str]], k: int, threads: int) -> dict[str, Hits]:
        """Anserini's ``batch_search`` (RM3, Lucene 8 indexes), its result map read as one JSON string."""
        if self._mapper is None:
            self._mapper = scored_docs_mapper()
        texts, qids = self._lists(), self._lists()
        for qid, text in queries:
            qids.add(qid)
            texts.add(text)
        results = json.loads(self._mapper.writeValueAsString(
            self._searcher.batch_search(texts, qids, int(k), int(threads))))
        return {qid: [(docid, float32(score)) for docid, score in hits] for qid, hits in results.items()}

    def close(self) -> None:
        """Close the Lucene index."""
        if self._top is not None:
            self._top.close()
            self._top = None
        if self._searcher is not None:
            self._searcher.close()
            self._searcher = None

    def __enter__(self) -> "Bm25Searcher":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class RetrieveReport:
    """What a retrieval did."""

    queries: int = 0
    lines: int = 0
    seconds: float = 0.0
    no_hits: list[str] = field(default_factory=list)
    removed_self: int = 0

    @property
    def queries_per_second(self) -> float:
        return self.queries / self.seconds if self.seconds > 0 else float("inf")


def drop_self_hits(qid: str, hits: Hits, k: int) -> tuple[Hits, bool]:
    """Remove the hit whose docid is the query's own id (``--remove-query``); keep the top ``k``."""
    kept = [(docid, score) for docid, score in hits if docid != qid]
    return kept[:k], len(kept) < len(hits)


def run_block(qid: str, hits: Hits, k: int, remove_query: bool, tag: str) -> tuple[str, int, bool]:
    """One query's run lines as :func:`~rankkit.formats.write_run` writes them, how many, and whether
    its own id was dropped (``remove_query``)."""
    removed = False
    if remove_query:
        hits, removed = drop_self_hits(qid, hits, k)
    text, count = format_ranking(qid, dict(hits), tag)
    return text, count, removed


def retrieve_bm25(
    index: PathLike,
    topics: PathLike | Mapping[str, str],
    output: PathLike,
    *,
    k: int = 1000,
    params: Bm25Params = Bm25Params(),
    threads: int | None = None,
    runtag: str | None = None,
    remove_query: bool = False,
    batch_size: int | None = None,
) -> RetrieveReport:
    """Retrieve the top ``k`` for every topic with BM25 and write a run through ``write_run``.

    ``remove_query`` drops a hit whose docid equals its qid (for tasks whose queries are in the
    corpus); ``k + 1`` are retrieved so ``k`` remain. A query with no hits is reported, not dropped
    silently (it simply has no lines in the run, as trec_eval expects). Each query's hits are
    written as they come (``batch_size`` is no longer used; kept for callers that pass it).

    ``threads`` > 1 searches in that many worker processes (:mod:`rankkit.lexical.pool`) from
    :data:`~rankkit.lexical.pool.MIN_QUERIES` queries on, else on that many threads; RM3 uses
    Anserini's ``batch_search``, which uses every core itself. The run is the same either way.
    """
    if k < 1:
        raise RankkitError(f"--k must be at least 1, got {k}")
    threads = threads or default_threads()
    if threads < 1:
        raise RankkitError(f"--threads must be at least 1, got {threads}")
    tag = runtag or params.runtag()
    if any(ch.isspace() for ch in tag):
        raise RankkitError(f"--runtag must be one word, got {tag!r}")
    queries = list((topics if isinstance(topics, Mapping) else read_topics(topics)).items())
    report = RetrieveReport(queries=len(queries))
    depth = k + 1 if remove_query else k
    with contextlib.ExitStack() as stack:
        blocks: Iterable[tuple[str, str, int, bool]]
        if threads > 1 and not params.rm3 and len(queries) >= pool.MIN_QUERIES:
            check_index(Path(index), params)
            # Workers search, format and send whole queries' lines: this process only writes them.
            blocks = pool.iter_blocks(Path(index), params, queries, depth, k, remove_query, tag, threads,
                                      count=len(queries))
        else:
            searcher = stack.enter_context(Bm25Searcher(index, params))
            blocks = ((qid, *run_block(qid, hits, k, remove_query, tag))
                      for qid, hits in searcher.iter_search(queries, depth, threads))
        bar = stack.enter_context(progress_bar("q"))
        started = time.perf_counter()  # search time only, not JVM start and index opening
        task = bar.add_task(f"{tag} search", total=len(queries))
        with atomic_write(output) as out:
            for qid, text, count, removed in blocks:
                bar.update(task, advance=1)
                report.removed_self += removed
                if not count:
                    report.no_hits.append(qid)
                    continue
                out.write(text)
                report.lines += count
        report.seconds = time.perf_counter() - started
    if report.no_hits:
        shown = ", ".join(report.no_hits[:5]) + (" ..." if len(report.no_hits) > 5 else "")
        warn(
            f"{len(report.no_hits)} of {len(queries)} queries retrieved nothing "
            f"(no query term in the index): {shown}"
        )
    return report
