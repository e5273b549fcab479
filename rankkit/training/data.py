"""Training files read from disk when a step draws them: memory that does not grow with the file.

``rankkit train`` used to parse every ``--train`` line into Python objects before the first step
(~1.9 KB a triple: ~60 GB for MS MARCO's ``triples.train.small``, in every torchrun rank). Now one
streaming pass per file builds an on-disk **group table** (the byte offsets of each group's line,
as the docid tables of :mod:`rankkit.docstore` do for corpora; :mod:`rankkit.training.group_table`),
and :class:`TrainingData` is a ``Sequence[TrainingGroup]`` whose item ``j`` reads and parses line ``j`` (two ``pread`` calls and
one JSON or TSV parse). What a step draws is what is read: each DDP rank and each ``--workers``
process reads only its own micro-batches' lines; sampling, shuffling, resume and DDP arithmetic
(:mod:`rankkit.training.sampling`) are unchanged, so a seed gives the same groups, hence the same
losses and weights, as the whole-file reader did.

Ids-only groups (``rankkit mine --ids-only``) and ``qidpidtriples`` take their texts from
``--collection`` (through its docid table) and ``--queries`` (:class:`TextSource`), looked up for
the candidates a step actually draws: no converted copy of the file is ever written.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, Iterable, Mapping, Protocol, Sequence, TypeVar, overload

import numpy as np

from rankkit.distributed import SINGLE, Dist
from rankkit.docstore import CorpusDocStore, MissingDocumentsError
from rankkit.errors import InputError, RankkitError
from rankkit.files import (
    is_stream,
)
from rankkit.formats.groups import TrainingGroup
from rankkit.formats.ids import docid_hash
from rankkit.formats.sources import load_topics, resolve_corpus

from rankkit.training.group_table import ID_SHAPES, GroupFile, ensure_table, fresh_header, needs_texts_error

def _sorted_hashes(keys: Iterable[str]) -> np.ndarray:
    return np.sort(np.fromiter((docid_hash(k) for k in keys), dtype=np.uint64))


def _absent(chunk: np.ndarray, known: np.ndarray) -> np.ndarray:
    """Positions of ``chunk`` whose hash is not in the sorted ``known``."""
    if not known.size:
        return np.arange(chunk.size)
    at = np.minimum(np.searchsorted(known, chunk), known.size - 1)
    return np.nonzero(known[at] != chunk)[0]


class DrawnCandidates(Protocol):
    """What :meth:`TextSource.fill` completes: a frozen dataclass of drawn candidates whose texts may be ``None``
    (:class:`rankkit.training.sampling.SampledGroup`)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]  # a dataclass, for dataclasses.replace

    @property
    def qid(self) -> str: ...
    @property
    def query(self) -> str | None: ...
    @property
    def docids(self) -> tuple[str, ...]: ...
    @property
    def texts(self) -> tuple[str | None, ...]: ...


Drawn = TypeVar("Drawn", bound=DrawnCandidates)


class TextSource:
    """Texts of ids-only groups: passages from ``--collection`` (its docid table), queries from ``--queries``.

    The collection's docid table is opened once per process (``--workers`` processes are forks,
    and a file position must not be shared between them).
    """

    def __init__(self, collection: Path | None, queries: Path | None) -> None:
        self.collection = resolve_corpus(collection) if collection is not None else None
        self.queries_path = queries
        self.queries: Mapping[str, str] | None = load_topics(queries) if queries is not None else None
        self._store: CorpusDocStore | None = None
        self._pid = 0
        if self.collection is not None:
            self.store()  # build the docid table now, not at the first step

    def store(self) -> CorpusDocStore:
        if self.collection is None:
            raise RankkitError("ids-only training groups need --collection")
        if self._store is None or self._pid != os.getpid():
            self._store, self._pid = CorpusDocStore(Path(self.collection)), os.getpid()
        return self._store

    def check(self, file: GroupFile) -> None:
        """Every qid of ``file`` has a query text and every docid a passage (vectorised over the table's hashes)."""
        if not file.ids_only:
            return
        if self.collection is None or self.queries is None:
            raise needs_texts_error(file)
        known = _sorted_hashes(self.queries)
        for position, chunk in file.hashes("qids"):
            missing = _absent(chunk, known)
            if missing.size:
                group = file[position + int(missing[0])]
                raise InputError(file.path, file.place(position + int(missing[0]))[2],
                                 f"query {group.qid!r} has no text in {self.queries_path}")
        store = self.store()
        for position, chunk in file.hashes("docids"):
            missing = np.nonzero(~store.holds(chunk))[0]
            if missing.size:
                index = file.group_of_candidate(position + int(missing[0]))
                group, line = file[index], file.place(index)[2]
                held = store.get_many([c.docid for c in group.pos + group.neg], missing="skip")
                absent = next(c.docid for c in group.pos + group.neg if c.docid not in held)
                raise InputError(file.path, line, f"passage {absent!r} is not in {store.source}")

    def fill(self, sampled: Sequence[Drawn]) -> list[Drawn]:
        """``sampled`` with every missing query and passage text looked up (one sweep of the collection)."""
        wanted = [d for s in sampled for d, t in zip(s.docids, s.texts) if t is None]
        if not wanted and all(s.query is not None for s in sampled):
            return list(sampled)
        try:
            texts = self.store().get_many(wanted) if wanted else {}
        except MissingDocumentsError as err:
            raise RankkitError(f"{err} (the collection changed since training started?)") from None
        out = []
        for s in sampled:
            query = s.query if s.query is not None else self.query(s.qid)
            out.append(replace(s, query=query, texts=tuple(t if t is not None else texts[d]
                                                           for d, t in zip(s.docids, s.texts))))
        return out

    def query(self, qid: str) -> str:
        if self.queries is None:
            raise RankkitError("ids-only training groups need --queries")
        if qid not in self.queries:
            raise RankkitError(f"query {qid!r} has no text in {self.queries_path}")
        return self.queries[qid]

    def fill_group(self, group: TrainingGroup) -> TrainingGroup:
        """A whole group with its texts (dev groups, which are evaluated on every candidate)."""
        if not group.ids_only:
            return group
        members = group.pos + group.neg
        texts = self.store().get_many([c.docid for c in members])
        return TrainingGroup(group.qid, self.query(group.qid), [replace(p, text=texts[p.docid]) for p in group.pos],
                             [replace(n, text=texts[n.docid]) for n in group.neg])

    def close(self) -> None:
        if self._store is not None and self._pid == os.getpid():
            self._store.close()
        self._store = None


