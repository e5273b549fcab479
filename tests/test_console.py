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


def recording_bar(on_add: Callable[[dict[str, Any]], None], on_update: Callable[[dict[str, Any]], None]) -> Any:
    """A stand-in for ``progress_bar`` that hands each ``add_task``/``update`` call's keywords to the callbacks."""

    class Recorder:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def __enter__(self) -> "Recorder":
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def add_task(self, *args: Any, **kwargs: Any) -> int:
            on_add(kwargs)
            return 0

        def update(self, task: int, **kwargs: Any) -> None:
            on_update(kwargs)

    return Recorder


def test_heartbeat_lines_off_a_terminal(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("RANKKIT_HEARTBEAT", "0.05")
    with progress_bar("q") as bar:
        task = bar.add_task("re-ranking", total=8)
        for _ in range(8):
            time.sleep(0.03)
            bar.advance(task)
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) >= 3
    # No rate before any work is done (and an unknown ETA), then both from the work done.
    pattern = r"re-ranking: (\d)/8 q \(\d+\.\d%\)(, [\d.,]+ q/s)?, elapsed 0:00:00(, ETA (0:00:0\d|\?))?"
    assert all(re.fullmatch(pattern, line) for line in lines), lines
    assert re.search(r"q/s, elapsed 0:00:00, ETA 0:00:0\d$", lines[-2])
    assert lines[-1].startswith("re-ranking: 8/8 q (100.0%)") and "ETA" not in lines[-1]


