"""Training groups from MS MARCO's ``qidpidtriples`` (ids only) with a collection and queries.

``qidpidtriples.train.full.2.tsv`` lines are ``qid<TAB>positive pid<TAB>negative pid``; the texts
live in ``collection.tsv`` (read through a :mod:`rankkit.docstore`, so a collection of millions of
passages is never loaded) and ``queries.train.tsv``. Each line becomes one group (one positive,
one negative), as :func:`rankkit.formats.groups.iter_groups` does for the text triples. A triple
whose query or passage has no text is an error naming its line: a silently shorter training set
would change what is trained.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Iterator, Mapping

from rankkit.docstore import DocStore, open_docstore
from rankkit.errors import InputError
from rankkit.files import PathLike, update_with_file, user_cache_root
from rankkit.formats.groups import Passage, TrainingGroup, iter_id_triples, write_groups
from rankkit.formats.sources import load_topics

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


def _digest(*paths: PathLike) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(str(path).encode("utf-8") + b"\0")
        if not Path(path).is_file():  # an irds: id or a BEIR folder: named, not hashed
            continue
        update_with_file(digest, path)
    return digest.hexdigest()[:16]


def materialize_id_triples(path: PathLike, collection: PathLike, queries: PathLike,
                           cache_dir: PathLike | None = None) -> Path:
    """Write the groups of a qidpidtriples file once, as rankkit JSONL in the cache, and return that file.

    ``rankkit train`` reads its ``--train`` files whole; a qidpidtriples file is turned into the
    groups file it stands for (named by the SHA-256 of the three inputs, so a changed input makes
    a new one) and trained on like any other, its fingerprint recorded in the checkpoint.
    """
    folder = Path(cache_dir) if cache_dir is not None else user_cache_root() / "triples"
    target = folder / f"{Path(path).name}.{_digest(path, collection, queries)}.groups.jsonl"
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    texts = load_topics(queries)
    with open_docstore(corpus=collection) as store:
        write_groups(target, groups_from_id_triples(path, store, texts))
    return target


__all__ = ["CHUNK_LINES", "groups_from_id_triples", "materialize_id_triples"]
