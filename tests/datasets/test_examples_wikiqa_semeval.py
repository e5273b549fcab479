"""rankkit.datasets.wikiqa and rankkit.datasets.semeval (examples/*/prepare.py) on tiny real slices (tests/data/)."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import ModuleType

import pytest

import rankkit.datasets.semeval
import rankkit.datasets.wikiqa
from rankkit.formats import (
    iter_corpus,
    read_groups,
    read_qrels,
    read_run,
    read_topics,
    sort_ranking,
)

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def wikiqa() -> ModuleType:
    return rankkit.datasets.wikiqa


@pytest.fixture(scope="module")
def semeval() -> ModuleType:
    return rankkit.datasets.semeval


def ranking(run: dict[str, dict[str, float]], qid: str) -> list[str]:
    return [docid for docid, _ in sort_ranking(run[qid])]


def test_wikiqa_task_files(wikiqa: ModuleType, tmp_path: Path) -> None:
    wikiqa.main(["--source", str(DATA / "wikiqa"), "--output", str(tmp_path)])
    # Questions without a correct sentence (train Q2, dev Q8, test Q3) are dropped; file order kept.
    assert list(read_topics(tmp_path / "test.topics.tsv")) == ["Q0", "Q4", "Q33", "Q242"]
    assert read_topics(tmp_path / "train.topics.tsv") == {
        "Q1": "how are glacier caves formed?",
        "Q98": "how are public schools funded",
    }
    qrels = read_qrels(tmp_path / "test.qrels.txt")
    assert qrels["Q33"] == {f"D33-{i}": int(i in (1, 2, 3, 4)) for i in range(22)}  # every candidate judged
    assert sum(len(j) for j in qrels.values()) == 6 + 6 + 22 + 3
    run = read_run(tmp_path / "test.candidates.run")
    assert ranking(run, "Q0") == [f"D0-{i}" for i in range(6)]  # the dataset's order, ranks 1..n
    assert ranking(run, "Q33") == [f"D33-{i}" for i in range(22)]  # not docid order (D33-10 < D33-2)
    corpus = {d.docid: d.text for d in iter_corpus(tmp_path / "corpus.jsonl")}
    assert corpus["D1-3"] == "A glacier cave is a cave formed within the ice of a glacier ."
    assert len(corpus) == 5 + 2 + 5 + 6 + 6 + 22 + 3  # train Q1, Q98; dev Q11; test Q0, Q4, Q33, Q242
    groups = {g.qid: g for g in read_groups(tmp_path / "train.groups.jsonl")}
    assert list(groups) == ["Q1"]  # Q98's candidates are all correct: nothing to contrast
    g = groups["Q1"]
    assert [p.docid for p in g.pos] == ["D1-3"] and g.pos[0].label == 1
    assert [n.docid for n in g.neg] == ["D1-0", "D1-1", "D1-2", "D1-4"]
    assert [n.score for n in g.neg] == [5.0, 4.0, 3.0, 1.0]  # the candidate run's scores
    assert [g.qid for g in read_groups(tmp_path / "test.groups.jsonl")] == ["Q0", "Q4", "Q33"]
    assert (tmp_path / "LICENSE.txt").read_bytes() == (DATA / "wikiqa" / "LICENSE.txt").read_bytes()
    assert "test: 4 questions, 37 candidates, 9 relevant, 3 training groups" in (tmp_path / "PROVENANCE.txt").read_text()


def test_wikiqa_malformed_lines(wikiqa: ModuleType, tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(DATA / "wikiqa", source)
    test = source / "WikiQA-test.tsv"
    lines = test.read_text(encoding="utf-8").split("\n")
    bad_label = lines[:3] + [lines[3].rsplit("\t", 1)[0] + "\tyes\r"] + lines[4:]
    test.write_text("\n".join(bad_label), encoding="utf-8")
    with pytest.raises(SystemExit, match=r"WikiQA-test.tsv:4: label 'yes' is not 0 or 1$"):
        wikiqa.main(["--source", str(source), "--output", str(tmp_path / "out")])
    test.write_text("\n".join(lines[:2] + ["Q0\tonly three\tfields\r"] + lines[3:]), encoding="utf-8")
    with pytest.raises(SystemExit, match=r"WikiQA-test.tsv:3: expected 7 tab-separated fields, found 3$"):
        wikiqa.main(["--source", str(source), "--output", str(tmp_path / "out")])
    test.write_text("\n".join(lines[:3] + [lines[2]] + lines[3:]), encoding="utf-8")
    with pytest.raises(SystemExit, match=r"WikiQA-test.tsv:4: sentence 'D0-1' appears twice for question 'Q0'$"):
        wikiqa.main(["--source", str(source), "--output", str(tmp_path / "out")])
    assert not (tmp_path / "out" / "corpus.jsonl").exists()  # nothing written before the inputs are valid


def test_semeval_task_files(semeval: ModuleType, tmp_path: Path) -> None:
    semeval.main(["--source", str(DATA / "semeval"), "--output", str(tmp_path)])
    topics = read_topics(tmp_path / "test.topics.tsv")
    # Q268_R4 is a subtask-A duplicate (skipped), Q271_R63 has no Good comment.
    assert list(topics) == ["Q268_R16"]
    assert topics["Q268_R16"].startswith("Best Bank. Hi ti all QL's; What bank you are using?")  # subject + body
    assert list(read_topics(tmp_path / "train.topics.tsv")) == ["Q201_R26", "Q201_R29"]
    qrels = read_qrels(tmp_path / "test.qrels.txt")
    good = {docid for docid, rel in qrels["Q268_R16"].items() if rel}
    assert len(qrels["Q268_R16"]) == 10 and good == {"Q268_R16_C4", "Q268_R16_C5", "Q268_R16_C10"}
    run = read_run(tmp_path / "test.candidates.run")
    assert ranking(run, "Q268_R16") == [f"Q268_R16_C{i}" for i in range(1, 11)]  # C10 last, not after C1
    corpus = {d.docid: d.text for d in iter_corpus(tmp_path / "corpus.jsonl")}
    assert len(corpus) == 30
    assert corpus["Q268_R16_C2"] == "In Qatar that is like saying which is the best STD."
    groups = read_groups(tmp_path / "train.groups.jsonl")
    assert [g.qid for g in groups] == ["Q201_R26", "Q201_R29"]
    assert [len(g.pos) for g in groups] == [3, 4] and [len(g.neg) for g in groups] == [7, 6]

    semeval.main(["--source", str(DATA / "semeval"), "--output", str(tmp_path / "all"), "--keep-duplicates"])
    assert list(read_topics(tmp_path / "all" / "test.topics.tsv")) == ["Q268_R4", "Q268_R16"]


def test_semeval_malformed_xml(semeval: ModuleType, tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(DATA / "semeval", source)
    dev = source / "SemEval2016-Task3-CQA-QL-dev.xml"
    text = dev.read_text(encoding="utf-8")
    number = text[: text.index('RELC_RELEVANCE2RELQ="Good"')].count("\n") + 1
    dev.write_text(text.replace('RELC_RELEVANCE2RELQ="Good"', 'RELC_RELEVANCE2RELQ="Great"', 1), encoding="utf-8")
    with pytest.raises(SystemExit, match=rf"QL-dev.xml:{number}: comment 'Q268_R4_C1': RELC_RELEVANCE2RELQ 'Great'"):
        semeval.main(["--source", str(source), "--output", str(tmp_path / "out")])
    closing = text.index("</RelCText>")
    dev.write_text(text[:closing] + text[closing + len("</RelCText>"):], encoding="utf-8")
    broken = text[:closing].count("\n") + 2  # expat notices at the next closing tag, one line down
    with pytest.raises(SystemExit, match=rf"QL-dev.xml:{broken}: malformed XML: mismatched tag"):
        semeval.main(["--source", str(source), "--output", str(tmp_path / "out")])
