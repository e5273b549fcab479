"""Passage score aggregation (PARADE §3.2): ``maxp``, ``firstp``, ``sump`` on hand-made passage vectors."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from test_models_parade import long_groups
from training_helpers import build_model, loss_drops_after_steps, whole_groups_batch

from rankkit.formats import read_groups
from rankkit.models import MODELS
from rankkit.models.checkpoint import load_model, save_model
from rankkit.models.documents.configs import FirstPConfig
from rankkit.models.documents.passage_score import FirstP, PassageScoreModel, masked_max

OPTIONS = {"window": 6, "stride": 5, "max_passages": 4, "max_query_length": 6}



def build(name: str, backbone: Path) -> PassageScoreModel:
    torch.manual_seed(0)
    options = {"window": 6, "max_query_length": 6} if name == "firstp" else OPTIONS
    model = build_model(MODELS[name], backbone, options)
    assert isinstance(model, PassageScoreModel)
    return model.eval()


def test_masked_max_ignores_padding_and_empty_rows() -> None:
    x = torch.tensor([[1.0, 5.0, 2.0], [-3.0, -1.0, 100.0], [4.0, 4.0, 4.0]])
    mask = torch.tensor([[True, False, True], [True, True, False], [False, False, False]])
    assert masked_max(x, mask, dim=1).tolist() == [2.0, -1.0, 0.0]


@pytest.mark.parametrize("name,expected", [("maxp", [3.0, -1.0]), ("firstp", [1.0, -1.0]), ("sump", [4.0, -1.0])])
def test_document_score_from_passage_scores(name: str, expected: list[float], backbone: Path) -> None:
    model = build(name, backbone)
    dim = model.pairs.dim
    # A scorer reading the first coordinate: s_i = p_i[0] + 0.
    with torch.no_grad():
        model.scorer.weight.zero_()
        model.scorer.weight[0, 0] = 1.0
        model.scorer.bias.zero_()
    p = torch.zeros(2, 3, dim)
    p[0, :, 0] = torch.tensor([1.0, 3.0, 0.0])
    p[1, :, 0] = torch.tensor([-1.0, 50.0, 60.0])  # two padded passages with garbage
    mask = torch.tensor([[True, True, True], [True, False, False]])
    with torch.no_grad():
        assert model.document_scores(p, mask).tolist() == expected
        garbage = p.clone()
        garbage[1, 1:] = torch.randn(2, dim) * 1e3
        assert model.document_scores(garbage, mask).tolist() == expected


def test_firstp_encodes_only_the_first_window(backbone: Path, tmp_path: Path) -> None:
    model = build("firstp", backbone)
    assert isinstance(model, FirstP) and FirstP.config_class is FirstPConfig
    assert [s.name for s in FirstP.config_class.model_options()] == ["window"]
    assert model.split(list(range(20)), None) == [list(range(6))]
    groups = read_groups(long_groups(tmp_path / "g.jsonl", count=2))
    batch = whole_groups_batch(model, groups)
    assert batch.features.slots[:, 2].max() == 0  # one passage per document


@pytest.mark.parametrize("name", ["maxp", "firstp", "sump"])
def test_trains_end_to_end_and_round_trips(name: str, backbone: Path, tmp_path: Path) -> None:
    groups = read_groups(long_groups(tmp_path / "g.jsonl", count=2))
    model = build(name, backbone).train()
    batch = whole_groups_batch(model, groups)
    assert loss_drops_after_steps(model, batch, steps=4)
    save_model(model, tmp_path / "ck", {})
    again = load_model(tmp_path / "ck", expect=name)
    model.eval()
    queries = [g.query for g in groups]
    texts = [[c.text for c in g.pos + g.neg] for g in groups]
    a = model.rerank_scores(queries, texts, batch_size=5)
    b = again.rerank_scores(queries, texts)
    assert all(torch.allclose(x, y, atol=1e-5) for x, y in zip(a, b))
    # maxp's document score is its best passage's point-wise score.
    if name == "maxp":
        documents = again.split_documents(texts[0], None)
        flat = again.pairs.encode_sorted([queries[0]] * sum(map(len, documents)),
                                         [p for d in documents for p in d], batch_size=4)
        with torch.inference_mode():
            per_passage = again.scorer(flat).squeeze(-1).double()
        starts = [0]
        for d in documents:
            starts.append(starts[-1] + len(d))
        best = [per_passage[starts[i]:starts[i + 1]].max().item() for i in range(len(documents))]
        assert b[0].tolist() == pytest.approx(best, abs=1e-5)
