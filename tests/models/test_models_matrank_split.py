"""MatRank-Split (paper 000, §3.2, Eqs. 9-12): piece matrix, same-document zeros, max-pooling, loss, voting."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from test_models_parade import long_groups
from training_helpers import build_model, loss_drops_after_steps, whole_groups_batch

from rankkit.errors import RankkitError
from rankkit.formats import read_groups
from rankkit.models.checkpoint import load_model, save_model
from rankkit.models.cross_encoders.matrank import borda_vote, matrank_loss
from rankkit.models.documents.configs import MatRankSplitConfig
from rankkit.models.documents.matrank_split import MatRankSplit, piece_matrix
from rankkit.models.losses import get_loss
from rankkit.models.outputs import PreferenceOutput

#: Pieces of 8 document tokens: piece_length counts the whole input, 6 query + 3 special + 8 = 17.
OPTIONS = {"piece_length": 17, "max_pieces": 3, "max_query_length": 6, "hidden": 16}



def build(backbone: Path) -> MatRankSplit:
    torch.manual_seed(0)
    model = build_model(MatRankSplit, backbone, OPTIONS)
    assert isinstance(model, MatRankSplit)
    return model


def test_piece_matrix_by_hand() -> None:
    # Two documents, K = 2: document 0 has pieces 0, 1; document 1 has piece 2 (piece 3 is padding).
    raw = torch.arange(16, dtype=torch.float32).reshape(1, 4, 4) + 1
    pmask = torch.tensor([[[True, True], [True, False]]])
    out = piece_matrix(raw, pmask)
    # Eq. 9: same-document entries (and the diagonal) and padded pieces are zero.
    assert out.S[0].tolist() == [[0, 0, 3, 0], [0, 0, 7, 0], [9, 10, 0, 0], [0, 0, 0, 0]]
    # Row/column means over the 3 real pieces, then max over each document's pieces (Eqs. 10-11).
    r = [3 / 3, 7 / 3, 19 / 3]
    c = [9 / 3, 10 / 3, 10 / 3]
    assert torch.allclose(out.r, torch.tensor([[max(r[0], r[1]), r[2]]]))
    assert torch.allclose(out.c, torch.tensor([[min(c[0], c[1]), c[2]]]))  # maxpool(-c) = -min(c)
    beta = torch.softmax(torch.tensor([7 / 3, 19 / 3]), dim=0)
    omega = torch.softmax(torch.tensor([-3.0, -10 / 3]), dim=0)
    assert torch.allclose(out.log_beta[0].exp(), beta, atol=1e-6)
    assert torch.allclose(out.log_omega[0].exp(), omega, atol=1e-6)


def test_padding_never_changes_the_matrix_outputs() -> None:
    torch.manual_seed(0)
    raw = torch.randn(1, 6, 6)
    pmask = torch.tensor([[[True, True], [True, False], [False, False]]])  # document slot 2 is padding
    out = piece_matrix(raw, pmask)
    garbage = raw.clone()
    garbage[0, 3] = 1e4
    garbage[0, :, 4:] = -1e4
    again = piece_matrix(garbage, pmask)
    for a, b in zip(out[1:], again[1:]):
        assert torch.allclose(a[0, :2], b[0, :2])
    assert out.r[0, 2] == 0 and out.log_beta[0, 2].exp() == 0
    assert torch.allclose(out.log_beta[0, :2].exp().sum(), torch.tensor(1.0))


def test_model_matrix_is_the_mlp_across_documents(backbone: Path) -> None:
    model = build(backbone).eval()
    dim = model.pairs.dim
    p = torch.randn(1, 3, 2, dim)
    pmask = torch.tensor([[[True, True], [True, False], [True, True]]])
    dmask = torch.ones(1, 3, dtype=torch.bool)
    with torch.no_grad():
        out = model.matrix(p, pmask, dmask)
        h = p.reshape(6, dim)

        def mlp(i: int, j: int) -> float:
            x = torch.cat([h[i], h[j]])
            return float(model.mlp_out(model.activation(model.mlp_in(x)))[0])

        assert out.S[0, 0, 2].item() == pytest.approx(mlp(0, 2), abs=1e-5)
        assert out.S[0, 5, 1].item() == pytest.approx(mlp(5, 1), abs=1e-5)
        assert out.S[0, 0, 1] == 0 and out.S[0, 4, 5] == 0 and out.S[0, 3].abs().sum() == 0
        # Scores for group losses: maxpool(r) + maxpool(-c); inference: Borda vote of beta and omega.
        assert torch.allclose(model.group_scores(p, pmask, dmask), out.r - out.c)
        vote = model.list_scores(p[0], pmask[0])
        assert torch.equal(vote, borda_vote(out.log_beta[0], out.log_omega[0]))


def test_pieces_are_the_first_k(backbone: Path) -> None:
    model = build(backbone)
    assert model.split(list(range(30)), None) == [list(range(8)), list(range(8, 16)), list(range(16, 24))]
    assert model.pairs.max_length == 6 + 8 + 3
    assert MatRankSplit.config_class is MatRankSplitConfig
    assert [s.name for s in MatRankSplit.config_class.model_options()] == ["piece_length", "max_pieces", "hidden"]


def test_trains_with_eq12_and_round_trips(backbone: Path, tmp_path: Path) -> None:
    groups = read_groups(long_groups(tmp_path / "g.jsonl", count=3))
    model = build(backbone).train()
    assert MatRankSplit.training_defaults.loss == "matrank" and MatRankSplit.output_type is PreferenceOutput
    batch = whole_groups_batch(model, groups)
    with torch.no_grad():
        p, pmask = model.passages(batch)
        expected = matrank_loss(model.matrix(p, pmask, batch.mask), batch.labels, batch.mask)
        loss = get_loss(MatRankSplit.training_defaults.loss, MatRankSplit.output_type, MatRankSplit.name)
        assert torch.allclose(loss(model(batch), batch), expected)
    assert loss_drops_after_steps(model, batch, steps=4)
    save_model(model, tmp_path / "ck", {})
    assert json.loads((tmp_path / "ck" / "config.json").read_text())["max_pieces"] == 3
    again = load_model(tmp_path / "ck", expect="matrank-split")
    model.eval()
    queries = [g.query for g in groups]
    texts = [[c.text for c in g.pos + g.neg] for g in groups]
    a = model.rerank_scores(queries, texts, batch_size=3)
    b = again.rerank_scores(queries, texts)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    # Borda votes of 4 documents: integer parts from 0 to 2 * 3, all different fractions (beta ranks).
    assert all(x.shape == (4,) and len(set((x - x.floor()).tolist())) == 4 for x in b)


# -- lengths (issue 17): L is the whole piece input; a piece longer than the backbone's positions is refused --

def test_piece_length_counts_query_and_special_tokens(backbone: Path) -> None:
    model = build(backbone)
    assert model.passage_tokens() == 17 - 6 - 3
    assert model.split(list(range(30)), None) == [list(range(0, 8)), list(range(8, 16)), list(range(16, 24))]
    assert model.pairs.max_length == 17
    with pytest.raises(RankkitError, match="leaves no room for document text"):
        build_model(MatRankSplit, backbone, {**OPTIONS, "piece_length": 9})


def test_piece_length_above_the_backbone_positions_is_refused(backbone: Path) -> None:
    # The tiny backbone has 64 positions: 64 fits exactly, 65 is refused with one line.
    assert build_model(MatRankSplit, backbone, {**OPTIONS, "piece_length": 64}).pairs.max_length == 64
    with pytest.raises(RankkitError, match="more than the backbone's 64 positions"):
        build_model(MatRankSplit, backbone, {**OPTIONS, "piece_length": 65})


def test_position_refusal_through_the_cli(cli: Any, backbone: Path, tmp_path: Path) -> None:
    groups = long_groups(tmp_path / "g.jsonl", count=2)
    res = cli("train", "--model", "matrank-split", "--train", groups, "--output", tmp_path / "ck", "--backbone",
              backbone, "--max-steps", 1, "--batch-size", 1, "--group-size", 2, "--device", "cpu",
              "--piece-length", 512, "--max-pieces", 5)  # the paper's K=5 x L=512 on a 64-position backbone
    assert res.code == 2 and "Traceback" not in res.stderr
    assert "--piece-length 512 makes 512-token piece inputs, more than the backbone's 64 positions" in res.stderr
    # One line: the model is built before the training file is indexed, so nothing else is printed first.
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not (tmp_path / "ck" / "rankkit.json").exists()


def test_old_checkpoints_keep_piece_length_as_document_tokens(backbone: Path, tmp_path: Path) -> None:
    model = build(backbone)
    save_model(model, tmp_path / "ck", {})
    meta_path = tmp_path / "ck" / "rankkit.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    assert meta["hparams"]["piece_includes_query"] is True
    # A checkpoint written before the setting existed: piece_length counted the piece's own tokens.
    del meta["hparams"]["piece_includes_query"]
    meta["hparams"]["piece_length"] = 8
    meta_path.write_text(json.dumps(meta), encoding="utf-8")
    old = load_model(tmp_path / "ck", expect="matrank-split")
    assert old.passage_tokens() == 8 and old.pairs.max_length == 6 + 8 + 3
    assert old.split(list(range(30)), None) == model.split(list(range(30)), None)


def test_generic_position_check_turns_a_crash_into_one_line(backbone: Path) -> None:
    from rankkit.models.cross_encoders.mono import Mono

    model = build_model(Mono, backbone, {"max_query_length": 8, "max_doc_length": 200})
    with pytest.raises(RankkitError, match="exceeds the backbone's 64 positions"):
        model.rerank_scores(["apple"], [[" ".join(["apple fruit red"] * 40)]])