class TrainingData(Sequence[TrainingGroup]):
    """The groups of every ``--train`` file in order, read when drawn; texts of ids-only ones from ``texts``."""

    def __init__(self, files: Sequence[GroupFile], texts: TextSource | None = None) -> None:
        self.files = list(files)
        self.texts = texts
        sizes = np.array([len(f) for f in self.files], dtype=np.int64)
        self._ends = np.cumsum(sizes)
        self._starts = self._ends - sizes

    @property
    def records(self) -> list[dict[str, Any]]:
        """A fingerprint record per file (``rankkit.json``'s ``data.train``; resume checks the SHA-256s)."""
        out = []
        for f in self.files:
            record = f.record
            if f.ids_only and self.texts is not None:
                record.update(collection=str(self.texts.collection), queries=str(self.texts.queries_path))
            out.append(record)
        return out

    @property
    def longest(self) -> int:
        """The most candidates any group holds."""
        return max((int(f.header["longest"]) for f in self.files), default=0)

    @property
    def all_scored(self) -> bool:
        """Every candidate of every group carries a score (teacher lists)."""
        return all(bool(f.header["all_scored"]) for f in self.files)

    def __len__(self) -> int:
        return int(self._ends[-1]) if self.files else 0

    @overload
    def __getitem__(self, index: int) -> TrainingGroup: ...

    @overload
    def __getitem__(self, index: slice) -> list[TrainingGroup]: ...

    def __getitem__(self, index: int | slice) -> TrainingGroup | list[TrainingGroup]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        index = int(index)
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        f = int(np.searchsorted(self._ends, index, side="right"))
        return self.files[f][index - int(self._starts[f])]

    def missing_qids(self, known: Iterable[str]) -> tuple[int, str | None]:
        """How many groups have a qid not in ``known``, and the first such qid."""
        keys = _sorted_hashes(known)
        count, first = 0, None
        for f in self.files:
            for position, chunk in f.hashes("qids"):
                absent = _absent(chunk, keys)
                if absent.size and first is None:
                    first = f[position + int(absent[0])].qid
                count += int(absent.size)
        return count, first

    def close(self) -> None:
        for f in self.files:
            f.close()
        if self.texts is not None:
            self.texts.close()


def open_training_data(paths: Sequence[Path], *, collection: Path | None = None, queries: Path | None = None,
                       dist: Dist = SINGLE, cache_dir: Path | None = None) -> TrainingData:
    """The ``--train`` files as one lazily read :class:`TrainingData`.

    Under torchrun, local rank 0 builds the tables that are missing (the training files' and the
    collection's docid table) while the other ranks wait, then every rank opens them.
    """
    if dist.local_rank == 0:
        shapes = [(fresh_header(ensure_table(Path(path), cache_dir), Path(path)) or {}).get("shape")
                  for path in paths if not is_stream(path) or Path(path).is_file()]
        if collection is not None and any(shape in ID_SHAPES for shape in shapes):
            CorpusDocStore(Path(resolve_corpus(collection))).close()  # the collection's docid table too, once
    dist.barrier()
    files: list[GroupFile] = []
    try:
        for path in paths:
            files.append(GroupFile.open(Path(path), cache_dir))
        needs_texts = [f for f in files if f.ids_only]
        if (collection is not None or queries is not None) and not needs_texts:
            raise RankkitError("--collection and --queries give the texts of qidpidtriples and ids-only groups "
                               "(rankkit mine --ids-only) among the --train files; none was given")
        texts = None
        if needs_texts:
            if collection is None or queries is None:
                raise needs_texts_error(needs_texts[0])
            texts = TextSource(collection, queries)
            for f in needs_texts:
                texts.check(f)
        return TrainingData(files, texts)
    except BaseException:
        for f in files:
            f.close()
        raise
