"""Turn SemEval-2016 Task 3 subtask A (question -> comment ranking) into rankkit re-ranking task files.

    python -m rankkit.datasets.semeval [--source ../shared/data/semeval2016-task3-cqa] [--output runs/semeval]

(``python examples/semeval/prepare.py`` takes the same arguments.)

Input: the Qatar Living CQA XML (v3.2) of ``SemEval2016-Task3-CQA-QL-train-part2.xml[.gz]`` and
``SemEval2016-Task3-CQA-QL-dev.xml[.gz]`` (read the source's PROVENANCE.txt). Subtask A ranks the
10 comments of a thread by how well they answer the thread's own question (``RelQuestion``);
as in MatRank (paper 000, App. A, after CETE) and the official scorer, only ``Good``
(``RELC_RELEVANCE2RELQ``) is relevant, ``PotentiallyUseful`` and ``Bad`` are not.

Splits (the official 2016 test set is not in the shared copy): ``train`` = train-part2,
``test`` = dev. A thread marked ``SubtaskA_Skip_Because_Same_As_RelQuestion_ID`` repeats another
thread (same question, same comments) and is skipped, as the official subtask A files do: dev
keeps 244 of its 500 threads (the paper's 244 questions / 2,440 comments), train-part2 379 of
670. As for WikiQA, only questions with at least one Good comment are kept (test 211 questions /
2,110 comments, train 344 / 3,440).

Output, in ``--output``: ``corpus.jsonl`` (every kept comment, id = RELC_ID) and for each split
``SPLIT.topics.tsv`` (qid = RELQ_ID, text = subject + body), ``SPLIT.qrels.txt``,
``SPLIT.candidates.run`` (the thread's comments in their given order) and ``SPLIT.groups.jsonl``
(positives = Good comments, negatives = the others); the same files as :mod:`rankkit.datasets.wikiqa`,
whose types and writers this module reuses. A malformed file stops with ``FILE:LINE: problem``.
"""

from __future__ import annotations

import argparse
import sys
import xml.parsers.expat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from rankkit.datasets._common import SHARED_DATA, sha256
from rankkit.datasets.wikiqa import (
    Candidate,
    Question,
    clean,
    source_file,
    summary,
    write_corpus_of,
    write_split,
)
from rankkit.errors import InputError, RankkitError
from rankkit.formats import atomic_write, open_text

DEFAULT_SOURCE = SHARED_DATA / "semeval2016-task3-cqa"
SPLITS = {"train": "SemEval2016-Task3-CQA-QL-train-part2.xml", "test": "SemEval2016-Task3-CQA-QL-dev.xml"}
LABELS = {"Good": 1, "PotentiallyUseful": 0, "Bad": 0}
SKIP = "SubtaskA_Skip_Because_Same_As_RelQuestion_ID"


@dataclass
class Thread:
    """The parts of one ``<Thread>`` gathered while parsing it."""

    skip: bool
    qid: str | None = None
    subject: str = ""
    body: str = ""
    comments: list[Candidate] = field(default_factory=list)


