"""Turn the WikiQA answer-sentence-selection splits into rankkit re-ranking task files.

    python -m rankkit.datasets.wikiqa [--source ../shared/data/wikiqa] [--output runs/wikiqa]

(``python examples/wikiqa/prepare.py`` takes the same arguments.)

Input: ``WikiQA-{train,dev,test}.tsv[.gz]`` of the Microsoft Research WikiQA Corpus (columns
``QuestionID Question DocumentID DocumentTitle SentenceID Sentence Label`` under a header row;
read the source folder's PROVENANCE.txt and LICENSE). Every question comes with the summary
sentences of one Wikipedia page as its candidates, labelled 1 (answers it) or 0.

Output, in ``--output``, for each SPLIT (train, dev, test):

* ``SPLIT.topics.tsv``: ``qid<TAB>question`` (the dataset's QuestionID);
* ``SPLIT.qrels.txt``: every candidate judged, 1 for a correct sentence, 0 otherwise;
* ``SPLIT.candidates.run``: each question's candidates in the dataset's order (score = number
  of candidates - position), the run ``rankkit rerank`` re-ranks;
* ``SPLIT.groups.jsonl``: training groups (positives = correct sentences, negatives = the other
  candidates of the question, ``score`` = their candidate-run score); questions whose candidates
  are all correct have no negative to learn from and get no group;

plus ``corpus.jsonl`` (``{"id", "contents"}``) with every candidate sentence of every split. The
docid is the dataset's SentenceID (``D<doc>-<n>``): questions on the same page share sentences,
and a SentenceID has the same text wherever it appears (checked). ``PROVENANCE.txt`` and the
source's LICENSE files are copied beside the outputs (the license must travel with the data).

As is standard for answer sentence selection (and ../shared/BASELINES.md), every split keeps only
the questions with at least one correct sentence: test 243 questions / 2,351 sentences, dev 126 /
1,130, train 873 / 8,672. A malformed line stops with ``FILE:LINE: problem``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from rankkit.datasets._common import SHARED_DATA, iter_lines, sha256
from rankkit.errors import InputError, RankkitError
from rankkit.formats import (
    Passage,
    TrainingGroup,
    atomic_write,
    write_groups,
    write_qrels,
    write_run,
    write_topics,
)

DEFAULT_SOURCE = SHARED_DATA / "wikiqa"
HEADER = ["QuestionID", "Question", "DocumentID", "DocumentTitle", "SentenceID", "Sentence", "Label"]
SPLITS = ("train", "dev", "test")
LICENSE_FILES = ("LICENSE.txt", "LICENSE.pdf")


@dataclass(frozen=True)
class Candidate:
    """One candidate answer of a question: its corpus id, text and binary label."""

    docid: str
    text: str
    label: int


@dataclass
class Question:
    """A question with its candidates in the dataset's order."""

    qid: str
    text: str
    candidates: list[Candidate] = field(default_factory=list)

    @property
    def answered(self) -> bool:
        """True when at least one candidate is correct."""
        return any(c.label > 0 for c in self.candidates)


def clean(text: str) -> str:
    """Whitespace collapsed to single spaces (TSV topics and one-line texts need it)."""
    return " ".join(text.split())


def read_wikiqa(path: Path) -> list[Question]:
    """The questions of one WikiQA split file, in file order, with ``FILE:LINE`` errors."""
    questions: dict[str, Question] = {}
    seen: dict[str, set[str]] = {}
    lines = iter_lines(path)
    number, header = next(lines)
    if header.split("\t") != HEADER:
        raise InputError(path, number, f"expected the header {' '.join(HEADER)!r}")
    for number, line in lines:
        fields = line.split("\t")
        if len(fields) != len(HEADER):
            raise InputError(path, number, f"expected {len(HEADER)} tab-separated fields, found {len(fields)}")
        qid, question, _doc, _title, sid, sentence, label = (f.strip() for f in fields)
        if label not in ("0", "1"):
            raise InputError(path, number, f"label {label!r} is not 0 or 1")
        if not qid or not sid:
            raise InputError(path, number, "empty QuestionID or SentenceID")
        entry = questions.get(qid)
        if entry is None:
            entry = questions[qid] = Question(qid, clean(question))
            seen[qid] = set()
        elif entry.text != clean(question):
            raise InputError(path, number, f"question {qid!r} has a different text than on its first line")
        if sid in seen[qid]:
            raise InputError(path, number, f"sentence {sid!r} appears twice for question {qid!r}")
        seen[qid].add(sid)
        entry.candidates.append(Candidate(sid, clean(sentence), int(label)))
    return list(questions.values())


def source_file(folder: Path, name: str) -> Path:
    """``NAME.gz`` (as shipped in ../shared) or, when only that exists, the uncompressed ``NAME``."""
    gz = folder / f"{name}.gz"
    return gz if gz.exists() or not (folder / name).exists() else folder / name


