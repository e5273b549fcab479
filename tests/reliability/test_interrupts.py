"""SIGTERM, SIGKILL (and Ctrl-C) at several moments into fuse, validate --fix, mine, index --kind bm25.

Each case starts ``.venv/bin/rankkit`` as a child process on small data, waits for a moment (a
fixed delay, or until the command's temporary file or staging folder appears, so the signal lands
while the output is being written), then signals it. What must hold:

* the target is never partial: it is absent, still the old file, or the complete new one;
* after SIGTERM (exit 143) or SIGINT (exit 130) nothing but the inputs and the old target is left;
* after SIGKILL leftovers may exist (no code runs), but the next run of the same command removes
  them and leaves nothing but its finished output, identical to an uninterrupted run's.
"""

from __future__ import annotations

import gzip
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

from rankkit.files import TEMP_MARK

RANKKIT = str(Path(sys.executable).with_name("rankkit"))
CORPUS_SMALL = Path(__file__).parents[1] / "data" / "corpus_small"

Moment = Callable[[subprocess.Popen[bytes], Path], None]


def env_for(root: Path) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "RANKKIT_CACHE_DIR": str(root / "cache")}


def listing(folder: Path) -> dict[str, bytes | None]:
    """Every entry under ``folder``, hidden ones too, with file contents (None for folders)."""
    out: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames:
            out[os.path.relpath(os.path.join(dirpath, name), folder)] = None
        for name in filenames:
            path = os.path.join(dirpath, name)
            out[os.path.relpath(path, folder)] = Path(path).read_bytes()
    return out


def has_temporary(folder: Path) -> bool:
    """True once a rankkit temporary (file or folder) exists anywhere under ``folder``."""
    return any(TEMP_MARK in name for _, dirs, files in os.walk(folder) for name in (*dirs, *files))


def after(seconds: float) -> Moment:
    def wait(proc: subprocess.Popen[bytes], folder: Path) -> None:
        time.sleep(seconds)

    return wait


def when(predicate: Callable[[Path], bool], timeout: float = 60.0) -> Moment:
    """Wait until ``predicate(folder)`` (polled every 2 ms) or the process ends."""

    def wait(proc: subprocess.Popen[bytes], folder: Path) -> None:
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline:
            if predicate(folder):
                return
            time.sleep(0.002)

    return wait


def run(args: list[str], root: Path, code: int = 0) -> subprocess.CompletedProcess[bytes]:
    """Run ``rankkit ARGS`` to the end and check its exit code."""
    result = subprocess.run([RANKKIT, *args], env=env_for(root), capture_output=True, timeout=300)
    assert result.returncode == code, result.stderr.decode()
    return result


