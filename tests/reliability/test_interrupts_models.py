"""SIGTERM and SIGKILL into the model commands: rerank, train (with step checkpoints), index --kind dense.

Same rules as tests/reliability/test_interrupts.py (whose helpers this reuses): the target is never partial,
SIGTERM leaves nothing but the inputs, and after a SIGKILL the next run of the same command removes
the leftovers and leaves only its finished output.
"""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

import pytest
from test_interrupts import SIGNALS, after, check, has_temporary, interrupt, run, when
from training_helpers import documents, write_corpus, write_groups, write_topics

from rankkit.formats import write_run

CHECKPOINTS = Path(__file__).parents[1] / "data" / "checkpoints-v0.1.0"


def rerank_data(root: Path) -> list[str]:
    docids = sorted(documents())
    write_run(root / "first.run", {f"t{i}": {d: float(k) for k, d in enumerate(docids)} for i in range(12)}, "x")
    shutil.copytree(CHECKPOINTS / "mono", root / "mono")
    write_corpus(root / "corpus.jsonl")
    write_topics(root / "topics.tsv")
    return ["rerank", "--model", "mono", "--checkpoint", str(root / "mono"), "--run", str(root / "first.run"),
            "--topics", str(root / "topics.tsv"), "--corpus", str(root / "corpus.jsonl"), "--depth", "36",
            "--output", str(root / "out.run"), "--device", "cpu", "--cache-dir", str(root / "cache")]


@pytest.mark.parametrize("signum", SIGNALS)
@pytest.mark.parametrize("moment", ["loading", "writing"])
def test_rerank(moment: str, signum: int, tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    reference.mkdir()
    run(rerank_data(reference), reference)
    expected = (reference / "out.run").read_bytes()
    root = tmp_path / "ws"
    root.mkdir()
    args = rerank_data(root)
    wait = after(2.0) if moment == "loading" else when(has_temporary)
    check(args, root, root / "out.run", wait, signum, expected, None)


@pytest.mark.parametrize("signum", SIGNALS)
def test_train_with_step_checkpoints(signum: int, tmp_path: Path) -> None:
    groups = write_groups(tmp_path / "groups.jsonl", count=48)
    out = tmp_path / "ck"
    args = ["train", "--model", "repbert", "--train", str(groups), "--output", str(out), "--backbone",
            str(CHECKPOINTS / "repbert"), "--max-steps", "60", "--batch-size", "2", "--group-size", "3",
            "--save-every", "1", "--device", "cpu", "--seed", "0"]
    # Signal while a step checkpoint is being staged (or whenever the run gets there first).
    code = interrupt(args, tmp_path, when(has_temporary), signum)
    if signum == signal.SIGTERM:
        assert code in (0, 143, -signal.SIGTERM)
        assert not has_temporary(tmp_path), "SIGTERM left a temporary"
        return
    assert code in (0, -signal.SIGKILL)
    if code != 0:  # resume from a finished step checkpoint if the kill left one, else start again
        finished = (out / "checkpoints").is_dir() and any(p.name.startswith("step-") for p in (out / "checkpoints").iterdir())
        run([*args, "--resume"] if finished else args, tmp_path)
    assert not has_temporary(tmp_path), "the killed run's staging folder was not removed by the next run"
    assert (out / "rankkit.json").is_file() and (out / "model.safetensors").is_file()


@pytest.mark.parametrize("signum", SIGNALS)
def test_dense_index(signum: int, tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus.jsonl", extra=400)
    index = tmp_path / "ix"
    args = ["index", "--kind", "dense", "--model", "repbert", "--checkpoint", str(CHECKPOINTS / "repbert"),
            "--corpus", str(corpus), "--index", str(index), "--chunk-size", "64", "--batch-size", "8"]
    code = interrupt(args, tmp_path, when(lambda root: (index / "embeddings").is_dir()), signum)
    assert code in (0, 128 + signum, -signum)
    if code != 0:  # an interrupted dense index resumes: the next run finishes it
        run(args, tmp_path)
    assert not has_temporary(tmp_path)
    assert (index / "index.faiss").is_file() and (index / "rankkit-index.json").is_file()
