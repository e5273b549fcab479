"""MatRank (paper 000, Eqs. 1-8): matrix, means, softmaxes, loss and voting on hand-made tensors."""

from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import nn
from training_helpers import build_model, loss_drops_after_steps, whole_groups_batch, write_groups

from rankkit.formats import read_groups
from rankkit.models.checkpoint import load_model, save_model
from rankkit.models.cross_encoders.matrank import (
    MatRank,
    MatRankRow,
    aggregate,
    blockwise_preference_matrix,
    borda_vote,
    descending_ranks,
    matrank_loss,
)
from rankkit.models.outputs import PreferenceOutput



def test_aggregate_means_and_softmaxes_by_hand() -> None:
    raw = torch.tensor([[[9.0, 2.0, 4.0], [1.0, 9.0, 0.0], [-2.0, 3.0, 9.0]]])
    out = aggregate(raw, torch.ones((1, 3), dtype=torch.bool))
    # Eq. 3: the diagonal is zeroed.
    assert out.S.tolist() == [[[0.0, 2.0, 4.0], [1.0, 0.0, 0.0], [-2.0, 3.0, 0.0]]]
    # Eqs. 4-5: means over M = 3.
    assert torch.allclose(out.r, torch.tensor([[2.0, 1 / 3, 1 / 3]]))
    assert torch.allclose(out.c, torch.tensor([[-1 / 3, 5 / 3, 4 / 3]]))
    # Eqs. 6-7: beta = softmax(r), omega = softmax(-c).
    r = [2.0, 1 / 3, 1 / 3]
    beta = [math.exp(x) / sum(math.exp(y) for y in r) for x in r]
    c = [-1 / 3, 5 / 3, 4 / 3]
    omega = [math.exp(-x) / sum(math.exp(-y) for y in c) for x in c]
    assert torch.allclose(out.log_beta.exp(), torch.tensor([beta]), atol=1e-6)
    assert torch.allclose(out.log_omega.exp(), torch.tensor([omega]), atol=1e-6)


def test_aggregate_ignores_masked_slots() -> None:
    raw = torch.tensor([[[0.0, 2.0, 50.0], [1.0, 0.0, 50.0], [50.0, 50.0, 50.0]]])
    mask = torch.tensor([[True, True, False]])
    out = aggregate(raw, mask)
    assert out.S[0, 2].abs().sum() == 0 and out.S[0, :, 2].abs().sum() == 0
    assert torch.allclose(out.r[0, :2], torch.tensor([1.0, 0.5]))  # divided by the 2 real candidates
    assert torch.allclose(out.log_beta[0, :2].exp().sum(), torch.tensor(1.0))
    assert out.log_beta[0, 2].exp() == 0


def test_loss_is_eq8_with_sign_fixed_and_shared_positive_mass() -> None:
    raw = torch.tensor([[[0.0, 1.0, 2.0], [0.5, 0.0, -1.0], [0.0, 3.0, 0.0]]])
    mask = torch.ones((1, 3), dtype=torch.bool)
    out = aggregate(raw, mask)
    one = torch.tensor([[1.0, 0.0, 0.0]])
    expected = -(out.log_beta[0, 0] + out.log_omega[0, 0])
    assert torch.allclose(matrank_loss(out, one, mask), expected)
    assert torch.allclose(matrank_loss(out, one, mask, row_only=True), -out.log_beta[0, 0])
    two = torch.tensor([[1.0, 0.0, 2.0]])  # graded labels: both positives weigh 1/2
    expected2 = -(0.5 * (out.log_beta[0, 0] + out.log_beta[0, 2]) + 0.5 * (out.log_omega[0, 0] + out.log_omega[0, 2]))
    assert torch.allclose(matrank_loss(out, two, mask), expected2)
    assert matrank_loss(out, one, mask) > 0


