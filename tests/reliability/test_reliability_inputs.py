"""Inputs built to exhaust memory, text that is not text, and error lines that would quote too much
(docs/RELIABILITY.md, "Memory bounded by the model and the batch").
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
from training_helpers import documents, write_corpus, write_groups, write_topics

from rankkit.formats import write_run

CHECKPOINTS = Path(__file__).parents[1] / "data" / "checkpoints-v0.1.0"


@pytest.fixture
def ws(tmp_path: Path) -> dict[str, Path]:
    docids = sorted(documents())
    write_run(tmp_path / "first.run", {f"t{i}": {d: float(k) for k, d in enumerate(docids[:3])} for i in range(2)}, "x")
    (tmp_path / "qrels.txt").write_text("".join(f"t{i} 0 {docids[0]} 1\n" for i in range(2)))
    return {"root": tmp_path, "corpus": write_corpus(tmp_path / "corpus.jsonl"), "run": tmp_path / "first.run",
            "topics": write_topics(tmp_path / "topics.tsv"), "groups": write_groups(tmp_path / "groups.jsonl", count=4),
            "qrels": tmp_path / "qrels.txt"}


def one_error(result: Any, code: int = 2) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.code == code and lines and lines[-1].startswith("rankkit: error: "), result.stderr
    assert sum(line.startswith("rankkit: error:") for line in lines) == 1 and "Traceback" not in result.stderr
    return lines[-1]


def long_line(path: Path, chars: int, before: str = "") -> Path:
    path.write_text(before + "x" * chars + "\n")
    return path


#: Each reader, given a file whose line 2 (or 1) is past the limit: ``(args, the file, its line)``.
READERS: dict[str, Callable[[dict[str, Path]], tuple[list[Any], Path, int]]] = {
    "eval: run": lambda ws: (["eval", long_line(ws["root"] / "r", 3000, "t0 Q0 d 1 1 x\n"), "--qrels", ws["qrels"]],
                             ws["root"] / "r", 2),
    "eval: qrels": lambda ws: (["eval", ws["run"], "--qrels", long_line(ws["root"] / "q", 3000)], ws["root"] / "q", 1),
    "fuse: run": lambda ws: (["fuse", "--method", "rrf", ws["run"], long_line(ws["root"] / "r", 3000), "-o",
                              ws["root"] / "f.run"], ws["root"] / "r", 1),
    "validate: run": lambda ws: (["validate", long_line(ws["root"] / "r", 3000)], ws["root"] / "r", 1),
    "rerank: topics": lambda ws: (["rerank", "--model", "mono", "--checkpoint", CHECKPOINTS / "mono", "--run", ws["run"],
                                   "--topics", long_line(ws["root"] / "t.tsv", 3000, "t0\tq\n"), "--corpus",
                                   ws["corpus"], "-o", ws["root"] / "o.run"], ws["root"] / "t.tsv", 2),
    "rerank: corpus": lambda ws: (["rerank", "--model", "mono", "--checkpoint", CHECKPOINTS / "mono", "--run", ws["run"],
                                   "--topics", ws["topics"], "--corpus", long_line(ws["root"] / "c.tsv", 3000),
                                   "-o", ws["root"] / "o.run"], ws["root"] / "c.tsv", 1),
    "train: groups": lambda ws: (["train", "--model", "mono", "--train", long_line(ws["root"] / "g.jsonl", 3000),
                                  "--backbone", CHECKPOINTS / "repbert", "-o", ws["root"] / "ck"],
                                 ws["root"] / "g.jsonl", 1),
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_every_reader_has_a_line_limit(cli: Callable[..., Any], ws: dict[str, Path], reader: str,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANKKIT_MAX_LINE", "1000")
    args, path, line = READERS[reader](ws)
    error = one_error(cli(*args), 2)
    assert f"{path}:{line}: line longer than 1,000 characters" in error, error


DRIVER = """
import resource, sys
from rankkit.cli import main
try:
    main(ARGS)
