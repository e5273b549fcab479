"""``rankkit retrieve --model bm25``: Anserini's BM25 (and BM25+RM3) through ``SimpleSearcher``.

This is the same Java searcher pyserini's ``LuceneSearcher`` wraps (same ``set_bm25``,
``set_rm3`` and multithreaded ``batch_search`` calls), reached through pyserini's class bridge
without importing ``pyserini.search`` (see :mod:`rankkit.lexical.java`); a test checks that
docids and scores equal ``LuceneSearcher``'s on the same index.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from rankkit.console import progress_bar, warn
from rankkit.errors import RankkitError
from rankkit.files import PathLike
from rankkit.formats.runs import write_run
from rankkit.formats.topics import read_topics
from rankkit.lexical import java
from rankkit.lexical.index import default_threads, resolved_options
from rankkit.indexes import read_manifest

Hits = list[tuple[str, float]]


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


class Bm25Searcher:
    """BM25 over a rankkit BM25 index. Use as a context manager, or call :meth:`close`."""

    def __init__(self, index_dir: PathLike, params: Bm25Params = Bm25Params()) -> None:
        params.check()
        self.index_dir = Path(index_dir)
        self.manifest = read_manifest(self.index_dir, kinds=("bm25",))
        if params.rm3 and not resolved_options(self.index_dir, self.manifest).get("docvectors"):
            how = ("rebuild it with `rankkit index --kind bm25 --docvectors`" if not self.manifest.get("foreign")
                   else "rebuild it with Pyserini's --storeDocvectors")
            raise RankkitError(f"RM3 needs document vectors, and index {self.index_dir} was built without them; {how}")
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

    @property
    def num_docs(self) -> int:
        """Documents in the index."""
        return int(self._searcher.get_total_num_docs())

    def search(self, query: str, k: int = 1000) -> Hits:
        """Top ``k`` ``(docid, score)`` of one query, best first."""
        return [(hit.docid, float(hit.score)) for hit in self._searcher.search(query, int(k))]

    def batch_search(
        self, queries: list[tuple[str, str]], k: int = 1000, threads: int = 1
    ) -> dict[str, Hits]:
        """Top ``k`` of each ``(qid, query)`` with Anserini's multithreaded ``batch_search``."""
        texts, qids = self._lists(), self._lists()
        for qid, text in queries:
            qids.add(qid)
            texts.add(text)
        results = self._searcher.batch_search(texts, qids, int(k), int(threads))
        out: dict[str, Hits] = {}
        for entry in results.entrySet().toArray():
            out[entry.getKey()] = [(hit.docid, float(hit.score)) for hit in entry.getValue()]
        return out

    def close(self) -> None:
        """Close the Lucene index."""
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


def iter_batches(items: list[tuple[str, str]], size: int) -> Iterator[list[tuple[str, str]]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


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
    batch_size: int = 256,
) -> RetrieveReport:
    """Retrieve the top ``k`` for every topic with BM25 and write a run through ``write_run``.

    ``remove_query`` drops a hit whose docid equals its qid (for tasks whose queries are in the
    corpus); ``k + 1`` are retrieved so ``k`` remain. A query with no hits is reported, not dropped
    silently (it simply has no lines in the run, as trec_eval expects).
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
    with Bm25Searcher(index, params) as searcher, progress_bar("q") as bar:
        started = time.perf_counter()  # search time only, not JVM start and index opening
        task = bar.add_task(f"{tag} search", total=len(queries))

        def ranked() -> Iterable[tuple[str, dict[str, float]]]:
            for batch in iter_batches(queries, batch_size):
                results = searcher.batch_search(batch, depth, threads)
                for qid, _ in batch:
                    hits = results.get(qid, [])
                    if remove_query:
                        hits, removed = drop_self_hits(qid, hits, k)
                        report.removed_self += removed
                    if not hits:
                        report.no_hits.append(qid)
                        continue
                    yield qid, dict(hits)
                bar.update(task, advance=len(batch))

        report.lines = write_run(output, ranked(), tag)
        report.seconds = time.perf_counter() - started
    if report.no_hits:
        shown = ", ".join(report.no_hits[:5]) + (" ..." if len(report.no_hits) > 5 else "")
        warn(
            f"{len(report.no_hits)} of {len(queries)} queries retrieved nothing "
            f"(no query term in the index): {shown}"
        )
    return report