def test_borda_vote_by_hand_and_ties_by_beta() -> None:
    beta = torch.tensor([0.5, 0.3, 0.2])
    omega = torch.tensor([0.1, 0.6, 0.3])
    # beta ranks 1,2,3 -> points 2,1,0; omega ranks 3,1,2 -> points 0,2,1; votes 2,3,1.
    vote = borda_vote(beta, omega)
    assert torch.equal(vote.floor(), torch.tensor([2.0, 3.0, 1.0], dtype=torch.float64))
    # Equal votes: candidate 0 (better beta) must come first.
    tie = borda_vote(torch.tensor([0.6, 0.4]), torch.tensor([0.4, 0.6]))
    assert tie.floor()[0] == tie.floor()[1] == 1.0
    assert tie[0] > tie[1]
    assert torch.equal(descending_ranks(torch.tensor([1.0, 3.0, 3.0])), torch.tensor([2, 0, 1]))
    # Row-only voting is the beta ranking.
    assert torch.equal(torch.argsort(borda_vote(beta, None), descending=True), torch.tensor([0, 1, 2]))


def test_blockwise_matrix_equals_dense_mlp_on_concatenation() -> None:
    torch.manual_seed(0)
    d, hdim, m = 6, 5, 7
    mlp = nn.Sequential(nn.Linear(2 * d, hdim), nn.GELU(), nn.Linear(hdim, 1))
    h = torch.randn(2, m, d)
    dense = mlp(torch.cat([h[:, :, None, :].expand(-1, -1, m, -1), h[:, None, :, :].expand(-1, m, -1, -1)], -1))[..., 0]
    w = mlp[0].weight
    a = h @ w[:, :d].T + mlp[0].bias
    b = h @ w[:, d:].T
    for block in (1, 3, 7, None):
        got = blockwise_preference_matrix(a, b, mlp[2].weight[0], mlp[2].bias[0], nn.GELU(), block)
        assert torch.allclose(got, dense, atol=1e-6), block


def test_model_matrix_is_asymmetric_mlp_and_bi_skip_starts_at_cosine(backbone: Path) -> None:
    model = build_model(MatRank, backbone, {"encoder": "bi"})
    groups = read_groups(write_groups(backbone.parent / "g.jsonl", count=2, negatives=4))
    batch = whole_groups_batch(model, groups)
    h, skip = model.grouped(batch)
    out = model.matrix(h, skip, batch.mask)
    assert torch.all(out.S.diagonal(dim1=1, dim2=2) == 0)
    # Zero-initialised last layer: s_ij = w (cos_i - cos_j), so r - c ranks exactly by cosine.
    assert skip is not None
    assert torch.allclose(out.S[0, 0, 1], model.skip_weight * (skip[0, 0] - skip[0, 1]), atol=1e-5)
    scores = model(batch).scores
    assert torch.equal(torch.argsort(scores[0], descending=True), torch.argsort(skip[0], descending=True))


def test_matrank_trains_and_round_trips(backbone: Path, tmp_path: Path) -> None:
    groups = read_groups(write_groups(tmp_path / "g.jsonl", count=8, negatives=3))
    torch.manual_seed(0)
    model = build_model(MatRankRow, backbone, {"max_query_length": 8, "max_doc_length": 24})
    assert MatRankRow.training_defaults.loss == "matrank" and MatRankRow.output_type is PreferenceOutput
    batch = whole_groups_batch(model, groups)
    assert model(batch).use_omega is False  # matrank-row: the loss keeps the beta term only
    assert loss_drops_after_steps(model, batch)
    save_model(model, tmp_path / "ck", {})
    again = load_model(tmp_path / "ck", expect="matrank-row")
    model.eval()
    texts = [[p.text for p in g.pos + g.neg] for g in groups[:2]]
    a = model.rerank_scores([g.query for g in groups[:2]], texts, batch_size=3)
    b = again.rerank_scores([g.query for g in groups[:2]], texts, batch_size=5)
    assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_depth_1000_matrix_stays_small(backbone: Path) -> None:
    model = build_model(MatRank, backbone, {"hidden": 64})
    h = torch.randn(1000, model.pairs.dim)
    with torch.inference_mode():
        scores = model.list_scores(h, None)
    assert scores.shape == (1000,)
    assert sorted(scores.floor().tolist()) != [0.0] * 1000
