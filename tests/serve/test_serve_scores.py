"""``rankkit serve`` scores as ``rankkit rerank`` does: mono, MatRank, the Set-Encoder and a PARADE model on
/rerank, RepBERT on /rerank and /embed, within 1e-5, with concurrent requests merged into dynamic batches."""

from __future__ import annotations

import base64
import concurrent.futures
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from serve_helpers import get, open_tiny, post, serving, tiny_checkpoint
from training_helpers import TOPICS, documents, write_corpus, write_topics

from rankkit.formats import read_run, write_run
from rankkit.serve import Limits

DEPTH = 10
#: Settings a model needs on the tiny 64-position backbone.
SETTINGS: dict[str, dict[str, Any]] = {"parade-max": {"window": 6, "stride": 4, "max_passages": 3},
                                       "mono": {"max_doc_length": 24}, "matrank": {"max_doc_length": 24},
                                       "set-encoder": {"max_doc_length": 24}}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("serve-scores")
    docids = sorted(documents())
    # A first stage: every query ranks every document in a fixed pseudo-random order.
    run = {f"t{i}": {d: float((sum(map(ord, d)) * (i + 3)) % 97) + 0.5 * k for k, d in enumerate(docids)}
           for i in range(len(TOPICS))}
    write_run(root / "first.txt", run, "first")
    return {"root": root, "corpus": write_corpus(root / "corpus.jsonl"), "topics": write_topics(root / "topics.tsv"),
            "run": root / "first.txt"}


def lists(data: dict[str, Path]) -> list[tuple[str, str, list[str], list[str]]]:
    """``(qid, query, docids, texts)`` of each query's top DEPTH, in run order."""
    texts = documents()
    queries = dict(line.split("\t") for line in data["topics"].read_text().splitlines())
    out = []
    for qid, ranking in read_run(data["run"]).items():
        top = sorted(ranking, key=lambda d: (-ranking[d], d))[:DEPTH]  # trec_eval order, as rerank reads it
        out.append((qid, queries[qid], top, [texts[d] for d in top]))
    return out


@pytest.mark.parametrize("name", ["mono", "matrank", "set-encoder", "parade-max", "repbert"])
def test_rerank_scores_equal_rankkit_rerank(name: str, data: dict[str, Path], backbone: Path, tmp_path: Path,
                                            cli: Any) -> None:
    checkpoint = tiny_checkpoint(name, backbone, tmp_path, **SETTINGS.get(name, {}))
    out = tmp_path / "reranked.txt"
    res = cli("rerank", "--model", name, "--checkpoint", checkpoint, "--run", data["run"], "--topics", data["topics"],
              "--corpus", data["corpus"], "--output", out, "--depth", DEPTH, "--device", "cpu",
              "--backend", "torch", "--precision", "fp32")
    assert res.code == 0, res.stderr
    expected = read_run(out)
    service = open_tiny(name, checkpoint, limits=Limits(max_wait_ms=100))  # a wide window: batches surely merge
    with serving(service) as url:
        shapes = ["texts", "documents"]

        def ask(i: int, item: tuple[str, str, list[str], list[str]]) -> tuple[str, list[str], Any, str]:
            qid, query, docids, texts = item
            shape = shapes[i % 2]
            reply = post(url, "/rerank", {"query": query, shape: texts})
            assert reply.status == 200, reply.body
            return qid, docids, reply.json, shape

        # All queries at once: the worker merges them into dynamic batches.
        with concurrent.futures.ThreadPoolExecutor(len(TOPICS)) as pool:
            answers = list(pool.map(lambda pair: ask(*pair), enumerate(lists(data))))
        metrics = get(url, "/metrics").body.decode()
    largest = 0.0
    for qid, docids, body, shape in answers:
        results = body if shape == "texts" else body["results"]
        key = "score" if shape == "texts" else "relevance_score"
        got = {docids[r["index"]]: r[key] for r in results}
        assert set(got) == set(docids)
        assert [r[key] for r in results] == sorted((r[key] for r in results), reverse=True)  # best first
        for docid, score in got.items():
            largest = max(largest, abs(score - expected[qid][docid]))
    assert largest <= 1e-5, f"{name}: /rerank differs from rankkit rerank by {largest:.2e}"
    # The requests really were batched together (fewer batches than requests).
    batches = float(next(line.split()[-1] for line in metrics.splitlines()
                         if line.startswith("rankkit_serve_batches_total")))
    assert 1 <= batches < len(TOPICS)


