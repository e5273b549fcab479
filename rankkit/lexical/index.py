"""``rankkit index --kind bm25``: a Lucene index built by Anserini's own ``IndexCollection``.

The corpus (any format :func:`rankkit.formats.iter_corpus` reads) is streamed once into
Pyserini's JsonCollection shape (``{"id", "contents"}`` lines, one file per indexing thread, in a
staging folder beside the target), validated on the way (malformed line -> ``file:line``, duplicate
docid -> error), then indexed by ``io.anserini.index.IndexCollection`` with the raw documents
stored (so later stages can fetch passage text) and, with ``docvectors=True``, the document
vectors RM3 needs. The index is built in the staging folder and renamed into place at the end,
so an interrupted build never leaves a half-built index behind.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from array import array
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import IO, Any

import numpy as np

from rankkit.console import log, progress_bar
from rankkit.formats.ids import docid_hash
from rankkit.errors import InputError, RankkitError
from rankkit.files import PathLike, staging_dir
from rankkit.files import remove_tree as _remove_tree
from rankkit.formats.corpus import count_documents, iter_corpus
from rankkit.lexical import java
from rankkit.indexes import MANIFEST_NAME, is_empty_dir, new_manifest, write_manifest

ANALYZER = "Anserini default: Lucene English analyzer, Porter stemmer, Lucene's English stopwords"


@dataclass(frozen=True)
class IndexReport:
    """What a build did: documents read from the corpus and Anserini's counters."""

    index: Path
    documents: int
    indexed: int
    empty: int
    skipped: int
    errors: int
    convert_seconds: float
    index_seconds: float

    @property
    def seconds(self) -> float:
        """Total build time."""
        return self.convert_seconds + self.index_seconds


