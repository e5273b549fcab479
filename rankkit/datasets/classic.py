"""Convert a classic IR test collection (TIME, Cranfield, CISI, MED, NPL) into rankkit's formats.

    python -m rankkit.datasets.classic --collection time \\
        --source ../shared/data/classic-ir-collections --output runs/time [--folds 5 --seed 0]

(``python examples/classic/prepare.py`` takes the same arguments.)

Input: the Glasgow/SMART distribution of the collections (``--source`` holds one folder per
collection: ``time/``, ``cran/``, ``cisi/``, ``med/``, ``npl/``; document files may be gzipped;
read its PROVENANCE.txt). Output, in ``--output``:

* ``corpus.jsonl``: every document, ``{"id", "contents"}``; the id is the number the collection
  gives it (TIME: the ``*TEXT 017`` number as written, ``"017"``; the others: ``.I`` / record
  number). Contents: the title, then the text (Cranfield repeats its title at the start of the
  text; it is not doubled), whitespace collapsed; authors and bibliographic fields are left out;
* ``topics.tsv``: every query, ``qid<TAB>text``;
* ``qrels.txt``: TREC qrels (``qid 0 docid rel``);
* ``folds/fold-K.topics.tsv`` / ``folds/fold-K.qrels.txt`` (K = 1..N) and ``folds/folds.json``:
  with ``--folds N`` (default 5), the judged queries dealt into N disjoint folds after a seeded
  shuffle, for N-fold cross-validation as PARADE (§4.4) does on Robust04: train on N-1 folds,
  test on the held-out one, report the concatenated test folds;
* ``PROVENANCE.txt``: what was derived from what (with checksums).

Quirks of the distribution that the conversion handles (each checked against the texts):

* TIME.REL numbers documents by their POSITION in the original 425-document TIME.ALL, not by the
  ``*TEXT`` number; the distributed TIME.ALL holds 423, the two missing ones lying between
  positions 371 and 379 (position 370 is TEXT 498, the Viet Nam "new regime" story of query 4;
  position 380 is TEXT 511, the East-West trade story of query 81, found as the 378th document).
  So a REL number n <= 370 is the n-th document and n >= 380 the (n-2)-th; no REL line uses
  371-379, which would be ambiguous (an error). Query 72 has no judgments.
* cran.qry numbers its queries 001, 002, 004, ... but cranqrel numbers them 1..225 in file order;
  the qids here are the qrels' (file order), as ir_datasets does. Cranfield grades are kept as
  in cranqrel (-1, 1..4; ir_datasets' reading: 4 = complete answer, -1 = of no interest; the
  readme beside the file describes Cleverdon's reversed 1 = best scale): trec_eval counts
  grades <= 0 as not relevant either way.
* CISI.REL (``qid docid 0 0.0``) and MED.REL (``qid 0 docid 1``) differ in column order; NPL
  records end with a ``/`` line.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from rankkit.datasets._common import SHARED_DATA, iter_lines, sha256
from rankkit.errors import InputError, RankkitError
from rankkit.formats import atomic_write, open_text, write_qrels, write_topics

Qrels = dict[str, dict[str, int]]
DEFAULT_SOURCE = SHARED_DATA / "classic-ir-collections"

# TIME.REL's document numbers are positions in the original 425-document TIME.ALL; the
# distributed file lacks two documents between positions TIME_GAP_FIRST and TIME_GAP_LAST.
TIME_ORIGINAL_DOCUMENTS = 425
TIME_GAP_FIRST, TIME_GAP_LAST = 371, 379
TIME_MISSING = 2
SMART_FIELD = re.compile(r"^\.([A-Z])(?:\s+(\S+))?\s*$")


@dataclass
class Collection:
    """A parsed collection: documents and queries in file order, judgments as ``{qid: {docid: rel}}``."""

    name: str
    documents: dict[str, str] = field(default_factory=dict)
    queries: dict[str, str] = field(default_factory=dict)
    qrels: Qrels = field(default_factory=dict)
    sources: list[Path] = field(default_factory=list)


@dataclass
class Record:
    """One ``.I`` record of a SMART file: its id, fields (letter -> lines) and first line number."""

    ident: str
    line: int
    fields: dict[str, list[str]] = field(default_factory=dict)


def normalize(lines: Iterable[str]) -> str:
    """Lines joined by single spaces (the files wrap text at fixed width)."""
    return " ".join(" ".join(lines).split())


def find_file(folder: Path, name: str) -> Path:
    """``folder/name``, or its gzipped copy ``name.gz``; an InputError naming the plain path if neither exists."""
    for candidate in (folder / name, folder / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    raise InputError(folder / name, None, f"no such file (nor {name}.gz); is --source the classic-ir-collections folder?")


def read_numbered(path: Path) -> list[tuple[int, str]]:
    """All lines of a file with their 1-based numbers, blank lines included (SMART text has paragraphs)."""
    with open_text(path) as handle:
        return [(number, line.rstrip("\r\n")) for number, line in enumerate(handle, start=1)]


def parse_smart(path: Path) -> list[Record]:
    """Records of a SMART file (``.I id`` then ``.T``/``.W``/... fields, each followed by its lines).

    A repeated field within a record (a few corrupt Cranfield abstracts) is appended to, so no
    text is lost; lines before the first ``.I`` or an ``.I`` without id are errors.
    """
    records: list[Record] = []
    seen: dict[str, int] = {}
    current: list[str] | None = None
    for number, line in read_numbered(path):
        match = SMART_FIELD.match(line)
        if match and match.group(1) == "I":
            ident = match.group(2)
            if not ident:
                raise InputError(path, number, "'.I' without a record number")
            if ident in seen:
                raise InputError(path, number, f"record {ident!r} already started at line {seen[ident]}")
            seen[ident] = number
            records.append(Record(ident, number))
            current = None
        elif match and not match.group(2):
            if not records:
                raise InputError(path, number, f"field '.{match.group(1)}' before the first '.I' record")
            current = records[-1].fields.setdefault(match.group(1), [])
        elif line.strip():
            if current is None:
                raise InputError(path, number, "text outside a field: expected '.I N' or a field marker like '.W'")
            current.append(line)
    if not records:
        raise InputError(path, None, "no '.I' records found")
    return records


def smart_text(record: Record) -> str:
    """Title then text of a record; a text that starts with its own title (Cranfield) keeps it once."""
    title = normalize(record.fields.get("T", []))
    text = normalize(record.fields.get("W", []))
    if title and not text.startswith(title):
        return f"{title} {text}".strip()
    return text or title


def parse_starred(path: Path, marker: str) -> list[tuple[str, int, str]]:
    """``(number, line, text)`` of each ``*MARKER number ...`` record (TIME's documents and queries)."""
    records: list[tuple[str, int, list[str]]] = []
    for number, line in read_numbered(path):
        if line.startswith("*STOP"):
            break
        if line.startswith("*"):
            fields = line[1:].split()
            if len(fields) < 2 or fields[0] != marker or not fields[1].isdigit():
                raise InputError(path, number, f"expected '*{marker} NUMBER ...', found {line[:40]!r}")
            if any(fields[1] == r[0] for r in records):
                raise InputError(path, number, f"{marker} {fields[1]} appears twice")
            records.append((fields[1], number, []))
        elif line.strip():
            if not records:
                raise InputError(path, number, f"text before the first '*{marker}' line")
            records[-1][2].append(line)
    if not records:
        raise InputError(path, None, f"no '*{marker}' records found")
    return [(ident, number, normalize(lines)) for ident, number, lines in records]


def parse_slashed(path: Path) -> list[tuple[str, int, list[str]]]:
    """NPL records: a number line, text lines, a ``/`` line; ``(number, line, text lines)``.

    A record number repeated is an error; text lines are kept as they are (stripped).
    """
    records: list[tuple[str, int, list[str]]] = []
    open_record = False
    for number, line in read_numbered(path):
        text = line.strip()
        if not text:
            continue
        if text == "/":
            if not open_record:
                raise InputError(path, number, "'/' without a record before it")
            open_record = False
        elif not open_record:
            if not text.isdigit():
                raise InputError(path, number, f"expected a record number, found {text[:40]!r}")
            if any(text == r[0] for r in records):
                raise InputError(path, number, f"record {text} appears twice")
            records.append((text, number, []))
            open_record = True
        else:
            records[-1][2].append(text)
    # The last record may end at the end of the file without its '/' (rlv-ass does).
    if not records:
        raise InputError(path, None, "no records found")
    return records


def time_rel_docid(path: Path, line: int, position: str, docids: list[str]) -> str:
    """The docid TIME.REL's document number ``position`` refers to (see the module docstring).

    REL numbers are positions in the original 425-document file; the distributed one lacks two
    documents among positions 371-379, so positions after the gap are shifted back by two.
    """
    n = int(position)
    if TIME_GAP_FIRST <= n <= TIME_GAP_LAST:
        raise InputError(path, line, f"document {n} lies where TIME.ALL lacks two documents (371-379): ambiguous")
    if not 1 <= n <= TIME_ORIGINAL_DOCUMENTS:
        raise InputError(path, line, f"document {n} is outside 1..{TIME_ORIGINAL_DOCUMENTS}")
    index = n - 1 if n < TIME_GAP_FIRST else n - 1 - TIME_MISSING
    if index >= len(docids):
        raise InputError(path, line, f"document {n}: TIME.ALL has only {len(docids)} documents")
    return docids[index]


def add_judgment(qrels: Qrels, collection: Collection, path: Path, line: int, qid: str, docid: str, rel: int) -> None:
    """Record one judgment, checking its query and document exist and it is not repeated."""
    if qid not in collection.queries:
        raise InputError(path, line, f"query {qid!r} is not in the query file")
    if docid not in collection.documents:
        raise InputError(path, line, f"document {docid!r} is not in the document file")
    judged = qrels.setdefault(qid, {})
    if docid in judged and judged[docid] != rel:
        raise InputError(path, line, f"document {docid!r} judged twice for query {qid!r} with different grades")
    judged[docid] = rel


def parse_int(path: Path, line: int, text: str, what: str) -> int:
    """``int(text)``, or an InputError naming ``what`` at ``path:line``."""
    try:
        return int(text)
    except ValueError:
        raise InputError(path, line, f"{what} {text!r} is not an integer") from None


def load_time(folder: Path) -> Collection:
    """TIME magazine 1963: ``*TEXT``/``*FIND`` records; REL lines ``qid doc doc ...`` by position."""
    c = Collection("time")
    docs_path, queries_path, rel_path = (find_file(folder, n) for n in ("TIME.ALL", "TIME.QUE", "TIME.REL"))
    c.sources = [docs_path, queries_path, rel_path]
    c.documents = {ident: text for ident, _, text in parse_starred(docs_path, "TEXT")}
    c.queries = {str(int(ident)): text for ident, _, text in parse_starred(queries_path, "FIND")}
    docids = list(c.documents)
    for number, text in iter_lines(rel_path):
        fields = text.split()
        qid = str(parse_int(rel_path, number, fields[0], "query number"))
        if qid not in c.queries:
            raise InputError(rel_path, number, f"query {qid!r} is not in the query file")
        # A line with a query number alone (56, 59, 62, ...): the query has no relevant document.
        for position in fields[1:]:
            parse_int(rel_path, number, position, "document number")
            add_judgment(c.qrels, c, rel_path, number, qid, time_rel_docid(rel_path, number, position, docids), 1)
    return c


def load_smart(folder: Path, docs: str, queries: str, rel: str, name: str,
               rel_columns: Callable[[Path, int, list[str]], tuple[str, str, int]],
               sequential_qids: bool = False) -> Collection:
    """A SMART-format collection (Cranfield, CISI, MED): ``.I``/``.T``/``.W`` documents and queries."""
    c = Collection(name)
    docs_path, queries_path, rel_path = (find_file(folder, n) for n in (docs, queries, rel))
    c.sources = [docs_path, queries_path, rel_path]
    c.documents = {r.ident: smart_text(r) for r in parse_smart(docs_path)}
    for position, record in enumerate(parse_smart(queries_path), start=1):
        # Cranfield's qrels number queries by file order, not by their (gappy) .I numbers.
        qid = str(position) if sequential_qids else str(int(record.ident))
        c.queries[qid] = normalize(record.fields.get("W", []))
    for number, text in iter_lines(rel_path):
        qid, docid, grade = rel_columns(rel_path, number, text.split())
        add_judgment(c.qrels, c, rel_path, number, qid, docid, grade)
    return c


def columns(qid_at: int, docid_at: int, grade_at: int | None,
            width: int) -> Callable[[Path, int, list[str]], tuple[str, str, int]]:
    """A qrels-line reader taking query, document and grade from the given columns (no grade: 1)."""

    def read(path: Path, number: int, fields: list[str]) -> tuple[str, str, int]:
        if len(fields) != width:
            raise InputError(path, number, f"expected {width} columns, found {len(fields)}")
        qid = str(parse_int(path, number, fields[qid_at], "query number"))
        docid = str(parse_int(path, number, fields[docid_at], "document number"))
        grade = 1 if grade_at is None else parse_int(path, number, fields[grade_at], "relevance")
        return qid, docid, grade

    return read


def load_npl(folder: Path) -> Collection:
    """NPL (Vaswani): ``/``-terminated records; rlv-ass lists each query's relevant documents."""
    c = Collection("npl")
    docs_path, queries_path, rel_path = (find_file(folder, n) for n in ("doc-text", "query-text", "rlv-ass"))
    c.sources = [docs_path, queries_path, rel_path]
    c.documents = {ident: normalize(lines) for ident, _, lines in parse_slashed(docs_path)}
    c.queries = {ident: normalize(lines) for ident, _, lines in parse_slashed(queries_path)}
    for qid, line, lines in parse_slashed(rel_path):
        for offset, text in enumerate(lines, start=1):
            for docid in text.split():
                if not docid.isdigit():
                    raise InputError(rel_path, line + offset, f"document number {docid!r} is not an integer")
                add_judgment(c.qrels, c, rel_path, line + offset, qid, docid, 1)
    return c


LOADERS: dict[str, Callable[[Path], Collection]] = {
    "time": lambda root: load_time(root / "time"),
    "cran": lambda root: load_smart(root / "cran", "cran.all.1400", "cran.qry", "cranqrel", "cran",
                                    columns(0, 1, 2, 3), sequential_qids=True),
    "cisi": lambda root: load_smart(root / "cisi", "CISI.ALL", "CISI.QRY", "CISI.REL", "cisi",
                                    columns(0, 1, None, 4)),
    "med": lambda root: load_smart(root / "med", "MED.ALL", "MED.QRY", "MED.REL", "med", columns(0, 2, 3, 4)),
    "npl": lambda root: load_npl(root / "npl"),
}


def load_collection(name: str, source: Path) -> Collection:
    """Parse collection ``name`` from the classic-ir-collections folder ``source``."""
    if name not in LOADERS:
        raise RankkitError(f"unknown collection {name!r}; known: {', '.join(LOADERS)}")
    if not source.is_dir():
        raise InputError(source, None, "no such folder (expected the classic-ir-collections folder)")
    return LOADERS[name](source)


def id_order(ident: str) -> tuple[int, str]:
    """Numeric ids in numeric order, anything else after them by string."""
    return (int(ident), ident) if ident.isdigit() else (sys.maxsize, ident)


def make_folds(qids: Iterable[str], folds: int, seed: int) -> list[list[str]]:
    """Deal the queries into ``folds`` disjoint folds after a ``seed``-ed shuffle (sizes differ by <= 1).

    The shuffle starts from the ids in numeric order, so the folds depend only on the set of
    queries and the seed, not on file order. Each fold lists its queries in numeric order.
    """
    ordered = sorted(set(qids), key=id_order)
    if folds < 2 or folds > len(ordered):
        raise RankkitError(f"--folds must be between 2 and the number of judged queries ({len(ordered)}), got {folds}")
    random.Random(seed).shuffle(ordered)
    return [sorted(ordered[k::folds], key=id_order) for k in range(folds)]


def judged_queries(c: Collection) -> list[str]:
    """Queries with at least one relevant (grade > 0) judgment, in topic order: the evaluable ones."""
    return [qid for qid in c.queries if any(rel > 0 for rel in c.qrels.get(qid, {}).values())]


def write_collection(c: Collection, out: Path, folds: int, seed: int) -> dict[str, object]:
    """Write corpus, topics, qrels, folds and PROVENANCE into ``out``; returns the statistics printed."""
    out.mkdir(parents=True, exist_ok=True)
    with atomic_write(out / "corpus.jsonl") as handle:
        for docid, text in c.documents.items():
            handle.write(json.dumps({"id": docid, "contents": text}, ensure_ascii=False) + "\n")
    write_topics(out / "topics.tsv", c.queries)
    ordered_qrels = {qid: c.qrels[qid] for qid in c.queries if qid in c.qrels}
    write_qrels(out / "qrels.txt", ordered_qrels)
    lengths = [len(text.split()) for text in c.documents.values()]
    judged = judged_queries(c)
    stats: dict[str, object] = {
        "collection": c.name,
        "documents": len(c.documents),
        "queries": len(c.queries),
        "judged_queries": len(judged),
        "judgments": sum(len(j) for j in c.qrels.values()),
        "relevant": sum(1 for j in c.qrels.values() for rel in j.values() if rel > 0),
        "median_words": statistics.median(lengths),
        "mean_words": round(statistics.fmean(lengths), 1),
        "max_words": max(lengths),
        "documents_over_512_words": sum(1 for n in lengths if n > 512),
    }
    if folds:
        split = make_folds(judged, folds, seed)
        for k, qids in enumerate(split, start=1):
            write_topics(out / "folds" / f"fold-{k}.topics.tsv", {q: c.queries[q] for q in qids})
            write_qrels(out / "folds" / f"fold-{k}.qrels.txt", {q: c.qrels[q] for q in qids})
        with atomic_write(out / "folds" / "folds.json") as handle:
            # One fold per line keeps the file short and diffable.
            body = ",\n".join(f'  "{k}": {json.dumps(q)}' for k, q in enumerate(split, start=1))
            handle.write(f'{{"folds": {folds}, "seed": {seed}, "queries": {{\n{body}\n}}}}\n')
        stats["fold_sizes"] = [len(q) for q in split]
    with atomic_write(out / "PROVENANCE.txt") as handle:
        handle.write(
            f"Derived by rankkit.datasets.classic (examples/classic/prepare.py) from the {c.name} collection of the\n"
            "Glasgow/SMART classic test collections (../shared/data/classic-ir-collections, from\n"
            "github.com/fabianobie/luppar @ 9abddd4af4e3720b8efc7716c8d1f22c6e76354e; research use,\n"
            "attribution to the original creators).\n"
        )
        for path in c.sources:
            handle.write(f"  {path.name} sha256 {sha256(path)}\n")
        handle.write(json.dumps(stats) + "\n")
        if folds:
            handle.write(f"folds/: {folds} folds of the judged queries, seed {seed} (see rankkit.datasets.classic.make_folds).\n")
    return stats


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Command line: convert one collection (see the module docstring); ``prog`` names the command in messages."""
    parser = argparse.ArgumentParser(prog=prog, description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--collection", required=True, choices=sorted(LOADERS), help="which collection")
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE,
                        help="classic-ir-collections folder (one sub-folder per collection)")
    parser.add_argument("--output", type=Path, required=True, help="output folder")
    parser.add_argument("--folds", type=int, default=5, help="cross-validation folds of the judged queries (0: none)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fold shuffle")
    args = parser.parse_args(argv)
    try:
        stats = write_collection(load_collection(args.collection, args.source), args.output, args.folds, args.seed)
    except RankkitError as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    folds = f"; folds {stats['fold_sizes']}" if "fold_sizes" in stats else ""
    print(
        f"{stats['collection']}: {stats['documents']} documents (median {stats['median_words']:g} words, "
        f"mean {stats['mean_words']}, max {stats['max_words']}, {stats['documents_over_512_words']} over 512), "
        f"{stats['queries']} queries ({stats['judged_queries']} judged), {stats['judgments']} judgments "
        f"({stats['relevant']} relevant){folds} -> {args.output}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main(prog="python -m rankkit.datasets.classic")