def candidate_score(position: int, count: int) -> float:
    """The candidate run's score of the candidate at 0-based ``position``: descending with position."""
    return float(count - position)


def training_group(question: Question) -> TrainingGroup | None:
    """Positives = correct candidates, negatives = the others; None without both kinds."""
    n = len(question.candidates)
    pos = [Passage(c.docid, c.text, c.label) for c in question.candidates if c.label > 0]
    neg = [
        Passage(c.docid, c.text, 0, candidate_score(i, n))
        for i, c in enumerate(question.candidates)
        if c.label == 0
    ]
    return TrainingGroup(question.qid, question.text, pos, neg) if pos and neg else None


def write_split(out: Path, split: str, questions: list[Question], tag: str = "candidates") -> dict[str, int]:
    """Topics, qrels, candidate run and training groups of one split; returns its counts."""
    write_topics(out / f"{split}.topics.tsv", {q.qid: q.text for q in questions})
    qrels = {q.qid: {c.docid: c.label for c in q.candidates} for q in questions}
    write_qrels(out / f"{split}.qrels.txt", qrels)
    run = {
        q.qid: {c.docid: candidate_score(i, len(q.candidates)) for i, c in enumerate(q.candidates)}
        for q in questions
    }
    write_run(out / f"{split}.candidates.run", run, tag)
    groups = [g for g in map(training_group, questions) if g is not None]
    write_groups(out / f"{split}.groups.jsonl", groups)
    return {
        "questions": len(questions),
        "candidates": sum(len(q.candidates) for q in questions),
        "relevant": sum(c.label > 0 for q in questions for c in q.candidates),
        "groups": len(groups),
    }


def write_corpus_of(out: Path, splits: dict[str, list[Question]], where: dict[str, Path]) -> int:
    """One ``corpus.jsonl`` of every split's candidates; an id reused with another text is an error."""
    texts: dict[str, str] = {}
    for split, questions in splits.items():
        for q in questions:
            for c in q.candidates:
                if texts.setdefault(c.docid, c.text) != c.text:
                    raise InputError(where[split], None, f"docid {c.docid!r} has two different texts")
    with atomic_write(out / "corpus.jsonl") as handle:
        for docid, text in texts.items():
            handle.write(json.dumps({"id": docid, "contents": text}, ensure_ascii=False) + "\n")
    return len(texts)


def summary(stats: dict[str, dict[str, int]]) -> str:
    """One line per split: questions, candidates, relevant, groups."""
    return "".join(
        f"  {split}: {s['questions']} questions, {s['candidates']} candidates, {s['relevant']} relevant, "
        f"{s['groups']} training groups\n"
        for split, s in stats.items()
    )


def copy_licenses(source: Path, out: Path, names: tuple[str, ...]) -> list[str]:
    """Copy the source's license files that exist beside the outputs; returns their names."""
    copied = []
    for name in names:
        if (source / name).exists():
            shutil.copyfile(source / name, out / name)
            copied.append(name)
    return copied


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Command line: write the task files (see the module docstring); ``prog`` names the command in messages."""
    parser = argparse.ArgumentParser(prog=prog, description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="folder with WikiQA-*.tsv.gz")
    parser.add_argument("--output", type=Path, default=Path("runs/wikiqa"), help="output folder")
    args = parser.parse_args(argv)
    try:
        where = {split: source_file(args.source, f"WikiQA-{split}.tsv") for split in SPLITS}
        read = {split: read_wikiqa(path) for split, path in where.items()}
        splits = {split: [q for q in questions if q.answered] for split, questions in read.items()}
        out = args.output
        out.mkdir(parents=True, exist_ok=True)
        n_docs = write_corpus_of(out, splits, where)
        stats = {split: write_split(out, split, questions) for split, questions in splits.items()}
    except RankkitError as err:
        sys.exit(f"{parser.prog}: error: {err}")
    licenses = copy_licenses(args.source, out, LICENSE_FILES)
    with atomic_write(out / "PROVENANCE.txt") as handle:
        handle.write(
            "Derived by rankkit.datasets.wikiqa (examples/wikiqa/prepare.py) from the Microsoft Research WikiQA Corpus v1.0\n"
            "(Yang, Yih, Meek, EMNLP 2015); see the source folder's PROVENANCE.txt.\n"
            + "".join(f"  {where[s].name} sha256 {sha256(where[s])} ({len(read[s])} questions)\n" for s in SPLITS)
            + "Kept: questions with at least one correct sentence (label 1).\n"
            + summary(stats)
            + f"corpus.jsonl: {n_docs} distinct sentences (id = SentenceID).\n"
            + f"License: Microsoft Research Data License Agreement ({', '.join(licenses) or 'see source'}):\n"
            "research/teaching use only, redistribution only under the same terms with the license included.\n"
        )
    print(f"{n_docs} sentences -> {out}\n{summary(stats)}", end="", file=sys.stderr)


if __name__ == "__main__":
    main(prog="python -m rankkit.datasets.wikiqa")
