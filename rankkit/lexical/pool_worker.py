"""One BM25 worker process of :mod:`rankkit.lexical.pool`: ``python -m rankkit.lexical.pool_worker FD``.

Reads its index, BM25 parameters and run settings, then batches of queries, from standard input and
writes each batch's run lines to the pipe ``FD`` (standard output is left to Java). A program of
its own, apart from the pool that starts it, so the pool needs nothing of the searcher it runs.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import signal
import sys
from typing import IO, Any

from rankkit.lexical.search import Bm25Searcher, run_block


def serve(index: str, params: Any, settings: tuple[int, int, bool, str], inbox: IO[bytes], outbox: IO[bytes]) -> None:
    """A worker: for each ``(position, [(qid, text)])`` read from ``inbox``, write ``(position, [(qid,
    run lines, line count, self-hit removed)])`` (``settings``: depth searched, k kept, remove_query, tag)."""
    depth, k, remove_query, tag = settings

    try:
        with contextlib.redirect_stderr(io.StringIO()):  # the parent already said what it opened
            searcher = Bm25Searcher(index, params)
        with searcher:
            while True:
                try:
                    position, batch = pickle.load(inbox)
                except EOFError:
                    return
                blocks = [(qid, *run_block(qid, searcher.search(text, depth), k, remove_query, tag))
                          for qid, text in batch]
                pickle.dump((position, blocks), outbox, protocol=pickle.HIGHEST_PROTOCOL)
                outbox.flush()
    except BaseException as err:  # noqa: BLE001 - reported by the parent, one line
        pickle.dump((-1, " ".join(str(err).split()) or type(err).__name__), outbox)
        outbox.flush()


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops its workers
    index_dir, bm25_params, block_settings = pickle.load(sys.stdin.buffer)
    with os.fdopen(int(sys.argv[1]), "wb") as channel:
        serve(index_dir, bm25_params, block_settings, sys.stdin.buffer, channel)
