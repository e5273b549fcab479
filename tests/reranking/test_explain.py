"""``rankkit explain``: a preference-matrix model's matrix for one query as a figure plus the top candidates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from training_helpers import build_model, tiny_backbone, write_corpus, write_topics

from rankkit.docstore import open_docstore
from rankkit.formats import write_run
from rankkit.models import MODELS
from rankkit.models.checkpoint import save_model
from rankkit.models.cross_encoders.matrank import MatRank
from rankkit.reranking.explain import explain_query, preference_models


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("explain")
    backbone = tiny_backbone(root / "tiny", dropout=0.0)
    ck = save_model(build_model(MatRank, backbone, {"encoder": "bi"}), root / "ck", {})
    out = {"ck": ck, "backbone": backbone}
    for name in ("matrank-row", "matrank-col"):
        out[name] = save_model(build_model(MODELS[name], backbone, {"encoder": "bi"}), root / name, {})
    # MatRank-Split with 6 document tokens per piece: the 7-word topic documents are 2 pieces each.
    out["matrank-split"] = save_model(build_model(MODELS["matrank-split"], backbone, {"piece_length": 41,
                                                                                      "max_pieces": 3}),
                                      root / "matrank-split", {})
    write_run(root / "run.txt", {"t0": {f"d{i}_0": float(-i) for i in range(6)}}, "x")
    return {**out, "run": root / "run.txt", "topics": write_topics(root / "topics.tsv"),
            "corpus": write_corpus(root / "corpus.jsonl")}


def test_the_registry_answers_which_models_explain_draws() -> None:
    assert preference_models() == ["matrank", "matrank-col", "matrank-row", "matrank-split"]


@pytest.mark.parametrize("name", ["matrank-row", "matrank-col", "matrank-split"])
def test_explain_draws_every_preference_matrix_model(data: dict[str, Path], tmp_path: Path, cli: Any,
                                                     name: str) -> None:
    fig = tmp_path / f"{name}.png"
    res = cli("explain", "--model", name, "--checkpoint", data[name], "--run", data["run"], "--topics",
              data["topics"], "--corpus", data["corpus"], "--qid", "t0", "--output", fig, "--depth", "4",
              "--device", "cpu")
    assert res.code == 0, res.stderr
    assert fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sum(f"d{i}_0" in res.stdout for i in range(4)) >= 3


def test_matrank_split_draws_its_piece_matrix(data: dict[str, Path]) -> None:
    """MatRank Fig. 4: one row and column per piece of every document, zero between pieces of one
    document; the documents' order is their vote (the re-ranking order)."""
    from rankkit.models.checkpoint import load_model

    model = load_model(data["matrank-split"])
    with open_docstore(corpus=data["corpus"]) as store:
        expl = explain_query(model, data["run"], data["topics"], store, "t0", depth=4)
        texts = store.get_many([c.docid for c in expl.candidates])
    pieces = {c.rank: len(model.split_documents([texts[c.docid]], None)[0]) for c in expl.candidates}
    assert all(count == 2 for count in pieces.values())
    assert expl.items == [(rank, piece) for rank in sorted(pieces) for piece in range(1, pieces[rank] + 1)]
    n = len(expl.items)
    assert len(expl.matrix) == n == 8 and all(len(row) == n for row in expl.matrix)
    for i, (rank_i, _) in enumerate(expl.items):
        for j, (rank_j, _) in enumerate(expl.items):
            if rank_i == rank_j:
                assert expl.matrix[i][j] == 0.0
    assert any(v != 0.0 for row in expl.matrix for v in row)
    votes = [c.vote for c in expl.candidates]
    assert votes == sorted(votes, reverse=True)
    scores = model.rerank_scores([expl.query], [[texts[c.docid] for c in expl.candidates]])[0]
    assert scores.tolist() == pytest.approx(votes)  # the vote is the re-ranking score


def test_explain_writes_a_png_and_prints_top_passages(data: dict[str, Path], tmp_path: Path, cli: Any) -> None:
    fig = tmp_path / "fig.png"
    res = cli("explain", "--model", "matrank", "--checkpoint", data["ck"], "--run", data["run"], "--topics",
              data["topics"], "--corpus", data["corpus"], "--qid", "t0", "--output", fig, "--depth", "5",
              "--top", "3", "--device", "cpu")
    assert res.code == 0, res.stderr
    assert fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The bi-encoder MatRank starts at the cosine ranking: the apple document (d0_0) wins for "apple fruit".
    assert "d0_0" in res.stdout.split("\n", 4)[-1][:400]
    assert res.stdout.count(" d") >= 3


@pytest.mark.parametrize("args, message", [
    (["--qid", "nope"], "has no text"),
    (["--qid", "t1"], "is not in"),
    (["--qid", "t0", "--model", "mono"], "--model matrank, matrank-col, matrank-row, matrank-split, not 'mono'"),
])
def test_explain_errors(data: dict[str, Path], tmp_path: Path, cli: Any, args: list[str], message: str) -> None:
    fig = tmp_path / "fig.png"
    res = cli("explain", "--checkpoint", data["ck"], "--run", data["run"], "--topics", data["topics"],
              "--corpus", data["corpus"], "--output", fig, *args)
    assert res.code == 2 and message in res.stderr and "Traceback" not in res.stderr
    assert not fig.exists()
