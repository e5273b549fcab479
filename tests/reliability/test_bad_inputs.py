"""Bad and unusual inputs across the subcommands: one error line, exit 2, no traceback, nothing written.

Every case in :data:`CASES` runs ``rankkit ARGS`` (in-process, so a traceback fails the test) in a
fresh workspace of small files, then checks that

* the exit code is the expected one (2 for a user mistake),
* stderr holds exactly one ``rankkit: error:`` line, naming the file (with its line) or the option,
  and no traceback,
* no file in the workspace was created, changed or removed (no output, no temporary, no input
  overwritten).

The legitimate inputs that must keep working (CRLF, gzip, a BOM, negative relevance, in-place
rewrites of the same kind, stream outputs, symlinks) follow the table. Guarantees they hold are
listed in docs/RELIABILITY.md.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import stat
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from rankkit.formats import read_groups, read_run

Cli = Callable[..., object]

# ------------------------------------------------------------------------------------ workspace

RUN_LINES = "".join(
    f"q{q} Q0 d{d} {rank} {10.0 - rank / 2} base\n"
    for q in (1, 2, 3)
    for rank, d in enumerate(range(q, q + 10), start=1)
)
QRELS_TEXT = "q1 0 d1 2\nq1 0 d2 0\nq1 0 d3 1\nq2 0 d5 1\nq2 0 d6 -1\nq3 0 d9 3\n"
TOPICS_TEXT = "q1\tfirst query\nq2\tsecond query\nq3\tthird query\n"
CORPUS_TEXT = "".join(f"d{i}\tpassage {i} about topic {i % 3}\n" for i in range(0, 20))
BIG_RUN = "".join(f"q{q} Q0 d{d} {d + 1} {1.0 / (d + 1)} big\n" for q in range(40) for d in range(60))

FILES: dict[str, bytes] = {
    "run.txt": RUN_LINES.encode(),
    "run2.txt": RUN_LINES.replace(" base\n", " other\n").replace("q1 Q0 d1 1", "q1 Q0 d1 9").encode(),
    "qrels.txt": QRELS_TEXT.encode(),
    "topics.tsv": TOPICS_TEXT.encode(),
    "corpus.tsv": CORPUS_TEXT.encode(),
    "empty.run": b"\n\n",
    "cols.run": b"q1 Q0 d1 1 1.0\n",
    "score.run": b"q1 Q0 d1 1 1.0 t\nq1 Q0 d2 2 high t\n",
    "rank.run": b"q1 Q0 d1 first 1.0 t\n",
    "nan.run": b"q1 Q0 d1 1 1.0 t\nq1 Q0 d2 2 nan t\nq1 Q0 d3 3 inf t\n",
    "dup.run": b"q1 Q0 d1 1 2.0 t\nq1 Q0 d1 2 1.0 t\n",
    "latin1.run": b"q1 Q0 d1 1 2.0 t\nq1 Q0 caf\xe9 2 1.0 t\n",
    "trunc.run.gz": gzip.compress(BIG_RUN.encode(), mtime=0)[:1500],
    "garbage.run.gz": b"\x1f\x8b\x08\x00" + bytes(range(200)),
    "split.run": b"q1 Q0 d1 1 2.0 t\nq2 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0 t\n",
    "rel.qrels": b"q1 0 d1 2\nq1 0 d2 yes\n",
    "cols.qrels": b"q1 0 d1\n",
    "dup.qrels": b"q1 0 d1 2\nq1 0 d1 0\n",
    "latin1.qrels": b"q1 0 d1 2\nq1 0 \xe9t\xe9 1\n",
    "utf16.qrels": "q1 0 d1 2\n".encode("utf-16"),
    "trunc.qrels.gz": gzip.compress("".join(f"q{i % 7} 0 d{i} 1\n" for i in range(3000)).encode(), mtime=0)[:700],
    "other.qrels": b"x1 0 d1 2\nx2 0 d5 1\n",
    "notab.tsv": b"q1 first query without a tab\n",
    "latin1.tsv": b"q1\tfirst query\nq2\tse\xf1al\n",
    "dup.tsv": b"q1\tfirst\nq1\tagain\n",
    "nokey.jsonl": b'{"text": "no id"}\n',
    "badjson.jsonl": b'{"qid": "q1", "text": "x"\n',
    "latin1.corpus.tsv": b"d1\tfine\nd2\tcaf\xe9\n",
    "dup.corpus.tsv": b"d1\tone\nd2\ttwo\nd1\tagain\n",
    "notab.corpus.tsv": b"d1\tone\nd2 two\n",
    "trunc.corpus.tsv.gz": gzip.compress("".join(f"d{i}\tpassage {i}\n" for i in range(3000)).encode(), mtime=0)[:900],
    "afile": b"a regular file\n",
    "groups.jsonl": b'{"qid": "q1", "query": "x", "pos": [{"docid": "a", "text": "A", "label": 1}], '
    b'"neg": [{"docid": "b", "text": "B", "score": 1.0}]}\n',
    "nopos.jsonl": b'{"qid": "q1", "query": "x", "pos": [], "neg": ["B"]}\n',
}


def make_workspace(root: Path) -> Path:
    """The files above, an empty folder ``adir`` and an empty read-only folder ``ro``."""
    ws = root / "ws"
    ws.mkdir()
    for name, data in FILES.items():
        (ws / name).write_bytes(data)
    (ws / "adir").mkdir()
    (ws / "ro").mkdir()
    os.chmod(ws / "ro", 0o555)  # no write bit: read-only even for root
    return ws


def snapshot(folder: Path) -> dict[str, str]:
    """Every entry under ``folder`` (hidden ones too) with a hash of its content."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames:
            out[os.path.relpath(os.path.join(dirpath, name), folder)] = "dir"
        for name in filenames:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as handle:
                out[os.path.relpath(path, folder)] = hashlib.sha1(handle.read()).hexdigest()
    return out


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # Docid tables are a cache, not an output: kept outside the workspace that must not change.
    monkeypatch.setenv("RANKKIT_CACHE_DIR", str(tmp_path / "cache"))
    return make_workspace(tmp_path)