def test_embed_vectors_equal_the_session_encoding(backbone: Path, tmp_path: Path) -> None:
    """/embed (TEI) and /embeddings (OpenAI, floats and base64) give the vectors `rankkit index --kind dense`
    computes (documents) and `rankkit retrieve` (queries: is_query)."""
    from rankkit.runtime import InferenceSession, Runtime, load_for_inference

    checkpoint = tiny_checkpoint("repbert", backbone, tmp_path)
    texts = list(documents().values())[:9]
    session = InferenceSession.of(load_for_inference("repbert", checkpoint, Runtime("torch", "none", None, "fp32"),
                                                     "cpu"))
    documents_ = session.encode(texts, is_query=False).numpy()
    queries = session.encode(texts, is_query=True).numpy()
    with serving(open_tiny("repbert", checkpoint)) as url:
        tei = post(url, "/embed", {"inputs": texts})
        one = post(url, "/embed", {"inputs": texts[0]})
        asked = post(url, "/embed", {"inputs": texts, "is_query": True})
        floats = post(url, "/v1/embeddings", {"input": texts, "model": "x"})
        packed = post(url, "/embeddings", {"input": texts, "encoding_format": "base64"})
        unit = post(url, "/embed", {"inputs": texts, "normalize": True})
        rerank = post(url, "/rerank", {"query": texts[0], "texts": texts})
        info = get(url, "/info").json
    assert np.abs(np.array(tei.json) - documents_).max() <= 1e-5
    assert np.abs(np.array(one.json) - documents_[:1]).max() <= 1e-5
    assert np.abs(np.array(asked.json) - queries).max() <= 1e-5
    assert [d["index"] for d in floats.json["data"]] == list(range(len(texts)))
    assert np.abs(np.array([d["embedding"] for d in floats.json["data"]]) - documents_).max() <= 1e-5
    decoded = np.stack([np.frombuffer(base64.b64decode(d["embedding"]), dtype="<f4") for d in packed.json["data"]])
    assert np.abs(decoded - documents_).max() <= 1e-5
    norms = np.linalg.norm(np.array(unit.json), axis=1)
    assert np.allclose(norms, 1.0, atol=1e-5)
    scores = {r["index"]: r["score"] for r in rerank.json}
    assert max(abs(scores[i] - float(queries[0] @ documents_[i])) for i in range(len(texts))) <= 1e-5
    assert info["family"] == "bi-encoder" and "/embed" in info["endpoints"]
    assert info["served_model_name"] == str(checkpoint) == floats.json["model"]  # unless --served-model-name


def test_model_options_reach_the_served_model(backbone: Path, tmp_path: Path) -> None:
    """`rankkit serve --pooling cls` (a model's inference-time override, as `rankkit rerank` takes it) serves the
    vectors of a session loaded with that setting, not the checkpoint's own pooling."""
    from rankkit.runtime import InferenceSession, Runtime, load_for_inference

    checkpoint = tiny_checkpoint("repbert", backbone, tmp_path)
    texts = list(documents().values())[:5]
    runtime = Runtime("torch", "none", None, "fp32")
    trained = InferenceSession.of(load_for_inference("repbert", checkpoint, runtime, "cpu"))
    as_trained = trained.encode(texts, is_query=False).numpy()
    cls = InferenceSession.of(load_for_inference("repbert", checkpoint, runtime, "cpu", settings={"pooling": "cls"}))
    expected = cls.encode(texts, is_query=False).numpy()
    assert np.abs(expected - as_trained).max() > 1e-3  # the override changes the vectors
    with serving(open_tiny("repbert", checkpoint, settings={"pooling": "cls"})) as url:
        served = np.array(post(url, "/embed", {"inputs": texts}).json)
    assert np.abs(served - expected).max() <= 1e-5


@pytest.mark.openvino
def test_an_openvino_service_runs_few_shapes_with_torchs_scores(backbone: Path, tmp_path: Path) -> None:
    """OpenVINO keeps memory per input shape it has run, and a server sees new shapes with every request: an
    OpenVINO service pads lengths to steps of OPENVINO_BUCKET tokens (a torch one does not), scores as torch does."""
    from rankkit.runtime import Runtime
    from rankkit.serve import OPENVINO_BUCKET, open_service

    checkpoint = tiny_checkpoint("mono", backbone, tmp_path, max_doc_length=24)
    openvino = open_service("mono", checkpoint, Runtime("openvino", "none", 1, "fp32"), "cpu")
    reference = open_tiny("mono", checkpoint)
    assert openvino.session.batching.bucket == OPENVINO_BUCKET and reference.session.batching.bucket == 1
    words = " ".join(documents().values()).split()
    lists = [[" ".join(words[start:start + count]) for start in range(3)] for count in range(1, 30, 3)]  # 10 lengths
    for passages in lists:
        ours = openvino.session.scores(["apple fruit"], [passages])[0]
        theirs = reference.session.scores(["apple fruit"], [passages])[0]
        assert np.abs(np.asarray(ours) - np.asarray(theirs)).max() <= 1e-4
    widths = {width for _, width in openvino.session.stats.shapes}
    assert all(width % OPENVINO_BUCKET == 0 or width == max(widths) for width in widths)  # the model's limit caps
    assert len(widths) < len({width for _, width in reference.session.stats.shapes})


def test_info_names_the_model_and_runtime(backbone: Path, tmp_path: Path) -> None:
    checkpoint = tiny_checkpoint("mono", backbone, tmp_path, max_doc_length=24)
    with serving(open_tiny("mono", checkpoint, served_name="my-reranker")) as url:
        info = get(url, "/info").json
        health = get(url, "/health")
        reply = post(url, "/rerank", {"query": "apple", "documents": ["apple fruit", "car"], "model": "anything"})
    assert health.status == 200 and health.json == {"status": "ok"}
    assert info["model"] == "mono" and info["served_model_name"] == "my-reranker"
    assert info["backend"] == "torch" and info["precision"] == "fp32" and info["device"] == "cpu"
    assert info["revision"].startswith("sha256:") and info["cpu"] and info["gpu"] is None
    assert info["limits"]["max_queue"] == 64 and info["truncation"]["reported"]
    assert reply.json["model"] == "my-reranker" and reply.json["object"] == "rerank"
    assert reply.json["usage"]["total_tokens"] > 0
