"""Text by docid: the corpus offset table (plain, gzipped, caching, rebuilds, errors) and the index store."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest
from _lexical_index import CORPUS, DOCUMENTS, small_index

from rankkit.docstore import CorpusDocStore, IndexDocStore, MissingDocumentsError, open_docstore
from rankkit.docstore.base import docid_hash
from rankkit.docstore.corpus import SUFFIX, _read_header, is_writable_dir
from rankkit.errors import InputError, RankkitError
from rankkit.formats import iter_corpus


@pytest.fixture(autouse=True)
def user_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep the user cache inside the test's temporary folder."""
    cache = tmp_path / "user-cache"
    monkeypatch.setenv("RANKKIT_CACHE_DIR", str(cache))
    return cache


def small_copy(tmp_path: Path) -> Path:
    target = tmp_path / "data" / CORPUS.name
    target.parent.mkdir()
    shutil.copy(CORPUS, target)
    return target


def test_gzipped_corpus_every_text_matches_the_reader(tmp_path: Path, user_cache: Path) -> None:
    corpus = small_copy(tmp_path)
    expected = {doc.docid: doc.contents for doc in iter_corpus(corpus)}
    with open_docstore(corpus=corpus) as store:
        assert isinstance(store, CorpusDocStore) and len(store) == DOCUMENTS == len(expected)
        assert store.table_dir.parent == user_cache / "docstore"  # never beside the user's data
        assert store.table_dir.name.startswith(corpus.name) and store.table_dir.name.endswith(SUFFIX)
        assert sorted(p.name for p in corpus.parent.iterdir()) == [corpus.name]
        assert (store.table_dir / "text").is_file()  # the decompressed copy
        ids = list(expected)[::-1]
        assert store.get_many(ids) == {d: expected[d] for d in ids}
        assert list(store.get_many(ids[:3])) == ids[:3]  # in the order asked
        assert store.get(ids[7]) == expected[ids[7]]
        assert ids[0] in store and "not-a-docid" not in store and 12 not in store


@pytest.mark.parametrize(
    "name, lines, expected",
    [
        (
            "c.tsv",
            ["d1\tfirst passage", "", "d2\tsecond\twith tab"],
            {"d1": "first passage", "d2": "second\twith tab"},
        ),
        (
            "c.jsonl",
            [json.dumps({"id": "d1", "contents": "x y"}), json.dumps({"id": 7, "contents": "seven"})],
            {"d1": "x y", "7": "seven"},
        ),
        (
            "beir.jsonl",
            [json.dumps({"_id": "a", "title": "T", "text": "body"}), json.dumps({"_id": "b", "text": "só"})],
            {"a": "T body", "b": "só"},
        ),
    ],
)
def test_plain_corpus_formats(tmp_path: Path, name: str, lines: list[str], expected: dict[str, str]) -> None:
    corpus = tmp_path / name
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with open_docstore(corpus=corpus) as store:
        assert store.get_many(list(expected)) == expected
        assert not (store.table_dir / "text").exists()  # plain corpora are read in place


def test_missing_docids_listed(tmp_path: Path) -> None:
    corpus = tmp_path / "c.tsv"
    corpus.write_text("a\tA\nb\tB\n", encoding="utf-8")
    with open_docstore(corpus=corpus) as store:
        with pytest.raises(
            MissingDocumentsError,
            match=r"7 docid\(s\) not found in .*c.tsv: 'x1', 'x2', 'x3', 'x4', 'x5' and 2 more",
        ):
            store.get_many(["a", "x1", "x2", "x3", "x4", "x5", "x6", "x7"])
        assert store.get_many(["x1", "b", "a"], missing="skip") == {"b": "B", "a": "A"}
        with pytest.raises(MissingDocumentsError, match="'zz'"):
            store.get("zz")