def error_line(result: object) -> str:
    """The single ``rankkit: error:`` line of a result, after checking there is exactly one."""
    stderr: str = result.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("rankkit: error: ")]
    assert len(errors) == 1, stderr
    return errors[0]


# ---------------------------------------------------------------------------------- the cases


@dataclass(frozen=True)
class Case:
    """``rankkit ARGS`` must exit ``code`` with one error line containing ``needle``.

    ``{name}`` in args and needle is replaced by the path of workspace file ``name``.
    """

    id: str
    args: str
    needle: str
    code: int = 2


def E(id: str, args: str, needle: str) -> Case:  # noqa: N802 - short table constructors
    return Case(f"eval-{id}", f"eval {args}", needle)


def F(id: str, args: str, needle: str) -> Case:  # noqa: N802
    return Case(f"fuse-{id}", f"fuse {args}", needle)


def V(id: str, args: str, needle: str, code: int = 2) -> Case:  # noqa: N802
    return Case(f"validate-{id}", f"validate {args}", needle, code)


MINE = "mine --run {run.txt} --qrels {qrels.txt} --topics {topics.tsv} --corpus {corpus.tsv}"


def M(id: str, args: str, needle: str) -> Case:  # noqa: N802
    return Case(f"mine-{id}", f"{MINE} {args}" if "--run" not in args else f"mine {args}", needle)


def C(id: str, args: str, needle: str) -> Case:  # noqa: N802
    return Case(f"consistency-{id}", f"consistency {args}", needle)


OK_EVAL = "{run.txt} --qrels {qrels.txt}"
OK_FUSE = "--method rrf {run.txt} {run2.txt}"
IDX = "index --kind bm25 --corpus {corpus.tsv}"
RET = "retrieve --model bm25 --index {adir} --topics {topics.tsv}"