def test_a_30_second_job_off_a_terminal(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A 30-second re-ranking on a fake clock, a heartbeat every 5 s: the count moves, the rate and ETA come
    from the work done, and the last line has the true overall rate.

    The job: 3 s of set-up, then 4,300 pairs in batches of 32 every 0.2 s: what issue 27 saw as `0/43 q`,
    `? q/s` and `ETA ?` for 40 s, then a final rate of less than half the true one.
    """
    monkeypatch.setenv("RANKKIT_HEARTBEAT", "0")  # no heartbeat thread: this test beats on the fake clock
    now = [100.0]
    with progress_bar("pairs", get_time=lambda: now[0]) as bar:
        task = bar.add_task("re-ranking", total=4300, detail="0/43 q")
        next_beat = now[0] + 2.5
        done = 0
        while done < 4300:
            step = 32 if now[0] >= 103 else 0  # set-up first
            done = min(4300, done + step)
            now[0] = round(now[0] + (0.2 if step else 0.5), 6)
            bar.update(task, completed=done, detail=f"{done * 43 // 4300}/43 q")
            if now[0] >= next_beat:
                bar.beat()
                next_beat += 5
        seconds = now[0] - 100.0
    lines = capsys.readouterr().err.strip().splitlines()
    assert seconds == pytest.approx(30.0) and len(lines) == 7, lines  # beats at 2.5, 7.5, ..., 27.5 s and the end
    assert lines[0] == "re-ranking: 0/4,300 pairs (0.0%), 0/43 q, elapsed 0:00:02, ETA ?"  # set-up: nothing to rate yet
    counts = [int(re.match(r"re-ranking: ([\d,]+)/4,300 pairs", line).group(1).replace(",", "")) for line in lines]
    assert counts == sorted(counts) and len(set(counts)) == len(counts) and counts[-1] == 4300, lines  # it moves
    for line in lines[1:-1]:
        match = re.fullmatch(r"re-ranking: [\d,]+/4,300 pairs \([\d.]+%\), \d+/43 q, ([\d.]+) pairs/s, "
                             r"elapsed 0:00:(\d\d), ETA 0:00:(\d\d)", line)
        assert match, line
        rate, elapsed, eta = float(match.group(1)), int(match.group(2)), int(match.group(3))
        assert 0 < rate <= 160, line
        if elapsed >= 10:  # the set-up weighs less and less: the ETA lands near the true end
            assert abs(elapsed + eta - seconds) <= 4, line
    # The true overall rate (4,300 pairs in 30 s, set-up included) and no ETA once finished.
    assert lines[-1] == "re-ranking: 4,300/4,300 pairs (100.0%), 43/43 q, 143 pairs/s, elapsed 0:00:30", lines[-1]


def test_the_final_line_is_not_repeated(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A heartbeat that lands after the work ended already says where it ended: stop() adds no copy of it."""
    monkeypatch.setenv("RANKKIT_HEARTBEAT", "0")
    now = [0.0]
    with progress_bar("ex", get_time=lambda: now[0]) as bar:
        task = bar.add_task("training", total=4)
        now[0] = 2.0
        bar.update(task, completed=4)
        now[0] = 5.0
        bar.beat()  # e.g. during the last dev evaluation
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == ["training: 4/4 ex (100.0%), 2.00 ex/s, elapsed 0:00:02"]


def test_terminal_columns_rate_the_work_done() -> None:
    """On a terminal the bar's rate and ETA come from the work done too (not rich's sliding window)."""
    from rankkit.console import EtaColumn, HeartbeatProgress, RateColumn

    now = [0.0]
    bar = HeartbeatProgress(disable=True, get_time=lambda: now[0])
    task = bar.add_task("training", total=1000, completed=200)  # resumed at 200
    rate, eta = RateColumn("ex"), EtaColumn()
    assert (rate.render(bar.tasks[0]).plain, eta.render(bar.tasks[0]).plain) == ("? ex/s", "ETA ?")
    now[0] = 40.0
    bar.update(task, completed=400)  # one long step: 200 examples in 40 s
    assert (rate.render(bar.tasks[0]).plain, eta.render(bar.tasks[0]).plain) == ("5.00 ex/s", "ETA 0:02:00")
    now[0] = 100.0
    bar.update(task, completed=1000)
    assert (rate.render(bar.tasks[0]).plain, eta.render(bar.tasks[0]).plain) == ("8.00 ex/s", "")


def test_rerank_counts_move_within_a_chunk(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A re-ranking chunk reports the model's batches (rankkit.console.report_work): pairs move batch by batch."""
    from rankkit import reranking
    from rankkit.docstore import open_docstore
    from rankkit.models.checkpoint import load_model

    updates: list[tuple[float | None, str | None]] = []
    Recorder = recording_bar(lambda kwargs: updates.append((kwargs.get("total"), None)),
                             lambda kwargs: updates.append((kwargs.get("completed"), kwargs.get("detail"))))
    monkeypatch.setattr(reranking, "progress_bar", Recorder)
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    docids = [f"d{i}_{j}" for i in range(3) for j in range(3)]
    run = tmp_path / "in.run"
    run.write_text("".join(f"{q} Q0 {d} {r + 1} {-r} x\n" for q in ("t0", "t1") for r, d in enumerate(docids)))
    model = load_model(Path(__file__).parent / "data" / "checkpoints-v0.1.0" / "mono")  # a tiny trained mono
    with open_docstore(corpus=corpus) as store:
        reranking.rerank_run(model, run, {"t0": "apple fruit", "t1": "car engine"}, store, tmp_path / "out.run",
                             depth=8, batch_size=3)
    assert updates[0] == (16, None)  # the total: 2 queries x depth 8 pairs, counted before scoring
    counts = [c for c, _ in updates[1:]]
    assert counts == [0, 3, 6, 9, 12, 15, 16, 16], updates  # one chunk, six batches of 3 pairs, then the queries
    assert updates[-1] == (16, "2/2 q")


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
    assert beats and beats[-1].startswith("re-ranking: 6/6 pairs (100.0%), 2/2 q, "), result.stderr  # pairs, then queries
    assert re.search(r"pairs/s, elapsed \d:\d\d:\d\d$", beats[-1]), beats[-1]  # the true rate, no ETA at the end


def test_bi_encoder_reports_each_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rankkit.dense import encode as encode_module
    from rankkit.models.checkpoint import load_for_inference

    model = load_for_inference("repbert", tiny_backbone(tmp_path / "tiny"))
    seen: list[int] = []
    model.encode(["apple fruit", "car", "river water flow", "tea", "code"], is_query=False, batch_size=2,
                 on_batch=seen.append)
    assert seen == [2, 2, 1]

    advances: list[float] = []

    Recorder = recording_bar(lambda kwargs: None, lambda kwargs: advances.append(kwargs.get("advance", 0)))
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
