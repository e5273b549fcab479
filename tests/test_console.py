"""Progress off a terminal: heartbeat lines with totals and ETA; totals and per-batch updates (issue 14, item 6)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from rankkit.console import heartbeat_seconds, progress_bar
from rankkit.formats.runs import count_run_queries

from training_helpers import tiny_backbone, write_corpus

DL19_RUN = Path(__file__).parent / "data" / "dl19" / "BM25.trec_results_dl19.txt"
BEIR = Path(__file__).parent / "data" / "interop" / "beir-squad-dev"


def test_heartbeat_lines_off_a_terminal(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("RANKKIT_HEARTBEAT", "0.05")
    with progress_bar("q") as bar:
        task = bar.add_task("re-ranking", total=8)
        for _ in range(8):
            time.sleep(0.03)
            bar.advance(task)
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) >= 3
    pattern = r"re-ranking: (\d)/8 q \(\d+\.\d%\), ([\d.,]+|\?) q/s, elapsed 0:00:00(, ETA (0:00:0\d|\?))?"
    assert all(re.fullmatch(pattern, line) for line in lines), lines
    assert re.search(r"ETA 0:00:0\d$", lines[-2])
    assert lines[-1].startswith("re-ranking: 8/8 q (100.0%)") and "ETA" not in lines[-1]


def test_heartbeat_setting(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("RANKKIT_HEARTBEAT", raising=False)
    assert heartbeat_seconds() == 5.0
    monkeypatch.setenv("RANKKIT_HEARTBEAT", "0")
    with progress_bar("q") as bar:
        task = bar.add_task("quiet", total=2)
        time.sleep(0.05)
        bar.advance(task, 2)
    assert capsys.readouterr().err == ""


def test_count_run_queries() -> None:
    assert count_run_queries(DL19_RUN) == 43


def test_rerank_progress_has_a_total(monkeypatch: pytest.MonkeyPatch, cli: Callable[..., Any], tmp_path: Path) -> None:
    run = tmp_path / "in.run"
    run.write_text("".join(f"{q} Q0 dev-a000-p00{d} {d + 1} {-d} x\n"
                           for q in ("5725b33f6a3fe71400b8952d", "5725b5a689a1e219009abd28") for d in range(3)))
    monkeypatch.setenv("RANKKIT_HEARTBEAT", "0.01")
    result = cli("rerank", "--model", "repbert", "--run", run, "--topics", BEIR, "--corpus", BEIR,
                 "-o", tmp_path / "out.run", "--device", "cpu")
    assert result.code == 0, result.stderr
    beats = [line for line in result.stderr.splitlines() if line.startswith("re-ranking: ")]
    assert beats and beats[-1].startswith("re-ranking: 2/2 q (100.0%)"), result.stderr


def test_bi_encoder_reports_each_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rankkit.dense import encode as encode_module
    from rankkit.models.checkpoint import load_for_inference

    model = load_for_inference("repbert", tiny_backbone(tmp_path / "tiny"))
    seen: list[int] = []
    model.encode(["apple fruit", "car", "river water flow", "tea", "code"], is_query=False, batch_size=2,
                 on_batch=seen.append)
    assert seen == [2, 2, 1]

    advances: list[float] = []

    class Recorder:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def __enter__(self) -> "Recorder":
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def add_task(self, *args: Any, **kwargs: Any) -> int:
            return 0

        def update(self, task: int, advance: float = 0, **kwargs: Any) -> None:
            advances.append(advance)

    monkeypatch.setattr(encode_module, "progress_bar", Recorder)
    corpus = write_corpus(tmp_path / "corpus.jsonl")  # 36 documents
    encode_module.encode_corpus(model, corpus, tmp_path / "index", manifest={"model": "repbert"}, batch_size=8)
    assert advances == [8, 8, 8, 8, 4]  # one update per batch within the single 8,192-document chunk


def test_bm25_indexing_steps_have_totals(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                         tmp_path: Path) -> None:
    from _lexical_index import CORPUS, DOCUMENTS

    from rankkit.lexical.index import build_bm25_index

    monkeypatch.setenv("RANKKIT_HEARTBEAT", "0.001")
    build_bm25_index(CORPUS, tmp_path / "index", threads=1)
    err = capsys.readouterr().err
    assert f"reading passages.tsv.gz: {DOCUMENTS:,}/{DOCUMENTS:,} doc (100.0%)" in err, err
    assert re.search(rf"indexing \(Anserini\): [\d,]+/{DOCUMENTS:,} doc", err), err



def test_no_counting_pass_over_a_pipe(tmp_path: Path) -> None:
    """A FIFO (``<(zcat run.gz)``) can be read once: the progress totals' counting pass is skipped for it."""
    import os

    fifo = tmp_path / "run.pipe"
    os.mkfifo(fifo)
    assert count_run_queries(fifo) is None  # returns without opening it (opening would block)


def test_bm25_index_of_a_pipe_still_reads_it_once(tmp_path: Path) -> None:
    """``rankkit index --corpus <(zcat corpus.gz)``: the reading step's total is skipped, not the documents."""
    import os
    import subprocess
    import sys
    import threading

    from _lexical_index import CORPUS, DOCUMENTS

    fifo = tmp_path / "corpus.pipe"
    os.mkfifo(fifo)
    threading.Thread(target=lambda: fifo.write_bytes(CORPUS.read_bytes()), daemon=True).start()
    code = ("from rankkit.lexical.index import build_bm25_index; import sys; "
            "print(build_bm25_index(sys.argv[1], sys.argv[2], threads=1).indexed)")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    result = subprocess.run([sys.executable, "-c", code, str(fifo), str(tmp_path / "index")], capture_output=True,
                            text=True, timeout=180, env=env, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(DOCUMENTS)
