"""``rankkit rerank``: depth handling, order below --depth, streaming, errors, train -> rerank end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from training_helpers import TOPICS, build_model, documents, tiny_backbone, write_corpus, write_groups, write_topics

from rankkit.docstore import open_docstore
from rankkit.formats import read_run, sort_ranking, write_run
from rankkit.formats.runs import iter_run_lines
from rankkit.models.cross_encoders.mono import Mono
from rankkit.reranking import merge_tail, rerank_run


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("rerank")
    corpus = write_corpus(root / "corpus.jsonl")
    topics = write_topics(root / "topics.tsv")
    # A first stage: every query ranks all 36 documents in a fixed pseudo-random order.
    docids = sorted(documents())
    run = {f"t{i}": {d: float((hash_(d) * (i + 3)) % 97) + 0.5 * k for k, d in enumerate(docids)}
           for i in range(len(TOPICS))}
    write_run(root / "first.txt", run, "first")
    return {"root": root, "corpus": corpus, "topics": topics, "run": root / "first.txt",
            "backbone": tiny_backbone(root / "tiny", dropout=0.0), "groups": write_groups(root / "groups.jsonl")}


def hash_(docid: str) -> int:
    return sum(ord(c) * (i + 1) for i, c in enumerate(docid))


def ranked(path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for row in iter_run_lines(path):
        out.setdefault(row.qid, []).append(row.docid)
    return out


def test_merge_tail_keeps_tail_order_below_head() -> None:
    docs = merge_tail({"a": 0.1, "b": -3.0}, ["z", "y", "x"])
    order = [d for d, _ in sorted(docs.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)]
    assert order == ["a", "b", "z", "y", "x"]


@pytest.mark.parametrize("depth", [1, 5, 36, 100])
def test_rerank_keeps_depth_and_tail_order(data: dict[str, Path], tmp_path: Path, depth: int) -> None:
    model = build_model(Mono, data["backbone"])
    out = tmp_path / "out.txt"
    with open_docstore(corpus=data["corpus"]) as store:
        report = rerank_run(model, data["run"], data["topics"], store, out, depth=depth, batch_size=7,
                            chunk_pairs=20)
    before, after = ranked(data["run"]), ranked(out)
    assert list(after) == list(before)
    assert report.queries == len(before) and report.reranked == len(before) * min(depth, 36)
    for qid, docs in before.items():
        assert len(after[qid]) == len(docs)
        assert set(after[qid][:depth]) == set(docs[:depth])
        assert after[qid][depth:] == docs[depth:]
    # Scores of the re-ranked head are the model's, independent of chunking and batch size.
    again = tmp_path / "again.txt"
    with open_docstore(corpus=data["corpus"]) as store:
        rerank_run(model, data["run"], data["topics"], store, again, depth=depth, batch_size=32, chunk_pairs=10_000)
    a, b = read_run(out), read_run(again)
    for qid in a:
        for docid, score in a[qid].items():
            assert b[qid][docid] == pytest.approx(score, abs=1e-5)


def test_rerank_is_deterministic(data: dict[str, Path], tmp_path: Path) -> None:
    model = build_model(Mono, data["backbone"])
    outs = []
    for name in ("a.txt", "b.txt"):
        with open_docstore(corpus=data["corpus"]) as store:
            rerank_run(model, data["run"], data["topics"], store, tmp_path / name, depth=10)
        outs.append((tmp_path / name).read_bytes())
    assert outs[0] == outs[1]


def test_zero_shot_repbert_reranks_by_cosine(data: dict[str, Path], tmp_path: Path) -> None:
    from rankkit.models.bi_encoders.repbert import RepBERT

    model = RepBERT.zero_shot(data["backbone"])
    out = tmp_path / "rep.txt"
    with open_docstore(corpus=data["corpus"]) as store:
        rerank_run(model, data["run"], data["topics"], store, out, depth=36)
        texts = store.get_many(sorted(documents()))
    q = model.encode(["apple fruit"], is_query=True)
    d = model.encode([texts[k] for k in sorted(texts)], is_query=False)
    expected = dict(zip(sorted(texts), (d @ q[0]).tolist()))
    got = read_run(out)["t0"]
    assert got == pytest.approx(expected, abs=1e-5)


def test_missing_topic_and_missing_passage_fail_without_output(data: dict[str, Path], tmp_path: Path, cli: Any) -> None:
    topics = tmp_path / "topics.tsv"
    topics.write_text("t0\tapple fruit\n")
    out = tmp_path / "out.txt"
    res = cli("rerank", "--model", "repbert", "--checkpoint", data["backbone"], "--run", data["run"],
              "--topics", topics, "--corpus", data["corpus"], "--output", out)
    assert res.code == 2 and "has no text" in res.stderr and "Traceback" not in res.stderr
    assert not out.exists()
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "d0_0", "contents": "apple"}) + "\n")
    res = cli("rerank", "--model", "repbert", "--checkpoint", data["backbone"], "--run", data["run"],
              "--topics", data["topics"], "--corpus", corpus, "--output", out)
    assert res.code == 2 and "not found" in res.stderr and not out.exists()
    res = cli("rerank", "--model", "mono", "--run", data["run"], "--topics", data["topics"],
              "--corpus", data["corpus"], "--output", out)
    assert res.code == 2 and "zero-shot" in res.stderr
    res = cli("rerank", "--model", "repbert", "--run", tmp_path / "nope.txt", "--topics", data["topics"],
              "--corpus", data["corpus"], "--output", out, "--checkpoint", data["backbone"])
    assert res.code == 2 and "no such file" in res.stderr


@pytest.mark.parametrize("model", ["mono", "matrank"])
def test_train_then_rerank_end_to_end_via_cli(data: dict[str, Path], tmp_path: Path, cli: Any, model: str) -> None:
    ck = tmp_path / "ck"
    res = cli("train", "--model", model, "--train", data["groups"], "--output", ck, "--backbone", data["backbone"],
              "--max-steps", "30", "--batch-size", "4", "--group-size", "4", "--lr", "3e-3", "--seed", "1",
              "--device", "cpu", "--max-doc-length", "24")
    assert res.code == 0, res.stderr
    assert json.loads((ck / "rankkit.json").read_text())["model"] == model
    out = tmp_path / "re.txt"
    res = cli("rerank", "--model", model, "--checkpoint", ck, "--run", data["run"], "--topics", data["topics"],
              "--corpus", data["corpus"], "--output", out, "--depth", "36", "--device", "cpu")
    assert res.code == 0, res.stderr
    before, after = read_run(data["run"]), read_run(out)
    assert {q: set(d) for q, d in after.items()} == {q: set(d) for q, d in before.items()}

    # The written head scores are exactly what the saved checkpoint computes from the texts alone.
    from rankkit.models.checkpoint import load_model

    loaded = load_model(ck, expect=model)
    with open_docstore(corpus=data["corpus"]) as store:
        # In the run's order: exactly tied candidates (identical texts) keep their input order.
        docids = [d for d, _ in sort_ranking(before["t3"])]
        texts = store.get_many(docids)
    scores = loaded.rerank_scores(["music guitar"], [[texts[d] for d in docids]])[0]  # type: ignore[attr-defined]
    assert [after["t3"][d] for d in docids] == pytest.approx(scores.tolist(), abs=1e-4)
    log = [json.loads(line) for line in (ck / "train.log").read_text().splitlines()]
    assert log[-1]["event"] == "done"
