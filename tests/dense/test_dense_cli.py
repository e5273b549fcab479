"""`rankkit index --kind dense`, `rankkit index --merge` and `rankkit retrieve --model repbert|densetrans`."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest
from _lexical_index import small_index
from training_helpers import TOPICS, tiny_backbone, write_corpus, write_groups, write_topics

from rankkit.formats import read_run
from rankkit.indexes import read_manifest


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny RepBERT trained through the CLI, its corpus (200 docs) and topics."""
    from rankkit.cli import main

    root = tmp_path_factory.mktemp("dense-cli")
    backbone = tiny_backbone(root / "tiny")
    groups = write_groups(root / "groups.jsonl")
    checkpoint = root / "repbert"
    try:  # success returns or exits 0, depending on the CLI runner
        main(["train", "--model", "repbert", "--train", str(groups), "--output", str(checkpoint), "--backbone",
              str(backbone), "--max-steps", "8", "--batch-size", "4", "--group-size", "3", "--lr", "2e-3",
              "--device", "cpu", "--seed", "3"])
    except SystemExit as done:
        assert done.code in (0, None)
    return {"root": root, "checkpoint": checkpoint, "backbone": backbone,
            "corpus": write_corpus(root / "corpus.jsonl", extra=164), "topics": write_topics(root / "topics.tsv")}


def dense_index(cli: Callable[..., object], trained: dict[str, Path], out: Path, *extra: object) -> object:
    return cli("index", "--kind", "dense", "--model", "repbert", "--checkpoint", trained["checkpoint"],
               "--corpus", trained["corpus"], "--index", out, "--batch-size", 7, *extra)


def test_train_index_retrieve(cli: Callable[..., object], trained: dict[str, Path], tmp_path: Path) -> None:
    result = dense_index(cli, trained, tmp_path / "index")
    assert result.code == 0, result.stderr
    manifest = read_manifest(tmp_path / "index", kinds=("dense",))
    assert manifest["model"] == "repbert" and manifest["documents"] == 200 and manifest["options"]["batch_size"] == 7
    run_path = tmp_path / "dense.run"
    result = cli("retrieve", "--model", "repbert", "--index", tmp_path / "index", "--topics", trained["topics"],
                 "--output", run_path, "--k", 5, "--batch-size", 4)
    assert result.code == 0, result.stderr
    run = read_run(run_path)
    assert sorted(run) == sorted(f"t{i}" for i in range(len(TOPICS))) and all(len(d) == 5 for d in run.values())
    assert next(iter(run["t0"])).startswith("d0_")  # "apple fruit" finds its topic's documents
    assert run_path.read_text().splitlines()[0].endswith(" repbert")


def test_max_lengths_are_recorded_and_used(cli: Callable[..., object], trained: dict[str, Path],
                                           tmp_path: Path) -> None:
    assert dense_index(cli, trained, tmp_path / "short", "--max-query-length", 2).code == 0
    assert read_manifest(tmp_path / "short")["model_hparams"]["max_query_length"] == 2
    runs = {}
    for name, extra in (("recorded", ()), ("override", ("--max-query-length", 20))):
        out = tmp_path / f"{name}.run"
        result = cli("retrieve", "--model", "repbert", "--index", tmp_path / "short", "--topics", trained["topics"],
                     "--output", out, "--k", 3, *extra)
        assert result.code == 0, result.stderr
        runs[name] = read_run(out)
    # two tokens are [CLS] [SEP] alone: every query gets the same vector, so the same ranking
    assert len({tuple(docs) for docs in runs["recorded"].values()}) == 1
    assert len({tuple(docs) for docs in runs["override"].values()}) > 1
    result = dense_index(cli, trained, tmp_path / "long", "--max-doc-length", 100000)
    assert result.code == 2 and "--max-doc-length 100000 exceeds the repbert model's" in result.stderr


