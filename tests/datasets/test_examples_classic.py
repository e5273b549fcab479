"""rankkit.datasets.classic (examples/classic/prepare.py): classic IR collections (TIME, Cranfield, CISI, MED, NPL)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from rankkit.datasets import classic
from rankkit.errors import InputError, RankkitError
from rankkit.formats import iter_corpus, read_qrels, read_topics

ROOT = Path(__file__).resolve().parents[2]
SLICE = ROOT / "tests" / "data" / "classic"


@pytest.fixture(scope="module")
def prepare() -> ModuleType:
    return classic


def run(prepare, tmp_path: Path, collection: str, *extra: str) -> Path:
    out = tmp_path / collection
    prepare.main(["--collection", collection, "--source", str(SLICE), "--output", str(out), *extra])
    return out


def test_time_slice(prepare, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = run(prepare, tmp_path, "time", "--folds", "0")
    docs = {d.docid: d.text for d in iter_corpus(out / "corpus.jsonl")}
    # Ids are the *TEXT numbers as written, in file order; lines joined by single spaces.
    assert list(docs)[:3] == ["017", "018", "019"] and len(docs) == 25 and list(docs)[-1] == "048"
    assert docs["017"].startswith("THE ALLIES AFTER NASSAU IN DECEMBER 1960, THE U.S . FIRST PROPOSED TO HELP NATO")
    assert "  " not in docs["017"] and "\n" not in docs["017"]
    topics = read_topics(out / "topics.tsv")
    assert list(topics) == ["40", "41", "46", "56", "61", "74"]
    assert topics["46"] == "PRESIDENT DE GAULLE'S POLICY ON BRITISH ENTRY INTO THE COMMON MARKET ."
    # TIME.REL numbers documents by position: 20 -> 20th document (*TEXT 040), 23 -> 045, 25 -> 048.
    assert read_qrels(out / "qrels.txt") == {
        "40": {"040": 1}, "41": {"045": 1}, "46": {"040": 1, "045": 1}, "61": {"045": 1}, "74": {"048": 1},
    }
    assert docs["040"].startswith("GREAT BRITAIN THE FATEFUL WEEKS TO CELEBRATE HIS SIXTH FULL YEAR")
    printed = capsys.readouterr().err
    assert "25 documents" in printed and "6 queries (5 judged)" in printed and "median" in printed


def test_time_positions_skip_the_two_missing_documents(prepare) -> None:
    docids = [f"{n:03d}" for n in range(1, 424)]  # 423 documents, as distributed
    path = Path("TIME.REL")
    assert prepare.time_rel_docid(path, 1, "370", docids) == "370"
    assert prepare.time_rel_docid(path, 1, "380", docids) == "378"  # two documents lost before it
    assert prepare.time_rel_docid(path, 1, "425", docids) == "423"
    for ambiguous in ("371", "379"):
        with pytest.raises(InputError, match="ambiguous"):
            prepare.time_rel_docid(path, 7, ambiguous, docids)
    with pytest.raises(InputError, match="outside"):
        prepare.time_rel_docid(path, 7, "426", docids)


def test_cranfield_qids_follow_file_order_and_grades_are_kept(prepare, tmp_path: Path) -> None:
    out = run(prepare, tmp_path, "cran", "--folds", "0")  # documents read from the .gz copy
    topics = read_topics(out / "topics.tsv")
    # cran.qry numbers them 001, 002, 004; the qrels (and so the qids) count 1, 2, 3.
    assert list(topics) == ["1", "2", "3"]
    assert topics["3"] == "what problems of heat conduction in composite slabs have been solved so far ."
    qrels = read_qrels(out / "qrels.txt")
    assert qrels["1"] == {"12": 3, "13": 4, "14": 4, "15": 4} and qrels["3"] == {"5": 3, "6": 3}
    docs = {d.docid: d.text for d in iter_corpus(out / "corpus.jsonl")}
    # The abstract repeats the title: kept once; author (.A) and source (.B) left out.
    assert docs["1"].startswith("experimental investigation of the aerodynamics of a wing in a slipstream . an experimental")
    assert docs["1"].count("experimental investigation of the aerodynamics") == 1 and "brenckman" not in docs["1"]


@pytest.mark.parametrize(
    ("collection", "qrels", "doc", "start"),
    [
        ("cisi", {"1": {"28": 1}, "2": {"29": 1}}, "1",
         "18 Editions of the Dewey Decimal Classifications The present study is a history"),
        ("med", {"1": {"13": 1, "14": 1, "15": 1}}, "1", "correlation between maternal and fetal plasma"),
        ("npl", {"1": {"1239": 1, "1502": 1}}, "1", "compact memories have flexible capacities a digital"),
    ],
)
def test_other_collections(prepare, tmp_path: Path, collection: str, qrels: dict, doc: str, start: str) -> None:
    out = run(prepare, tmp_path, collection, "--folds", "0")
    assert read_qrels(out / "qrels.txt") == qrels
    docs = {d.docid: d.text for d in iter_corpus(out / "corpus.jsonl")}
    assert docs[doc].startswith(start)
    assert list(read_topics(out / "topics.tsv")) == ["1", "2"]


def test_folds_disjoint_cover_and_deterministic(prepare, tmp_path: Path) -> None:
    qids = [str(n) for n in range(1, 84) if n not in (56, 59, 62, 72)]
    folds = prepare.make_folds(qids, 5, 0)
    assert sorted(len(f) for f in folds) == [15, 16, 16, 16, 16]
    flat = [q for f in folds for q in f]
    assert len(flat) == len(set(flat)) and set(flat) == set(qids)
    assert folds == prepare.make_folds(list(reversed(qids)), 5, 0)  # input order does not matter
    assert folds != prepare.make_folds(qids, 5, 1)
    assert all(f == sorted(f, key=int) for f in folds)
    with pytest.raises(RankkitError, match="--folds"):
        prepare.make_folds(qids[:3], 5, 0)


def test_fold_files(prepare, tmp_path: Path) -> None:
    out = run(prepare, tmp_path, "time", "--folds", "2", "--seed", "3")
    qrels = read_qrels(out / "qrels.txt")
    spec = json.loads((out / "folds" / "folds.json").read_text())
    assert spec["folds"] == 2 and spec["seed"] == 3
    seen: list[str] = []
    for k in ("1", "2"):
        topics = read_topics(out / "folds" / f"fold-{k}.topics.tsv")
        assert list(topics) == spec["queries"][k]
        assert read_qrels(out / "folds" / f"fold-{k}.qrels.txt") == {q: qrels[q] for q in topics}
        seen += topics
    # Only judged queries are dealt into folds (56 has no relevant document).
    assert sorted(seen, key=int) == ["40", "41", "46", "61", "74"]
    again = run(prepare, tmp_path / "again", "time", "--folds", "2", "--seed", "3")
    for name in ("fold-1.topics.tsv", "fold-2.qrels.txt", "folds.json"):
        assert (again / "folds" / name).read_bytes() == (out / "folds" / name).read_bytes()


def copy_slice(tmp_path: Path, collection: str) -> Path:
    source = tmp_path / "src"
    shutil.copytree(SLICE / collection, source / collection)
    return source


def fails(prepare, source: Path, collection: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        prepare.main(["--collection", collection, "--source", str(source), "--output", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    message = capsys.readouterr().err.strip()
    assert message.count("\n") == 0  # one line
    return message


def test_errors_name_file_and_line(prepare, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = copy_slice(tmp_path, "time")
    (source / "time" / "TIME.REL").write_text("40  20\n\n41  9x\n")
    assert fails(prepare, source, "time", tmp_path, capsys).endswith(
        "time/TIME.REL:3: document number '9x' is not an integer")
    (source / "time" / "TIME.REL").write_text("99  20\n")
    assert "TIME.REL:1: query '99' is not in the query file" in fails(prepare, source, "time", tmp_path, capsys)
    (source / "time" / "TIME.REL").write_text("40  26\n")  # the slice has 25 documents
    assert "TIME.REL:1: document 26: TIME.ALL has only 25" in fails(prepare, source, "time", tmp_path, capsys)
    (source / "time" / "TIME.QUE").write_text("*FIND 1\n\nA QUERY .\n*FIND x\n")
    assert "TIME.QUE:4: expected '*FIND NUMBER" in fails(prepare, source, "time", tmp_path, capsys)
    (source / "time" / "TIME.QUE").unlink()
    assert "time/TIME.QUE: no such file" in fails(prepare, source, "time", tmp_path, capsys)

    source = copy_slice(tmp_path / "c", "med")
    (source / "med" / "MED.REL").write_text("1 0 13 1\n1 0 999 1\n")
    assert "MED.REL:2: document '999' is not in the document file" in fails(prepare, source, "med", tmp_path, capsys)
    (source / "med" / "MED.REL").write_text("1 0 13\n")
    assert "MED.REL:1: expected 4 columns, found 3" in fails(prepare, source, "med", tmp_path, capsys)
    (source / "med" / "MED.QRY").write_text("stray text\n.I 1\n.W\nq\n")
    assert "MED.QRY:1: text outside a field" in fails(prepare, source, "med", tmp_path, capsys)
    assert "no such folder" in fails(prepare, tmp_path / "nowhere", "med", tmp_path, capsys)
