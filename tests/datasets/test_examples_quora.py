"""rankkit.datasets.quora (examples/quora/prepare.py): the Quora duplicate-question retrieval task derivation."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from rankkit.datasets import quora
from rankkit.formats import iter_corpus, read_qrels, read_topics

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def prepare() -> ModuleType:
    return quora


DEV = [
    "1\tHow do I learn Python ?\tWhat is the best way to learn Python ?\t11",
    "0\tHow do I learn Python ?\tHow do I learn Java ?\t12",
]
TEST = [
    "1\tWhy is the sky blue ?\tWhat makes the sky blue ?\t21",
    "1\tWhy is the sky blue ?\tWhy does the sky look blue ?\t22",
    "1\tWhat makes the sky blue ?\tWhy is the sky blue during the day ?\t23",
    "0\tHow do I learn Java ?\tWhy is the sky blue ?\t24",
    "1\tSame question ?\tSame question ?\t25",
]


def write_source(folder: Path) -> Path:
    folder.mkdir()
    (folder / "dev.tsv").write_text("\n".join(DEV) + "\n", encoding="utf-8")
    (folder / "test.tsv").write_text("\n".join(TEST) + "\n", encoding="utf-8")
    return folder


def test_task_files(prepare, tmp_path: Path) -> None:
    source = write_source(tmp_path / "src")
    prepare.main(["--source", str(source), "--output", str(tmp_path / "pairs")])
    corpus = {doc.docid: doc.text for doc in iter_corpus(tmp_path / "pairs" / "corpus.jsonl")}
    ids = {text: docid for docid, text in corpus.items()}
    assert len(corpus) == 8 and corpus["0"] == "How do I learn Python ?"  # unique questions, first-seen order
    topics = read_topics(tmp_path / "pairs" / "test.topics.tsv")
    # Queries: first question of each duplicate pair (distinct); qid = its corpus id.
    assert topics == {
        ids["Why is the sky blue ?"]: "Why is the sky blue ?",
        ids["What makes the sky blue ?"]: "What makes the sky blue ?",
        ids["Same question ?"]: "Same question ?",
    }
    qrels = read_qrels(tmp_path / "pairs" / "test.qrels.txt")
    sky = ids["Why is the sky blue ?"]
    assert qrels[sky] == {ids["What makes the sky blue ?"]: 1, ids["Why does the sky look blue ?"]: 1}
    assert ids["Same question ?"] not in qrels  # a question is never relevant to itself
    train = read_qrels(tmp_path / "pairs" / "train.qrels.txt")
    assert train == {ids["How do I learn Python ?"]: {ids["What is the best way to learn Python ?"]: 1}}

    prepare.main(["--source", str(source), "--output", str(tmp_path / "all"), "--relevant", "all"])
    both = read_qrels(tmp_path / "all" / "test.qrels.txt")
    makes = ids["What makes the sky blue ?"]
    assert both[makes] == {sky: 1, ids["Why is the sky blue during the day ?"]: 1}
    assert set(both[sky]) == set(qrels[sky])


def test_bad_source_line(prepare, tmp_path: Path) -> None:
    source = write_source(tmp_path / "src")
    (source / "test.tsv").write_text("1\tonly two fields\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"test.tsv:1: expected"):
        prepare.main(["--source", str(source), "--output", str(tmp_path / "out")])


def test_converters_import_no_models() -> None:
    """rankkit.datasets loads only formats/errors: no torch, transformers or rankkit models."""
    code = (
        "import sys\n"
        "import rankkit.datasets.classic, rankkit.datasets.quora, rankkit.datasets.semeval, rankkit.datasets.wikiqa\n"
        "heavy = {'torch', 'transformers', 'rankkit.models', 'rankkit.training', 'rankkit.cli'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("name", ["quora", "wikiqa", "semeval", "classic"])
def test_example_wrapper_runs_the_module(name: str, tmp_path: Path) -> None:
    """examples/NAME/prepare.py and python -m rankkit.datasets.NAME are the same command."""
    for cmd in ([sys.executable, str(ROOT / "examples" / name / "prepare.py"), "--help"],
                [sys.executable, "-m", f"rankkit.datasets.{name}", "--help"]):
        done = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=tmp_path)
        assert "--output" in done.stdout and "--source" in done.stdout
