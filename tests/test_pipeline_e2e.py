"""The whole pipeline on a tiny real slice, as a shell script would chain it (the `make demo` shape).

BM25 index + retrieve, mine, train a tiny RepBERT, dense index + retrieve, alternate fusion,
train a tiny MatRank, re-rank the fused run, evaluate with significance and a plot, explain one
query, and validate every run written on the way. Models are random-init 2-layer BERTs with a
vocabulary drawn from the slice, so this checks plumbing (every stage's output feeds the next and
is valid), not effectiveness.
"""

from __future__ import annotations

import collections
import gzip
import re
from pathlib import Path
from typing import Callable

import pytest
from _lexical_index import CORPUS, QRELS, TOPICS

from rankkit.formats import read_run, read_topics
from rankkit.models.backbone import write_tiny_backbone


def slice_vocabulary(limit: int = 400) -> list[str]:
    """The slice's most frequent lower-case words plus every query word."""
    counts: collections.Counter[str] = collections.Counter()
    with gzip.open(CORPUS, "rt", encoding="utf-8") as lines:
        for line in lines:
            counts.update(re.findall(r"[a-z]+", line.split("\t", 1)[-1].lower()))
    words = {w for w, _ in counts.most_common(limit)}
    for text in read_topics(TOPICS).values():
        words.update(re.findall(r"[a-z]+", text.lower()))
    return sorted(words)


def test_index_retrieve_mine_train_fuse_rerank_eval(cli: Callable[..., object], tmp_path: Path) -> None:
    def ok(*args: object) -> object:
        result = cli(*args)
        assert result.code == 0, f"rankkit {' '.join(map(str, args))}\n{result.stderr}"
        return result

    topics = read_topics(TOPICS)
    qids = sorted(topics)
    train_topics, test_topics = tmp_path / "train.tsv", tmp_path / "test.tsv"
    train_topics.write_text("".join(f"{q}\t{topics[q]}\n" for q in qids[:5]), encoding="utf-8")
    test_topics.write_text("".join(f"{q}\t{topics[q]}\n" for q in qids[5:]), encoding="utf-8")
    backbone = write_tiny_backbone(tmp_path / "tiny", words=slice_vocabulary(), hidden=24, layers=2, heads=2,
                                   intermediate=48, dropout=0.0, max_positions=160)

    # 1. BM25
    ok("index", "--kind", "bm25", "--corpus", CORPUS, "--index", tmp_path / "bm25", "--threads", 2)
    for name, tsv in (("train", train_topics), ("test", test_topics)):
        ok("retrieve", "--model", "bm25", "--index", tmp_path / "bm25", "--topics", tsv, "--k", 30,
           "--output", tmp_path / f"bm25.{name}.run")
    # 2. hard negatives for the training queries
    ok("mine", "--run", tmp_path / "bm25.train.run", "--qrels", QRELS, "--topics", train_topics,
       "--index", tmp_path / "bm25", "--negatives", 6, "--output", tmp_path / "groups.jsonl")
    # 3. dense: train a tiny RepBERT, index the slice, retrieve
    common = ["--backbone", backbone, "--max-steps", 3, "--batch-size", 2, "--group-size", 4, "--device", "cpu",
              "--seed", 0, "--max-doc-length", 48]
    ok("train", "--model", "repbert", "--train", tmp_path / "groups.jsonl", "--output", tmp_path / "repbert", *common)
    ok("index", "--kind", "dense", "--model", "repbert", "--checkpoint", tmp_path / "repbert", "--corpus", CORPUS,
       "--index", tmp_path / "dense", "--batch-size", 64)
    ok("retrieve", "--model", "repbert", "--index", tmp_path / "dense", "--topics", test_topics, "--k", 30,
       "--output", tmp_path / "repbert.test.run")
    # 4. fusion
    ok("fuse", "--method", "alternate", tmp_path / "bm25.test.run", tmp_path / "repbert.test.run", "--k", 30,
       "--output", tmp_path / "fused.test.run")
    # 5. re-ranker: train, re-rank the fused run
    ok("train", "--model", "matrank", "--train", tmp_path / "groups.jsonl", "--output", tmp_path / "matrank", *common)
    ok("rerank", "--model", "matrank", "--checkpoint", tmp_path / "matrank", "--run", tmp_path / "fused.test.run",
       "--topics", test_topics, "--index", tmp_path / "bm25", "--depth", 10, "--output", tmp_path / "matrank.test.run")
    # 6. evaluation with significance and a plot; explain one query
    runs = [tmp_path / f"{n}.test.run" for n in ("bm25", "repbert", "fused", "matrank")]
    result = ok("eval", "-m", "nDCG@10", "-m", "AP", "--qrels", QRELS, *runs, "-b", runs[0], "-f", "tsv",
                "--plot", tmp_path / "eval.png")
    table = [line.split("\t") for line in result.stdout.strip().splitlines()]
    assert {Path(row[0]).name for row in table[1:]} >= {r.name for r in runs}
    assert (tmp_path / "eval.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    qid = qids[5]
    ok("explain", "--model", "matrank", "--checkpoint", tmp_path / "matrank", "--run", tmp_path / "fused.test.run",
       "--topics", test_topics, "--index", tmp_path / "bm25", "--qid", qid, "--depth", 6,
       "--output", tmp_path / "explain.png")
    assert (tmp_path / "explain.png").stat().st_size > 1000

    # Every run is valid, covers the test queries, and the re-ranked run keeps the fused depth.
    for run in runs:
        result = cli("validate", "--quiet", run, "--qrels", QRELS)
        assert result.code == 0, result.stdout + result.stderr
        assert set(read_run(run)) == set(qids[5:])
    fused, reranked = read_run(tmp_path / "fused.test.run"), read_run(tmp_path / "matrank.test.run")
    for q in qids[5:]:
        assert set(reranked[q]) == set(fused[q])
        order = list(fused[q])
        assert list(reranked[q])[10:] == order[10:]  # below --depth, the input order


@pytest.fixture(autouse=True)
def _quiet_tokenizers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