CASES: list[Case] = [
    # ---- eval: unreadable or malformed inputs
    E("missing-run", "{adir}/nope.run --qrels {qrels.txt}", "{adir}/nope.run: no such file"),
    E("missing-qrels", "{run.txt} --qrels {adir}/nope.qrels", "nope.qrels: no such file"),
    E("run-is-dir", "{adir} --qrels {qrels.txt}", "{adir}: is a directory"),
    E("qrels-is-dir", "{run.txt} --qrels {adir}", "{adir}: is a directory"),
    E("empty-run", "{empty.run} --qrels {qrels.txt}", "{empty.run}: file is empty"),
    E("run-5-columns", "{cols.run} --qrels {qrels.txt}", "{cols.run}:1: expected 6 columns"),
    E("run-bad-score", "{score.run} --qrels {qrels.txt}", "{score.run}:2: score 'high' is not a number"),
    E("run-bad-rank", "{rank.run} --qrels {qrels.txt}", "{rank.run}:1: rank 'first' is not an integer"),
    E("run-nan-score", "{nan.run} --qrels {qrels.txt}", "{nan.run}:2: score nan is not finite"),
    E("run-duplicate", "{dup.run} --qrels {qrels.txt}", "{dup.run}:2: duplicate document 'd1'"),
    E("run-latin1", "{latin1.run} --qrels {qrels.txt}", "{latin1.run}:2: not valid UTF-8"),
    E("run-truncated-gzip", "{trunc.run.gz} --qrels {qrels.txt}", "{trunc.run.gz}: corrupt or truncated gzip"),
    E("run-garbage-gzip", "{garbage.run.gz} --qrels {qrels.txt}", "{garbage.run.gz}: corrupt or truncated gzip"),
    E("qrels-bad-rel", "{run.txt} --qrels {rel.qrels}", "{rel.qrels}:2: relevance 'yes' is not an integer"),
    E("qrels-3-columns", "{run.txt} --qrels {cols.qrels}", "{cols.qrels}:1: expected 4 columns"),
    E("qrels-duplicate", "{run.txt} --qrels {dup.qrels}", "{dup.qrels}:2: duplicate judgment"),
    E("qrels-latin1", "{run.txt} --qrels {latin1.qrels}", "{latin1.qrels}:2: not valid UTF-8"),
    E("qrels-utf16", "{run.txt} --qrels {utf16.qrels}", "{utf16.qrels}:1: looks like UTF-16"),
    E("qrels-truncated-gzip", "{run.txt} --qrels {trunc.qrels.gz}", "{trunc.qrels.gz}: corrupt or truncated gzip"),
    E("run-twice", "{run.txt} {run.txt} --qrels {qrels.txt}", "is given twice"),
    # ---- eval: measures and options
    E("rr-at-0", f"{OK_EVAL} -m RR@0", "'RR@0': the cutoff must be a whole number of at least 1"),
    E("judged-at-0", f"{OK_EVAL} -m Judged@0", "'Judged@0': the cutoff"),
    E("ndcg-cut-0", f"{OK_EVAL} -m ndcg_cut.0", "'ndcg_cut.0': cutoff must be at least 1"),
    E("p-fraction", f"{OK_EVAL} -m P@1.5", "'P@1.5'"),
    E("iprec-above-1", f"{OK_EVAL} -m IPrec@1.5", "'IPrec@1.5': the recall level"),
    E("gain-nan", f"{OK_EVAL} -m ndcg.1=nan", "gain of level 1 must be a finite number"),
    E("unknown-measure", f"{OK_EVAL} -m Foo@10", "unknown measure 'Foo@10'"),
    E("alpha-0", f"{OK_EVAL} --alpha 0", "--alpha must be in (0, 1), got 0.0"),
    E("alpha-nan", f"{OK_EVAL} --alpha nan", "--alpha must be a finite number, got nan"),
    E("alpha-1.5", f"{OK_EVAL} --alpha 1.5", "--alpha must be in (0, 1)"),
    E("permutations-0", f"{OK_EVAL} --permutations 0", "--permutations must be at least 1, got 0"),
    E("seed-negative", f"{OK_EVAL} --seed -1", "--seed must be at least 0, got -1"),
    E("max-docs-0", f"{OK_EVAL} --max-docs 0", "--max-docs must be at least 1, got 0"),
    E("max-docs-text", f"{OK_EVAL} --max-docs many", "'--max-docs'"),
    E("format", f"{OK_EVAL} --format xml", "--format must be one of"),
    E("test", f"{OK_EVAL} --test z", "--test must be one of"),
    E("correction", f"{OK_EVAL} --correction sidak", "--correction must be one of"),
    E("unknown-option", f"{OK_EVAL} --bogus", "No such option: --bogus"),
    E("no-qrels", "{run.txt}", "Missing option '--qrels'"),
    E("plot-needs-two", f"{OK_EVAL} -m P@5 --plot {{adir}}/p.png", "--plot needs"),
    # ---- eval: outputs
    E("output-is-run", f"{OK_EVAL} -o {{run.txt}}", "--output {run.txt} is the input RUN"),
    E("output-is-qrels", f"{OK_EVAL} -o {{qrels.txt}}", "--output {qrels.txt} is the input --qrels"),
    E("output-is-plot", f"{OK_EVAL} -m R@5 -o {{adir}}/x.png --plot {{adir}}/x.png", "is the same file as --output"),
    E("plot-is-run", f"{OK_EVAL} -m R@5 --plot {{run.txt}}", "--plot {run.txt} is the input RUN"),
    E("output-is-dir", f"{OK_EVAL} -o {{adir}}", "--output {adir}: is a directory"),
    E("output-under-file", f"{OK_EVAL} -o {{afile}}/table.txt", "{afile} is not a directory"),
    E("output-read-only", f"{OK_EVAL} -o {{ro}}/table.txt", "folder {ro} is not writable"),
    E("plot-is-dir", f"{OK_EVAL} -m R@5 --plot {{adir}}", "--plot {adir}: is a directory"),
    # ---- fuse
    F("missing-run", "--method rrf {run.txt} {adir}/nope.run -o {adir}/f.run", "nope.run: no such file"),
    F("output-is-dir", f"{OK_FUSE} -o {{adir}}", "--output {adir}: is a directory"),
    F("output-read-only", f"{OK_FUSE} -o {{ro}}/f.run", "folder {ro} is not writable"),
    F("output-under-file", f"{OK_FUSE} -o {{afile}}/f.run", "{afile} is not a directory"),
    F("k-0", f"{OK_FUSE} --k 0 -o {{adir}}/f.run", "--k must be at least 1, got 0"),
    F("k-negative", f"{OK_FUSE} --k -5 -o {{adir}}/f.run", "--k must be at least 1, got -5"),
    F("k-text", f"{OK_FUSE} --k ten -o {{adir}}/f.run", "'--k'"),
    F("depth-0", f"{OK_FUSE} --depth 0 -o {{adir}}/f.run", "--depth must be at least 1"),
    F("rrf-k-negative", f"{OK_FUSE} --rrf-k -1 -o {{adir}}/f.run", "--rrf-k must be at least 0"),
    F("rrf-k-nan", f"{OK_FUSE} --rrf-k nan -o {{adir}}/f.run", "--rrf-k must be a finite number"),
    F("alpha-2", "--method interpolate {run.txt} {run2.txt} --alpha 2 -o {adir}/f.run", "--alpha must be in [0, 1]"),
    F("alpha-inf", "--method interpolate {run.txt} {run2.txt} --alpha inf -o {adir}/f.run", "--alpha must be a finite"),
    F("weights-nan", "--method combsum {run.txt} {run2.txt} --weights 1,nan -o {adir}/f.run", "--weights must be finite"),
    F("weights-count", "--method combsum {run.txt} {run2.txt} --weights 1 -o {adir}/f.run", "--weights has 1 values"),
    F("method", "--method borda {run.txt} {run2.txt} -o {adir}/f.run", "unknown fusion method 'borda'"),
    F("one-run", "--method rrf {run.txt} -o {adir}/f.run", "at least 2 runs"),
    F("runtag-space", f"{OK_FUSE} --runtag 'a b' -o {{adir}}/f.run", "--runtag must be one non-empty word"),
    F("malformed-run", "--method rrf {run.txt} {cols.run} -o {adir}/f.run", "{cols.run}:1: expected 6 columns"),
    F("latin1-run", "--method rrf {run.txt} {latin1.run} -o {adir}/f.run", "{latin1.run}:2: not valid UTF-8"),
    F("truncated-gzip", "--method rrf {run.txt} {trunc.run.gz} -o {adir}/f.run", "{trunc.run.gz}: corrupt or trunc"),
    F("output-replaces-run-of-failed-fuse", "--method rrf {run.txt} {dup.run} -o {run.txt}", "{dup.run}:2: duplicate"),
    # ---- validate: 2 means the input could not be read, or --fix could not be written
    V("missing", "{adir}/nope.run", "nope.run: no such file"),
    V("is-dir", "{adir}", "{adir}: is a directory"),
    V("truncated-gzip", "{trunc.run.gz}", "{trunc.run.gz}: corrupt or truncated gzip"),
    V("missing-qrels", "{run.txt} --qrels {adir}/nope.qrels", "nope.qrels: no such file"),
    V("malformed-qrels", "{run.txt} --qrels {cols.qrels}", "{cols.qrels}:1: expected 4 columns"),
    V("latin1-qrels", "{run.txt} --qrels {latin1.qrels}", "{latin1.qrels}:2: not valid UTF-8"),
    V("fix-is-qrels", "{run.txt} --qrels {qrels.txt} --fix {qrels.txt}", "--fix {qrels.txt} is the input --qrels"),
    V("fix-is-dir", "{run.txt} --fix {adir}", "--fix {adir}: is a directory"),
    V("fix-read-only", "{run.txt} --fix {ro}/fixed.run", "folder {ro} is not writable"),
    V("fix-under-file", "{run.txt} --fix {afile}/fixed.run", "{afile} is not a directory"),
    # ---- mine
    M("output-is-run", "-o {run.txt}", "--output {run.txt} is the input --run"),
    M("output-is-qrels", "-o {qrels.txt}", "--output {qrels.txt} is the input --qrels"),
    M("output-is-topics", "-o {topics.tsv}", "--output {topics.tsv} is the input --topics"),
    M("output-is-corpus", "-o {corpus.tsv}", "--output {corpus.tsv} is the input --corpus"),
    M("output-is-dir", "-o {adir}", "--output {adir}: is a directory"),
    M("output-read-only", "-o {ro}/g.jsonl", "folder {ro} is not writable"),
    M("no-group", "--run {run.txt} --qrels {other.qrels} --topics {topics.tsv} --corpus {corpus.tsv} -o {adir}/g.jsonl",
      "no training group could be built from {run.txt}"),
    M("depth-0", "--depth 0 -o {adir}/g.jsonl", "--depth must be at least 1, got 0"),
    M("negatives-0", "--negatives 0 -o {adir}/g.jsonl", "--negatives must be at least 1, got 0"),
    M("skip-top-negative", "--skip-top -1 -o {adir}/g.jsonl", "--skip-top must be at least 0, got -1"),
    M("skip-top-at-depth", "--depth 5 --skip-top 5 -o {adir}/g.jsonl", "--skip-top must be in [0, depth)"),
    M("min-rel-0", "--min-rel 0 -o {adir}/g.jsonl", "--min-rel must be at least 1, got 0"),
    M("strategy", "--strategy best -o {adir}/g.jsonl", "unknown --strategy 'best'"),
    M("both-sources", "--index {adir} -o {adir}/g.jsonl", "exactly one"),
    M("missing-topics", "--run {run.txt} --qrels {qrels.txt} --topics {adir}/no.tsv --corpus {corpus.tsv} -o {adir}/g",
      "no.tsv: no such file"),
    M("topics-no-tab", "--run {run.txt} --qrels {qrels.txt} --topics {notab.tsv} --corpus {corpus.tsv} -o {adir}/g",
      "{notab.tsv}:1: expected 'qid<TAB>text'"),
    M("topics-latin1", "--run {run.txt} --qrels {qrels.txt} --topics {latin1.tsv} --corpus {corpus.tsv} -o {adir}/g",
      "{latin1.tsv}:2: not valid UTF-8"),
    M("topics-duplicate", "--run {run.txt} --qrels {qrels.txt} --topics {dup.tsv} --corpus {corpus.tsv} -o {adir}/g",
      "{dup.tsv}:2: query 'q1' appears twice"),
    M("corpus-latin1", "--run {run.txt} --qrels {qrels.txt} --topics {topics.tsv} --corpus {latin1.corpus.tsv} "
      "-o {adir}/g", "{latin1.corpus.tsv}:2: not valid UTF-8"),
    M("corpus-duplicate", "--run {run.txt} --qrels {qrels.txt} --topics {topics.tsv} --corpus {dup.corpus.tsv} "
      "-o {adir}/g", "{dup.corpus.tsv}:3: duplicate document id 'd1'"),
    M("corpus-no-tab", "--run {run.txt} --qrels {qrels.txt} --topics {topics.tsv} --corpus {notab.corpus.tsv} "
      "-o {adir}/g", "{notab.corpus.tsv}:2: expected 'id<TAB>text'"),
    M("corpus-truncated-gzip", "--run {run.txt} --qrels {qrels.txt} --topics {topics.tsv} "
      "--corpus {trunc.corpus.tsv.gz} -o {adir}/g", "{trunc.corpus.tsv.gz}: corrupt or truncated gzip"),
    M("cache-dir-is-file", "--cache-dir {afile} -o {adir}/g.jsonl", "cannot create the docid table cache {afile}"),
    M("run-not-contiguous", "--run {split.run} --qrels {qrels.txt} --topics {topics.tsv} --corpus {corpus.tsv} "
      "-o {adir}/g", "{split.run}:3: lines of query 'q1' are not contiguous"),
    # ---- consistency
    C("depth-0", "{run.txt} {run2.txt} --depth 0", "--depth must be at least 1, got 0"),
    C("ref-depth-0", "{run.txt} {run2.txt} --ref-depth 0", "--ref-depth must be at least 1, got 0"),
    C("format", "{run.txt} {run2.txt} --format xml", "unknown --format 'xml'"),
    C("missing-reference", "{run.txt} {adir}/nope.run", "nope.run: no such file"),
    C("latin1-run", "{latin1.run} {run.txt}", "{latin1.run}:2: not valid UTF-8"),
    # ---- index (checks made before the JVM starts)
    Case("index-threads-0", f"{IDX} --index {{adir}}/ix --threads 0", "--threads must be at least 1, got 0"),
    Case("index-threads-negative", f"{IDX} --index {{adir}}/ix --threads -2", "--threads must be at least 1, got -2"),
    Case("index-missing-corpus", "index --kind bm25 --corpus {adir}/no.tsv --index {adir}/ix", "no.tsv: no such file"),
    Case("index-corpus-is-dir", "index --kind bm25 --corpus {adir} --index {adir}/ix", "{adir}: is a directory"),
    Case("index-is-file", f"{IDX} --index {{afile}}", "--index {afile}: exists and is not a directory"),
    Case("index-under-file", f"{IDX} --index {{afile}}/ix", "{afile} is not a directory"),
    Case("index-read-only", f"{IDX} --index {{ro}}/ix", "--index {ro}/ix: folder {ro} is not writable"),
    Case("index-kind", "index --kind sparse --corpus {corpus.tsv} --index {adir}/ix", "unknown index kind 'sparse'"),
    Case("index-dense-option-on-bm25", f"{IDX} --index {{adir}}/ix --nlist 5", "--nlist"),
    Case("index-dense-batch-0", "index --kind dense --model repbert --corpus {corpus.tsv} --index {adir}/ix "
         "--batch-size 0", "--batch-size must be at least 1, got 0"),
    Case("index-dense-pq-bits", "index --kind dense --model repbert --corpus {corpus.tsv} --index {adir}/ix "
         "--faiss ivfpq --pq-bits 99", "--pq-bits must be between 1 and 16, got 99"),
    # ---- retrieve (checks made before the index is opened)
    Case("retrieve-k-0", f"{RET} -o {{adir}}/r.run --k 0", "--k must be at least 1, got 0"),
    Case("retrieve-threads-0", f"{RET} -o {{adir}}/r.run --threads 0", "--threads must be at least 1, got 0"),
    Case("retrieve-b-above-1", f"{RET} -o {{adir}}/r.run --b 1.5", "--b must be in [0, 1], got 1.5"),
    Case("retrieve-k1-negative", f"{RET} -o {{adir}}/r.run --k1 -1", "--k1 must be at least 0"),
    Case("retrieve-k1-nan", f"{RET} -o {{adir}}/r.run --k1 nan", "--k1 must be a finite number"),
    Case("retrieve-fb-terms-0", f"{RET} -o {{adir}}/r.run --rm3 --fb-terms 0", "--fb-terms must be at least 1"),
    Case("retrieve-original-weight", f"{RET} -o {{adir}}/r.run --rm3 --original-weight 2",
         "--original-weight must be in [0, 1]"),
    Case("retrieve-output-is-topics", f"{RET} -o {{topics.tsv}}", "--output {topics.tsv} is the input --topics"),
    Case("retrieve-output-in-index", f"{RET} -o {{adir}}/r.run", "--output {adir}/r.run is inside the input --index"),
    Case("retrieve-output-is-dir", "retrieve --model bm25 --index {ro} --topics {topics.tsv} -o {adir}",
         "--output {adir}: is a directory"),
    Case("retrieve-model", "retrieve --model tfidf --index {adir} --topics {topics.tsv} -o {ro}/r", "unknown model"),
    # ---- the top level
    Case("unknown-command", "frobnicate", "No such command 'frobnicate'"),
    Case("doctor-option", "doctor --bogus", "No such option: --bogus"),
]


