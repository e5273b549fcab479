"""Standard streams (issue 39): ``-`` is standard input for the stages that stream a run in (eval, fuse, validate)
and standard output for the runs retrieve and rerank write, so stages pipe into each other; eval's table is plain
TSV when its output is not a terminal (a pipe, a file), the box table on one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from rankkit.formats import read_run

ROOT = Path(__file__).resolve().parents[2]
DL19 = ROOT / "tests" / "data" / "dl19"
BM25 = DL19 / "BM25.trec_results_dl19.txt"
ADA2 = DL19 / "OPEN_AI_ADA2.trec_results_dl19.txt"
QRELS = DL19 / "qrels.dl19-passage.txt"


def rankkit(*args: object, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "rankkit", *map(str, args)], input=stdin, env=env,
                          capture_output=True, timeout=300, check=False)


def test_eval_reads_a_run_from_standard_input_and_prints_tsv_into_a_pipe() -> None:
    piped = rankkit("eval", "-", "--qrels", QRELS, "-m", "nDCG@10", stdin=BM25.read_bytes())
    named = rankkit("eval", BM25, "--qrels", QRELS, "-m", "nDCG@10")
    assert piped.returncode == 0 == named.returncode, piped.stderr
    rows = [line.split("\t") for line in piped.stdout.decode().splitlines()]
    assert rows[0] == ["run", "qid", "measure", "value"] and rows[1][:3] == ["-", "all", "nDCG@10"]
    assert float(rows[1][3]) == float(named.stdout.decode().splitlines()[1].split("\t")[3])
    assert "┃" not in piped.stdout.decode()  # no box table off a terminal


def test_eval_keeps_the_box_table_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    from rankkit.cli import eval_cmd

    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert eval_cmd.default_format(None) == "table" and eval_cmd.default_format("-") == "table"
    assert eval_cmd.default_format("report.txt") == "tsv"


def test_fuse_reads_standard_input_and_writes_standard_output() -> None:
    piped = rankkit("fuse", "-", ADA2, "-m", "rrf", "-o", "-", stdin=BM25.read_bytes())
    assert piped.returncode == 0, piped.stderr
    filed = rankkit("fuse", BM25, ADA2, "-m", "rrf", "-o", "-")
    assert piped.stdout == filed.stdout and len(piped.stdout.splitlines()) > 1000
    twice = rankkit("fuse", "-", "-", "-m", "rrf", "-o", "-", stdin=BM25.read_bytes())
    assert twice.returncode == 2 and b"'-' (standard input) can be given once" in twice.stderr


def test_validate_reads_standard_input() -> None:
    bad = BM25.read_bytes() + b"not a run line\n"
    result = rankkit("validate", "-", stdin=bad)
    assert result.returncode == 1
    assert b"/dev/stdin:4209: error" in result.stdout  # the line is named, as for a file


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory, backbone: Path) -> dict[str, Path]:
    """A tiny mono checkpoint and a zero-shot dense index of the tiny corpus on the tiny backbone."""
    from training_helpers import write_corpus, write_topics

    from rankkit.cli import main
    from rankkit.models import create_model
    from rankkit.models.checkpoint import save_model

    root = tmp_path_factory.mktemp("streams")
    save_model(create_model("mono", backbone), root / "mono", {})
    corpus, topics = write_corpus(root / "corpus.jsonl"), write_topics(root / "topics.tsv")
    try:
        main(["index", "--kind", "dense", "--model", "repbert", "--checkpoint", str(backbone), "--corpus", str(corpus),
              "--index", str(root / "index"), "--backend", "torch", "--device", "cpu"])
    except SystemExit as done:
        assert done.code in (0, None)
    return {"root": root, "mono": root / "mono", "corpus": corpus, "topics": topics, "index": root / "index"}


def test_retrieve_and_rerank_write_their_runs_to_standard_output(cli: Callable[..., Any], models: dict[str, Path],
                                                                 tmp_path: Path) -> None:
    retrieved = cli("retrieve", "--model", "repbert", "--index", models["index"], "--topics", models["topics"],
                    "--output", "-", "--k", 5)
    assert retrieved.code == 0, retrieved.stderr
    run = tmp_path / "dense.run"
    run.write_text(retrieved.stdout, encoding="utf-8")
    assert sum(len(docs) for docs in read_run(run).values()) == len(retrieved.stdout.splitlines()) > 0
    reranked = cli("rerank", "--model", "mono", "--checkpoint", models["mono"], "--run", run, "--topics",
                   models["topics"], "--corpus", models["corpus"], "--output", "-", "--backend", "torch")
    assert reranked.code == 0, reranked.stderr
    lines = reranked.stdout.splitlines()
    assert len(lines) == len(retrieved.stdout.splitlines()) and all(line.endswith(" rankkit-mono") for line in lines)
    # ... and into the next stage's standard input: rankkit rerank ... -o - | rankkit eval - --qrels QRELS
    qrels = tmp_path / "qrels"
    qrels.write_text("".join(f"{qid} 0 {docid} 1\n" for qid, docs in read_run(run).items() for docid in list(docs)[:1]),
                     encoding="utf-8")
    scored = rankkit("eval", "-", "--qrels", qrels, "-m", "RR@10", stdin=reranked.stdout.encode())
    assert scored.returncode == 0, scored.stderr
    assert scored.stdout.decode().splitlines()[1].split("\t")[:3] == ["-", "all", "RR@10"]