def test_table_rebuilt_when_corpus_changes(
    tmp_path: Path, user_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "c.tsv"
    corpus.write_text("a\tA\n", encoding="utf-8")
    with open_docstore(corpus=corpus) as store:
        assert "b" not in store
    assert "building the docid table" in capsys.readouterr().err
    with open_docstore(corpus=corpus) as store:  # cached: no rebuild
        assert len(store) == 1
    assert capsys.readouterr().err == ""
    corpus.write_text("a\tA2\nb\tB\n", encoding="utf-8")
    os.utime(corpus, ns=(corpus.stat().st_atime_ns, corpus.stat().st_mtime_ns + 10**9))
    with open_docstore(corpus=corpus) as store:
        assert store.get_many(["a", "b"]) == {"a": "A2", "b": "B"}
    assert "changed since its docid table was built; rebuilding" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.tsv", "user-cache"]
    cached = sorted(p.name for p in (user_cache / "docstore").iterdir())
    assert len(cached) == 1 and cached[0].startswith("c.tsv.") and cached[0].endswith(SUFFIX)  # no temporaries


def test_read_only_corpus_dir_uses_the_user_cache(tmp_path: Path, user_cache: Path) -> None:
    corpus = small_copy(tmp_path)
    os.chmod(corpus.parent, 0o555)  # even root must not write here: the folder has no write bit
    try:
        assert not is_writable_dir(corpus.parent)
        with open_docstore(corpus=corpus) as store:
            assert store.table_dir.parent == user_cache / "docstore"
            assert store.table_dir.name.startswith(corpus.name) and store.table_dir.name.endswith(SUFFIX)
            assert len(store) == DOCUMENTS
        assert sorted(p.name for p in corpus.parent.iterdir()) == [corpus.name]
    finally:
        os.chmod(corpus.parent, 0o755)


def test_explicit_cache_dir(tmp_path: Path) -> None:
    corpus = tmp_path / "c.tsv"
    corpus.write_text("a\tA\n", encoding="utf-8")
    with open_docstore(corpus=corpus, cache_dir=tmp_path / "cache") as store:
        assert store.table_dir.parent == tmp_path / "cache"
        assert store.get("a") == "A"
    header, _ = _read_header(store.table_dir / "table")
    assert header["documents"] == 1 and header["corpus"] == str(corpus.resolve())


def test_hash_collisions_never_return_the_wrong_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every docid hashed to one key: lookups must still find each text by comparing docids."""
    import rankkit.docstore.corpus as corpus_module

    monkeypatch.setattr(corpus_module, "docid_hash", lambda docid: 42)
    corpus = tmp_path / "c.tsv"
    corpus.write_text("a\tA\nb\tB\nc\tC\n", encoding="utf-8")
    with open_docstore(corpus=corpus) as store:
        assert store.get_many(["c", "a", "b"]) == {"c": "C", "a": "A", "b": "B"}
        assert "d" not in store


@pytest.mark.parametrize(
    "name, content, message",
    [
        (
            "dup.tsv",
            "a\tA\nb\tB\n\na\tA again\n",
            r"dup.tsv:4: duplicate document id 'a' \(first on line 1\)",
        ),
        ("bad.tsv", "a\tA\nno-tab\n", r"bad.tsv:2: expected 'id<TAB>text'"),
        ("bad.jsonl", '{"id": "a", "contents": "A"}\n{"id": "b"}\n', r"bad.jsonl:2: missing document text"),
        ("empty.tsv", "\n\n", r"empty.tsv: file is empty"),
    ],
)
def test_corpus_errors_name_file_and_line(tmp_path: Path, name: str, content: str, message: str) -> None:
    corpus = tmp_path / name
    corpus.write_text(content, encoding="utf-8")
    with pytest.raises(InputError, match=message):
        open_docstore(corpus=corpus)
    assert sorted(p.name for p in tmp_path.iterdir()) == [name, "user-cache"]
    assert list((tmp_path / "user-cache" / "docstore").iterdir()) == []  # no half-built table


def test_corrupt_gzip_is_an_input_error(tmp_path: Path) -> None:
    corpus = tmp_path / "c.tsv.gz"
    corpus.write_bytes(gzip.compress(b"a\tA\nb\tB\n" * 100)[:-30])
    with pytest.raises(InputError, match="corrupt or truncated gzip data"):
        open_docstore(corpus=corpus)


def test_open_docstore_needs_exactly_one_source(tmp_path: Path) -> None:
    with pytest.raises(RankkitError, match="exactly one"):
        open_docstore()
    with pytest.raises(RankkitError, match="exactly one"):
        open_docstore(corpus=tmp_path / "a", index=tmp_path / "b")
    with pytest.raises(InputError, match="no such file"):
        open_docstore(corpus=tmp_path / "missing.tsv")
    with pytest.raises(RankkitError, match="is not a rankkit index"):
        open_docstore(index=tmp_path)


def test_index_store_matches_corpus_store(tmp_path: Path) -> None:
    index = small_index()
    expected = {doc.docid: doc.contents for doc in iter_corpus(CORPUS)}
    with open_docstore(index=index) as store:
        assert isinstance(store, IndexDocStore) and len(store) == DOCUMENTS
        assert store.get_many(list(expected)) == expected
        with pytest.raises(MissingDocumentsError, match="'nope'"):
            store.get_many(["nope", next(iter(expected))])


def test_docid_hash_is_stable() -> None:
    assert docid_hash("7067032") == docid_hash("7067032") != docid_hash("7067033")
    assert docid_hash("a") == 0x2F42665B399EF840  # blake2b, not hash(): the same in every process