def expand(text: str, ws: Path) -> str:
    """Replace ``{name}`` by the workspace path of ``name`` (``{ro}``, ``{adir}`` included)."""
    out = text
    for name in (*FILES, "adir", "ro"):
        out = out.replace("{" + name + "}", str(ws / name))
    assert "{" not in out.replace("{TAB}", "").replace("<TAB>", ""), out
    return out


def split_args(text: str) -> list[str]:
    import shlex

    return shlex.split(text)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input(case: Case, cli: Cli, ws: Path) -> None:
    before = snapshot(ws)
    result = cli(*split_args(expand(case.args, ws)))
    assert result.code == case.code, (result.code, result.stderr)  # type: ignore[attr-defined]
    line = error_line(result)
    assert expand(case.needle, ws) in line, line
    assert snapshot(ws) == before  # nothing created, changed or removed


def test_enough_cases() -> None:
    assert len(CASES) >= 80
    assert len({case.id for case in CASES}) == len(CASES)


# pytrec_eval aborts the whole process (SIGABRT) on a zero cutoff: run these in a child process.
@pytest.mark.parametrize("measure", ["nDCG@0", "P@0", "R@0", "P.0"])
def test_zero_cutoff_is_refused_before_the_evaluator(measure: str, ws: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "rankkit", "eval", str(ws / "run.txt"), "--qrels", str(ws / "qrels.txt"),
         "-m", measure],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("rankkit: error: ") == 1 and measure in proc.stderr and "Traceback" not in proc.stderr


