"""BM25 through the real Anserini: indexing, the manifest, retrieval equal to pyserini's, CLI errors."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from _lexical_index import CORPUS, DOCUMENTS, TOPICS, small_index

from rankkit.errors import InputError, RankkitError
from rankkit.formats import read_run, read_topics, write_topics
from rankkit.lexical import java
from rankkit.lexical.index import build_bm25_index
from rankkit.lexical.pyserini_env import VECTOR_MODULE_OPTION
from rankkit.indexes import MANIFEST_NAME, read_manifest
from rankkit.lexical.search import Bm25Params, Bm25Searcher, drop_self_hits, retrieve_bm25


@pytest.fixture(scope="session")
def index() -> Path:
    return small_index()


@pytest.fixture(scope="module")
def pyserini_searcher_class():
    """pyserini's own LuceneSearcher (importing it takes several seconds: once per module)."""
    return java.import_pyserini_lucene().LuceneSearcher


def write_tsv_corpus(path: Path, rows: list[tuple[str, str]]) -> Path:
    path.write_text("".join(f"{docid}\t{text}\n" for docid, text in rows), encoding="utf-8")
    return path


# --- java.py -----------------------------------------------------------------------------------


def test_java_is_21_or_newer_and_vector_option_filtered(index: Path) -> None:
    import jnius_config

    home, version = java.check_java()
    assert java.java_major(version) >= 21
    assert VECTOR_MODULE_OPTION not in jnius_config.get_options()
    assert java.anserini_version() is not None
    assert java.jvm_started()


def test_java_major_parses_old_and_new_schemes() -> None:
    assert java.java_major("25.0.2") == 25
    assert java.java_major("1.8.0_392") == 8
    assert java.java_major("17") == 17


def test_check_java_rejects_an_old_or_missing_runtime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANKKIT_JAVA_HOME", str(tmp_path / "nope"))
    with pytest.raises(java.JavaError, match="does not exist.*rankkit doctor"):
        java.check_java()
    (tmp_path / "release").write_text('JAVA_VERSION="17.0.2"\n')
    monkeypatch.setenv("RANKKIT_JAVA_HOME", str(tmp_path))
    with pytest.raises(java.JavaError, match="needs Java 21.*17.0.2"):
        java.check_java()


# --- index ---------------------------------------------------------------------------------------


def test_index_manifest_records_the_build(index: Path) -> None:
    manifest = read_manifest(index, kinds=("bm25",))
    assert manifest["kind"] == "bm25"
    assert manifest["corpus"]["path"] == str(CORPUS.resolve())
    assert manifest["corpus"]["bytes"] == CORPUS.stat().st_size
    assert manifest["options"]["docvectors"] is True and manifest["options"]["store_raw"] is True
    assert manifest["counts"] == {
        "documents": DOCUMENTS,
        "indexed": DOCUMENTS,
        "empty": 0,
        "skipped": 0,
        "errors": 0,
    }
    assert manifest["software"]["anserini"] == java.anserini_version()
    # Nothing of the build is left beside the index.
    assert [p.name for p in index.parent.iterdir()] == ["index"]


def test_index_formats_empty_documents_and_stored_text(tmp_path: Path) -> None:
    corpus = tmp_path / "beir.jsonl.gz"
    with gzip.open(corpus, "wt", encoding="utf-8") as out:
        out.write(json.dumps({"_id": "d1", "title": "Aspirin", "text": "reduces fever and pain"}) + "\n")
        out.write(json.dumps({"_id": "d2", "title": "", "text": ""}) + "\n")
        out.write(
            json.dumps({"_id": "d3", "title": "", "text": "ibuprofen is an anti-inflammatory drug"}) + "\n"
        )
    report = build_bm25_index(corpus, tmp_path / "idx", threads=2)
    assert (report.documents, report.indexed, report.empty, report.skipped) == (3, 2, 1, 0)
    with Bm25Searcher(tmp_path / "idx") as searcher:
        assert [docid for docid, _ in searcher.search("aspirin fever")] == ["d1"]
        assert searcher.num_docs == 2
    from rankkit.docstore import open_docstore

    with open_docstore(index=tmp_path / "idx") as store:
        assert store.get("d1") == "Aspirin reduces fever and pain"


