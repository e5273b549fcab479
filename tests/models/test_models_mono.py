"""The point-wise cross-encoder ``mono``: pair tokenisation, [CLS] scores, LCE training, bi variant."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from training_helpers import build_model, loss_drops_after_steps, write_groups

from rankkit.errors import RankkitError
from rankkit.formats import read_groups
from rankkit.models.checkpoint import load_model, save_model
from rankkit.models.cross_encoders.candidate_list import CandidateListConfig
from rankkit.models.cross_encoders.mono import Mono
from rankkit.training import sampling



def test_pair_tokens_and_segments(backbone: Path) -> None:
    model = build_model(Mono, backbone, {"max_query_length": 4, "max_doc_length": 5})
    tok = model.tokenizer
    feats = model.pairs.features(["apple fruit"], ["red apple fruit red apple fruit red"])
    ids = feats["input_ids"][0].tolist()
    # The pair budget is 3 + 4 + 5 = 12 tokens: a 2-token query leaves 7 for the passage.
    assert len(ids) == 12
    assert ids[0] == tok.cls_token_id and ids[3] == tok.sep_token_id and ids[-1] == tok.sep_token_id
    assert feats["token_type_ids"][0].tolist() == [0, 0, 0, 0] + [1] * 8


def test_scores_are_pointwise_and_independent_of_batching(backbone: Path) -> None:
    model = build_model(Mono, backbone)
    model.eval()
    texts = ["apple fruit red", "car engine fuel", "river water", "apple"]
    all_at_once = model.rerank_scores(["apple fruit"], [texts], batch_size=4)[0]
    one_by_one = torch.cat([model.rerank_scores(["apple fruit"], [[t]], batch_size=1)[0] for t in texts])
    assert torch.allclose(all_at_once, one_by_one, atol=1e-5)


def test_lce_training_lowers_loss_and_round_trips(backbone: Path, tmp_path: Path) -> None:
    groups = read_groups(write_groups(tmp_path / "g.jsonl", count=8, negatives=3))
    torch.manual_seed(0)
    model = build_model(Mono, backbone)
    assert Mono.training_defaults.loss == "listwise-ce" and issubclass(Mono.config_class, CandidateListConfig)
    batch = model.prepare(sampling.collate([sampling.sample_group(g, 4, sampling.group_rng(0, 0, i))
                                            for i, g in enumerate(groups)]))
    assert loss_drops_after_steps(model, batch)
    save_model(model, tmp_path / "ck", {})
    again = load_model(tmp_path / "ck", expect="mono")
    model.eval()
    assert torch.equal(model(batch).scores, again(batch).scores)


def test_bi_encoder_variant_starts_at_cosine_and_freezes(backbone: Path) -> None:
    model = build_model(Mono, backbone, {"encoder": "bi"})
    assert model.hparams["freeze_encoder"] is True and model.hparams["hidden"] == 256
    assert not any(p.requires_grad for p in model.pairs.encoder.parameters())
    model.train()
    assert not model.pairs.encoder.training  # frozen: no dropout, cached vectors stay valid
    texts = ["apple fruit red", "car engine fuel", "dog bark pet"]
    with torch.inference_mode():
        feats = model.pairs.features(["apple"] * 3, texts)
        h, cos = model.pairs(feats)
        scores = model.list_scores(h, cos)
    assert h.shape == (3, 4 * 24)
    assert cos is not None and torch.allclose(scores, 20.0 * cos)


def test_tuned_bi_encoder_encodes_in_length_chunks_with_the_same_vectors_and_gradients(backbone: Path) -> None:
    from rankkit.models.base import l2_normalize
    from rankkit.models.cross_encoders import pair_encoders
    from rankkit.models.pooling import pool

    model = build_model(Mono, backbone, {"encoder": "bi", "freeze_encoder": False})
    model.eval()
    encoder = model.pairs
    texts = ["apple " * n for n in (1, 9, 3, 17, 2, 5, 11, 1, 7, 4)]
    feats = encoder.features(["apple"] * len(texts), texts)
    ids, mask = feats["d_input_ids"], feats["d_attention_mask"]
    old_rows = pair_encoders.BUCKET_ROWS
    pair_encoders.BUCKET_ROWS = 3  # four chunks of different widths
    try:
        chunked = encoder._embed(ids, mask)
    finally:
        pair_encoders.BUCKET_ROWS = old_rows
    out = encoder.encoder(input_ids=ids, attention_mask=mask, return_dict=True)
    whole = l2_normalize(pool(encoder.pooling, out.last_hidden_state, mask))
    assert torch.allclose(chunked, whole, atol=1e-6)
    weight = next(encoder.encoder.parameters())
    grad_chunked = torch.autograd.grad(chunked.sum(), weight)[0]
    grad_whole = torch.autograd.grad(whole.sum(), weight)[0]
    assert torch.allclose(grad_chunked, grad_whole, atol=1e-5)


def test_unknown_encoder_is_a_user_error(backbone: Path) -> None:
    with pytest.raises(RankkitError, match="--encoder must be one of cross, bi"):
        build_model(Mono, backbone, {"encoder": "poly"})
