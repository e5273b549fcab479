"""A teacher run held as arrays: 16 bytes a (qid, docid) pair instead of a dict of dicts.

``rankkit train --teacher RUN`` (Margin-MSE, KL) looks up the teacher's score of every drawn candidate.
A run read into ``dict[qid, dict[docid, score]]`` costs ~100+ bytes a pair in Python objects: gigabytes
for a distillation run of MS MARCO's training queries (tens of millions of pairs), in every torchrun rank.
Here one streaming pass keeps, per pair, a 64-bit key of ``qid``/``docid`` (blake2b, so stable across
processes) and its float64 score, sorted by key; a look-up is a binary search. Scores are the run's own
float64 values, so training sees exactly what the dict gave it.

Two different pairs with the same 64-bit key (about 4e-5 at 40 million pairs) are not guessed at: the
pass finds equal keys and a second pass puts those pairs in an exact dict, or reports the run's
duplicate pair at its ``FILE:LINE`` (as :func:`rankkit.formats.read_run` does).
"""

from __future__ import annotations

import hashlib
from array import array
from typing import Callable, Iterable, Iterator, Mapping

import numpy as np

from rankkit.errors import InputError
from rankkit.files import PathLike
from rankkit.formats.runs import iter_run_scores

#: ``(line number or None, qid, docid, score)``: one pair of a run.
Pair = tuple[int | None, str, str, float]


def pair_key(qid: str, docid: str) -> int:
    """A stable 64-bit key of a (qid, docid) pair (a NUL cannot occur in either id: runs split on whitespace,
    and ids never hold NUL)."""
    return int.from_bytes(hashlib.blake2b(f"{qid}\0{docid}".encode("utf-8"), digest_size=8).digest(), "little")


class TeacherRun:
    """The scores of a run's (qid, docid) pairs, and each query's floor (its lowest score - 1).

    Build with :meth:`read` (a run file, streamed) or :meth:`from_mapping`.
    """

    def __init__(self, keys: np.ndarray, scores: np.ndarray, exact: dict[tuple[str, str], float],
                 floors: dict[str, float]) -> None:
        self.keys, self.values, self.exact, self.floors = keys, scores, exact, floors

    @classmethod
    def read(cls, path: PathLike) -> "TeacherRun":
        """The run file ``path`` in one pass (two when keys are equal); its errors as ``FILE:LINE``."""
        return cls._build(lambda: iter_run_scores(path),
                          lambda number, qid, docid: InputError(path, number,
                                                                f"duplicate document {docid!r} for query {qid!r}"))

    @classmethod
    def from_mapping(cls, run: Mapping[str, Mapping[str, float]]) -> "TeacherRun":
        """A run already in memory (``{qid: {docid: score}}``)."""
        def pairs() -> Iterator[Pair]:
            return ((None, qid, docid, float(score)) for qid, docs in run.items() for docid, score in docs.items())

        return cls._build(pairs, lambda number, qid, docid: ValueError(f"pair {qid!r}/{docid!r} given twice"))

    @classmethod
    def _build(cls, pairs: Callable[[], Iterable[Pair]],
               duplicate: Callable[[int | None, str, str], Exception]) -> "TeacherRun":
        keys, scores = array("Q"), array("d")
        floors: dict[str, float] = {}
        for _, qid, docid, score in pairs():
            keys.append(pair_key(qid, docid))
            scores.append(score)
            low = floors.get(qid)
            if low is None or score < low:
                floors[qid] = score
        floors = {qid: low - 1.0 for qid, low in floors.items()}
        key_array = np.frombuffer(keys, dtype=np.uint64) if keys else np.empty(0, dtype=np.uint64)
        order = np.argsort(key_array, kind="stable")
        sorted_keys = key_array[order]
        sorted_scores = (np.frombuffer(scores, dtype=np.float64) if scores else np.empty(0))[order]
        del keys, scores, key_array, order
        equal = np.nonzero(sorted_keys[1:] == sorted_keys[:-1])[0]
        exact: dict[tuple[str, str], float] = {}
        if equal.size:
            shared = np.unique(sorted_keys[equal])
            held = {int(k) for k in shared}
            for number, qid, docid, score in pairs():  # second pass: only the pairs behind equal keys
                if pair_key(qid, docid) in held:
                    if (qid, docid) in exact:
                        raise duplicate(number, qid, docid)
                    exact[(qid, docid)] = score
            keep = ~np.isin(sorted_keys, shared)
            sorted_keys, sorted_scores = sorted_keys[keep], sorted_scores[keep]
        return cls(np.ascontiguousarray(sorted_keys), np.ascontiguousarray(sorted_scores), exact, floors)

    def __len__(self) -> int:
        return int(self.keys.size) + len(self.exact)

    def qids(self) -> Iterable[str]:
        """The run's queries."""
        return self.floors.keys()

    def scores(self, qid: str, docids: Iterable[str]) -> list[float]:
        """The teacher's score of each of ``docids`` for ``qid``; absent pairs get the query's floor (0 for an
        absent query)."""
        docids = list(docids)
        if not docids:
            return []
        floor = self.floors.get(qid, 0.0)
        wanted = np.fromiter((pair_key(qid, d) for d in docids), dtype=np.uint64, count=len(docids))
        out = [floor] * len(docids)
        if self.keys.size:
            at = np.minimum(np.searchsorted(self.keys, wanted), self.keys.size - 1)
            found = self.keys[at] == wanted
            for i in np.nonzero(found)[0].tolist():
                out[i] = float(self.values[at[i]])
        if self.exact:
            for i, docid in enumerate(docids):
                score = self.exact.get((qid, docid))
                if score is not None:
                    out[i] = score
        return out
