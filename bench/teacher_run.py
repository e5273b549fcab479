"""Memory and speed of ``rankkit train --teacher RUN``'s teacher: the run as a dict of dicts vs as arrays.

Writes a synthetic teacher run (``--queries`` x ``--depth`` distinct docids, MS MARCO-like ids) and, each
way ``--rounds`` times in a fresh process, reads it and reports CPU seconds and peak RSS: ``dict`` is
``read_run`` plus each query's floor (what ``TeacherScores`` held before), ``table`` is
``TeacherRun.read``. Then times look-ups of groups of 8 (7 present, 1 absent) both ways and checks that
the scores are equal.

    OMP_NUM_THREADS=1 PYTHONPATH=$PWD python bench/teacher_run.py --queries 50000 --depth 100 --rounds 2
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def write_run(path: Path, queries: int, depth: int) -> None:
    rng = random.Random(1)
    with path.open("w") as out:
        for q in range(queries):
            qid = str(1000000 + q * 7)
            for rank, docid in enumerate(rng.sample(range(8_841_823), depth), start=1):
                out.write(f"{qid} Q0 {docid} {rank} {rng.uniform(-10, 15):.5f} ce\n")


def read_once(kind: str, path: str) -> None:
    """Child process: read the run one way, print pairs, CPU seconds and peak RSS."""
    import resource

    started = time.process_time()
    if kind == "dict":
        from rankkit.formats import read_run

        run = read_run(path)
        floors = {qid: min(docs.values()) - 1.0 for qid, docs in run.items()}
        pairs = sum(len(docs) for docs in run.values())
        assert len(floors) == len(run)
    else:
        from rankkit.training.teacher_run import TeacherRun

        pairs = len(TeacherRun.read(path))
    print(f"{kind}: {pairs:,} pairs, {time.process_time() - started:.1f} s CPU, "
          f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024:,} MB")


def look_ups(path: str) -> None:
    from rankkit.formats import read_run
    from rankkit.training.teacher_run import TeacherRun

    run = read_run(path)
    table = TeacherRun.from_mapping(run)
    floors = {qid: min(docs.values()) - 1.0 for qid, docs in run.items()}
    rng = random.Random(0)
    qids = list(run)
    probes = [(q, rng.sample(list(run[q]), 7) + ["absent"]) for q in (rng.choice(qids) for _ in range(20000))]

    def as_dict(qid: str, docids: list[str]) -> list[float]:
        docs, floor = run.get(qid, {}), floors.get(qid, 0.0)
        return [float(docs.get(d, floor)) for d in docids]

    for name, scores in (("dict", as_dict), ("table", table.scores)):
        started = time.perf_counter()
        for qid, docids in probes:
            scores(qid, docids)
        print(f"{name}: {(time.perf_counter() - started) / len(probes) * 1e6:.1f} us per group of 8")
    assert all(as_dict(q, d) == table.scores(q, d) for q, d in probes)
    print(f"scores equal on {len(probes):,} groups")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=50000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        read_once(*args.child)
        return
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "teacher.run"
        write_run(path, args.queries, args.depth)
        print(f"{path.stat().st_size / 1e6:.0f} MB, {args.queries * args.depth:,} lines")
        for _ in range(args.rounds):
            for kind in ("dict", "table"):
                subprocess.run([sys.executable, __file__, "--child", kind, str(path)], check=True)
        look_ups(str(path))


if __name__ == "__main__":
    main()