def test_index_refuses_non_empty_dir_unless_force(tmp_path: Path) -> None:
    corpus = write_tsv_corpus(tmp_path / "c.tsv", [("a", "alpha beta"), ("b", "beta gamma")])
    target = tmp_path / "idx"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    with pytest.raises(RankkitError, match="not empty; pass --force"):
        build_bm25_index(corpus, target)
    with pytest.raises(RankkitError, match="not a rankkit index; refusing"):
        build_bm25_index(corpus, target, force=True)
    assert (target / "notes.txt").read_text() == "mine"
    (target / "notes.txt").unlink()
    build_bm25_index(corpus, target, threads=1)
    write_tsv_corpus(corpus, [("a", "alpha beta"), ("b", "beta gamma"), ("c", "gamma delta")])
    report = build_bm25_index(corpus, target, threads=1, force=True)
    assert report.indexed == 3
    assert read_manifest(target)["counts"]["indexed"] == 3


def test_index_bad_corpus_leaves_nothing_behind(tmp_path: Path) -> None:
    corpus = tmp_path / "bad.jsonl"
    corpus.write_text('{"id": "1", "contents": "fine"}\n{"id": "2", "contents": \n', encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.jsonl:2: invalid JSON"):
        build_bm25_index(corpus, tmp_path / "idx")
    dup = write_tsv_corpus(tmp_path / "dup.tsv", [("a", "x y"), ("b", "y z"), ("a", "z w")])
    with pytest.raises(InputError, match=r"dup.tsv:3: duplicate document id 'a' \(first on line 1\)"):
        build_bm25_index(dup, tmp_path / "idx")
    with pytest.raises(InputError, match="no such file"):
        build_bm25_index(tmp_path / "missing.tsv", tmp_path / "idx")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl", "dup.tsv"]


def test_read_manifest_refuses_other_folders(tmp_path: Path) -> None:
    with pytest.raises(RankkitError, match="no such directory"):
        read_manifest(tmp_path / "nope")
    with pytest.raises(RankkitError, match="is not a rankkit index"):
        read_manifest(tmp_path)
    (tmp_path / MANIFEST_NAME).write_text(json.dumps({"rankkit_index": 1, "kind": "dense"}))
    with pytest.raises(RankkitError, match=r"is a 'dense' index, not a 'bm25' index; retrieve from it with --model \?"):
        read_manifest(tmp_path, kinds=("bm25",))


# --- retrieval -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [Bm25Params(), Bm25Params(k1=1.2, b=0.75), Bm25Params(rm3=True)],
    ids=["default", "k1=1.2,b=0.75", "rm3"],
)
def test_retrieve_equals_pyserini(
    index: Path, tmp_path: Path, pyserini_searcher_class, params: Bm25Params
) -> None:
    output = tmp_path / "run.txt"
    report = retrieve_bm25(index, TOPICS, output, k=100, params=params, threads=2)
    assert report.queries == 8 and report.lines == 800 and not report.no_hits
    ours = read_run(output)

    reference = pyserini_searcher_class(str(index))
    reference.set_bm25(params.k1, params.b)
    if params.rm3:
        reference.set_rm3(params.fb_terms, params.fb_docs, params.original_weight)
    topics = read_topics(TOPICS)
    for qid, text in topics.items():
        hits = reference.search(text, k=100)
        assert list(ours[qid]) == [hit.docid for hit in hits]  # same docids in the same order
        assert list(ours[qid].values()) == [hit.score for hit in hits]  # and the very same scores
    batch = reference.batch_search(list(topics.values()), list(topics), k=100, threads=2)
    assert {qid: [h.docid for h in hits] for qid, hits in batch.items()} == {
        q: list(d) for q, d in ours.items()
    }


def anserini_ties(scores: list[float]) -> list[float]:
    """Anserini 1.7.1's ScoreTiesAdjusterReranker transcribed line by line from its bytecode."""
    import numpy as np

    out = [np.float32(x) for x in scores]
    dup = 0
    for i in range(len(out)):
        out[i] = np.float32(np.floor(np.float64(out[i]) * 10000.0 + 0.5) / 10000.0)
        if i == 0 or out[i - 1] - out[i] > np.float32(1e-4):
            dup = 0
        else:
            dup += 1
            out[i] = out[i] - np.float32(1e-6) * np.float32(dup)
    return [float(x) for x in out]