except SystemExit as done:
    # VmHWM: this program's own peak (ru_maxrss keeps a forking parent's peak across exec: pytest's 1.5 GB)
    print(done.code, [int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:')][0])
"""


def test_a_gzip_bomb_is_refused_with_bounded_memory(ws: dict[str, Path]) -> None:
    """1 GB of one line, gzipped to 1 MB, as a run: refused at the line limit (64 Mi characters),
    never read whole (before: 4-4.5 GB resident, then a MemoryError traceback)."""
    bomb = ws["root"] / "bomb.run"
    with gzip.open(bomb, "wb", compresslevel=1) as out:
        block = b"a" * (1 << 20)
        for _ in range(1024):
            out.write(block)
    args = ["eval", str(bomb), "--qrels", str(ws["qrels"])]
    done = subprocess.run([sys.executable, "-c", DRIVER.replace("ARGS", repr(args))], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    code, peak_kb = (int(v) for v in done.stdout.split())
    assert code == 2 and f"{bomb}:1: line longer than 67,108,864 characters" in done.stderr, done.stderr
    assert peak_kb < 1 << 20, f"peak RSS {peak_kb / 1024:.0f} MB"


@pytest.mark.parametrize("where", ["passage", "docid", "query"])
def test_lone_surrogates_are_refused_with_file_and_line(cli: Callable[..., Any], ws: dict[str, Path],
                                                         where: str) -> None:
    """``"\\ud800"`` parses as JSON but is no text (before: tokenizer or UnicodeEncodeError tracebacks)."""
    root = ws["root"]
    corpus, topics = ws["corpus"], ws["topics"]
    if where == "query":
        topics = root / "topics.jsonl"
        topics.write_text(json.dumps({"qid": "t0", "text": "fine"}) + "\n" + '{"qid": "t1", "text": "bad \\ud800"}\n')
        bad, line = topics, 2
    else:
        corpus = root / "bad.jsonl"
        lines = corpus_lines = ws["corpus"].read_text().splitlines()
        record = json.loads(corpus_lines[0])
        if where == "passage":
            record["contents"] += " \\ud800"
        else:
            record["id"] = record["id"] + "\\udc80"
        lines = [json.dumps(record).replace("\\\\u", "\\u")] + corpus_lines[1:]
        corpus.write_text("\n".join(lines) + "\n")
        bad, line = corpus, 1
    error = one_error(cli("rerank", "--model", "mono", "--checkpoint", CHECKPOINTS / "mono", "--run", ws["run"],
                          "--topics", topics, "--corpus", corpus, "-o", root / "o.run"))
    assert f"{bad}:{line}: text holds a lone surrogate" in error, error
    assert not (root / "o.run").exists()


def test_training_groups_with_surrogates_are_refused(cli: Callable[..., Any], ws: dict[str, Path]) -> None:
    groups = ws["root"] / "g.jsonl"
    text = ws["groups"].read_text().splitlines()
    groups.write_text("\n".join(text[:2] + [text[2].replace('"query": "', '"query": "\\udfff')] + text[3:]) + "\n")
    error = one_error(cli("train", "--model", "mono", "--train", groups, "--backbone", CHECKPOINTS / "repbert",
                          "-o", ws["root"] / "ck", "--max-steps", 1))
    assert f"{groups}:3: text holds a lone surrogate" in error, error


def test_error_lines_quote_a_short_excerpt(cli: Callable[..., Any], ws: dict[str, Path]) -> None:
    """A run query missing from a 200,000-topic file (before: the whole topics mapping in the line)."""
    topics = ws["root"] / "many.tsv"
    topics.write_text("".join(f"t{i}\tquery number {i}\n" for i in range(200_000)))
    run = ws["root"] / "odd.run"
    run.write_text(f"{'q' * 5000} Q0 d0_0 1 1.0 x\n")
    error = one_error(cli("rerank", "--model", "mono", "--checkpoint", CHECKPOINTS / "mono", "--run", run,
                          "--topics", topics, "--corpus", ws["corpus"], "-o", ws["root"] / "o.run"))
    assert "has no text in the topics" in error and "(5,002 characters)" in error and len(error) < 300, error[:500]


def test_out_of_memory_names_the_batch_size(cli: Callable[..., Any], ws: dict[str, Path],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """torch's CPU allocator failing mid-batch (what ``--batch-size`` too large gets) is one line
    naming the setting, exit 1."""
    from rankkit.models import get_model_class

    def allocate(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: "
                           "you tried to allocate 128000000000 bytes. Error code 12 (Cannot allocate memory)")

    monkeypatch.setattr(get_model_class("mono"), "rerank_scores", allocate)
    error = one_error(cli("rerank", "--model", "mono", "--checkpoint", CHECKPOINTS / "mono", "--run", ws["run"],
                          "--topics", ws["topics"], "--corpus", ws["corpus"], "-o", ws["root"] / "o.run",
                          "--batch-size", 100000), 1)
    assert "out of memory scoring 100000 pairs at a time" in error and "lower --batch-size" in error, error
    assert not (ws["root"] / "o.run").exists()


OOM_DRIVER = """
import resource, sys
from rankkit.cli import main
import rankkit.models.checkpoint, torch, transformers  # imported before the cap: it bounds the scoring only
def vm_bytes():
    for line in open("/proc/self/status"):
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
cap = vm_bytes() + (CAP << 20)
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
try:
    main(ARGS)
except SystemExit as done:
    sys.exit(done.code)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_a_real_out_of_memory_is_one_line(ws: dict[str, Path]) -> None:
    """The same with a real allocation failure: with 30 MB of address space left after start-up,
    re-ranking 1,080 pairs 16 at a time works and all at once is the one-line refusal."""
    docids = sorted(documents())
    run = ws["root"] / "wide.run"
    write_run(run, {f"t{i}": {d: float(k) for k, d in enumerate(docids)} for i in range(30)}, "x")
    topics = ws["root"] / "long.tsv"
    topics.write_text("".join(f"t{i}\t{' '.join(['apple fruit red'] * 30)}\n" for i in range(30)))

    def rerank(batch: int) -> subprocess.CompletedProcess[str]:
        args = ["rerank", "--model", "mono", "--checkpoint", str(CHECKPOINTS / "mono"), "--run", str(run), "--topics",
                str(topics), "--corpus", str(ws["corpus"]), "-o", str(ws["root"] / f"o{batch}.run"), "--batch-size",
                str(batch), "--device", "cpu"]
        return subprocess.run([sys.executable, "-c", OOM_DRIVER.replace("ARGS", repr(args)).replace("CAP", "30")],
                              capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})

    small, large = rerank(16), rerank(100_000)
    if small.returncode != 0 or large.returncode == 0:
        pytest.skip("30 MB of address space does not separate the two batch sizes on this machine")
    assert large.returncode == 1, large.stderr[-2000:]
    line = large.stderr.strip().splitlines()[-1]
    assert line == "rankkit: error: out of memory scoring 100000 pairs at a time on cpu; lower --batch-size (now 100000)"
    assert "Traceback" not in large.stderr and not (ws["root"] / "o100000.run").exists()
