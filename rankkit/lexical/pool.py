"""BM25 over many queries in worker processes: ``rankkit retrieve --model bm25 --threads N``.

Searching is Java (and runs in parallel on threads, :meth:`~rankkit.lexical.search.Bm25Searcher.iter_search`),
but turning each query's hits into Python values and run lines costs about as much again under
the GIL, so threads in one process stop scaling near 1.3x. Here each of N worker processes
(``python -m rankkit.lexical.pool_worker``, each with its own JVM and searcher) searches batches of
queries and sends back their formatted run lines; the parent only writes them, in query order. Results are identical
to one process (each query is searched the same way; the run is written in the topics' order).
At most two batches per worker are in flight, so memory holds a few hundred queries' hits, not the
run. Workers are separate programs, not ``multiprocessing`` children (a JVM does not survive a
``fork``, and ``spawn`` would re-import the caller's main script); they ignore Ctrl-C (the parent
stops them), and a worker's error is raised in the parent as one line.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from rankkit.errors import RankkitError

#: Queries a worker searches per batch.
BATCH = 32
#: Fewer queries than this are searched in one process (a worker's start, ~2 s of Python and JVM, would not pay off).
MIN_QUERIES = 500
#: A worker's JVM heap unless ``RANKKIT_JAVA_OPTS`` sets one: it holds a searcher and one query's hits.
WORKER_HEAP = "-Xmx1g"
#: Below this many queries a worker, its JVM compiles with C1 only: C2's compilation costs each JVM
#: ~3-5 s of CPU that a short run does not earn back (measured on 1M passages: 1,000 queries x k 1000
#: in one worker 11.2 s CPU with C1 only, 11.7 s with C2; 3,000 queries 27.8 s vs 23.0 s).
C2_FROM_QUERIES = 1500


class _Worker:
    """One ``python -m rankkit.lexical.pool_worker`` process and the thread reading its results."""

    def __init__(self, number: int, index: Path, params: Any, settings: tuple[int, int, bool, str],
                 results: "queue.Queue[Any]", short: bool = False) -> None:
        root = str(Path(__file__).resolve().parents[2])  # the parent's rankkit (rankkit/lexical/pool.py), whatever is installed
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])}
        options = env.get("RANKKIT_JAVA_OPTS", "").split()
        if not any(o.startswith("-Xmx") for o in options):
            options.append(WORKER_HEAP)
        if short and not any("Tiered" in o for o in options):
            options.append("-XX:TieredStopAtLevel=1")
        env["RANKKIT_JAVA_OPTS"] = " ".join(options)
        # Results come back on a pipe of their own: Java may print to standard output.
        read_end, write_end = os.pipe()
        try:
            self.process = subprocess.Popen([sys.executable, "-m", "rankkit.lexical.pool_worker", str(write_end)],
                                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env,
                                            pass_fds=(write_end,))
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)
        assert self.process.stdin is not None
        self.inbox: IO[bytes] = self.process.stdin
        pickle.dump((str(index), params, settings), self.inbox)
        self.inbox.flush()
        self.number = number
        self.outstanding = 0
        self.reader = threading.Thread(target=self._read, args=(os.fdopen(read_end, "rb"), results), daemon=True)
        self.reader.start()

    def _read(self, stream: IO[bytes], results: "queue.Queue[Any]") -> None:
        with stream:
            while True:
                try:
                    position, value = pickle.load(stream)
                except (EOFError, OSError, pickle.UnpicklingError):
                    results.put((self.number, -2, None))
                    return
                results.put((self.number, position, value))

    def send(self, position: int, batch: list[tuple[str, str]]) -> None:
        pickle.dump((position, batch), self.inbox, protocol=pickle.HIGHEST_PROTOCOL)
        self.inbox.flush()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.inbox.close()

    def stop(self) -> None:
        self.close()
        if self.process.poll() is None:
            self.process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(10)


def iter_blocks(index: Path, params: Any, queries: Iterable[tuple[str, str]], depth: int, k: int,
                remove_query: bool, tag: str, workers: int, *, count: int | None = None
                ) -> Iterator[tuple[str, str, int, bool]]:
    """``(qid, run lines, line count, self-hit removed)`` of each ``(qid, query)`` in order, searched
    (``depth`` hits) and formatted (top ``k``, :func:`~rankkit.lexical.search.run_block`) by ``workers`` processes.

    ``count`` (the number of queries, when known) picks the workers' JIT (:data:`C2_FROM_QUERIES`).
    """
    results: queue.Queue[Any] = queue.Queue()
    settings = (int(depth), int(k), bool(remove_query), str(tag))
    short = count is not None and count < C2_FROM_QUERIES * workers
    pool = [_Worker(n, Path(index).resolve(), params, settings, results, short) for n in range(workers)]
    source = iter(queries)
    sent = received = 0
    waiting: dict[int, list[tuple[str, str, int, bool]]] = {}
    ended = False

    def send(worker: _Worker) -> bool:
        nonlocal sent, ended
        batch = [item for _, item in zip(range(BATCH), source)]
        if not batch:
            if not ended:
                ended = True
                for each in pool:
                    each.close()  # end of input: workers exit when their pipe closes
            return False
        worker.send(sent, batch)
        worker.outstanding += 1
        sent += 1
        return True

    try:
        for worker in pool:
            for _ in range(2):
                send(worker)
        while received < sent:
            while received not in waiting:
                number, position, value = results.get()
                if position == -1:
                    raise RankkitError(value)
                worker = pool[number]
                if position == -2:  # its result pipe closed: fine once it has answered everything
                    if worker.process.wait() != 0 or worker.outstanding:
                        raise RankkitError(f"a BM25 search process ended unexpectedly (exit status "
                                           f"{worker.process.returncode}; out of memory?)")
                    continue
                worker.outstanding -= 1
                waiting[position] = value
                send(worker)
            yield from waiting.pop(received)
            received += 1
    finally:
        for worker in pool:
            worker.stop()