def test_tie_adjustment_equals_anserinis_on_tie_heavy_lists() -> None:
    import numpy as np

    from rankkit.lexical.hits import adjust_ties

    rng = np.random.default_rng(0)
    for _ in range(2000):
        n = int(rng.integers(0, 80))
        # Scores one rounding unit (1e-4) apart, equal, or a hair apart: ties, runs that go on past a block.
        steps = rng.integers(0, 4, size=n) * rng.choice([0, 1e-5, 1e-4, 1.02e-4, 2e-4, 3e-6], size=n)
        scores = np.sort(rng.choice([1.0, 2.5, 3.00004, 20.0, 7.12345, 7.1233], size=n) + steps)[::-1].tolist()
        assert adjust_ties(scores) == anserini_ties(scores)


def test_worker_processes_write_the_same_run(index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rankkit.lexical import pool

    monkeypatch.setattr(pool, "MIN_QUERIES", 1)
    monkeypatch.setattr(pool, "BATCH", 3)  # several batches per worker, results out of order
    lines = retrieve_bm25(index, TOPICS, tmp_path / "one.txt", k=200, threads=1).lines
    report = retrieve_bm25(index, TOPICS, tmp_path / "two.txt", k=200, threads=2, remove_query=True)
    assert report.queries == 8 and report.lines == lines > 8 * 150
    retrieve_bm25(index, TOPICS, tmp_path / "two.txt", k=200, threads=2)
    assert (tmp_path / "one.txt").read_bytes() == (tmp_path / "two.txt").read_bytes()
    with pytest.raises(RankkitError, match="no such directory"):  # a worker's error, raised here as one line
        list(pool.iter_blocks(tmp_path / "gone", Bm25Params(), [("q", "text")], 10, 10, False, "t", 1))


def test_retrieve_is_deterministic_and_ranked(index: Path, tmp_path: Path) -> None:
    retrieve_bm25(index, TOPICS, tmp_path / "a.txt", k=50, threads=2)
    retrieve_bm25(index, TOPICS, tmp_path / "b.txt", k=50, threads=1)
    assert (tmp_path / "a.txt").read_bytes() == (tmp_path / "b.txt").read_bytes()
    first = (tmp_path / "a.txt").read_text().splitlines()[0].split()
    assert first[1] == "Q0" and first[3] == "1" and first[5] == "bm25"


def test_rankings_do_not_depend_on_index_threads(index: Path, tmp_path: Path) -> None:
    """One segment or two (different internal doc order): Anserini breaks ties by docid either way."""
    single = tmp_path / "single"
    build_bm25_index(CORPUS, single, threads=1)
    retrieve_bm25(single, TOPICS, tmp_path / "a.txt", k=100)
    retrieve_bm25(index, TOPICS, tmp_path / "b.txt", k=100)
    assert (tmp_path / "a.txt").read_bytes() == (tmp_path / "b.txt").read_bytes()


def test_remove_query_drops_self_hit_and_keeps_k(index: Path, tmp_path: Path) -> None:
    with Bm25Searcher(index) as searcher:
        docid, _ = searcher.search("naturalization records public", 1)[0]
    from rankkit.docstore import open_docstore

    with open_docstore(index=index) as store:
        text = store.get(docid)
    topics = tmp_path / "self.tsv"
    write_topics(topics, {docid: text})
    retrieve_bm25(index, topics, tmp_path / "keep.txt", k=10)
    retrieve_bm25(index, topics, tmp_path / "drop.txt", k=10, remove_query=True)
    keep, drop = read_run(tmp_path / "keep.txt")[docid], read_run(tmp_path / "drop.txt")[docid]
    assert next(iter(keep)) == docid
    assert docid not in drop and len(drop) == 10
    assert list(drop)[:9] == [d for d in keep if d != docid]


def test_drop_self_hits() -> None:
    hits = [("q1", 3.0), ("a", 2.0), ("b", 1.0)]
    assert drop_self_hits("q1", hits, 2) == ([("a", 2.0), ("b", 1.0)], True)
    assert drop_self_hits("zz", hits, 2) == ([("q1", 3.0), ("a", 2.0)], False)


def test_query_without_hits_is_reported(
    index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topics = tmp_path / "t.tsv"
    write_topics(topics, {"1": "naturalization records", "2": "the of and", "3": "zzzqqqxxx"})
    report = retrieve_bm25(index, topics, tmp_path / "run.txt", k=5)
    assert report.no_hits == ["2", "3"]
    assert "2 of 3 queries retrieved nothing" in capsys.readouterr().err
    assert set(read_run(tmp_path / "run.txt")) == {"1"}


def test_rm3_needs_docvectors(tmp_path: Path) -> None:
    corpus = write_tsv_corpus(tmp_path / "c.tsv", [("a", "alpha beta"), ("b", "beta gamma")])
    build_bm25_index(corpus, tmp_path / "idx", threads=1)
    with pytest.raises(RankkitError, match="RM3 needs document vectors.*--docvectors"):
        Bm25Searcher(tmp_path / "idx", Bm25Params(rm3=True))


@pytest.mark.parametrize(
    "params, message",
    [
        (Bm25Params(k1=-1), "--k1"),
        (Bm25Params(b=2), "--b"),
        (Bm25Params(rm3=True, fb_docs=0), "--fb-docs"),
    ],
)
def test_bad_parameters_are_one_line_errors(index: Path, params: Bm25Params, message: str) -> None:
    with pytest.raises(RankkitError, match=message):
        Bm25Searcher(index, params)


# --- CLI -------------------------------------------------------------------------------------------


def test_cli_index_and_retrieve(cli, tmp_path: Path) -> None:
    corpus = write_tsv_corpus(tmp_path / "c.tsv", [("a", "alpha beta"), ("b", "beta gamma"), ("c", "")])
    result = cli("index", "--kind", "bm25", "--corpus", corpus, "--index", tmp_path / "idx", "--threads", "1")
    assert result.code == 0, result.stderr
    assert "indexed 2 of 3 documents (empty 1, skipped 0, errors 0)" in result.stderr
    again = cli("index", "--corpus", corpus, "--index", tmp_path / "idx")
    assert again.code == 2 and again.stderr.strip().endswith(
        "exists and is not empty; pass --force to replace it"
    )
    topics = tmp_path / "q.tsv"
    write_topics(topics, {"q1": "gamma", "q2": "delta"})
    run = tmp_path / "run.txt"
    result = cli(
        "retrieve",
        "--model",
        "bm25",
        "--index",
        tmp_path / "idx",
        "--topics",
        topics,
        "--output",
        run,
        "--k",
        "5",
        "--runtag",
        "mytag",
        "--k1",
        "1.2",
        "--b",
        "0.75",
    )
    assert result.code == 0, result.stderr
    assert "1 of 2 queries retrieved nothing" in result.stderr
    assert run.read_text().split() == ["q1", "Q0", "b", "1", run.read_text().split()[4], "mytag"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["retrieve", "--model", "colbert"], "unknown model 'colbert'; known models: bm25"),
        (["retrieve"], "is not a rankkit index"),
        (["retrieve", "--fb-docs", "3"], "--fb-terms, --fb-docs and --original-weight need --rm3"),
        (["index", "--kind", "sparse"], "unknown index kind 'sparse'; known kinds: bm25"),
    ],
)
def test_cli_user_errors_are_one_line(cli, tmp_path: Path, args: list[str], message: str) -> None:
    topics = tmp_path / "q.tsv"
    write_topics(topics, {"q1": "x"})
    (tmp_path / "not-an-index").mkdir()
    common = (
        ["--index", tmp_path / "not-an-index", "--topics", topics, "--output", tmp_path / "r.txt"]
        if args[0] == "retrieve"
        else ["--corpus", topics, "--index", tmp_path / "idx"]
    )
    result = cli(*args, *common)
    assert result.code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rankkit: error: ") and message in lines[0]


def test_cli_malformed_corpus_names_file_and_line(cli, tmp_path: Path) -> None:
    corpus = tmp_path / "c.tsv"
    corpus.write_text("a\talpha\nno tab here\n", encoding="utf-8")
    result = cli("index", "--corpus", corpus, "--index", tmp_path / "idx")
    assert result.code == 2
    assert result.stderr.strip().splitlines()[-1] == f"rankkit: error: {corpus}:2: expected 'id<TAB>text'"
    missing = cli("index", "--corpus", tmp_path / "none.tsv", "--index", tmp_path / "idx")
    assert missing.code == 2 and "none.tsv: no such file" in missing.stderr
    assert not (tmp_path / "idx").exists()
