"""lightning-ir interop: checkpoints lightning-ir 0.0.6 saved (tests/data/lightning_ir, rebuilt by its
build_fixtures.py) re-rank in rankkit to lightning-ir's own scores, and rankkit's exports read back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest
import torch
from training_helpers import tiny_backbone, write_groups

from rankkit.errors import RankkitError
from rankkit.models import lightning_ir
from rankkit.models.checkpoint import load_for_inference

FIXTURES = Path(__file__).parents[1] / "data" / "lightning_ir"
CASES = [("set-encoder-bert", "set-encoder"), ("set-encoder-electra-int", "set-encoder"), ("mono-electra", "mono")]


def expected(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name / "scores.json").read_text(encoding="utf-8"))


def largest_difference(got: list[torch.Tensor], want: list[list[float]]) -> float:
    return max(abs(float(a) - b) for g, w in zip(got, want) for a, b in zip(g, w))


@pytest.mark.parametrize("name, model", CASES)
def test_lightning_ir_checkpoints_score_as_lightning_ir(name: str, model: str) -> None:
    data = expected(name)
    ranker = load_for_inference(model, FIXTURES / name)
    got = ranker.rerank_scores(data["queries"], data["docs"], batch_size=3)
    assert largest_difference(got, data["scores"]) < 1e-5
    # The fixtures exercise lightning-ir's own cuts (passages over doc_length) and, for the ELECTRA
    # Set-Encoder, the [INT] token: either changed, the scores move.
    ranker.pairs.truncation = "pair"
    assert largest_difference(ranker.rerank_scores(data["queries"], data["docs"]), data["scores"]) > 1e-4


def test_the_int_token_is_what_the_other_passages_attend_to() -> None:
    ranker = load_for_inference("set-encoder", FIXTURES / "set-encoder-electra-int")
    assert ranker.interaction_token() == "[INT]" and ranker.max_set_size == 5
    data = expected("set-encoder-electra-int")
    for layer in ranker.pairs.encoder.encoder.layer:
        layer.attention.self.position = 0  # [CLS] instead of [INT]
    assert largest_difference(ranker.rerank_scores(data["queries"], data["docs"]), data["scores"]) > 1e-4


def test_lightning_ir_folders_through_the_cli(cli: Callable[..., Any], tmp_path: Path) -> None:
    data = expected("set-encoder-bert")
    run, topics, corpus = tmp_path / "run", tmp_path / "topics.tsv", tmp_path / "corpus.tsv"
    topics.write_text("".join(f"q{i}\t{q}\n" for i, q in enumerate(data["queries"])), encoding="utf-8")
    corpus.write_text("".join(f"d{i}_{j}\t{d}\n" for i, docs in enumerate(data["docs"]) for j, d in enumerate(docs)),
                      encoding="utf-8")
    run.write_text("".join(f"q{i} Q0 d{i}_{j} {j + 1} {-j} bm25\n" for i, docs in enumerate(data["docs"])
                           for j in range(len(docs))), encoding="utf-8")
    out = tmp_path / "out.run"
    result = cli("rerank", "--model", "set-encoder", "--checkpoint", FIXTURES / "set-encoder-bert", "--run", run,
                 "--topics", topics, "--corpus", corpus, "--output", out)
    assert result.code == 0, result.stderr
    scores = {(line.split()[0], line.split()[2]): float(line.split()[4]) for line in out.read_text().splitlines()}
    for i, docs in enumerate(data["docs"]):
        for j in range(len(docs)):
            assert abs(scores[(f"q{i}", f"d{i}_{j}")] - data["scores"][i][j]) < 1e-5
    wrong = cli("rerank", "--model", "repbert", "--checkpoint", FIXTURES / "mono-electra", "--run", run, "--topics",
                topics, "--corpus", corpus, "--output", tmp_path / "x.run")
    assert wrong.code == 2 and "lightning-ir mono checkpoint: re-rank it with --model mono" in wrong.stderr


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from rankkit.training import TrainConfig, train

    root = tmp_path_factory.mktemp("lir")
    backbone = tiny_backbone(root / "tiny", dropout=0.0)
    groups = write_groups(root / "groups.jsonl", count=8, negatives=3)
    common: dict[str, Any] = {"train": [groups], "backbone": str(backbone), "max_steps": 2, "batch_size": 4,
                              "group_size": 3, "lr": 1e-2, "warmup": 0, "device": "cpu", "max_query_length": 6,
                              "max_doc_length": 10}
    train(TrainConfig(model="set-encoder", output=root / "se", **common,
                      model_options={"interaction_token": "int", "truncation": "lightning-ir"}))
    train(TrainConfig(model="mono", output=root / "mono", **common,
                      model_options={"hf_head": False, "truncation": "lightning-ir"}))
    train(TrainConfig(model="mono", output=root / "mono-hf", **common))
    return {"root": root, "se": root / "se", "mono": root / "mono", "mono-hf": root / "mono-hf", "groups": groups}


QUERIES = ["apple fruit", "car fuel"]
DOCS = [["apple fruit red apple apple red fruit apple red", "car engine fuel", "dog bark"],
        ["car engine fuel car fuel engine car", "tea leaf cup", "apple red"]]


def test_the_int_token_trains_saves_and_reloads(trained: dict[str, Path]) -> None:
    model = load_for_inference("set-encoder", trained["se"])
    assert model.interaction_token() == "[INT]"
    before = model.rerank_scores(QUERIES, DOCS)
    again = load_for_inference("set-encoder", trained["se"]).rerank_scores(QUERIES, DOCS)
    assert all(torch.equal(a, b) for a, b in zip(before, again))
    shuffled = model.rerank_scores(QUERIES, [docs[::-1] for docs in DOCS])  # permutation-invariant with [INT] too
    assert all(torch.allclose(a, b.flip(0), atol=1e-5) for a, b in zip(before, shuffled))


@pytest.mark.parametrize("kind, model", [("se", "set-encoder"), ("mono", "mono")])
def test_exports_read_back_with_the_same_scores(cli: Callable[..., Any], trained: dict[str, Path], tmp_path: Path,
                                                kind: str, model: str) -> None:
    out = tmp_path / "exported"
    result = cli("export", trained[kind], out, "--format", "lightning-ir")
    assert result.code == 0, result.stderr
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert config["model_type"] == model and config["backbone_model_type"] == "bert"
    assert (config["query_length"], config["doc_length"]) == (6, 10)
    tokenizer_config = json.loads((out / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert tokenizer_config["backbone_tokenizer_class"].startswith("BertTokenizer")
    if model == "set-encoder":
        assert config["add_extra_token"] is True and config["sample_missing_docs"] is False and config["depth"] == 100
        assert tokenizer_config["tokenizer_class"] == "SetEncoderTokenizer"
    original = load_for_inference(model, trained[kind]).rerank_scores(QUERIES, DOCS)
    read_back = lightning_ir.load(out, model).rerank_scores(QUERIES, DOCS)
    assert largest_difference(read_back, [t.tolist() for t in original]) < 1e-5


def test_exports_of_other_models_are_refused(cli: Callable[..., Any], trained: dict[str, Path], tmp_path: Path) -> None:
    # The mono rankkit train writes by default (--hf-head): refused in one line that says why and which flag exports.
    result = cli("export", trained["mono-hf"], tmp_path / "x", "--format", "lightning-ir")
    assert result.code == 2 and len(result.stderr.splitlines()) == 1
    assert "(BertForSequenceClassification: --hf-head, the default of rankkit train --model mono)" in result.stderr
    assert "train with --rankkit-head (--encoder cross --hidden 0) for a mono that exports" in result.stderr
    assert not (tmp_path / "x").exists()
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "file").write_text("x")
    again = cli("export", trained["se"], busy)
    assert again.code == 2 and "exists and is not empty" in again.stderr
    unknown = cli("export", trained["se"], tmp_path / "y", "--format", "onnx")
    assert unknown.code == 2 and "rankkit exports lightning-ir" in unknown.stderr


def test_unsupported_lightning_ir_settings_are_refused(tmp_path: Path) -> None:
    import shutil

    folder = tmp_path / "bi"
    shutil.copytree(FIXTURES / "mono-electra", folder)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config["pooling_strategy"] = "mean"
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(RankkitError, match="pooling 'mean'"):
        lightning_ir.load(folder, "mono")
    config["model_type"] = "col"
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(RankkitError, match="lightning-ir model type 'col' is not one rankkit reads"):
        lightning_ir.load(folder, "mono")