def test_shards_and_merge_give_the_one_pass_run(cli: Callable[..., object], trained: dict[str, Path],
                                                tmp_path: Path) -> None:
    # Shards share out chunks: 7 chunks of 30 documents, chunks 0,2,4,6 in shard 0 and 1,3,5 in shard 1.
    assert dense_index(cli, trained, tmp_path / "one", "--chunk-size", 30).code == 0
    shards = []
    for i in range(2):
        shard = tmp_path / f"shard{i}"
        result = dense_index(cli, trained, shard, "--shard", f"{i}/2", "--chunk-size", 30)
        assert result.code == 0, result.stderr
        manifest = read_manifest(shard)
        assert manifest["kind"] == "dense-shard" and manifest["documents"] == (110 if i == 0 else 90)
        shards.append(shard)
    # a shard is not searchable: one line naming the fix
    result = cli("retrieve", "--model", "repbert", "--index", shards[0], "--topics", trained["topics"],
                 "--output", tmp_path / "x.run")
    assert result.code == 2 and result.stderr.count("\n") == 1 and "merge the shards first" in result.stderr
    assert cli("index", "--merge", shards[0], shards[1], "--index", tmp_path / "merged").code == 0
    runs = []
    for folder in ("one", "merged"):
        out = tmp_path / f"{folder}.run"
        result = cli("retrieve", "--model", "repbert", "--index", tmp_path / folder, "--topics", trained["topics"],
                     "--output", out, "--k", 20)
        assert result.code == 0, result.stderr
        runs.append(out.read_bytes())
    assert runs[0] == runs[1]
    assert (tmp_path / "merged" / "index.faiss").read_bytes() == (tmp_path / "one" / "index.faiss").read_bytes()


def test_kind_refusals_are_one_line(cli: Callable[..., object], trained: dict[str, Path], tmp_path: Path) -> None:
    dense = tmp_path / "dense"
    assert dense_index(cli, trained, dense).code == 0
    bm25 = small_index()
    out = tmp_path / "x.run"
    result = cli("retrieve", "--model", "bm25", "--index", dense, "--topics", trained["topics"], "--output", out)
    assert result.code == 2 and result.stderr.count("\n") == 1
    assert result.stderr == (f"rankkit: error: {dense} is a 'dense' index, not a 'bm25' index; "
                             "retrieve from it with --model repbert\n")
    result = cli("retrieve", "--model", "repbert", "--index", bm25, "--topics", trained["topics"], "--output", out)
    assert result.code == 2 and result.stderr == (f"rankkit: error: {bm25} is a 'bm25' index, not a 'dense' index; "
                                                  "retrieve from it with --model bm25\n")
    result = cli("retrieve", "--model", "densetrans", "--index", dense, "--topics", trained["topics"], "--output", out)
    assert result.code == 2 and result.stderr.count("\n") == 1
    assert "built with --model repbert, not densetrans" in result.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--kind", "dense", "--corpus", "C", "--index", "I"), "--kind dense needs --model"),
        (("--kind", "bm25", "--model", "repbert", "--corpus", "C", "--index", "I"),
         "--model applies to --kind dense, not bm25"),
        (("--kind", "dense", "--model", "repbert", "--docvectors", "--corpus", "C", "--index", "I"),
         "--docvectors applies to --kind bm25, not dense"),
        (("--kind", "dense", "--model", "repbert", "--shard", "2", "--corpus", "C", "--index", "I"), "I/N"),
        (("--kind", "dense", "--model", "repbert", "--faiss", "hnsw", "--corpus", "C", "--index", "I"),
         "unknown faiss kind 'hnsw'"),
        (("--kind", "dense", "--model", "bm25", "--corpus", "C", "--index", "I"), "unknown model"),
        (("--merge", "S", "--corpus", "C", "--index", "I"), "not --corpus"),
        (("--kind", "dense", "--index", "I"), "--corpus is required"),
        (("--merge", "MISSING", "--index", "I"), "no such directory"),
    ],
)
def test_index_errors_are_one_line(cli: Callable[..., object], trained: dict[str, Path], tmp_path: Path,
                                   args: tuple[str, ...], message: str) -> None:
    paths = {"C": str(trained["corpus"]), "I": str(tmp_path / "index"), "S": str(tmp_path), "MISSING": str(tmp_path / "nope")}
    result = cli("index", *[paths.get(a, a) for a in args])
    assert result.code == 2 and result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    assert not (tmp_path / "index" / "index.faiss").exists()


def test_retrieve_option_of_another_model_is_refused(cli: Callable[..., object], trained: dict[str, Path],
                                                     tmp_path: Path) -> None:
    result = cli("retrieve", "--model", "bm25", "--nprobe", 5, "--index", tmp_path, "--topics", trained["topics"],
                 "--output", tmp_path / "x.run")
    assert result.code == 2 and "--nprobe applies to --model densetrans or repbert, not bm25" in result.stderr
    result = cli("retrieve", "--model", "repbert", "--k1", 1.2, "--index", tmp_path, "--topics", trained["topics"],
                 "--output", tmp_path / "x.run")
    assert result.code == 2 and "--k1 applies to --model bm25, not repbert" in result.stderr