# ------------------------------------------------------------- JVM-backed index and retrieve


@pytest.mark.parametrize(
    ("corpus", "needle"),
    [
        ("latin1.corpus.tsv", "{latin1.corpus.tsv}:2: not valid UTF-8"),
        ("dup.corpus.tsv", "{dup.corpus.tsv}:3: duplicate document id 'd1'"),
        ("trunc.corpus.tsv.gz", "{trunc.corpus.tsv.gz}: corrupt or truncated gzip"),
        ("notab.corpus.tsv", "{notab.corpus.tsv}:2: expected 'id<TAB>text'"),
    ],
)
def test_bad_corpus_leaves_no_index(corpus: str, needle: str, cli: Cli, ws: Path) -> None:
    before = snapshot(ws)
    result = cli("index", "--kind", "bm25", "--corpus", ws / corpus, "--index", ws / "adir" / "ix", "--threads", "1")
    assert result.code == 2  # type: ignore[attr-defined]
    assert expand(needle, ws) in error_line(result)
    assert snapshot(ws) == before  # no index, no staging folder


@pytest.fixture(scope="module")
def bm25_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from rankkit.lexical.index import build_bm25_index

    root = tmp_path_factory.mktemp("bm25")
    (root / "corpus.tsv").write_text(CORPUS_TEXT, encoding="utf-8")
    build_bm25_index(root / "corpus.tsv", root / "index", threads=1)
    return root / "index"


