"""PARADE's missing baselines and Table 10 (paper 004): AvgP and k-max pooling of passage scores,
MaxP trained on passage-level labels, PARADE-Transformer scoring more passages than it trained on."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest
import torch
from test_models_parade import long_groups
from training_helpers import build_model, whole_groups_batch

from rankkit.errors import RankkitError
from rankkit.formats import read_groups, read_run, write_run
from rankkit.models import MODELS
from rankkit.models.checkpoint import load_model, save_model
from rankkit.models.documents.parade import ParadeTransformer
from rankkit.models.documents.passage_score import PassageScoreModel, kmax_mean
from rankkit.models.losses import PassageCrossEntropyLoss, get_loss
from rankkit.models.outputs import PassageScoreOutput

OPTIONS = {"window": 6, "stride": 5, "max_passages": 4, "max_query_length": 6}



def build(name: str, backbone: Path, **extra: object) -> PassageScoreModel:
    torch.manual_seed(0)
    model = build_model(MODELS[name], backbone, {**OPTIONS, **extra})
    assert isinstance(model, PassageScoreModel)
    return model.eval()


def test_kmax_mean_by_hand() -> None:
    s = torch.tensor([[1.0, 5.0, 2.0, 4.0], [-3.0, -1.0, 100.0, 0.0], [7.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[True, True, True, True], [True, True, False, False], [False] * 4])
    assert kmax_mean(s, mask, 2).tolist() == [4.5, -2.0, 0.0]  # (5 + 4) / 2; (-1 - 3) / 2; none
    assert kmax_mean(s, mask, 3).tolist() == pytest.approx([11 / 3, -2.0, 0.0])  # fewer than k real: their mean
    assert kmax_mean(s, mask, 9).tolist() == [3.0, -2.0, 0.0]


@pytest.mark.parametrize("name,extra,expected", [
    ("avgp", {}, [4 / 3, -1.0]),
    ("kmaxp", {"k": 2}, [2.0, -1.0]),
    ("kmaxp", {"k": 1}, [3.0, -1.0]),  # k = 1 is MaxP
])
def test_document_score_from_passage_scores(name: str, extra: dict[str, object], expected: list[float],
                                            backbone: Path) -> None:
    model = build(name, backbone, **extra)
    dim = model.pairs.dim
    with torch.no_grad():  # s_i = p_i[0]
        model.scorer.weight.zero_()
        model.scorer.weight[0, 0] = 1.0
        model.scorer.bias.zero_()
    p = torch.zeros(2, 3, dim)
    p[0, :, 0] = torch.tensor([1.0, 3.0, 0.0])
    p[1, :, 0] = torch.tensor([-1.0, 50.0, 60.0])  # padded passages with garbage
    mask = torch.tensor([[True, True, True], [True, False, False]])
    with torch.no_grad():
        assert model.document_scores(p, mask).tolist() == pytest.approx(expected)


def test_passage_ce_labels_every_passage_with_its_document(backbone: Path, tmp_path: Path) -> None:
    model = build("maxp", backbone).train()
    groups = read_groups(long_groups(tmp_path / "g.jsonl", count=2))
    batch = whole_groups_batch(model, groups)
    out = model(batch)
    assert isinstance(out, PassageScoreOutput)
    # Document scores are still the max of the real passages' scores.
    best = out.passage_scores.masked_fill(~out.passage_mask, -1e9).amax(dim=2)
    assert torch.allclose(out.scores[batch.mask], best[batch.mask])
    loss = get_loss("passage-ce", type(model).output_type, "maxp")
    assert isinstance(loss, PassageCrossEntropyLoss)
    # By hand: -log sigmoid(s) for every passage of a relevant document, -log(1 - sigmoid(s)) otherwise.
    terms = []
    for g in range(len(batch)):
        for s in range(batch.group_size):
            for n in range(out.passage_scores.shape[2]):
                if out.passage_mask[g, s, n]:
                    p = torch.sigmoid(out.passage_scores[g, s, n])
                    terms.append(-torch.log(p) if batch.labels[g, s] > 0 else -torch.log(1 - p))
    assert len(terms) > 2 * len(batch) * batch.group_size - 2  # several passages per document
    assert torch.allclose(loss(out, batch), torch.stack(terms).mean(), atol=1e-6)
    # The loss is refused by models without passage scores.
    with pytest.raises(RankkitError, match="cannot train with loss 'passage-ce'"):
        get_loss("passage-ce", MODELS["parade-max"].output_type, "parade-max")


def test_passage_level_training_through_the_cli(cli: Callable[..., object], tmp_path: Path, backbone: Path) -> None:
    groups = long_groups(tmp_path / "g.jsonl", count=4)
    out = tmp_path / "ck"
    res = cli("train", "--model", "maxp", "--loss", "passage-ce", "--train", groups, "--output", out, "--backbone",
              backbone, "--max-steps", 2, "--batch-size", 2, "--group-size", 3, "--device", "cpu", "--window", 6,
              "--stride", 5, "--max-passages", 3)
    assert res.code == 0, res.stderr
    assert load_model(out).name == "maxp"


# -- PARADE-Transformer: more passages at inference than in training (Table 10) -------------------

def test_transformer_position_table_sized_by_declared_maximum(backbone: Path, tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = build_model(ParadeTransformer, backbone, {**OPTIONS, "max_passages": 2, "position_passages": 6})
    assert model.positions.shape == (7, model.pairs.dim)
    with pytest.raises(RankkitError, match="below --max-passages"):
        build_model(ParadeTransformer, backbone, {**OPTIONS, "max_passages": 4, "position_passages": 2})
    save_model(model, tmp_path / "ck", {})
    again = load_model(tmp_path / "ck", expect="parade-transformer")
    assert again.positions.shape == (7, model.pairs.dim)
    groups = read_groups(long_groups(tmp_path / "g.jsonl", count=2))
    queries = [g.query for g in groups]
    texts = [[c.text for c in g.pos + g.neg] for g in groups]
    again.eval()
    trained = again.rerank_scores(queries, texts)
    again.set_max_passages(6)  # Table 10: evaluate on more passages than trained on
    more = again.rerank_scores(queries, texts)
    assert all(x.shape == y.shape for x, y in zip(trained, more))
    assert any(not torch.allclose(x, y) for x, y in zip(trained, more))  # the extra passages count
    # Six passages really reach the aggregator (documents of ~33 tokens: 7 windows of 6 every 5).
    documents = again.split_documents(texts[0], None)
    assert max(len(d) for d in documents) == 6
    with pytest.raises(RankkitError, match="--position-passages"):
        again.set_max_passages(7)


def test_transformer_default_positions_stay_the_training_count(backbone: Path) -> None:
    model = build_model(ParadeTransformer, backbone, dict(OPTIONS))
    assert model.config.position_passages == OPTIONS["max_passages"]
    assert model.positions.shape[0] == OPTIONS["max_passages"] + 1


def test_transformer_more_passages_through_the_cli(cli: Callable[..., object], tmp_path: Path,
                                                   backbone: Path) -> None:
    groups = long_groups(tmp_path / "g.jsonl", count=4)
    ck = tmp_path / "ck"
    res = cli("train", "--model", "parade-transformer", "--train", groups, "--output", ck, "--backbone", backbone,
              "--max-steps", 1, "--batch-size", 2, "--group-size", 3, "--device", "cpu", "--window", 6,
              "--stride", 5, "--max-passages", 2, "--position-passages", 8)
    assert res.code == 0, res.stderr
    read = read_groups(groups)
    corpus = tmp_path / "corpus.jsonl"
    topics = tmp_path / "topics.tsv"
    import json

    with open(corpus, "w", encoding="utf-8") as f:
        for g in read:
            for c in g.pos + g.neg:
                f.write(json.dumps({"id": c.docid, "contents": c.text}) + "\n")
    topics.write_text("".join(f"{g.qid}\t{g.query}\n" for g in read), encoding="utf-8")
    write_run(tmp_path / "first.run", {g.qid: {c.docid: float(-i) for i, c in enumerate(g.pos + g.neg)}
                                       for g in read}, "first")
    for n in (2, 8):
        res = cli("rerank", "--model", "parade-transformer", "--checkpoint", ck, "--run", tmp_path / "first.run",
                  "--topics", topics, "--corpus", corpus, "--max-passages", n, "--output", tmp_path / f"{n}.run",
                  "--device", "cpu")
        assert res.code == 0, res.stderr
    assert read_run(tmp_path / "2.run") != read_run(tmp_path / "8.run")


# -- PARADE-Transformer without passage positions (--position-passages none) ----------------------

def test_transformer_without_positions_is_a_set_of_passages(backbone: Path, tmp_path: Path) -> None:
    """``none`` (= 0): no position table, so the aggregate does not depend on the passages' order and
    any inference passage count uses trained weights only; checkpoints keep the setting."""
    from safetensors.torch import load_file

    torch.manual_seed(0)
    model = build_model(ParadeTransformer, backbone, {**OPTIONS, "max_passages": 3, "position_passages": "none"})
    assert model.config.position_passages == 0 and model.positions is None
    model.eval()
    p, mask = torch.randn(2, 5, model.pairs.dim), torch.tensor([[True] * 5, [True, True, True, False, False]])
    order = torch.tensor([3, 0, 4, 1, 2])
    with torch.no_grad():
        assert torch.allclose(model.aggregate(p, mask), model.aggregate(p[:, order], mask[:, order]), atol=1e-5)
    save_model(model, tmp_path / "ck", {})
    assert not any("positions" in key for key in load_file(str(tmp_path / "ck" / "model.safetensors")))
    again = load_model(tmp_path / "ck", expect="parade-transformer")
    assert again.positions is None and again.config.position_passages == 0
    groups = read_groups(long_groups(tmp_path / "g.jsonl", count=2))
    queries, texts = [g.query for g in groups], [[c.text for c in g.pos + g.neg] for g in groups]
    again.eval()
    trained = again.rerank_scores(queries, texts)
    again.set_max_passages(7)  # more than trained on, and more than any position table would hold
    more = again.rerank_scores(queries, texts)
    assert any(not torch.allclose(x, y) for x, y in zip(trained, more))
    with_positions = build_model(ParadeTransformer, backbone, {**OPTIONS, "max_passages": 3})
    with pytest.raises(RankkitError, match="--position-passages"):
        with_positions.set_max_passages(7)


def test_position_passages_none_through_the_cli(cli: Callable[..., object], tmp_path: Path, backbone: Path) -> None:
    groups = long_groups(tmp_path / "g.jsonl", count=4)
    common = ["--model", "parade-transformer", "--train", groups, "--backbone", backbone, "--max-steps", 1,
              "--batch-size", 2, "--group-size", 3, "--device", "cpu", "--window", 6, "--stride", 5,
              "--max-passages", 2]
    res = cli("train", *common, "--output", tmp_path / "ck", "--position-passages", "none")
    assert res.code == 0, res.stderr
    assert load_model(tmp_path / "ck").config.position_passages == 0
    bad = cli("train", *common, "--output", tmp_path / "bad", "--position-passages", "all")
    assert bad.code == 2 and "--position-passages takes an integer or none" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and not (tmp_path / "bad").exists()
    config = tmp_path / "none.toml"
    config.write_text('[train]\nmodel = "parade-transformer"\nposition_passages = "none"\nmax_passages = 2\n'
                      'window = 6\nstride = 5\n', encoding="utf-8")
    printed = cli("train", "--config", config, "--print-config")
    assert printed.code == 0 and "position_passages = 0" in printed.stdout
    res = cli("train", "--config", config, "--train", groups, "--output", tmp_path / "ck2", "--backbone", backbone,
              "--max-steps", 1, "--batch-size", 2, "--group-size", 3, "--device", "cpu")
    assert res.code == 0, res.stderr
    wrong = tmp_path / "wrong.toml"
    wrong.write_text('[train]\nmodel = "parade-transformer"\nposition_passages = "all"\n', encoding="utf-8")
    res = cli("train", "--config", wrong, "--print-config")
    assert res.code == 2 and "position_passages" in res.stderr and "none" in res.stderr
