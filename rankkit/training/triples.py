"""Training groups from MS MARCO's ``qidpidtriples`` (ids only) with a collection and queries.

``qidpidtriples.train.full.2.tsv`` lines are ``qid<TAB>positive pid<TAB>negative pid``; the texts
live in ``collection.tsv`` (read through a :mod:`rankkit.docstore`, so a collection of millions of
passages is never loaded) and ``queries.train.tsv``. Each line becomes one group (one positive,
one negative), as :func:`rankkit.formats.groups.iter_groups` does for the text triples. A triple
whose query or passage has no text is an error naming its line: a silently shorter training set
would change what is trained.

This is ``rankkit mine --triples``' conversion to groups with texts; ``rankkit train`` reads
qidpidtriples as they are (:mod:`rankkit.training.data`) and writes no converted copy.
"""

from __future__ import annotations

from typing import Iterator, Mapping

from rankkit.docstore import DocStore
from rankkit.errors import InputError
from rankkit.files import PathLike
from rankkit.formats.groups import Passage, TrainingGroup, iter_id_triples

#: Triples resolved per docstore lookup.
CHUNK_LINES = 4096


def groups_from_id_triples(path: PathLike, store: DocStore, queries: Mapping[str, str]) -> Iterator[TrainingGroup]:
    """Stream one :class:`TrainingGroup` per ``qid pid pid`` line of ``path``, texts from ``store`` and ``queries``."""
    chunk: list[tuple[int, str, str, str]] = []

    def flush() -> Iterator[TrainingGroup]:
        wanted = sorted({pid for _, _, pos, neg in chunk for pid in (pos, neg)})
        texts = store.get_many(wanted, missing="skip")
        for number, qid, pos, neg in chunk:
            if qid not in queries:
                raise InputError(path, number, f"query {qid!r} has no text in the queries")
            for pid in (pos, neg):
                if pid not in texts:
                    raise InputError(path, number, f"passage {pid!r} is not in {store.source}")
            yield TrainingGroup(qid, queries[qid], [Passage(pos, texts[pos], 1)], [Passage(neg, texts[neg], 0)])

    for row in iter_id_triples(path):
        chunk.append(row)
        if len(chunk) >= CHUNK_LINES:
            yield from flush()
            chunk = []
    if chunk:
        yield from flush()


__all__ = ["CHUNK_LINES", "groups_from_id_triples"]
