"""SIGTERM and SIGKILL into the newer paths: the ONNX export, the NNCF calibration child, index --merge
(docs/RELIABILITY.md, "Interruptions"). Same rules as tests/reliability/test_interrupts.py: SIGTERM leaves
nothing, after a SIGKILL the next run removes the leftovers and gives a lone run's result, and a
killed parent takes its calibration child with it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

import pytest
from test_interrupts import RANKKIT, SIGNALS, env_for, has_temporary, interrupt, run, when
from training_helpers import documents, write_corpus, write_topics

from rankkit.formats import write_run

CHECKPOINTS = Path(__file__).parents[1] / "data" / "checkpoints-v0.1.0"


def rerank_workspace(root: Path) -> Path:
    docids = sorted(documents())
    write_run(root / "first.run", {f"t{i}": {d: float(k) for k, d in enumerate(docids)} for i in range(12)}, "x")
    write_corpus(root / "corpus.jsonl")
    write_topics(root / "topics.tsv")
    shutil.copytree(CHECKPOINTS / "mono", root / "mono")  # its exports go to cache/onnx/KEY, never into it
    return root / "mono"


def rerank_args(root: Path, *backend: str) -> list[str]:
    return ["rerank", "--model", "mono", "--checkpoint", str(root / "mono"), "--run", str(root / "first.run"),
            "--topics", str(root / "topics.tsv"), "--corpus", str(root / "corpus.jsonl"), "--device", "cpu",
            "-o", str(root / "out.run"), *backend]


def exports(root: Path) -> Path:
    """The export cache of the processes run in ``root`` (test_interrupts.env_for: ``root/cache``)."""
    return root / "cache" / "onnx"


def exporting(root: Path) -> bool:
    """True once an export's temporary exists in the export cache."""
    return has_temporary(exports(root)) if exports(root).is_dir() else False


@pytest.mark.parametrize("signum", SIGNALS)
def test_onnx_export(signum: int, tmp_path: Path, cli: Callable[..., Any]) -> None:
    """Signalled while the export's temporary is being written (or whenever the run gets there first)."""
    reference = tmp_path / "reference"
    reference.mkdir()
    rerank_workspace(reference)
    assert cli(*rerank_args(reference, "--backend", "onnx")).code == 0
    root = tmp_path / "ws"
    root.mkdir()
    rerank_workspace(root)
    args = rerank_args(root, "--backend", "onnx")
    code = interrupt(args, root, when(exporting), signum)
    complete_exports(root)
    if signum == signal.SIGTERM:
        assert code in (0, 143, -signal.SIGTERM), code
        assert not has_temporary(root), "SIGTERM left a temporary"
        return
    assert code in (0, -signal.SIGKILL), code
    run(args, root)  # removes the killed run's temporary, exports afresh
    assert not has_temporary(root), "the killed export's temporary was not removed by the next run"
    assert (root / "out.run").read_bytes() == (reference / "out.run").read_bytes()
    complete_exports(root)


def complete_exports(root: Path) -> None:
    """The export cache holds nothing but complete exports: each .onnx beside its record; the checkpoint nothing."""
    assert not (root / "mono" / "onnx").exists()
    folders = list(exports(root).iterdir()) if exports(root).is_dir() else []
    for folder in folders:
        names = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
        assert all(name.endswith((".onnx", ".json")) for name in names), names
        assert {n[:-5] for n in names if n.endswith(".json")} >= {n[:-5] for n in names if n.endswith(".onnx")}, names