@pytest.mark.parametrize(
    ("topics", "needle"),
    [
        ("latin1.tsv", "{latin1.tsv}:2: not valid UTF-8"),
        ("notab.tsv", "{notab.tsv}:1: expected 'qid<TAB>text'"),
        ("nokey.jsonl", "{nokey.jsonl}:1: missing query id"),
        ("badjson.jsonl", "{badjson.jsonl}:1: invalid JSON"),
        ("adir/none.tsv", "none.tsv: no such file"),
    ],
)
def test_bad_topics_leave_no_run(topics: str, needle: str, cli: Cli, ws: Path, bm25_index: Path) -> None:
    before = snapshot(ws)
    result = cli("retrieve", "--model", "bm25", "--index", bm25_index, "--topics", ws / topics, "-o", ws / "r.run")
    assert result.code == 2  # type: ignore[attr-defined]
    assert expand(needle, ws) in error_line(result)
    assert snapshot(ws) == before


def test_retrieve_bom_topics_and_threads_default(cli: Cli, ws: Path, bm25_index: Path) -> None:
    bom = ws / "bom.tsv"
    bom.write_bytes(b"\xef\xbb\xbf" + TOPICS_TEXT.encode())
    assert cli("retrieve", "--index", bm25_index, "--topics", bom, "-o", ws / "a.run", "--k", "5").code == 0  # type: ignore[attr-defined]
    assert cli("retrieve", "--index", bm25_index, "--topics", ws / "topics.tsv", "-o", ws / "b.run",  # type: ignore[attr-defined]
               "--k", "5").code == 0
    assert (ws / "a.run").read_bytes() == (ws / "b.run").read_bytes()  # no phantom "\ufeffq1"


