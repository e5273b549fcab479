"""Dense encoding, faiss indexes and search: train -> index -> search, shards, resume, IVFPQ."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from training_helpers import TOPICS, build_model, tiny_backbone, write_corpus, write_groups, write_topics

from rankkit.dense import build_dense_index, dense_search, load_dense_index, merge_dense_shards
from rankkit.dense import encode as enc
from rankkit.dense.faiss_index import effective_ivfpq
from rankkit.errors import RankkitError
from rankkit.formats import iter_corpus, read_run, write_run
from rankkit.models import DenseTrans
from rankkit.models.checkpoint import load_model, save_model
from rankkit.training import TrainConfig, train


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("dense")
    backbone = tiny_backbone(root / "tiny")
    groups = write_groups(root / "groups.jsonl")
    checkpoint = root / "repbert"
    train(TrainConfig(model="repbert", train=[groups], output=checkpoint, backbone=backbone, max_steps=8,
                      batch_size=4, group_size=3, lr=2e-3, device="cpu", seed=3))
    torch.manual_seed(0)
    densetrans = root / "densetrans"
    save_model(build_model(DenseTrans, backbone), densetrans, {"steps": 0})
    return {"root": root, "checkpoint": checkpoint, "densetrans": densetrans,
            "corpus": write_corpus(root / "corpus.jsonl"), "big": write_corpus(root / "big.jsonl", extra=164),
            "topics": write_topics(root / "topics.tsv")}


def test_train_index_search(setup: dict[str, Path], tmp_path: Path) -> None:
    index_dir = tmp_path / "index"
    meta = build_dense_index("repbert", setup["checkpoint"], setup["corpus"], index_dir, "flat", batch_size=5,
                             chunk_size=8)
    assert meta["kind"] == "dense" and meta["dims"] == 24 and meta["documents"] == 36 and meta["chunks"] == 5
    assert meta["normalized"] is False and meta["faiss"] == {"kind": "flat"}
    saved = json.loads((index_dir / "rankkit-index.json").read_text())
    assert saved["checkpoint"] == str(setup["checkpoint"].resolve()) and saved["corpus"]["path"] == str(setup["corpus"].resolve())
    assert saved["rankkit_index"] == 1 and saved["options"]["faiss"] == "flat"

    run = dense_search(index_dir, setup["topics"], k=5, batch_size=4)
    assert list(run) == [f"t{i}" for i in range(len(TOPICS))] and all(len(d) == 5 for d in run.values())

    # Exact search = brute-force inner products of the same model's vectors.
    model = load_model(setup["checkpoint"])
    docs = list(iter_corpus(setup["corpus"]))
    dvec = model.encode([d.contents for d in docs], is_query=False)
    qvec = model.encode(["apple fruit"], is_query=True)
    brute = (qvec @ dvec.T)[0]
    top = torch.topk(brute, 5)
    # The same top-5 scores; each returned document scored as brute force scores it (documents
    # with equal texts tie, and faiss may return either).
    assert list(run["t0"].values()) == pytest.approx(top.values.tolist(), rel=1e-5)
    row = {d.docid: i for i, d in enumerate(docs)}
    assert [run["t0"][d] for d in run["t0"]] == pytest.approx([float(brute[row[d]]) for d in run["t0"]], rel=1e-5)
    # The trained model finds the query's topic: documents d0_* lead for t0 = "apple fruit".
    assert next(iter(run["t0"])).startswith("d0_")

    write_run(tmp_path / "dense.run", run, "repbert")
    assert read_run(tmp_path / "dense.run")["t0"] == pytest.approx(run["t0"])


def test_search_is_streamed_query_by_query(setup: dict[str, Path], tmp_path: Path) -> None:
    from rankkit.dense import iter_dense_search
    from rankkit.dense.faiss_index import DocidList

    index_dir = tmp_path / "index"
    build_dense_index("repbert", setup["checkpoint"], setup["corpus"], index_dir, "flat", batch_size=5)
    with pytest.raises(RankkitError, match="k must be at least 1"):  # checked before anything is searched
        iter_dense_search(index_dir, setup["topics"], k=0)
    searched = iter_dense_search(index_dir, setup["topics"], k=5, batch_size=2)
    first = next(searched)  # one batch searched, the rest not yet: a run is written as it comes
    assert first[0] == "t0" and len(first[1]) == 5
    assert dict([first, *searched]) == dense_search(index_dir, setup["topics"], k=5, batch_size=4)
    docids = DocidList(index_dir / "docids.txt")
    assert list(docids) == (index_dir / "docids.txt").read_text().splitlines() and docids[-1] == docids[35]


def test_shards_merge_into_the_one_pass_index(setup: dict[str, Path], tmp_path: Path) -> None:
    for kind in ("flat", "ivfpq"):
        one = tmp_path / f"one-{kind}"
        build_dense_index("repbert", setup["checkpoint"], setup["big"], one, kind, nlist=4, pq_m=8, pq_bits=8,
                          chunk_size=30)
        shards = []
        for i in range(3):
            shard = tmp_path / f"{kind}-shard{i}"
            meta = build_dense_index("repbert", setup["checkpoint"], setup["big"], shard, kind, nlist=4, pq_m=8,
                                     pq_bits=8, chunk_size=30, shard=f"{i}/3")
            assert meta["kind"] == "dense-shard" and not (shard / "index.faiss").exists()
            shards.append(shard)
        with pytest.raises(RankkitError, match="merge the shards first"):
            dense_search(shards[0], setup["topics"], k=3)
        with pytest.raises(RankkitError, match="chunks are missing"):
            merge_dense_shards(shards[:2], tmp_path / "partial")
        merged = tmp_path / f"merged-{kind}"
        meta = merge_dense_shards(shards, merged)
        assert meta["documents"] == 200 and meta["faiss"] == json.loads((one / "rankkit-index.json").read_text())["faiss"]
        assert (merged / "index.faiss").read_bytes() == (one / "index.faiss").read_bytes()
        assert (merged / "docids.txt").read_text() == (one / "docids.txt").read_text()
        assert dense_search(merged, setup["topics"], k=3) == dense_search(one, setup["topics"], k=3)


def test_ivfpq_reduces_nlist_and_bits_for_small_corpora(setup: dict[str, Path], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert effective_ivfpq(10_000_000, 2000, 8) == (2000, 8)
    assert effective_ivfpq(200, 2000, 8) == (5, 2)
    meta = build_dense_index("repbert", setup["checkpoint"], setup["big"], tmp_path / "pq", "ivfpq", pq_m=8)
    assert meta["faiss"]["nlist"] == 5 and meta["faiss"]["nlist_requested"] == 2000 and meta["faiss"]["pq_bits"] == 2
    assert "nlist reduced from 2000 to 5" in capsys.readouterr().err
    _, index, _ = load_dense_index(tmp_path / "pq")
    assert index.ntotal == 200 and index.nlist == 5
    run = dense_search(tmp_path / "pq", setup["topics"], k=10, nprobe=5)
    assert all(len(d) == 10 for d in run.values())
    with pytest.raises(RankkitError, match="too few to train product quantisation"):
        build_dense_index("repbert", setup["checkpoint"], setup["corpus"], tmp_path / "tiny-pq", "ivfpq", pq_m=8)
    with pytest.raises(RankkitError, match="must divide the vector size 24"):
        build_dense_index("repbert", setup["checkpoint"], setup["big"], tmp_path / "m", "ivfpq", pq_m=7)


def test_encoding_resumes_and_skips_finished_chunks(setup: dict[str, Path], tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    index_dir = tmp_path / "index"
    build_dense_index("repbert", setup["checkpoint"], setup["corpus"], index_dir, chunk_size=10)
    before = (index_dir / "index.faiss").read_bytes()
    emb = index_dir / "embeddings"
    assert sorted(p.name for p in emb.glob("*.npy")) == [f"chunk-{c:08d}.npy" for c in range(4)]
    kept = np.load(emb / "chunk-00000000.npy")
    (emb / "chunk-00000002.npy").unlink()  # as if the run died while encoding chunk 2
    encoded: list[int] = []
    real = enc._write_chunk
    monkeypatch.setattr(enc, "_write_chunk", lambda out, c, d, v: (encoded.append(c), real(out, c, d, v)))
    build_dense_index("repbert", setup["checkpoint"], setup["corpus"], index_dir, chunk_size=10)
    assert encoded == [2]
    assert (index_dir / "index.faiss").read_bytes() == before
    assert np.array_equal(np.load(emb / "chunk-00000000.npy"), kept)
    with pytest.raises(RankkitError, match="other settings"):
        build_dense_index("repbert", setup["checkpoint"], setup["corpus"], index_dir, chunk_size=7)


def test_cosine_model_index_and_remove_query(setup: dict[str, Path], tmp_path: Path) -> None:
    corpus = tmp_path / "questions.tsv"
    corpus.write_text("t0\tapple fruit\nt1\tcar engine\nx\tapple fruit red\ny\tcar fuel\n")
    meta = build_dense_index("densetrans", setup["densetrans"], corpus, tmp_path / "index")
    assert meta["normalized"] is True and meta["dims"] == 4 * 24  # the last of 3 dense layers ([E0;E1;E2])
    _, index, _ = load_dense_index(tmp_path / "index")
    vectors = index.reconstruct_n(0, index.ntotal)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)  # cosine = inner product
    topics = {"t0": "apple fruit", "t1": "car engine"}
    with_self = dense_search(tmp_path / "index", topics, k=2)
    assert next(iter(with_self["t0"])) == "t0" and with_self["t0"]["t0"] == pytest.approx(1.0, abs=1e-5)
    without = dense_search(tmp_path / "index", topics, k=2, remove_query=True)
    assert all(qid not in docs and len(docs) == 2 for qid, docs in without.items())


def test_zero_shot_and_errors(setup: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(RankkitError, match="no zero-shot form"):
        build_dense_index("densetrans", None, setup["corpus"], tmp_path / "x")
    with pytest.raises(RankkitError, match="holds a 'repbert' model, not 'densetrans'"):
        build_dense_index("densetrans", setup["checkpoint"], setup["corpus"], tmp_path / "y")
    with pytest.raises(RankkitError, match="I/N"):
        build_dense_index("repbert", setup["checkpoint"], setup["corpus"], tmp_path / "z", shard="2")
    with pytest.raises(RankkitError, match="out of range"):
        build_dense_index("repbert", setup["checkpoint"], setup["corpus"], tmp_path / "z", shard="3/3")
    with pytest.raises(RankkitError, match="no such directory"):
        dense_search(tmp_path / "missing", setup["topics"])
    # any local HF folder works zero-shot: the tiny backbone itself, segment id 0 for documents
    meta = build_dense_index("repbert", setup["root"] / "tiny", setup["corpus"], tmp_path / "zs")
    assert meta["model_hparams"]["doc_segment_id"] == 0 and meta["checkpoint"] == str((setup["root"] / "tiny").resolve())