def children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def quantizer_of(pid: int) -> int | None:
    for child in children_of(pid):
        try:
            if b"rankkit.runtime.openvino_quantize" in Path(f"/proc/{child}/cmdline").read_bytes():
                return child
        except OSError:
            continue
    return None


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize("signum", SIGNALS)
def test_calibration_child_dies_with_its_parent(signum: int, tmp_path: Path) -> None:
    pytest.importorskip("nncf")
    pytest.importorskip("openvino")
    rerank_workspace(tmp_path)
    args = rerank_args(tmp_path, "--backend", "openvino", "--quantize", "int8")
    proc = subprocess.Popen([RANKKIT, *args], env=env_for(tmp_path), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    child = None
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline and child is None:
        child = quantizer_of(proc.pid)
        time.sleep(0.01)
    assert child is not None, "the calibration child never started"
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert b"Traceback" not in err, err.decode()
    deadline = time.monotonic() + 20
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child), "the calibration child outlived its parent"
    if signum == signal.SIGTERM:
        assert proc.returncode == 143 and not has_temporary(exports(tmp_path))
    else:  # the next run removes the killed one's temporaries and calibrates afresh
        run(args, tmp_path)
        assert not has_temporary(exports(tmp_path)) and (tmp_path / "out.run").is_file()
        assert any(p.name.endswith(".ov-int8.xml") for p in exports(tmp_path).rglob("*"))
    assert not (tmp_path / "mono" / "onnx").exists()


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], Path]:
    """Two dense shards of a 2,036-document corpus and the index their lone merge makes."""
    from rankkit.cli import main

    root = tmp_path_factory.mktemp("shards")
    corpus = write_corpus(root / "corpus.jsonl", extra=2000)
    folders = []
    for i in range(2):
        folders.append(root / f"s{i}")
        try:
            main(["index", "--kind", "dense", "--model", "repbert", "--checkpoint", str(CHECKPOINTS / "repbert"),
                  "--corpus", str(corpus), "--index", str(folders[-1]), "--shard", f"{i}/2", "--chunk-size", "200"])
        except SystemExit as done:
            assert not done.code
    try:
        main(["index", "--merge", *map(str, folders), "--index", str(root / "lone")])
    except SystemExit as done:
        assert not done.code
    return folders, root / "lone"


@pytest.mark.parametrize("signum", SIGNALS)
def test_merge(signum: int, shards: tuple[list[Path], Path], tmp_path: Path) -> None:
    folders, lone = shards
    index = tmp_path / "ix"
    args = ["index", "--merge", *map(str, folders), "--index", str(index)]
    code = interrupt(args, tmp_path, when(has_temporary), signum)
    if index.exists():  # never half-built: a complete index, or none
        assert (index / "rankkit-index.json").is_file()
        assert (index / "index.faiss").read_bytes() == (lone / "index.faiss").read_bytes()
    if signum == signal.SIGTERM:
        assert code in (0, 143, -signal.SIGTERM), code
        assert not has_temporary(tmp_path), "SIGTERM left a temporary"
        assert code == 0 or not index.exists()
        return
    assert code in (0, -signal.SIGKILL), code
    run(args, tmp_path)
    assert not has_temporary(tmp_path), "the killed merge's staging folder was not removed by the next merge"
    for name in ("index.faiss", "docids.txt"):
        assert (index / name).read_bytes() == (lone / name).read_bytes()


def test_merge_into_an_index_folder_keeps_it_whole(shards: tuple[list[Path], Path], tmp_path: Path) -> None:
    """Merging again into a finished index: SIGKILL mid-way leaves it complete or manifest-less (never a
    mix that loads), and the next merge restores the lone merge's files."""
    folders, lone = shards
    index = tmp_path / "ix"
    args = ["index", "--merge", *map(str, folders), "--index", str(index)]
    run(args, tmp_path)
    code = interrupt(args, tmp_path, when(has_temporary), signal.SIGKILL)
    assert code in (0, -signal.SIGKILL)
    if (index / "rankkit-index.json").is_file():
        assert (index / "index.faiss").read_bytes() == (lone / "index.faiss").read_bytes()
    run(args, tmp_path)
    assert not has_temporary(tmp_path)
    for name in ("index.faiss", "docids.txt"):
        assert (index / name).read_bytes() == (lone / name).read_bytes()