# --------------------------------------------------- the lead's commands: what already holds

LEAD_CASES: list[Case] = [
    Case("train-missing-groups", "train --model repbert --train {adir}/no.jsonl --output {adir}/ck", "no.jsonl: no such"),
    Case("train-groups-latin1", "train --model repbert --train {latin1.run} --output {adir}/ck", "{latin1.run}"),
    Case("train-lr-nan", "train --model repbert --train {groups.jsonl} --output {adir}/ck --lr nan", "--lr"),
    Case("train-epochs-0", "train --model repbert --train {groups.jsonl} --output {adir}/ck --epochs 0", "--epochs"),
    Case("train-batch-0", "train --model repbert --train {groups.jsonl} --output {adir}/ck --batch-size 0",
         "--batch-size"),
    Case("train-unknown-model", "train --model bm42 --train {groups.jsonl} --output {adir}/ck", "unknown model"),
    Case("train-output-is-file", "train --model repbert --train {groups.jsonl} --output {afile}", "{afile}"),
    Case("rerank-depth-0", "rerank --model repbert --run {run.txt} --topics {topics.tsv} --corpus {corpus.tsv} "
         "-o {adir}/r.run --depth 0", "--depth"),
    Case("rerank-missing-checkpoint", "rerank --model mono --checkpoint {adir}/none --run {run.txt} "
         "--topics {topics.tsv} --corpus {corpus.tsv} -o {adir}/r.run", "none"),
    Case("explain-missing-checkpoint", "explain --model matrank --checkpoint {adir}/none --run {run.txt} "
         "--topics {topics.tsv} --corpus {corpus.tsv} --qid q1 --output {adir}/x.png", "none"),
]


@pytest.mark.parametrize("case", LEAD_CASES, ids=[case.id for case in LEAD_CASES])
def test_lead_commands_black_box(case: Case, cli: Cli, ws: Path) -> None:
    before = snapshot(ws)
    result = cli(*split_args(expand(case.args, ws)))
    assert result.code == case.code, (result.code, result.stderr)  # type: ignore[attr-defined]
    assert expand(case.needle, ws) in error_line(result)
    assert snapshot(ws) == before


# ------------------------------------------------------------ legitimate inputs keep working


def table(cli: Cli, *args: object) -> str:
    result = cli("eval", *args, "-m", "nDCG@10", "-m", "AP", "-m", "P@5", "-f", "tsv", "-c")
    assert result.code == 0, result.stderr  # type: ignore[attr-defined]
    return result.stdout.split("\n", 1)[1]  # type: ignore[attr-defined]


def test_crlf_gzip_bom_and_plain_gz_score_as_the_plain_files(cli: Cli, ws: Path) -> None:
    expected = table(cli, ws / "run.txt", "--qrels", ws / "qrels.txt")
    variants = {
        "crlf": (RUN_LINES.replace("\n", "\r\n").encode(), QRELS_TEXT.replace("\n", "\r\n").encode()),
        "gzip": (gzip.compress(RUN_LINES.encode()), gzip.compress(QRELS_TEXT.encode())),
        "bom": (b"\xef\xbb\xbf" + RUN_LINES.encode(), b"\xef\xbb\xbf" + QRELS_TEXT.encode()),
        "plain-named-gz": (RUN_LINES.encode(), QRELS_TEXT.encode()),
    }
    for name, (run, qrels) in variants.items():
        suffix = ".gz" if "gz" in name else ""
        (ws / f"{name}.run{suffix}").write_bytes(run)
        (ws / f"{name}.qrels{suffix}").write_bytes(qrels)
        got = table(cli, ws / f"{name}.run{suffix}", "--qrels", ws / f"{name}.qrels{suffix}")
        assert got.replace(str(ws / f"{name}.run{suffix}"), "R") == expected.replace(str(ws / "run.txt"), "R"), name


def test_negative_relevance_is_kept_and_not_relevant(cli: Cli, ws: Path) -> None:
    (ws / "neg.run").write_text("q2 Q0 d6 1 2.0 t\nq2 Q0 d5 2 1.0 t\n")
    result = cli("eval", ws / "neg.run", "--qrels", ws / "qrels.txt", "-m", "P@1", "-m", "RR", "-f", "tsv")
    assert result.code == 0 and "P@1\t0.0" in result.stdout and "RR\t0.5" in result.stdout  # type: ignore[attr-defined]


