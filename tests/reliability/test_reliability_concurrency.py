"""Two rankkit processes on one shared resource never corrupt each other and never crash: one waits
(caches) or one is refused with a line (outputs), and the survivor's result equals a lone run's
(docs/RELIABILITY.md, "Two runs at once"). One test per resource: a run output, an index folder,
the docid-table cache, the export cache, a training folder.

Where a race would make the test flaky, the "other process" holds the resource's lock from this
test process (``flock`` locks belong to an open file, so the command, in-process or in a child,
meets it exactly as it would meet another rankkit process).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest
from test_interrupts import RANKKIT, big_run, env_for, has_temporary
from training_helpers import documents, write_corpus, write_groups, write_topics

from rankkit.files import exclusive
from rankkit.formats import write_run

CHECKPOINTS = Path(__file__).parents[1] / "data" / "checkpoints-v0.1.0"


def start(args: list[Any], root: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([RANKKIT, *map(str, args)], env=env_for(root), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    _, err = proc.communicate(timeout=300)
    assert "Traceback" not in err, err
    return proc.returncode, err


def test_two_runs_writing_one_output(tmp_path: Path) -> None:
    """Two ``fuse`` into one file at once: both finish, the file is one complete run (a lone run's)."""
    big_run(tmp_path / "a.run", 300, 150, "a", 1)
    big_run(tmp_path / "b.run", 300, 150, "b", 2)
    args = ["fuse", "--method", "combsum", tmp_path / "a.run", tmp_path / "b.run", "-o"]
    lone = tmp_path / "lone.run"
    assert finish(start([*args, lone], tmp_path))[0] == 0
    target = tmp_path / "out" / "fused.run"
    procs = [start([*args, target], tmp_path) for _ in range(2)]
    assert [finish(p)[0] for p in procs] == [0, 0]
    assert target.read_bytes() == lone.read_bytes()
    assert not has_temporary(tmp_path / "out")


def dense_args(corpus: Path, index: Path) -> list[Any]:
    return ["index", "--kind", "dense", "--model", "repbert", "--checkpoint", CHECKPOINTS / "repbert", "--corpus",
            corpus, "--index", index, "--chunk-size", 100]


def test_two_builds_of_one_index_folder(cli: Callable[..., Any], tmp_path: Path) -> None:
    """A second ``index`` into a folder being built is refused in one line, before writing anything;
    two started together leave the index a lone build makes."""
    corpus = write_corpus(tmp_path / "corpus.jsonl", extra=300)
    lone = tmp_path / "lone"
    assert cli(*dense_args(corpus, lone)).code == 0
    index = tmp_path / "ix"
    with exclusive(index, "--index", wait=False):  # another process building it
        result = cli(*dense_args(corpus, index))
    lines = result.stderr.strip().splitlines()
    assert result.code == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith(f"rankkit: error: --index {index} is in use by another rankkit process"), lines[0]
    assert not index.exists()
    procs = [start(dense_args(corpus, index), tmp_path) for _ in range(2)]
    for code, err in map(finish, procs):  # both built one after the other, or the second was refused
        assert code == 0 or (code == 2 and "is in use by another rankkit process" in err), err
    for name in ("index.faiss", "docids.txt"):
        assert (index / name).read_bytes() == (lone / name).read_bytes(), name
    assert not has_temporary(index)


def test_a_merge_into_a_busy_folder_is_refused(cli: Callable[..., Any], tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus.jsonl", extra=100)
    shards = []
    for i in range(2):
        shards.append(tmp_path / f"s{i}")
        assert cli(*dense_args(corpus, shards[-1]), "--shard", f"{i}/2").code == 0
    with exclusive(tmp_path / "ix", "--index", wait=False):
        result = cli("index", "--merge", *shards, "--index", tmp_path / "ix")
    assert result.code == 2 and "is in use by another rankkit process" in result.stderr, result.stderr


DOCSTORE_CHILD = """
import sys
from rankkit.docstore import open_docstore
with open_docstore(corpus=sys.argv[1]) as store:
    print(len(store), store.get_many(["d7"])["d7"])
"""


def test_two_processes_building_one_docid_table(tmp_path: Path) -> None:
    """The docid-table cache: a process that finds the table being built waits, then uses it (before:
    the second build moved the first one's table away while it was being opened)."""
    corpus = tmp_path / "corpus.tsv"
    corpus.write_text("".join(f"d{i}\tpassage number {i} " + "word " * 40 + "\n" for i in range(60000)))
    children = [subprocess.Popen([sys.executable, "-c", DOCSTORE_CHILD, str(corpus)], env=env_for(tmp_path),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outputs = [child.communicate(timeout=300) for child in children]
    for child, (out, err) in zip(children, outputs):
        assert child.returncode == 0 and "Traceback" not in err, err
        assert out.strip() == "60000 passage number 7 " + "word " * 39 + "word"
    assert len(list((tmp_path / "cache" / "docstore").iterdir())) == 1
    assert not has_temporary(tmp_path / "cache")


def test_a_docid_table_being_built_is_waited_for(tmp_path: Path) -> None:
    from rankkit.docstore.corpus import table_locations

    corpus = tmp_path / "corpus.tsv"
    corpus.write_text("".join(f"d{i}\tpassage {i}\n" for i in range(100)))
    env = env_for(tmp_path)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RANKKIT_CACHE_DIR", env["RANKKIT_CACHE_DIR"])
        target = table_locations(corpus, None)[0]
        with exclusive(target, "the docid table", wait=True):
            child = subprocess.Popen([sys.executable, "-c", DOCSTORE_CHILD, str(corpus)], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(3.0)
            assert child.poll() is None  # waiting for the lock, not building beside it
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0 and out.startswith("100 "), err
    assert "waiting for another rankkit process" in err


def onnx_rerank(root: Path, checkpoint: Path, out: Path) -> list[Any]:
    return ["rerank", "--model", "mono", "--checkpoint", checkpoint, "--run", root / "first.run", "--topics",
            root / "topics.tsv", "--corpus", root / "corpus.jsonl", "--backend", "onnx", "-o", out, "--device", "cpu"]


def test_two_processes_sharing_one_export_cache(cli: Callable[..., Any], tmp_path: Path) -> None:
    """Two ``rerank --backend onnx`` of one checkpoint at once: one exports while the other waits,
    then reuses it; both runs equal a lone run's and the cache holds one export and its record."""
    docids = sorted(documents())
    write_run(tmp_path / "first.run", {f"t{i}": {d: float(k) for k, d in enumerate(docids)} for i in range(12)}, "x")
    write_corpus(tmp_path / "corpus.jsonl")
    write_topics(tmp_path / "topics.tsv")
    lone = tmp_path / "lone"
    shutil.copytree(CHECKPOINTS / "mono", lone)
    assert cli(*onnx_rerank(tmp_path, lone, tmp_path / "lone.run")).code == 0
    shared = tmp_path / "shared"
    shutil.copytree(CHECKPOINTS / "mono", shared)
    procs = [start(onnx_rerank(tmp_path, shared, tmp_path / f"out{i}.run"), tmp_path) for i in range(2)]
    assert [finish(p)[0] for p in procs] == [0, 0]
    expected = (tmp_path / "lone.run").read_bytes()
    assert (tmp_path / "out0.run").read_bytes() == expected == (tmp_path / "out1.run").read_bytes()
    (folder,) = (tmp_path / "cache" / "onnx").iterdir()  # the processes' cache (env_for), keyed by the weights
    assert sorted(p.suffix for p in folder.iterdir()) == [".json", ".onnx"]
    assert not has_temporary(tmp_path / "cache") and not (shared / "onnx").exists()


def test_an_export_being_built_is_waited_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The export cache's lock held elsewhere: the export waits for it instead of building beside it."""
    from rankkit.models.checkpoint import load_for_inference
    from rankkit.runtime import Runtime, use_runtime

    from rankkit.runtime.cache import export_folder, weights_key

    monkeypatch.setenv("RANKKIT_CACHE_DIR", str(tmp_path / "cache"))  # an export cache with nothing in it yet
    checkpoint = tmp_path / "mono"
    shutil.copytree(CHECKPOINTS / "mono", checkpoint)
    model = load_for_inference("mono", checkpoint)
    (slot,) = model.encoder_slots()
    folder = export_folder(checkpoint, weights_key(slot))  # in the cache, keyed by the encoder's weights
    folder.mkdir(parents=True)
    done: list[Any] = []
    with exclusive(folder, "the export cache", wait=True, on_folder=True):
        worker = threading.Thread(target=lambda: done.append(use_runtime(model, Runtime("onnx"), checkpoint=checkpoint)))
        worker.start()
        time.sleep(1.0)
        assert worker.is_alive() and not list(folder.iterdir())
    worker.join(timeout=120)
    assert done and done[0][0].parent == folder


def train_args(groups: Path, out: Path) -> list[Any]:
    return ["train", "--model", "mono", "--train", groups, "--backbone", CHECKPOINTS / "repbert", "--max-steps", 3,
            "--batch-size", 2, "--group-size", 3, "--device", "cpu", "--seed", 0, "-o", out]


def test_two_trainings_into_one_folder(cli: Callable[..., Any], tmp_path: Path) -> None:
    """A second ``train`` into a folder being trained into is refused in one line (before: two runs
    mixed their checkpoints and train.log); two started together leave a lone run's model."""
    groups = write_groups(tmp_path / "groups.jsonl", count=8)
    lone = tmp_path / "lone"
    assert cli(*train_args(groups, lone)).code == 0
    out = tmp_path / "ck"
    with exclusive(out, "--output", wait=False):
        result = cli(*train_args(groups, out))
    assert result.code == 2 and not out.exists(), result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(f"rankkit: error: --output {out} is in use by another")
    procs = [start(train_args(groups, out), tmp_path) for _ in range(2)]
    results = [finish(p) for p in procs]
    assert sorted(code for code, _ in results)[0] == 0, results
    for code, err in results:  # the other was refused: busy, or (if it came later) a finished run is there
        assert code == 0 or (code == 2 and ("is in use by another" in err or "already holds a training run" in err)), err
    assert (out / "model.safetensors").read_bytes() == (lone / "model.safetensors").read_bytes()
    assert not has_temporary(out)
