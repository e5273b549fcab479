"""MatRank Table 3's passage ablation rows (paper 000, §4.3): matrank-col, +Attention, List-wise.

Hand-made tensors for the column-only softmax and loss, the attention row and the concatenation
MLP; each model trains a few steps and round-trips through a checkpoint.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from training_helpers import build_model, loss_drops_after_steps, whole_groups_batch, write_groups

from rankkit.errors import RankkitError
from rankkit.formats import read_groups
from rankkit.models import MODELS
from rankkit.models.checkpoint import load_model, save_model
from rankkit.models.cross_encoders.candidate_attention import CandidateAttention
from rankkit.models.cross_encoders.listwise import Listwise
from rankkit.models.cross_encoders.matrank import MatRank, MatRankCol, aggregate, matrank_loss
from rankkit.models.losses import MatRankLoss



def test_registered_names() -> None:
    assert {"listwise", "matrank-attn", "matrank-col", "matrank-row", "matrank", "mono"} <= set(MODELS)


# -- matrank-col ----------------------------------------------------------------------------------

def test_column_only_softmax_and_loss_by_hand() -> None:
    raw = torch.tensor([[[0.0, 2.0, 4.0], [1.0, 0.0, 0.0], [-2.0, 3.0, 0.0]]])
    mask = torch.ones((1, 3), dtype=torch.bool)
    out = aggregate(raw, mask)
    # Eq. 5: c = column means = [-1/3, 5/3, 4/3]; Eq. 7: omega = softmax(-c).
    c = [-1 / 3, 5 / 3, 4 / 3]
    omega = [math.exp(-x) / sum(math.exp(-y) for y in c) for x in c]
    y = torch.tensor([[0.0, 0.0, 1.0]])
    assert math.isclose(float(matrank_loss(out, y, mask, col_only=True)), -math.log(omega[2]), rel_tol=1e-6)
    with pytest.raises(ValueError):
        matrank_loss(out, y, mask, row_only=True, col_only=True)


def test_matrank_col_uses_omega_only(backbone: Path, tmp_path: Path) -> None:
    groups = read_groups(write_groups(tmp_path / "g.jsonl", count=4, negatives=3))
    torch.manual_seed(0)
    model = build_model(MatRankCol, backbone, {"max_query_length": 8, "max_doc_length": 24, "hidden": 16})
    batch = whole_groups_batch(model, groups)
    output = model(batch)
    assert output.use_beta is False and output.use_omega is True
    assert torch.allclose(output.scores, -output.matrix.c)  # differentiable scores = -c
    y = (batch.labels > 0).float()
    y = y / y.sum(dim=1, keepdim=True)
    expected = -(y * output.matrix.log_omega).sum(dim=1).mean()
    assert torch.allclose(MatRankLoss()(output, batch), expected)
    # Inference: the omega ranking alone (its Borda vote of one list is the omega order).
    h, skip = model.grouped(batch)
    model.eval()
    with torch.no_grad():
        scores = model.list_scores(h[0], None)
        omega = model.explain(h[0], None).log_omega[0]
    assert torch.equal(torch.argsort(scores, descending=True, stable=True),
                       torch.argsort(omega, descending=True, stable=True))
    model.train()
    assert loss_drops_after_steps(model, batch)


def test_matrank_col_ranks_by_column_and_matrank_by_both() -> None:
    # A matrix where the row and column rankings disagree: r ranks 0 first, -c ranks 1 first.
    raw = torch.tensor([[[0.0, 3.0, 3.0], [-5.0, 0.0, 2.0], [-1.0, -1.0, 0.0]]])
    out = aggregate(raw, torch.ones((1, 3), dtype=torch.bool))
    col = MatRankCol.vote(MatRankCol.__new__(MatRankCol), out)
    assert int(torch.argmax(col)) == int(torch.argmax(out.log_omega[0]))
    both = MatRank.vote(MatRank.__new__(MatRank), out)
    assert both.shape == (3,)


# -- +Attention ---------------------------------------------------------------------------------

def test_attention_row_by_hand(backbone: Path) -> None:
    torch.manual_seed(0)
    model = build_model(CandidateAttention, backbone, {"attention_heads": 1, "attention_dropout": 0.0, "hidden": 8})
    model.eval()
    dim = model.pairs.dim
    layer = model.attention
    h = torch.randn(1, 3, dim)
    # One post-LN encoder layer written out: single-head attention over the 3 candidates, residual,
    # LayerNorm, GELU feed-forward, residual, LayerNorm, then the linear score.
    w_q, w_k, w_v = layer.self_attn.in_proj_weight.split(dim)
    b_q, b_k, b_v = layer.self_attn.in_proj_bias.split(dim)
    q, k, v = h[0] @ w_q.T + b_q, h[0] @ w_k.T + b_k, h[0] @ w_v.T + b_v
    attn = torch.softmax(q @ k.T / math.sqrt(dim), dim=-1) @ v
    attn = attn @ layer.self_attn.out_proj.weight.T + layer.self_attn.out_proj.bias
    x = layer.norm1(h[0] + attn)
    x = layer.norm2(x + layer.linear2(nn.functional.gelu(layer.linear1(x))))
    expected = (x @ model.score.weight.T).squeeze(-1) + model.score.bias
    with torch.no_grad():
        got = model.list_scores(h[0], None)
    assert torch.allclose(got, expected, atol=1e-5)
    # Every score depends on the other candidates (unlike mono) ...
    changed = h.clone()
    changed[0, 2] += 1.0
    with torch.no_grad():
        again = model.list_scores(changed[0], None)
    assert not torch.allclose(got[0], again[0])
    # ... but not on their order: no position embeddings.
    perm = torch.tensor([2, 0, 1])
    with torch.no_grad():
        permuted = model.list_scores(h[0, perm], None)
    assert torch.allclose(permuted, got[perm], atol=1e-5)


def test_attention_masks_padded_slots(backbone: Path) -> None:
    torch.manual_seed(0)
    model = build_model(CandidateAttention, backbone, {"attention_dropout": 0.0})
    model.eval()
    h = torch.randn(1, 4, model.pairs.dim)
    mask = torch.tensor([[True, True, True, False]])
    noisy = h.clone()
    noisy[0, 3] = 100.0
    with torch.no_grad():
        a = model.head(h, None, mask)
        b = model.head(noisy, None, mask)
    assert torch.allclose(a[0, :3], b[0, :3], atol=1e-5) and a[0, 3] == 0


def test_attention_bi_starts_at_cosine_and_trains(backbone: Path, tmp_path: Path) -> None:
    groups = read_groups(write_groups(tmp_path / "g.jsonl", count=4, negatives=3))
    torch.manual_seed(0)
    model = build_model(CandidateAttention, backbone, {"encoder": "bi"})
    batch = whole_groups_batch(model, groups)
    h, skip = model.grouped(batch)
    assert skip is not None
    assert torch.allclose(model(batch).scores, model.skip_weight * skip * batch.mask)
    model = build_model(CandidateAttention, backbone, {"max_query_length": 8, "max_doc_length": 24})
    batch = whole_groups_batch(model, groups)
    assert loss_drops_after_steps(model, batch)
    save_model(model, tmp_path / "ck", {})
    again = load_model(tmp_path / "ck", expect="matrank-attn")
    model.eval()
    texts = [[p.text for p in g.pos + g.neg] for g in groups[:2]]
    a = model.rerank_scores([g.query for g in groups[:2]], texts, batch_size=3)
    b = again.rerank_scores([g.query for g in groups[:2]], texts, batch_size=5)
    assert all(torch.allclose(x, y, atol=1e-6) for x, y in zip(a, b))


def test_attention_heads_must_divide_width(backbone: Path) -> None:
    with pytest.raises(RankkitError, match="does not divide"):
        build_model(CandidateAttention, backbone, {"attention_heads": 5})


# -- List-wise ----------------------------------------------------------------------------------

def test_listwise_is_one_mlp_over_the_concatenation(backbone: Path) -> None:
    torch.manual_seed(0)
    model = build_model(Listwise, backbone, {"list_size": 4, "hidden": 6})
    model.eval()
    d = model.pairs.dim
    h = torch.randn(3, d)
    x = torch.cat([h[0], h[1], h[2], torch.zeros(d)])  # 3 candidates in 4 slots: the last is zeros
    expected = (model.mlp_out(nn.functional.gelu(model.mlp_in(x))))[:3]
    with torch.no_grad():
        got = model.list_scores(h, None)
    assert torch.allclose(got, expected, atol=1e-6)
    # The network reads the whole list: changing candidate 2 moves candidate 0's score.
    changed = h.clone()
    changed[2] += 1.0
    with torch.no_grad():
        assert not torch.allclose(model.list_scores(changed, None)[0], got[0])


def test_listwise_refuses_more_candidates_than_slots(backbone: Path) -> None:
    model = build_model(Listwise, backbone, {"list_size": 2})
    with pytest.raises(RankkitError, match="at most 2 candidates per query"):
        model.list_scores(torch.randn(3, model.pairs.dim), None)


def test_listwise_shuffles_training_slots(backbone: Path, tmp_path: Path) -> None:
    groups = read_groups(write_groups(tmp_path / "g.jsonl", count=4, negatives=3))
    torch.manual_seed(0)
    model = build_model(Listwise, backbone, {"list_size": 6, "max_query_length": 8, "max_doc_length": 24,
                                             "encoder": "bi", "hidden": 8})
    nn.init.normal_(model.mlp_out.weight)
    batch = whole_groups_batch(model, groups)
    h, skip = model.grouped(batch)
    model.train()
    trained = model(batch).scores
    assert torch.equal(trained, model(batch).scores)  # the shuffle is a function of the batch
    model.eval()
    plain = model(batch).scores
    # The same candidates in another slot order get other scores (the positive's slot is hidden).
    assert not torch.allclose(trained, plain)
    # ... and with the shuffle undone, training scores are those of the shuffled lists.
    from rankkit.models.inputs import batch_rng

    rng = batch_rng(batch)
    perm = torch.from_numpy(np.stack([rng.permutation(h.shape[1]) for _ in range(h.shape[0])]))
    for g in range(h.shape[0]):
        with torch.no_grad():
            s = model.head(h[g, perm[g]][None], None if skip is None else skip[g, perm[g]][None],
                           batch.mask[g, perm[g]][None])[0]
        assert torch.allclose(trained[g, perm[g]], s, atol=1e-5)


def test_listwise_trains_and_round_trips(backbone: Path, tmp_path: Path) -> None:
    groups = read_groups(write_groups(tmp_path / "g.jsonl", count=4, negatives=3))
    torch.manual_seed(0)
    model = build_model(Listwise, backbone, {"list_size": 8, "max_query_length": 8, "max_doc_length": 24})
    batch = whole_groups_batch(model, groups)
    assert loss_drops_after_steps(model, batch)
    save_model(model, tmp_path / "ck", {})
    again = load_model(tmp_path / "ck", expect="listwise")
    model.eval()
    texts = [[p.text for p in g.pos + g.neg] for g in groups[:2]]
    a = model.rerank_scores([g.query for g in groups[:2]], texts, batch_size=3)
    b = again.rerank_scores([g.query for g in groups[:2]], texts, batch_size=5)
    assert all(torch.allclose(x, y, atol=1e-6) for x, y in zip(a, b))


# -- +BigBird (listwise-joint): the query and every candidate in one input, scored at each [SEP] ---------

def test_joint_input_layout_and_scores_at_each_sep(backbone: Path) -> None:
    from rankkit.models.cross_encoders.joint_list import JointList

    torch.manual_seed(0)
    model = build_model(JointList, backbone, {"max_query_length": 4, "max_doc_length": 5})
    model.eval()
    tok = model.tokenizer
    ids, seps, head = model.joint_ids("apple fruit", ["car engine fuel", "dog", "river water flow flow flow flow"])
    cls_id, sep_id = tok.cls_token_id, tok.sep_token_id
    assert ids[0] == cls_id and ids[head - 1] == sep_id and [ids[i] for i in seps] == [sep_id] * 3
    assert seps[-1] == len(ids) - 1 and seps[2] - seps[1] - 1 == 5  # the long candidate cut to 5 tokens
    with torch.no_grad():
        got = model.rerank_scores(["apple fruit"], [["car engine fuel", "dog", "river water flow flow flow flow"]])[0]
        feats = model.features(["apple fruit"], [["car engine fuel", "dog", "river water flow flow flow flow"]], 3)
        hidden = model.pairs.encoder(**feats.inputs).last_hidden_state[0]
        expected = (hidden[seps] @ model.score.weight[0] + model.score.bias[0]).double()
    assert torch.allclose(got, expected, atol=1e-6)
    # Each score reads the other candidates (one input), unlike mono.
    with torch.no_grad():
        other = model.rerank_scores(["apple fruit"], [["car engine fuel", "bread", "river water flow flow flow flow"]])[0]
    assert not torch.isclose(got[0], other[0])


def test_joint_budget_shrinks_to_fit_and_refuses_when_nothing_fits(backbone: Path) -> None:
    from rankkit.models.cross_encoders.joint_list import JointList

    model = build_model(JointList, backbone, {"max_query_length": 4, "max_doc_length": 50, "max_length": 20})
    ids, seps, head = model.joint_ids("apple", ["apple fruit red " * 5, "car engine fuel " * 5])
    assert len(ids) <= 20 and len(seps) == 2
    with pytest.raises(RankkitError, match="do not fit a 20-token joint input"):
        model.joint_ids("apple", ["x"] * 12)
    with pytest.raises(RankkitError, match="exceeds the backbone's 64 positions"):
        build_model(JointList, backbone, {"max_length": 65})


def test_joint_training_shuffles_and_trains(backbone: Path, tmp_path: Path) -> None:
    from rankkit.models.cross_encoders.joint_list import JointList, JointListFeatures

    groups = read_groups(write_groups(tmp_path / "g.jsonl", count=4, negatives=3))
    torch.manual_seed(0)
    model = build_model(JointList, backbone, {"max_query_length": 6, "max_doc_length": 8})
    model.train()
    batch = whole_groups_batch(model, groups)
    assert isinstance(batch.features, JointListFeatures)
    sep = batch.features.sep
    # Slot 0 (the positive) is not always the first candidate of the input.
    firsts = [int(sep[g][batch.mask[g]].min()) for g in range(len(batch))]
    assert any(int(sep[g, 0]) != firsts[g] for g in range(len(batch)))
    assert loss_drops_after_steps(model, batch)
    save_model(model, tmp_path / "ck", {})
    again = load_model(tmp_path / "ck", expect="listwise-joint")
    model.eval()
    texts = [[p.text for p in g.pos + g.neg] for g in groups[:2]]
    a = model.rerank_scores([g.query for g in groups[:2]], texts, batch_size=3)
    b = again.rerank_scores([g.query for g in groups[:2]], texts, batch_size=50)
    assert all(torch.allclose(x, y, atol=1e-5) for x, y in zip(a, b))