class ThreadReader:
    """Streams a SemEval CQA XML file with expat, keeping each element's line for error messages.

    Collects one :class:`Question` per ``Thread`` (skipped threads included, flagged in ``skipped``).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.parser = xml.parsers.expat.ParserCreate()
        self.parser.StartElementHandler = self.start
        self.parser.EndElementHandler = self.end
        self.parser.CharacterDataHandler = self.chars
        self.questions: list[Question] = []
        self.skipped: set[str] = set()
        self.comment_ids: set[str] = set()
        self.text: list[str] | None = None
        self.thread: Thread | None = None
        self.comment: tuple[str, int] | None = None

    def error(self, problem: str) -> InputError:
        """An InputError at the parser's current line."""
        return InputError(self.path, self.parser.CurrentLineNumber, problem)

    def need(self, attrs: dict[str, str], name: str, element: str) -> str:
        """The non-empty attribute ``name`` of ``element``, or an error."""
        value = attrs.get(name, "").strip()
        if not value:
            raise self.error(f"<{element}> without {name}")
        return value

    def start(self, name: str, attrs: dict[str, str]) -> None:
        """expat: an element opens."""
        if name == "Thread":
            self.thread = Thread(skip=bool(attrs.get(SKIP)))
        elif name == "RelQuestion":
            if self.thread is None:
                raise self.error("<RelQuestion> outside a <Thread>")
            self.thread.qid = self.need(attrs, "RELQ_ID", name)
        elif name == "RelComment":
            if self.thread is None or self.thread.qid is None:
                raise self.error("<RelComment> before its thread's <RelQuestion>")
            cid = self.need(attrs, "RELC_ID", name)
            label = attrs.get("RELC_RELEVANCE2RELQ")
            if label not in LABELS:
                raise self.error(f"comment {cid!r}: RELC_RELEVANCE2RELQ {label!r} is not one of {', '.join(LABELS)}")
            if cid in self.comment_ids:
                raise self.error(f"comment id {cid!r} appears twice")
            self.comment_ids.add(cid)
            self.comment = (cid, LABELS[label])
        if name in ("RelQSubject", "RelQBody", "RelCText"):
            self.text = []

    def chars(self, data: str) -> None:
        """expat: text inside the element being collected."""
        if self.text is not None:
            self.text.append(data)

    def end(self, name: str) -> None:
        """expat: an element closes; store its text where it belongs."""
        text = clean("".join(self.text)) if self.text is not None else ""
        if name in ("RelQSubject", "RelQBody", "RelCText"):
            self.text = None
        if self.thread is None:
            return
        if name == "RelQSubject":
            self.thread.subject = text
        elif name == "RelQBody":
            self.thread.body = text
        elif name == "RelCText":
            if self.comment is None:
                raise self.error("<RelCText> outside a <RelComment>")
            self.thread.comments.append(Candidate(self.comment[0], text, self.comment[1]))
        elif name == "RelComment":
            self.comment = None
        elif name == "Thread":
            self.finish_thread()

    def finish_thread(self) -> None:
        """Check the thread just closed and keep it as a question."""
        thread, self.thread = self.thread, None
        assert thread is not None
        if thread.qid is None:
            raise self.error("<Thread> without a <RelQuestion>")
        query = " ".join(part for part in (thread.subject, thread.body) if part)
        if not query:
            raise self.error(f"question {thread.qid!r} has neither subject nor body text")
        if not thread.comments:
            raise self.error(f"thread {thread.qid!r} has no <RelComment>")
        for c in thread.comments:
            if not c.text:
                raise self.error(f"comment {c.docid!r} has no text")
        if thread.skip:
            self.skipped.add(thread.qid)
        self.questions.append(Question(thread.qid, query, thread.comments))

    def read(self, lines: Iterable[str]) -> list[Question]:
        """Feed the file line by line, so errors carry expat's line number."""
        try:
            for line in lines:
                self.parser.Parse(line, False)
            self.parser.Parse("", True)
        except xml.parsers.expat.ExpatError as err:
            raise InputError(self.path, err.lineno, f"malformed XML: {xml.parsers.expat.errors.messages[err.code]}") from None
        return self.questions


def read_semeval(path: Path) -> tuple[list[Question], set[str]]:
    """All threads of a SemEval CQA file as questions, and the qids of the subtask-A duplicates."""
    reader = ThreadReader(path)
    with open_text(path) as handle:
        questions = reader.read(handle)
    if not questions:
        raise InputError(path, None, "no <Thread> found")
    return questions, reader.skipped


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Command line: write the task files (see the module docstring); ``prog`` names the command in messages."""
    parser = argparse.ArgumentParser(prog=prog, description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="folder with the SemEval XML files")
    parser.add_argument("--output", type=Path, default=Path("runs/semeval"), help="output folder")
    parser.add_argument("--keep-duplicates", action="store_true",
                        help=f"keep threads marked {SKIP} (default: skipped, as in subtask A)")
    args = parser.parse_args(argv)
    where = {split: source_file(args.source, name) for split, name in SPLITS.items()}
    try:
        read = {split: read_semeval(path) for split, path in where.items()}
        splits = {
            split: [q for q in questions if q.answered and (args.keep_duplicates or q.qid not in skipped)]
            for split, (questions, skipped) in read.items()
        }
        out = args.output
        out.mkdir(parents=True, exist_ok=True)
        n_docs = write_corpus_of(out, splits, where)
        stats = {split: write_split(out, split, questions) for split, questions in splits.items()}
    except RankkitError as err:
        sys.exit(f"{parser.prog}: error: {err}")
    with atomic_write(out / "PROVENANCE.txt") as handle:
        handle.write(
            "Derived by rankkit.datasets.semeval (examples/semeval/prepare.py) from SemEval-2016 Task 3 (Qatar Living CQA,\n"
            "English, v3.2 XML), subtask A; see the source folder's PROVENANCE.txt.\n"
            + "".join(
                f"  {split}: {where[split].name} sha256 {sha256(where[split])} ({len(read[split][0])} threads, "
                f"{len(read[split][1])} marked {SKIP})\n"
                for split in SPLITS
            )
            + ("Duplicate threads kept (--keep-duplicates).\n" if args.keep_duplicates else "Duplicate threads skipped.\n")
            + "Kept: questions with at least one Good comment; relevant = Good (RELC_RELEVANCE2RELQ).\n"
            + summary(stats)
            + f"corpus.jsonl: {n_docs} comments (id = RELC_ID).\n"
            "License: SemEval-2016 Task 3 data, released by the organizers (QCRI) for research use;\n"
            "Qatar Living content.\n"
        )
    print(f"{n_docs} comments -> {out}\n{summary(stats)}", end="", file=sys.stderr)


if __name__ == "__main__":
    main(prog="python -m rankkit.datasets.semeval")
