"""Indexes rankkit did not build (issue 14): a Lucene index made by Pyserini's own indexer
(``python -m pyserini.index.lucene``) and a Pyserini faiss folder (``index`` + ``docid``).

The Lucene index is built here, in a subprocess, from the first 300 passages of
tests/data/corpus_small; rankkit's BM25 (and RM3) on it must give exactly Pyserini's
``LuceneSearcher`` results. The faiss folder is written in Pyserini's layout and searched both by
rankkit (queries encoded by the ``--checkpoint`` given) and by Pyserini's ``FaissSearcher``.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _lexical_index import CORPUS, TOPICS
from training_helpers import WORDS

from rankkit.docstore import open_docstore
from rankkit.errors import RankkitError
from rankkit.formats import read_run, read_topics
from rankkit.lexical import java
from rankkit.lexical.shell_env import shell_exports
from rankkit.lexical.search import Bm25Params, Bm25Searcher, retrieve_bm25

DOCS = 300


def pyserini_index(docs: list[tuple[str, str]], root: Path, *flags: str) -> Path:
    """``python -m pyserini.index.lucene --collection JsonCollection ...`` over ``docs``; returns the index."""
    collection = root / "collection"
    collection.mkdir(parents=True)
    with open(collection / "docs.jsonl", "w", encoding="utf-8") as out:
        for docid, text in docs:
            out.write(json.dumps({"id": docid, "contents": text}) + "\n")
    index = root / "index"
    # As a user runs it, in a shell set up by `eval "$(rankkit env)"` (README).
    env = {**os.environ, **shell_exports()}
    done = subprocess.run(
        [sys.executable, "-m", "pyserini.index.lucene", "--collection", "JsonCollection", "--input", str(collection),
         "--index", str(index), "--generator", "DefaultLuceneDocumentGenerator", "--threads", "1", *flags],
        capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not (index / "rankkit-index.json").exists()
    return index


def passages() -> list[tuple[str, str]]:
    with gzip.open(CORPUS, "rt", encoding="utf-8") as lines:
        rows = [line.rstrip("\n").split("\t", 1) for _, line in zip(range(DOCS), lines)]
    return [(docid, text) for docid, text in rows]


@pytest.fixture(scope="module")
def lucene(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pyserini_index(passages(), tmp_path_factory.mktemp("pyserini"), "--storeRaw", "--storeDocvectors")


@pytest.mark.parametrize("params", [Bm25Params(), Bm25Params(rm3=True)], ids=["bm25", "rm3"])
def test_pyserini_lucene_index_searches_as_pyserini(lucene: Path, tmp_path: Path, params: Bm25Params,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    retrieve_bm25(lucene, TOPICS, tmp_path / "run.txt", k=20, params=params, threads=1)
    assert "no rankkit-index.json; opened as a Lucene index (Pyserini/Anserini) with Anserini's defaults" \
        in capsys.readouterr().err
    ours = read_run(tmp_path / "run.txt")
    reference = java.import_pyserini_lucene().LuceneSearcher(str(lucene))
    if params.rm3:
        reference.set_rm3(params.fb_terms, params.fb_docs, params.original_weight)
    compared = 0
    for qid, text in read_topics(TOPICS).items():
        hits = reference.search(text, k=20)
        assert list(ours.get(qid, {})) == [h.docid for h in hits]
        assert list(ours.get(qid, {}).values()) == [h.score for h in hits]
        compared += len(hits)
    assert compared > 20  # the queries do hit this slice of the corpus


def test_cli_retrieve_and_rerank_text_from_a_pyserini_index(cli, lucene: Path, tmp_path: Path) -> None:
    result = cli("retrieve", "--model", "bm25", "--index", lucene, "--topics", TOPICS, "--output", tmp_path / "run.txt",
                 "--k", 10)
    assert result.code == 0, result.stderr
    assert "opened as a Lucene index" in result.stderr
    run = read_run(tmp_path / "run.txt")
    docids = [d for docs in run.values() for d in docs][:5]
    texts = dict(passages())
    with open_docstore(index=lucene) as store:  # Pyserini's stored raw JsonCollection documents
        assert store.get_many(docids) == {d: texts[d] for d in docids}


def test_rm3_needs_document_vectors_in_a_pyserini_index(tmp_path: Path) -> None:
    bare = pyserini_index(passages()[:5], tmp_path)
    with pytest.raises(RankkitError, match="RM3 needs document vectors.*Pyserini's --storeDocvectors"):
        Bm25Searcher(bare, Bm25Params(rm3=True))
    with pytest.raises(RankkitError, match="stores no raw text"):
        open_docstore(index=bare)


def test_not_an_index_names_what_it_looked_for(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("x")
    with pytest.raises(RankkitError, match="not a rankkit index .*nor a Lucene index .*Pyserini faiss"):
        Bm25Searcher(tmp_path)


def test_pyserini_faiss_folder_searches_as_pyserini(cli, tmp_path: Path) -> None:
    import faiss

    from rankkit.dense import dense_search
    from rankkit.models.backbone import write_sentence_transformers, write_tiny_backbone
    from rankkit.models.checkpoint import load_for_inference

    # As tests/training_helpers.tiny_backbone, with BERT's 512 positions for 256-token documents.
    encoder = write_tiny_backbone(tmp_path / "encoder", words=WORDS, hidden=24, layers=2, heads=2, intermediate=48,
                                  dropout=0.0, max_positions=512)
    write_sentence_transformers(encoder, dim=24, pooling="mean", normalize=True, max_seq_length=64, prompts={})
    model = load_for_inference("repbert", encoder)
    docs = passages()[:120]
    vectors = model.encode([text for _, text in docs], is_query=False).numpy()
    folder = tmp_path / "pyserini-faiss"  # what pyserini.encode --to-faiss writes
    folder.mkdir()
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    faiss.write_index(index, str(folder / "index"))
    (folder / "docid").write_text("".join(d + "\n" for d, _ in docs), encoding="utf-8")

    topics = read_topics(TOPICS)
    ours = dense_search(folder, topics, k=10, model_name="repbert", checkpoint=encoder, device="cpu")
    java.start_jvm()  # pyserini.search loads Java classes on import
    with java._placeholder_openai_key():
        from pyserini.search.faiss import FaissSearcher
    reference = FaissSearcher(str(folder), None)
    queries = model.encode(list(topics.values()), is_query=True).numpy()
    for qid, vector in zip(topics, queries):
        hits = reference.search(vector.reshape(1, -1), k=10)
        assert list(ours[qid]) == [h.docid for h in hits]
        assert list(ours[qid].values()) == pytest.approx([float(h.score) for h in hits], abs=1e-5)

    with pytest.raises(RankkitError, match="records no encoder"):
        dense_search(folder, topics, k=10, model_name="repbert")
    result = cli("retrieve", "--model", "repbert", "--index", folder, "--checkpoint", encoder, "--topics", TOPICS,
                 "--output", tmp_path / "run.txt", "--k", 10, "--device", "cpu")
    assert result.code == 0, result.stderr
    assert {q: list(d) for q, d in read_run(tmp_path / "run.txt").items()} == {q: list(d) for q, d in ours.items()}


def test_a_relative_index_path_after_the_jvm_started_elsewhere(lucene: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Java resolves relative paths against the directory the JVM started in: rankkit passes absolute ones."""
    java.start_jvm()
    monkeypatch.chdir(lucene.parent)
    with Bm25Searcher(Path(lucene.name)) as searcher:
        assert searcher.num_docs == DOCS
    with open_docstore(index=Path(lucene.name)) as store:
        assert len(store) == DOCS