def default_threads() -> int:
    """Indexing/search threads when none are given: the CPU cores available to this process."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def check_target(index_dir: Path, force: bool) -> None:
    """Refuse to overwrite a non-empty folder unless ``force``, and never replace a non-index folder."""
    if not index_dir.exists():
        return
    if not index_dir.is_dir():
        raise RankkitError(f"index {index_dir} exists and is not a directory")
    if is_empty_dir(index_dir):
        return
    if not force:
        raise RankkitError(f"index directory {index_dir} exists and is not empty; pass --force to replace it")
    if not (index_dir / MANIFEST_NAME).is_file():
        # --force replaces an index, never an arbitrary folder (it could hold the corpus itself).
        raise RankkitError(
            f"{index_dir} is not empty and not a rankkit index; refusing to replace it even with --force"
        )


def convert_corpus(corpus: Path, collection_dir: Path, parts: int) -> int:
    """Stream ``corpus`` into ``parts`` JsonCollection files round-robin; returns the document count.

    Round-robin keeps every part the same size, so each of Anserini's indexing threads (one per
    file) has the same amount of work. Duplicate docids raise :class:`InputError`.
    """
    outputs: list[IO[str]] = [
        open(collection_dir / f"part-{i:05d}.jsonl", "w", encoding="utf-8", newline="\n")
        for i in range(parts)
    ]
    keys, lines = array("Q"), array("Q")
    count = 0
    try:
        with progress_bar("doc") as bar:
            # One quick counting pass gives the reading step a total and an ETA too (not for a pipe: read once).
            total = count_documents(corpus) if corpus.is_file() else None
            task = bar.add_task(f"reading {corpus.name}", total=total)
            for doc in iter_corpus(corpus):
                outputs[count % parts].write(
                    json.dumps({"id": doc.docid, "contents": doc.contents}, ensure_ascii=False) + "\n"
                )
                keys.append(docid_hash(doc.docid))
                lines.append(doc.line)
                count += 1
                if count % 5000 == 0:
                    bar.update(task, completed=count)
            bar.update(task, completed=count)
    finally:
        for out in outputs:
            out.close()
    _check_unique_docids(corpus, np.frombuffer(keys, dtype=np.uint64), np.frombuffer(lines, dtype=np.uint64))
    return count


def _check_unique_docids(corpus: Path, keys: np.ndarray, lines: np.ndarray) -> None:
    """Raise on a repeated docid: Anserini would index both copies and runs would show it twice."""
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    same = np.nonzero(sorted_keys[1:] == sorted_keys[:-1])[0]
    if same.size == 0:
        return
    # Equal 64-bit hashes: almost surely a real duplicate, but compare the docids to be exact.
    suspects = set(np.unique(np.concatenate([order[same], order[same + 1]])).tolist())
    wanted_lines = {int(lines[i]) for i in suspects}
    first_line: dict[str, int] = {}
    for doc in iter_corpus(corpus):
        if doc.line in wanted_lines:
            if doc.docid in first_line:
                raise InputError(
                    corpus,
                    doc.line,
                    f"duplicate document id {doc.docid!r} (first on line {first_line[doc.docid]})",
                )
            first_line[doc.docid] = doc.line


def run_index_collection(
    collection_dir: Path, index_dir: Path, *, threads: int, docvectors: bool, documents: int
) -> dict[str, int]:
    """Run Anserini's ``IndexCollection`` on a JsonCollection folder; returns its counters.

    The Java call runs in a worker thread (pyjnius releases the GIL) so this thread can show
    Anserini's own counters as a progress bar.
    """
    args = java.autoclass("io.anserini.index.IndexCollection$Args")()
    args.input = str(collection_dir)
    args.index = str(index_dir)
    args.collectionClass = "JsonCollection"
    args.generatorClass = "DefaultLuceneDocumentGenerator"
    args.threads = int(threads)
    args.storeRaw = True
    args.storeDocvectors = bool(docvectors)
    args.quiet = True
    indexer = java.autoclass("io.anserini.index.IndexCollection")(args)
    counters = indexer.getCounters()
    failure: list[BaseException] = []

    def work() -> None:
        try:
            indexer.run()
        except BaseException as err:  # reported on the calling thread
            failure.append(err)
        finally:
            import jnius

            jnius.detach()  # a thread that touched Java must detach before it ends

    worker = threading.Thread(target=work, name="anserini-index", daemon=True)

    def done() -> int:
        return int(
            counters.indexed.get()
            + counters.empty.get()
            + counters.unindexable.get()
            + counters.skipped.get()
            + counters.errors.get()
        )

    with progress_bar("doc") as bar:
        task = bar.add_task("indexing (Anserini)", total=documents)
        worker.start()
        while worker.is_alive():
            worker.join(0.25)
            bar.update(task, completed=done())
        bar.update(task, completed=done())
    if failure:
        message = " ".join(str(failure[0]).split())
        raise RankkitError(f"Anserini indexing failed: {message[:300]}")
    return {
        "indexed": int(counters.indexed.get()),
        "empty": int(counters.empty.get()),
        "skipped": int(counters.skipped.get() + counters.unindexable.get()),
        "errors": int(counters.errors.get()),
    }


def remove_tree(folder: Path, attempts: int = 100) -> None:
    """Remove ``folder`` even while an interrupted Anserini thread is still writing into it.

    After an interrupt the Java indexing thread keeps running for a moment; a single rmtree can
    race with a file it creates. Once the folder is gone, its writes fail and it stops.
    """
    _remove_tree(folder, attempts)


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def build_bm25_index(
    corpus: PathLike,
    index_dir: PathLike,
    *,
    threads: int | None = None,
    docvectors: bool = False,
    force: bool = False,
) -> IndexReport:
    """Index ``corpus`` for BM25 into ``index_dir`` (see the module docstring); returns the counts."""
    corpus, index_dir = Path(corpus), Path(index_dir)
    if not corpus.exists():
        raise InputError(corpus, None, "no such file")
    if corpus.is_dir():
        raise InputError(corpus, None, "is a directory, expected a corpus file")
    check_target(index_dir, force)
    # 0 is refused, not read as "all cores": only None (option not given) means the default.
    threads = default_threads() if threads is None else threads
    if threads < 1:
        raise RankkitError(f"--threads must be at least 1, got {threads}")
    java.start_jvm()  # fail fast (one line) before reading a large corpus
    # The staging folder carries rankkit's temporary mark and a lock: a build killed with SIGKILL
    # leaves it behind, and the next build of the same index removes it.
    with staging_dir(index_dir.resolve()) as staging:
        collection = staging / "collection"
        collection.mkdir()
        started = time.perf_counter()
        documents = convert_corpus(corpus, collection, threads)
        converted = time.perf_counter()
        log(f"read {documents:,} documents from {corpus} in {converted - started:.1f} s; indexing")
        built = staging / "index"
        counts = run_index_collection(
            collection, built, threads=threads, docvectors=docvectors, documents=documents
        )
        finished = time.perf_counter()
        home, version = java.check_java()
        write_manifest(
            built,
            new_manifest(
                "bm25",
                corpus,
                {"threads": threads, "docvectors": bool(docvectors), "store_raw": True, "analyzer": ANALYZER},
                counts={"documents": documents, **counts},
                seconds={"convert": round(converted - started, 3), "index": round(finished - converted, 3)},
                software={
                    "anserini": java.anserini_version(),
                    "pyserini": _version("pyserini"),
                    "java": version,
                },
            ),
        )
        shutil.rmtree(collection)
        if index_dir.exists():
            os.replace(
                index_dir, staging / "replaced"
            )  # checked above: empty, or a rankkit index with --force
        os.replace(built, index_dir)
    return IndexReport(
        index_dir,
        documents,
        counts["indexed"],
        counts["empty"],
        counts["skipped"],
        counts["errors"],
        converted - started,
        finished - converted,
    )


def index_options(manifest: dict[str, Any]) -> dict[str, Any]:
    """The build options recorded in a manifest (empty if absent)."""
    options = manifest.get("options")
    return options if isinstance(options, dict) else {}


def lucene_index_options(index_dir: PathLike) -> dict[str, Any]:
    """What a Lucene index built elsewhere (Pyserini, Anserini; no manifest) holds, read from its field
    infos: ``docvectors`` (term vectors on ``contents``, which RM3 needs) and ``store_raw`` (a ``raw``
    field, the text rankkit re-ranks from)."""
    java.start_jvm()
    directory = java.autoclass("org.apache.lucene.store.FSDirectory").open(
        java.autoclass("java.io.File")(str(Path(index_dir).resolve())).toPath())
    try:
        reader = java.autoclass("org.apache.lucene.index.DirectoryReader").open(directory)
    except Exception as err:  # a Java IOException for a damaged or half-written index
        raise InputError(index_dir, None, f"not a readable Lucene index ({' '.join(str(err).split())[:200]})") from None
    try:
        infos = java.autoclass("org.apache.lucene.index.FieldInfos").getMergedFieldInfos(reader)
        contents = infos.fieldInfo("contents")
        # Lucene 9 names it hasVectors(), Lucene 10 hasTermVectors().
        vectors = None if contents is None else getattr(contents, "hasTermVectors", None) or contents.hasVectors
        return {"docvectors": bool(vectors is not None and vectors()),
                "store_raw": infos.fieldInfo("raw") is not None, "documents": int(reader.numDocs())}
    finally:
        reader.close()
        directory.close()


def resolved_options(index_dir: PathLike, manifest: dict[str, Any]) -> dict[str, Any]:
    """The build options of a BM25 index: recorded in rankkit's manifest, or read from a foreign index."""
    if manifest.get("foreign") == "lucene":
        return lucene_index_options(index_dir)
    return index_options(manifest)
