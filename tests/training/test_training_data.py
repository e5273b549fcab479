"""Training data read from disk when drawn (rankkit.training.data): the same groups as the whole-file
reader, every shape, checked up front, ids-only groups with texts looked up, flat memory."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
from training_helpers import TOPICS, documents, tiny_backbone, write_groups

from rankkit.errors import InputError, RankkitError
from rankkit.formats import read_groups, write_qrels, write_run, write_topics
from rankkit.formats.groups import TrainingGroup, iter_groups
from rankkit.training.data import open_training_data
from rankkit.training.group_table import GroupFile, table_dir
from rankkit.training.sampling import MicroBatches


@pytest.fixture
def tables(tmp_path: Path) -> Path:
    return tmp_path / "tables"


def write_collection(tmp_path: Path) -> tuple[Path, Path]:
    """The tiny topic documents as a TSV collection, and the queries of ``write_groups``' groups."""
    collection = tmp_path / "collection.tsv"
    collection.write_text("".join(f"{d}\t{t}\n" for d, t in documents().items()), encoding="utf-8")
    groups = read_groups(write_groups(tmp_path / "g.jsonl"))
    queries = tmp_path / "queries.tsv"
    write_topics(queries, {g.qid: g.query or "" for g in groups})
    return collection, queries


def test_lazy_groups_equal_the_whole_file_reader_in_every_text_shape(tmp_path: Path, tables: Path,
                                                                   data_dir: Path) -> None:
    groups = write_groups(tmp_path / "g.jsonl", count=30)
    # A BOM, blank lines and CRLF endings are read as the line reader reads them (line numbers kept).
    lines = groups.read_text(encoding="utf-8").splitlines()
    messy = tmp_path / "messy.jsonl"
    messy.write_bytes(b"\xef\xbb\xbf" + "\r\n\n".join(lines).encode() + b"\r\n\n\n")
    packed = tmp_path / "g.jsonl.gz"
    packed.write_bytes(gzip.compress(groups.read_bytes()))
    triples = tmp_path / "triples.tsv"
    triples.write_text("".join(f"{g.query}\t{g.pos[0].text}\t{g.neg[0].text}\n\n" for g in read_groups(groups)))
    flag = data_dir / "formats" / "flagembedding.head.jsonl"
    for path in (groups, messy, packed, triples, flag):
        data = open_training_data([path], cache_dir=tables)
        assert list(data) == read_groups(path)  # same qids, texts, labels, scores, line-derived ids
        assert data.records == [{"path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                                 "groups": len(read_groups(path))}]
        data.close()
    both = open_training_data([groups, triples], cache_dir=tables)
    assert len(both) == 60 and both[30] == read_groups(triples)[0] and both[-1] == read_groups(triples)[-1]
    assert both[29] == read_groups(groups)[-1]
    both.close()


def test_the_table_is_built_once_and_rebuilt_when_the_file_changes(tmp_path: Path, tables: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_groups(tmp_path / "g.jsonl", count=6)
    GroupFile.open(path, tables).close()
    folder = table_dir(path, tables)
    assert folder.parent == tables and json.loads((folder / "header.json").read_text())["groups"] == 6
    built: list[Path] = []
    import rankkit.training.group_table as data_module

    real = data_module.build_table
    monkeypatch.setattr(data_module, "build_table", lambda *a, **k: built.append(a[0]) or real(*a, **k))
    GroupFile.open(path, tables).close()
    assert built == []  # fresh: reused, the file not read again
    write_groups(path, count=9, seed=4)
    os.utime(path, ns=(1, 1))  # a different mtime even on a coarse clock
    reopened = GroupFile.open(path, tables)
    assert built == [path] and len(reopened) == 9 and reopened[8] == read_groups(path)[8]
    reopened.close()
    assert sorted(p.name for p in tables.iterdir()) == [folder.name]  # no temporaries left


def test_every_line_is_checked_before_training(tmp_path: Path, tables: Path) -> None:
    path = write_groups(tmp_path / "g.jsonl", count=5)
    with open(path, "a", encoding="utf-8") as out:
        out.write('{"qid": "x", "query": "q", "pos": []}\n')
    with pytest.raises(InputError, match=r"g.jsonl:6: group has no positive"):
        open_training_data([path], cache_dir=tables)
    mixed = tmp_path / "mixed.jsonl"
    first = read_groups(write_groups(tmp_path / "h.jsonl", count=2))
    mixed.write_text(json.dumps(first[0].without_texts().to_json()) + "\n" + json.dumps(first[1].to_json()) + "\n")
    with pytest.raises(InputError, match="mixed.jsonl:2: a group with texts in a file of ids-only groups"):
        open_training_data([mixed], cache_dir=tables)
    with pytest.raises(InputError, match="no such file"):
        open_training_data([tmp_path / "absent.jsonl"], cache_dir=tables)
    assert not [p for p in tables.iterdir() if p.name.startswith(".")]  # failed builds leave nothing


def test_ids_only_groups_and_qidpidtriples_get_their_texts_when_drawn(tmp_path: Path, tables: Path) -> None:
    collection, queries = write_collection(tmp_path)
    text_groups = read_groups(tmp_path / "g.jsonl")
    ids = tmp_path / "ids.jsonl"
    ids.write_text("".join(json.dumps(g.without_texts().to_json()) + "\n" for g in text_groups))
    assert all(g.ids_only and g.query is None for g in iter_groups(ids))
    triples = tmp_path / "qidpid.tsv"
    triples.write_text("".join(f"{g.qid}\t{g.pos[0].docid}\t{g.neg[0].docid}\n" for g in text_groups))
    with pytest.raises(InputError, match="ids-only groups .* need --collection COLLECTION and --queries QUERIES"):
        open_training_data([ids], cache_dir=tables)
    data = open_training_data([ids, triples], collection=collection, queries=queries, cache_dir=tables)
    assert data.texts is not None and data[0] == text_groups[0].without_texts()
    assert data.texts.fill_group(data[0]) == text_groups[0]
    common: dict[str, Any] = dict(seed=3, batch_size=4, group_size=3, grad_accum=2, rank=0, world=1, teacher=None)
    lazy = MicroBatches(data, texts=data.texts, **common)
    triple_groups = [TrainingGroup(g.qid, g.query, [g.pos[0]], [g.neg[0]]) for g in text_groups]
    whole = MicroBatches(text_groups + triple_groups, **common)
    for step in range(lazy.steps_per_epoch + 2):  # into the second epoch
        assert lazy.sampled_at(step) == whole.sampled_at(step)
    assert [r["collection"] for r in data.records] == [str(collection)] * 2
    data.close()


def test_ids_missing_from_the_collection_or_queries_are_errors_naming_the_line(tmp_path: Path, tables: Path) -> None:
    collection, queries = write_collection(tmp_path)
    triples = tmp_path / "qidpid.tsv"
    triples.write_text("q0\td0_0\td1_0\nq1\td1_0\tnowhere\n")
    with pytest.raises(InputError, match=r"qidpid.tsv:2: passage 'nowhere' is not in"):
        open_training_data([triples], collection=collection, queries=queries, cache_dir=tables)
    triples.write_text("q0\td0_0\td1_0\n\nq404\td1_0\td0_0\n")
    with pytest.raises(InputError, match=r"qidpid.tsv:3: query 'q404' has no text in"):
        open_training_data([triples], collection=collection, queries=queries, cache_dir=tables)
    with pytest.raises(RankkitError, match="--collection and --queries give the texts"):
        open_training_data([write_groups(tmp_path / "t.jsonl")], collection=collection, queries=queries,
                           cache_dir=tables)


def test_a_stream_is_read_through_a_table_of_this_run_only(tmp_path: Path, tables: Path) -> None:
    groups = write_groups(tmp_path / "g.jsonl", count=8)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    writer = subprocess.Popen([sys.executable, "-c", f"open({str(fifo)!r}, 'wb').write(open({str(groups)!r}, 'rb').read())"])
    data = open_training_data([fifo], cache_dir=tables)
    writer.wait(30)
    folder = data.files[0].folder
    assert list(data) == read_groups(groups) and folder.is_dir()
    data.close()
    assert not folder.exists() and not tables.exists()


def test_mine_ids_only_trains_to_the_same_weights_as_the_text_form(tmp_path: Path, cli: Callable[..., Any]) -> None:
    collection, queries = write_collection(tmp_path)
    rng = random.Random(5)
    docs = list(documents())
    run = {f"q{n}": {d: rng.random() for d in docs} for n in range(24)}
    qrels = {f"q{n}": {f"d{n % len(TOPICS)}_{j}": 1 for j in range(2)} for n in range(24)}
    write_run(tmp_path / "run.txt", run, "bm25")
    write_qrels(tmp_path / "qrels.txt", qrels)
    mine = ["mine", "--run", tmp_path / "run.txt", "--qrels", tmp_path / "qrels.txt", "--topics", queries,
            "--corpus", collection, "--negatives", "4", "--depth", "20"]
    assert cli(*mine, "-o", tmp_path / "text.jsonl").code == 0
    result = cli(*mine, "-o", tmp_path / "ids.jsonl", "--ids-only")
    assert result.code == 0, result.stderr
    first = json.loads((tmp_path / "ids.jsonl").read_text().splitlines()[0])
    assert set(first) == {"qid", "pos", "neg"} and set(first["pos"][0]) == {"docid", "label"}
    assert [g.without_texts() for g in read_groups(tmp_path / "text.jsonl")] == read_groups(tmp_path / "ids.jsonl")
    assert (tmp_path / "ids.jsonl").stat().st_size * 2 < (tmp_path / "text.jsonl").stat().st_size

    backbone = tiny_backbone(tmp_path / "tiny")
    common = ["--model", "mono", "--backbone", backbone, "--max-steps", "4", "--batch-size", "3", "--group-size", "3",
              "--device", "cpu", "--seed", "5", "--log-every", "1"]
    assert cli("train", "--train", tmp_path / "text.jsonl", "-o", tmp_path / "a", *common).code == 0
    # Ids-only, with the texts looked up by a DataLoader worker (a fork with its own docid table handle).
    ids = cli("train", "--train", tmp_path / "ids.jsonl", "--collection", collection, "--queries", queries,
              "-o", tmp_path / "b", "--workers", "1", *common)
    assert ids.code == 0, ids.stderr
    weights = [hashlib.sha256((tmp_path / out / "model.safetensors").read_bytes()).hexdigest() for out in "ab"]
    assert weights[0] == weights[1]
    losses = [[r["loss"] for r in map(json.loads, (tmp_path / out / "train.log").read_text().splitlines()) if "loss" in r]
              for out in "ab"]
    assert losses[0] == losses[1] and len(losses[0]) == 4
    assert "--ids-only does not apply" in cli("mine", "--triples", tmp_path / "x.tsv", "-o", tmp_path / "y.jsonl",
                                               "--ids-only").stderr


#: Forks, execs the command and prints its own peak RSS (KiB) from wait4: started as a fresh small
#: process, because a child inherits its parent's high-water mark across exec (bench/harness.py).
LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(usage.ru_maxrss if status == 0 else -1)
"""


def peak_rss_mb(args: list[str], env: dict[str, str], log: Path) -> float:
    """Peak resident memory of one ``rankkit`` process, in MB."""
    with open(log, "wb") as err:
        done = subprocess.run([sys.executable, "-S", "-c", LAUNCHER, sys.executable, "-m", "rankkit", *args], env=env,
                              stdout=subprocess.PIPE, stderr=err, check=True)
    peak = int(done.stdout)
    assert peak > 0, log.read_text()[-2000:]
    return peak / 1024


def write_big_groups(path: Path, count: int) -> Path:
    """``count`` groups of 8 passages of ~60 words (the shape of the issue's measurements)."""
    rng = random.Random(count)
    words = sorted({w for t in TOPICS for w in t.split()})
    pool = [" ".join(rng.choice(words) for _ in range(60)) for _ in range(400)]
    with open(path, "w", encoding="utf-8") as out:
        for n in range(count):
            passages = rng.sample(pool, 8)
            out.write(json.dumps({"qid": f"q{n}", "query": " ".join(rng.sample(words, 3)),
                                  "pos": [{"docid": f"p{n}", "text": passages[0], "label": 1}],
                                  "neg": [{"docid": f"n{n}_{k}", "text": t, "score": 1.0}
                                          for k, t in enumerate(passages[1:])]}) + "\n")
    return path


def test_training_memory_does_not_grow_with_the_file(tmp_path: Path) -> None:
    """Peak RSS of `rankkit train --max-steps 1` on 500 and on 15,000 groups (a 30x larger file, ~+40 MB of
    text): the whole-file reader grew by ~1.9 KB a group here; read from disk the two peaks are equal."""
    backbone = tiny_backbone(tmp_path / "tiny")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "RANKKIT_CACHE_DIR": str(tmp_path / "cache")}
    peaks = []
    for count in (500, 15000):
        groups = write_big_groups(tmp_path / f"g{count}.jsonl", count)
        peaks.append(peak_rss_mb(["train", "--model", "mono", "--train", str(groups), "--backbone", str(backbone),
                                  "--max-steps", "1", "--batch-size", "4", "--group-size", "4", "--device", "cpu",
                                  "--max-query-length", "8", "--max-doc-length", "48", "-o", str(tmp_path / f"out{count}")], env,
                                 tmp_path / "log.txt"))
    small, large = peaks
    assert large <= 1.25 * small and large - small < 12, peaks


def test_each_rank_reads_only_its_own_groups(tmp_path: Path, tables: Path) -> None:
    """Under DDP a rank parses the lines of its own micro-batches, no other (k = m * world + rank)."""
    from rankkit.training.sampling import micro_batch_indices

    data = open_training_data([write_groups(tmp_path / "g.jsonl", count=40)], cache_dir=tables)
    read: list[int] = []
    original = GroupFile.__getitem__

    def counting(self: GroupFile, index: Any) -> Any:
        read.append(int(index))
        return original(self, index)

    GroupFile.__getitem__ = counting  # type: ignore[method-assign]
    try:
        batches = MicroBatches(data, seed=1, batch_size=2, group_size=3, grad_accum=2, rank=1, world=2, teacher=None)
        batches.at_step(3)
    finally:
        GroupFile.__getitem__ = original  # type: ignore[method-assign]
        data.close()
    order = batches.order(0)
    mine = [int(j) for m in range(2) for j in micro_batch_indices(order, 3, m, 1, 2, 2, 2)]
    assert read == mine and len(read) == 4


def test_qidpidtriples_train_without_a_converted_copy(tmp_path: Path, cli: Callable[..., Any],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANKKIT_CACHE_DIR", str(tmp_path / "cache"))
    collection, queries = write_collection(tmp_path)
    triples = tmp_path / "qidpid.tsv"
    triples.write_text("".join(f"{g.qid}\t{g.pos[0].docid}\t{g.neg[0].docid}\n" for g in read_groups(tmp_path / "g.jsonl")))
    result = cli("train", "--model", "mono", "--train", triples, "--collection", collection, "--queries", queries,
                 "--backbone", tiny_backbone(tmp_path / "tiny"), "--max-steps", 2, "--batch-size", 4, "--group-size", 2,
                 "--device", "cpu", "-o", tmp_path / "out")
    assert result.code == 0, result.stderr
    cache = tmp_path / "cache"
    # Tables only (and the lock files of rankkit.files.locks), no groups written out.
    assert sorted(p.name for p in cache.iterdir() if p.name != "locks") == ["docstore", "groups"]
    (table,) = (cache / "groups").iterdir()
    assert tree_bytes(table) < triples.stat().st_size * 4 + 4096  # offsets and id hashes, no texts


def tree_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