def interrupt(args: list[str], root: Path, moment: Moment, signum: int) -> int:
    """Start ``rankkit ARGS``, wait for ``moment``, send ``signum``; returns the exit code."""
    proc = subprocess.Popen([RANKKIT, *args], env=env_for(root), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    moment(proc, root)
    if proc.poll() is None:
        proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    assert b"Traceback" not in err, err.decode()
    return proc.returncode


def outside_cache(root: Path) -> dict[str, bytes | None]:
    # The docid table cache (RANKKIT_CACHE_DIR) may legitimately keep a finished table.
    return {name: data for name, data in listing(root).items() if name.split(os.sep)[0] != "cache"}


def check(
    args: list[str], root: Path, target: Path, moment: Moment, signum: int, expected: bytes, old: bytes | None,
    code: int = 0,
) -> None:
    """One interruption of ``rankkit ARGS`` writing ``target``, and the rerun after a SIGKILL."""
    if old is not None:
        target.write_bytes(old)
    inputs = outside_cache(root)
    finished = code
    code = interrupt(args, root, moment, signum)
    rel = os.path.relpath(target, root)
    if target.exists():  # never partial: the old target, or the complete new one
        assert target.read_bytes() in (old, expected), rel
    if signum != signal.SIGKILL:
        # -SIGTERM: the signal came before rankkit installed its handler (during imports, nothing written).
        assert code in (finished, 128 + signum, -signum), code
        leftovers = set(outside_cache(root)) - set(inputs) - {rel}
        assert not leftovers, leftovers  # SIGTERM and Ctrl-C remove everything they made
        assert not has_temporary(root), "temporary left after SIGTERM"
    else:
        assert code in (finished, -signal.SIGKILL), code
        run(args, root, finished)
        assert set(outside_cache(root)) - set(inputs) <= {rel}
        assert not has_temporary(root), "leftover of the killed run not removed by the next run"
        assert target.read_bytes() == expected


SIGNALS = [pytest.param(signal.SIGTERM, id="TERM"), pytest.param(signal.SIGKILL, id="KILL")]


def big_run(path: Path, queries: int, docs: int, tag: str, seed: int) -> None:
    import random

    rng = random.Random(seed)
    with open(path, "w") as out:
        for q in range(queries):
            for d in range(docs):
                out.write(f"q{q} Q0 d{rng.randrange(10**5)}-{d} {d + 1} {rng.random()!r} {tag}\n")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("runs")
    big_run(folder / "a.run", 300, 150, "a", 1)
    big_run(folder / "b.run", 300, 150, "b", 2)
    return folder


@pytest.fixture(scope="module")
def fused_reference(runs: Path, tmp_path_factory: pytest.TempPathFactory) -> bytes:
    root = tmp_path_factory.mktemp("ref")
    out = root / "fused.run"
    run(["fuse", "--method", "combsum", str(runs / "a.run"), str(runs / "b.run"), "-o", str(out)], root)
    return out.read_bytes()


@pytest.mark.parametrize("signum", [*SIGNALS, pytest.param(signal.SIGINT, id="INT")])
@pytest.mark.parametrize("moment", ["early", "writing"])
def test_fuse(moment: str, signum: int, runs: Path, fused_reference: bytes, tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    for name in ("a.run", "b.run"):
        shutil.copy(runs / name, root / name)
    target = root / "out" / "fused.run"
    target.parent.mkdir()
    args = ["fuse", "--method", "combsum", str(root / "a.run"), str(root / "b.run"), "-o", str(target)]
    wait = after(0.8) if moment == "early" else when(has_temporary)
    check(args, root, target, wait, signum, fused_reference, b"old run\n")


@pytest.mark.parametrize("signum", SIGNALS)
@pytest.mark.parametrize("moment", ["writing"])
def test_validate_fix(moment: str, signum: int, runs: Path, tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    messy = root / "messy.run.gz"
    # Reversed lines: every query's rank column contradicts its scores, so --fix has work to do.
    with gzip.open(messy, "wb") as out:
        out.write(b"".join(reversed((runs / "a.run").read_bytes().splitlines(keepends=True))))
    target = root / "fixed.run.gz"
    reference = tmp_path / "reference.run.gz"
    run(["validate", "-q", str(messy), "--fix", str(reference)], tmp_path, 1)
    args = ["validate", "-q", str(messy), "--fix", str(target)]
    check(args, root, target, when(has_temporary), signum, reference.read_bytes(), None, code=1)


@pytest.fixture(scope="module")
def mine_data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    """A run of 600 small-corpus passages for each of its 8 queries, and the groups mined from it."""
    folder = tmp_path_factory.mktemp("mine")
    corpus = [line.split("\t", 1)[0] for line in gzip.open(CORPUS_SMALL / "passages.tsv.gz", "rt")][:600]
    qids = [line.split("\t", 1)[0] for line in open(CORPUS_SMALL / "topics.tsv")]
    with open(folder / "run.txt", "w") as out:
        for qid in qids:
            out.writelines(f"{qid} Q0 {docid} {i + 1} {-i}.0 x\n" for i, docid in enumerate(corpus))
    reference = folder / "reference.jsonl"
    # In-process: `rankkit mine` loads torch through rankkit.training, paid once here, not per child.
    from rankkit.cli import main

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RANKKIT_CACHE_DIR", str(folder / "cache"))
        main(mine_args(folder / "run.txt", reference))
    return folder / "run.txt", reference.read_bytes()


def mine_args(run_file: Path, output: Path) -> list[str]:
    return ["mine", "--run", str(run_file), "--qrels", str(CORPUS_SMALL / "qrels.txt"),
            "--topics", str(CORPUS_SMALL / "topics.tsv"), "--corpus", str(CORPUS_SMALL / "passages.tsv.gz"),
            "--depth", "600", "--negatives", "30", "-o", str(output)]


# One combination: every `rankkit mine` child takes seconds to import torch (through rankkit.training);
# the docid table's own SIGKILL case is test_docid_table_kill below, without the CLI.
@pytest.mark.parametrize(("moment", "signum"), [pytest.param("writing", signal.SIGTERM, id="writing-TERM")])
def test_mine(moment: str, signum: int, mine_data: tuple[Path, bytes], tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    shutil.copy(mine_data[0], root / "run.txt")
    args = mine_args(root / "run.txt", root / "groups.jsonl")
    cache = root / "cache"  # RANKKIT_CACHE_DIR: the docid table is built here, never beside the corpus
    wait = when(lambda folder: any(TEMP_MARK in p.name for p in folder.iterdir()))
    check(args, root, root / "groups.jsonl", wait, signum, mine_data[1], None)
    if cache.exists():
        assert not has_temporary(cache), "docid table staging folder left behind"


@pytest.mark.parametrize(
    ("moment", "signum"),
    [pytest.param("converting", signal.SIGTERM, id="converting-TERM"),
     pytest.param("indexing", signal.SIGTERM, id="indexing-TERM"),
     pytest.param("indexing", signal.SIGKILL, id="indexing-KILL")],
)
def test_index_bm25(moment: str, signum: int, tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    target = root / "index"
    args = ["index", "--kind", "bm25", "--corpus", str(CORPUS_SMALL / "passages.tsv.gz"), "--index", str(target),
            "--threads", "1"]
    if moment == "converting":
        wait = when(lambda folder: any(TEMP_MARK in p.name for p in folder.iterdir()))
    else:
        wait = when(lambda folder: any((p / "index").exists() for p in folder.iterdir() if TEMP_MARK in p.name))
    inputs = outside_cache(root)  # the cache holds the --index lock (rankkit.files.locks)
    code = interrupt(args, root, wait, signum)
    assert not target.exists() or (target / "rankkit-index.json").is_file()  # never a half-built index
    if signum == signal.SIGTERM:
        assert code in (0, 128 + signal.SIGTERM, -signal.SIGTERM), code
        made = set(outside_cache(root)) - set(inputs)
        assert made <= ({"index"} | {p for p in made if p.startswith("index/")})
        assert not has_temporary(root)
    else:
        assert code in (0, -signal.SIGKILL), code
        run([*args, "--force"], root)
        assert not has_temporary(root), "staging folder of the killed build not removed"
        assert sorted(set(os.listdir(root)) - {"cache"}) == ["index"]
        assert json_counts(target) == 2013


def json_counts(index: Path) -> int:
    import json

    return int(json.loads((index / "rankkit-index.json").read_text())["counts"]["indexed"])


DOCSTORE_CHILD = """
import sys
from rankkit.cli import terminate_as_interrupt
from rankkit.docstore import open_docstore
try:
    with terminate_as_interrupt(), open_docstore(corpus=sys.argv[1]) as store:
        print(len(store))
except KeyboardInterrupt:
    sys.exit(143)
"""


@pytest.mark.parametrize("signum", SIGNALS)
def test_docid_table(signum: int, tmp_path: Path) -> None:
    """A docid table build killed half-way: its staging folder (in the cache, never beside the corpus)
    is removed by the next build, which leaves only the finished table."""
    root = tmp_path / "ws"
    root.mkdir()
    corpus = root / "corpus.tsv"
    corpus.write_text("".join(f"d{i}\tpassage number {i} " + "word " * 40 + "\n" for i in range(60000)))
    cache = root / "cache"
    proc = subprocess.Popen([sys.executable, "-c", DOCSTORE_CHILD, str(corpus)], env=env_for(root),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    when(lambda _: cache.exists() and has_temporary(cache))(proc, root)
    if proc.poll() is None:
        proc.send_signal(signum)
    proc.communicate(timeout=60)
    assert sorted(os.listdir(root)) == ["cache", "corpus.tsv"]  # nothing beside the corpus
    tables = cache / "docstore"
    if signum == signal.SIGTERM:
        assert not has_temporary(cache)
    elif proc.returncode == -signal.SIGKILL:
        assert has_temporary(cache)  # what the next build must recognise and remove
    again = subprocess.run([sys.executable, "-c", DOCSTORE_CHILD, str(corpus)], env=env_for(root),
                           capture_output=True, timeout=120)
    assert again.returncode == 0 and again.stdout.strip() == b"60000", again.stderr.decode()
    assert not has_temporary(cache), "staging folder of the killed build not removed"
    assert len(os.listdir(tables)) == 1