def test_distinct_non_ascii_docids_stay_distinct(cli: Cli, ws: Path) -> None:
    (ws / "u.run").write_text("q1 Q0 dé 1 2.0 t\nq1 Q0 dè 2 1.0 t\n", encoding="utf-8")
    (ws / "u.qrels").write_text("q1 0 dè 1\n", encoding="utf-8")
    result = cli("eval", ws / "u.run", "--qrels", ws / "u.qrels", "-m", "RR", "-f", "tsv")
    assert result.code == 0 and "RR\t0.5" in result.stdout  # type: ignore[attr-defined]
    assert read_run(ws / "u.run") == {"q1": {"dé": 2.0, "dè": 1.0}}


def test_in_place_rewrites_of_the_same_kind(cli: Cli, ws: Path) -> None:
    """fuse -o one of its runs, validate --fix RUN: the input is read whole, then replaced atomically."""
    reference = ws / "adir" / "ref.run"
    assert cli("fuse", "--method", "rrf", ws / "run.txt", ws / "run2.txt", "-o", reference).code == 0  # type: ignore[attr-defined]
    assert cli("fuse", "--method", "rrf", ws / "run.txt", ws / "run2.txt", "-o", ws / "run.txt").code == 0  # type: ignore[attr-defined]
    assert (ws / "run.txt").read_bytes() == reference.read_bytes()
    (ws / "messy.run").write_text("q1 Q0 a 2 1.0 t\nq1 Q0 b 1 2.0 t\nq1 Q0 a 3 0.5 t\n")
    assert cli("validate", ws / "messy.run", "--fix", ws / "messy.run").code == 1  # type: ignore[attr-defined]
    assert (ws / "messy.run").read_text() == "q1 Q0 b 1 2.0 t\nq1 Q0 a 2 1.0 t\n"
    assert cli("validate", ws / "messy.run").code == 0  # type: ignore[attr-defined]


def test_validate_reports_non_utf8_lines_and_fix_drops_them(cli: Cli, ws: Path) -> None:
    result = cli("validate", ws / "latin1.run", "--fix", ws / "adir" / "fixed.run")
    assert result.code == 1  # type: ignore[attr-defined]
    assert f"{ws / 'latin1.run'}:2: error: not valid UTF-8" in result.stdout  # type: ignore[attr-defined]
    assert (ws / "adir" / "fixed.run").read_text() == "q1 Q0 d1 1 2.0 t\n"


def test_stream_outputs_are_written_through(cli: Cli, ws: Path) -> None:
    result = cli("fuse", "--method", "rrf", ws / "run.txt", ws / "run2.txt", "-o", "-", "--k", "2")
    assert result.code == 0 and result.stdout.count(" fuse-rrf\n") == 6  # type: ignore[attr-defined]
    fifo = ws / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    assert cli("eval", ws / "run.txt", "--qrels", ws / "qrels.txt", "-m", "P@5", "-f", "tsv", "-o", fifo).code == 0  # type: ignore[attr-defined]
    reader.join(30)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still a FIFO, not replaced by a file
    assert b"P@5" in received[0]


def test_symlink_output_replaces_its_target_and_stays_a_link(cli: Cli, ws: Path) -> None:
    target = ws / "adir" / "real.run"
    target.write_text("old\n")
    link = ws / "link.run"
    link.symlink_to(target)
    assert cli("fuse", "--method", "rrf", ws / "run.txt", ws / "run2.txt", "-o", link).code == 0  # type: ignore[attr-defined]
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert read_run(target) and sorted(p.name for p in (ws / "adir").iterdir()) == ["real.run"]


def test_missing_output_folders_are_created(cli: Cli, ws: Path) -> None:
    out = ws / "adir" / "new" / "deeper" / "f.run"
    assert cli("fuse", "--method", "rrf", ws / "run.txt", ws / "run2.txt", "-o", out).code == 0  # type: ignore[attr-defined]
    assert read_run(out)


def test_mine_with_bom_topics_is_byte_identical_to_plain(cli: Cli, ws: Path) -> None:
    (ws / "bom.tsv").write_bytes(b"\xef\xbb\xbf" + TOPICS_TEXT.encode())
    outs = []
    for topics, name in ((ws / "topics.tsv", "a.jsonl"), (ws / "bom.tsv", "b.jsonl"), (ws / "topics.tsv", "a.jsonl")):
        out = ws / "adir" / name
        result = cli("mine", "--run", ws / "run.txt", "--qrels", ws / "qrels.txt", "--topics", topics,
                     "--corpus", ws / "corpus.tsv", "-o", out, "--negatives", "3")
        assert result.code == 0, result.stderr  # type: ignore[attr-defined]
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] == outs[2]
    assert [g.qid for g in read_groups(ws / "adir" / "a.jsonl")] == ["q1", "q2", "q3"]
    assert sorted(p.name for p in ws.iterdir() if p.name.endswith(".rkoffsets")) == []  # never beside the data
