"""Document splitting (PARADE §3.1/§4.3, MatRank-Split §3.2), the passage pair encoder and batch-seeded sampling."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from training_helpers import build_model

from rankkit.errors import RankkitError
from rankkit.models.backbone import load_encoder, load_tokenizer
from rankkit.models.cross_encoders.pair_encoders import CrossPairEncoder
from rankkit.models.documents.base import batch_rng
from rankkit.models.documents.parade import ParadeMax
from rankkit.models.documents.splitting import (
    PassagePairEncoder,
    keep_passages,
    passage_slots,
    passage_tensor,
    split_ids,
    split_pieces,
    window_starts,
)
from rankkit.models.inputs import GroupBatch, PassageFeatures
from rankkit.training.sampling import SampledGroup, collate



def test_windows_cover_the_document_with_paper_window_and_stride() -> None:
    assert window_starts(0, 225, 200) == [0]
    assert window_starts(225, 225, 200) == [0]
    assert window_starts(226, 225, 200) == [0, 200]
    ids = list(range(430))
    passages = split_ids(ids)  # paper defaults: 225 tokens every 200
    assert [p[0] for p in passages] == [0, 200, 400]
    assert [len(p) for p in passages] == [225, 225, 30]
    assert passages[1] == list(range(200, 425))  # 25 tokens overlap with the first window
    assert split_ids([]) == [[]]
    assert split_ids(list(range(10)), window=4, stride=3) == [[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9]]
    with pytest.raises(RankkitError):
        split_ids([1, 2], window=0)


def test_inference_keeps_first_last_and_evenly_spaced() -> None:
    ids = list(range(100))
    passages = split_ids(ids, window=10, stride=10, max_passages=4)  # 10 windows -> 4
    assert [p[0] for p in passages] == [0, 30, 60, 90]
    assert keep_passages(17, 16) == [0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16]  # the middle one goes
    assert keep_passages(5, 5) == [0, 1, 2, 3, 4]
    assert keep_passages(9, 1) == [0]
    assert keep_passages(9, 2) == [0, 8]
    for count in range(3, 60):
        for k in range(2, count):
            kept = keep_passages(count, k)
            assert len(kept) == k and kept[0] == 0 and kept[-1] == count - 1
            assert kept == sorted(set(kept))


def test_training_samples_middle_uniformly_in_document_order() -> None:
    seen = np.zeros(20)
    draws = set()
    for seed in range(400):
        kept = keep_passages(20, 5, np.random.default_rng(seed))
        assert kept[0] == 0 and kept[-1] == 19 and len(kept) == 5
        assert kept == sorted(set(kept))
        seen[kept[1:-1]] += 1
        draws.add(tuple(kept))
    # Each of the 18 middle windows is drawn with probability 3/18: 400 * 3 / 18 = 66.7 on average.
    assert seen[1:19].sum() == 400 * 3 and len(draws) > 100
    assert 35 < seen[1:19].min() and seen[1:19].max() < 100
    a = split_ids(list(range(200)), window=10, stride=10, max_passages=5, rng=np.random.default_rng(3))
    b = split_ids(list(range(200)), window=10, stride=10, max_passages=5, rng=np.random.default_rng(3))
    assert a == b and a[0][0] == 0 and a[-1][0] == 190


def test_matrank_pieces_are_the_documents_head() -> None:
    assert split_pieces(list(range(10)), length=4, max_pieces=2) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert split_pieces(list(range(10)), length=4, max_pieces=5) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert split_pieces([], length=4, max_pieces=5) == [[]]
    with pytest.raises(RankkitError):
        split_pieces([1], max_pieces=0)


def test_passage_pairs_match_the_cross_encoder_layout(backbone: Path) -> None:
    tok = load_tokenizer(backbone)
    enc = load_encoder(backbone)
    pairs = PassagePairEncoder(enc, tok, 4, 12)
    cross = CrossPairEncoder(enc, tok, 4, 12)
    text = "apple fruit red car engine"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    got = pairs.features(["apple fruit"], [ids])
    want = cross.features(["apple fruit"], [text])
    assert all(torch.equal(got[k], want[k]) for k in want)
    row = got["input_ids"][0].tolist()
    assert row[0] == tok.cls_token_id and row.count(tok.sep_token_id) == 2
    assert got["token_type_ids"][0].tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 1, 1]
    # A passage longer than the pair's room is cut: 12 tokens in all, ending in [SEP].
    long_pair = pairs.features(["apple fruit"], [ids * 3])["input_ids"][0].tolist()
    assert len(long_pair) == 12 and long_pair[-1] == tok.sep_token_id
    # Length-sorted batches return the vectors in input order.
    queries = ["apple fruit", "car", "apple fruit"]
    passages = [ids[:1], ids, ids[:3]]
    with torch.inference_mode():
        one = torch.stack([pairs.encode([q], [p])[0] for q, p in zip(queries, passages)])
    assert torch.allclose(pairs.encode_sorted(queries, passages, batch_size=2), one, atol=1e-6)


def test_passage_tensor_and_mask() -> None:
    documents = [[[1], [2], [3]], [[4]], [[5], [6]]]
    slots = passage_slots(documents)
    assert slots.tolist() == [[0, 0], [0, 1], [0, 2], [1, 0], [2, 0], [2, 1]]
    flat = torch.arange(12, dtype=torch.float32).reshape(6, 2) + 1
    p, mask = passage_tensor(flat, slots, (3, 3))
    assert mask.tolist() == [[True, True, True], [True, False, False], [True, True, False]]
    assert p[1, 0].tolist() == [7.0, 8.0] and p[1, 1].abs().sum() == 0 and p[2, 1].tolist() == [11.0, 12.0]


def _batch(texts: list[str]) -> GroupBatch:
    group = SampledGroup("q1", "apple fruit", tuple(f"d{i}" for i in range(len(texts))), tuple(texts),
                         (1,) + (0,) * (len(texts) - 1), frozenset({"d0"}))
    return collate([group], len(texts) + 1)


def test_prepare_samples_from_the_batch_in_training_and_evenly_at_inference(backbone: Path) -> None:
    model = build_model(ParadeMax, backbone, {"window": 2, "stride": 2, "max_passages": 3, "max_query_length": 4})
    words = "apple fruit red car engine fuel river water flow music guitar song space star planet bread".split()
    long_doc = " ".join(words * 2)  # 32 tokens: 16 windows of 2
    texts = [long_doc, "apple", long_doc]
    model.train()
    first = model.prepare(_batch(texts)).features
    again = model.prepare(_batch(texts)).features
    assert isinstance(first, PassageFeatures) and isinstance(again, PassageFeatures)
    assert torch.equal(first.pairs["input_ids"], again.pairs["input_ids"])  # same batch, same passages
    assert batch_rng(_batch(texts)).integers(1 << 30) == batch_rng(_batch(texts)).integers(1 << 30)
    # (group, slot, passage): 3 + 1 + 3 passages; the padded slot 3 has none.
    assert first.slots.tolist() == [[0, 0, 0], [0, 0, 1], [0, 0, 2], [0, 1, 0], [0, 2, 0], [0, 2, 1], [0, 2, 2]]
    model.eval()
    evaluated = model.prepare(_batch(texts)).features
    assert isinstance(evaluated, PassageFeatures)
    tok = model.tokenizer
    ids = tok(long_doc, add_special_tokens=False)["input_ids"]
    # Evenly spaced windows 0, 8 (round(7.5)), 15 at inference.
    expected = [ids[0:2], ids[16:18], ids[30:32]]
    rows = evaluated.pairs["input_ids"][:3, 4:6].tolist()
    assert rows == expected
