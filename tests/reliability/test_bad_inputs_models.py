"""Bad inputs to the model commands (rerank, explain, train, index --kind dense): one line, exit 2, nothing written.

Checkpoints come from tests/data/checkpoints-v0.1.0 (tiny real rankkit checkpoints), damaged here.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable

import pytest
from training_helpers import documents, write_corpus, write_groups, write_topics

from rankkit.formats import write_run
from rankkit.models.backbone import load_tokenizer
from rankkit.models.inputs import tokenize
from rankkit.models.pair_tokens import CHARS_PER_TOKEN

CHECKPOINTS = Path(__file__).parents[1] / "data" / "checkpoints-v0.1.0"


@pytest.fixture
def ws(tmp_path: Path) -> dict[str, Path]:
    docids = sorted(documents())
    write_run(tmp_path / "first.run", {f"t{i}": {d: float(k) for k, d in enumerate(docids[:4])} for i in range(2)}, "x")
    mono = tmp_path / "mono"
    shutil.copytree(CHECKPOINTS / "mono", mono)
    return {"root": tmp_path, "corpus": write_corpus(tmp_path / "corpus.jsonl"), "run": tmp_path / "first.run",
            "topics": write_topics(tmp_path / "topics.tsv"), "groups": write_groups(tmp_path / "groups.jsonl", count=4),
            "mono": mono}


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def damage(kind: str, ws: dict[str, Path]) -> Path:
    """A checkpoint folder (or file) broken in the way ``kind`` names."""
    root = ws["root"]
    if kind == "empty folder":
        (root / "empty").mkdir()
        return root / "empty"
    if kind == "a file":
        return ws["topics"]
    if kind == "missing":
        return root / "nope"
    folder = root / "broken"
    shutil.copytree(CHECKPOINTS / "mono", folder)
    weights = folder / "model.safetensors"
    if kind == "truncated weights":
        weights.write_bytes(weights.read_bytes()[:300])
    elif kind == "random weights":
        weights.write_bytes(bytes(range(256)) * 8)
    elif kind == "another model's weights":
        shutil.copy(CHECKPOINTS / "matrank" / "model.safetensors", weights)
    elif kind == "pickle only":
        shutil.rmtree(folder)
        folder.mkdir()
        shutil.copy(CHECKPOINTS / "repbert" / "config.json", folder)
        (folder / "pytorch_model.bin").write_bytes(b"\x80\x04not really")
    return folder


CASES = {
    "empty folder": "not a rankkit checkpoint (no rankkit.json) nor a Hugging Face model folder",
    "a file": "is a file, expected a checkpoint folder",
    "missing": "no such checkpoint folder",
    "truncated weights": "not a readable safetensors file",
    "random weights": "not a readable safetensors file",
    "another model's weights": "weights do not fit",
    "pickle only": "rankkit loads only safetensors",
}


def assert_refused(result: Any, message: str) -> None:
    assert result.code == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rankkit: error: ") and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("kind", sorted(CASES))
def test_broken_checkpoints_are_refused_in_one_line(cli: Callable[..., Any], ws: dict[str, Path], kind: str) -> None:
    checkpoint = damage(kind, ws)
    before = snapshot(ws["root"])
    result = cli("rerank", "--model", "mono" if kind != "pickle only" else "repbert", "--checkpoint", checkpoint,
                 "--run", ws["run"], "--topics", ws["topics"], "--corpus", ws["corpus"], "--output",
                 ws["root"] / "out.run", "--device", "cpu")
    assert_refused(result, CASES[kind])
    assert snapshot(ws["root"]) == before


@pytest.mark.parametrize("target, message", [("topics", "is the input --topics"), ("run", "is the input --run"),
                                             ("dir", "is a directory")])
def test_rerank_output_is_checked_before_any_work(cli: Callable[..., Any], ws: dict[str, Path], target: str,
                                                  message: str) -> None:
    (ws["root"] / "dir").mkdir()
    output = ws[target] if target in ws else ws["root"] / target
    before = snapshot(ws["root"])
    result = cli("rerank", "--model", "mono", "--checkpoint", ws["mono"], "--run", ws["run"], "--topics",
                 ws["topics"], "--corpus", ws["corpus"], "--output", output, "--device", "cpu")
    assert_refused(result, message)
    assert snapshot(ws["root"]) == before


@pytest.mark.parametrize("args, message", [
    (["--lr", "nan"], "--lr must be a finite number"),
    (["--lr", "-1"], "--lr must be a finite number >= 0"),
    (["--epochs", "0"], "--epochs must be at least 1"),
    (["--batch-size", "0"], "--batch-size must be at least 1"),
    (["--max-grad-norm", "inf"], "--max-grad-norm must be a finite number"),
    (["--no-dense"], "--no-dense is not an option of model mono"),
    (["--hidden", "-3"], "--hidden must be at least 0"),
    (["--encoder", "poly"], "--encoder must be one of cross, bi"),
    (["--loss", "softmax-ce"], "cannot train with loss 'softmax-ce'"),
    (["--loss", "kl"], "--loss kl needs --teacher RUN"),
])
def test_train_options_are_checked_before_any_work(cli: Callable[..., Any], ws: dict[str, Path], args: list[str],
                                                   message: str) -> None:
    out = ws["root"] / "ck"
    result = cli("train", "--model", "mono", "--train", ws["groups"], "--output", out, "--backbone", CHECKPOINTS / "repbert",
                 "--max-steps", "1", "--batch-size" if "--batch-size" not in args else "--seed", "2", *args)
    assert_refused(result, message)
    assert not out.exists()


def test_train_output_that_is_a_file_is_refused(cli: Callable[..., Any], ws: dict[str, Path]) -> None:
    result = cli("train", "--model", "mono", "--train", ws["groups"], "--output", ws["run"])
    assert_refused(result, "exists and is not a directory")


def test_dense_index_of_a_missing_corpus_writes_nothing(cli: Callable[..., Any], ws: dict[str, Path]) -> None:
    result = cli("index", "--kind", "dense", "--model", "repbert", "--checkpoint", CHECKPOINTS / "repbert",
                 "--corpus", ws["root"] / "nope.jsonl", "--index", ws["root"] / "ix")
    assert_refused(result, "no such file")
    assert not (ws["root"] / "ix").exists()


def test_corrupt_faiss_index_is_one_line(cli: Callable[..., Any], ws: dict[str, Path]) -> None:
    index = ws["root"] / "ix"
    assert cli("index", "--kind", "dense", "--model", "repbert", "--checkpoint", CHECKPOINTS / "repbert",
               "--corpus", ws["corpus"], "--index", index).code == 0
    (index / "index.faiss").write_bytes(b"garbage")
    result = cli("retrieve", "--model", "repbert", "--index", index, "--topics", ws["topics"], "--output",
                 ws["root"] / "dense.run")
    assert_refused(result, "not a readable faiss index")
    assert not (ws["root"] / "dense.run").exists()


def test_long_texts_are_cut_before_tokenising() -> None:
    tokenizer = load_tokenizer(CHECKPOINTS / "mono")
    text = "apple fruit red " * 200_000  # 3.2 MB
    ids = tokenize(tokenizer, [text], 24)[0]
    assert ids == tokenize(tokenizer, [text[: 24 * CHARS_PER_TOKEN]], 24)[0]
    assert len(ids) == 24
