"""Set-Encoder (paper 003, §3): inter-passage attention against naive masked attention, invariances, CLI."""

from __future__ import annotations

import copy
import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
import torch
from training_helpers import build_model, loss_drops_after_steps, whole_groups_batch, write_groups

from rankkit.errors import RankkitError
from rankkit.formats import read_groups, read_run
from rankkit.models.backbone import load_encoder, tiny_bert_config
from rankkit.models.checkpoint import load_model, save_model
from rankkit.models.cross_encoders.set_encoder import (
    InterPassageSelfAttention,
    SetEncoder,
    SetEncoderConfig,
    set_chunks,
    set_layout,
)
from rankkit.training import sampling



@pytest.fixture(scope="module")
def model(backbone: Path) -> SetEncoder:
    torch.manual_seed(0)
    m = build_model(SetEncoder, backbone, {"max_query_length": 8, "max_doc_length": 24})
    return m.eval()


def tiny_attention(seed: int = 0) -> InterPassageSelfAttention:
    from transformers.models.bert.modeling_bert import BertSelfAttention

    torch.manual_seed(seed)
    original = BertSelfAttention(tiny_bert_config(50, hidden=8, heads=2))
    return InterPassageSelfAttention(original, num_heads=2, dropout=0.0).eval()


def naive_attention(attn: InterPassageSelfAttention, hidden: torch.Tensor, group: torch.Tensor,
                    slot: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
    """Explicit softmax attention over the concatenation of all sequences with a boolean mask:
    token (n, i) sees (m, j) iff m == n and j is a real token, or m is another sequence of the
    same query and j == 0 (its [CLS])."""
    n, length, width = hidden.shape
    flat = hidden.reshape(n * length, width)
    seq = torch.arange(n).repeat_interleave(length)
    pos = torch.arange(length).repeat(n)
    real = token_mask.reshape(-1).bool()
    same = seq[:, None] == seq[None, :]
    other_cls = (~same) & (group[seq][:, None] == group[seq][None, :]) & (pos[None, :] == 0)
    allowed = (same | other_cls) & real[None, :]
    heads, d = attn.num_heads, attn.head_dim
    out = torch.empty(n * length, width)
    for h in range(heads):
        cols = slice(h * d, (h + 1) * d)
        q, k, v = attn.query(flat)[:, cols], attn.key(flat)[:, cols], attn.value(flat)[:, cols]
        logits = (q @ k.T / math.sqrt(d)).masked_fill(~allowed, float("-inf"))
        out[:, cols] = torch.softmax(logits, dim=-1) @ v
    return out.reshape(n, length, width)


def layout_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    torch.manual_seed(1)
    hidden = torch.randn(5, 6, 8)
    group = torch.tensor([0, 0, 0, 1, 1])  # query 0 has three candidates, query 1 two
    slot = torch.tensor([0, 2, 1, 0, 3])  # slots need not be contiguous (masked training slots)
    mask = torch.ones(5, 6, dtype=torch.long)
    mask[1, 4:] = 0
    mask[3, 2:] = 0
    return hidden, group, slot, mask


def test_layout_by_hand() -> None:
    _, group, slot, mask = layout_inputs()
    layout = set_layout(group, slot, mask)
    # Sequence 1 (query 0, slot 2) sees the [CLS] of slots 0 and 1 (rows 0 and 2), not its own.
    assert layout.members[1, :3].tolist() == [0, 2, 1]
    assert layout.attend[1, 6:].tolist() == [True, True, False, False]
    assert layout.attend[1, :6].tolist() == [True] * 4 + [False] * 2
    # Sequence 4 (query 1, slot 3) sees only row 3's [CLS] (slot 0); slots 1-2 are empty.
    assert layout.attend[4, 6:].tolist() == [True, False, False, False]
    with pytest.raises(ValueError, match="same"):
        set_layout(torch.tensor([0, 0]), torch.tensor([1, 1]), torch.ones(2, 3))


def test_attention_equals_naive_masked_full_attention() -> None:
    attn = tiny_attention()
    hidden, group, slot, mask = layout_inputs()
    with torch.no_grad():
        got = attn(hidden, set_layout(group, slot, mask))
        want = naive_attention(attn, hidden, group, slot, mask)
    assert torch.allclose(got, want, atol=1e-6)


def test_only_other_cls_tokens_of_the_same_query_interact() -> None:
    attn = tiny_attention()
    hidden, group, slot, mask = layout_inputs()
    layout = set_layout(group, slot, mask)
    with torch.no_grad():
        base = attn(hidden, layout)
        changed_token = hidden.clone()
        changed_token[2, 3] += 5.0  # a passage token of another sequence of query 0
        changed_cls = hidden.clone()
        changed_cls[2, 0] += 5.0  # the [CLS] of that sequence
        changed_other_query = hidden.clone()
        changed_other_query[3, 0] += 5.0  # [CLS] of a query-1 sequence
        changed_pad = hidden.clone()
        changed_pad[1, 5] += 5.0  # a padding token
        assert torch.equal(attn(changed_token, layout)[0], base[0])
        assert not torch.allclose(attn(changed_cls, layout)[0], base[0])
        assert torch.equal(attn(changed_other_query, layout)[:3], base[:3])
        assert torch.allclose(attn(changed_pad, layout)[[0, 2, 3, 4]], base[[0, 2, 3, 4]], atol=1e-7)
        assert torch.allclose(attn(changed_pad, layout)[1, :4], base[1, :4], atol=1e-7)


def test_single_candidate_sets_equal_the_plain_bert_encoder(backbone: Path, model: SetEncoder) -> None:
    """With no other sequence, inter-passage attention is BERT's own: same [CLS] as transformers' forward."""
    plain = load_encoder(backbone).eval()
    feats = model.pairs.features(["apple fruit", "car engine"], ["apple fruit red apple", "river water flow"])
    with torch.no_grad():
        h, skip = model.pairs(feats)
        ref = plain(**{k: v for k, v in feats.items() if k not in ("group", "slot")}).last_hidden_state[:, 0]
    assert skip is None
    assert torch.allclose(h, ref, atol=1e-5)


def candidates() -> tuple[str, list[str]]:
    return "apple fruit", ["apple fruit red", "car engine fuel", "river water", "apple red red apple",
                           "dog bark pet", "tea leaf cup cup"]


def test_scores_are_permutation_invariant_and_depend_on_the_set(model: SetEncoder) -> None:
    query, texts = candidates()
    base = model.rerank_scores([query], [texts])[0]
    order = list(range(len(texts)))
    for seed in range(3):
        random.Random(seed).shuffle(order)
        shuffled = model.rerank_scores([query], [[texts[i] for i in order]])[0]
        assert torch.allclose(shuffled, base[order], atol=1e-5)
    # Candidates interact: replacing one candidate changes the others' scores (unlike mono). A random
    # tiny BERT attends almost uniformly, so the effect is small: measured in float64.
    wide = copy.deepcopy(model).double()
    before = wide.rerank_scores([query], [texts])[0]
    other = wide.rerank_scores([query], [texts[:-1] + ["chess king move"]])[0]
    assert (other[:-1] - before[:-1]).abs().min() > 1e-9
    alone = wide.rerank_scores([query] * 5, [[t] for t in texts[:-1]])
    assert (torch.cat(alone) - before[:-1]).abs().min() > 1e-9


def test_queries_in_one_batch_never_see_each_other_and_padding_changes_nothing(backbone: Path,
                                                                             model: SetEncoder) -> None:
    groups = read_groups(write_groups(backbone.parent / "two.jsonl", count=2, negatives=5))
    sampled = [sampling.all_candidates(groups[0]), sampling.all_candidates(groups[1], limit=3)]
    with torch.no_grad():
        together = model(model.prepare(sampling.collate(sampled))).scores
        alone = [model(model.prepare(sampling.collate([s]))).scores for s in sampled]
        # Wider groups (masked slots) and a different partner query change nothing.
        padded = model(model.prepare(sampling.collate([sampled[1]], group_size=9))).scores
    assert torch.allclose(together[0], alone[0][0], atol=1e-5)
    assert torch.allclose(together[1, :3], alone[1][0], atol=1e-5)
    assert torch.allclose(padded[0, :3], alone[1][0], atol=1e-5)
    # The same lists through rerank_scores (packed differently) give the same numbers.
    scores = model.rerank_scores([s.query for s in sampled], [list(s.texts) for s in sampled], batch_size=1)
    assert torch.allclose(scores[0].float(), alone[0][0], atol=1e-5)
    assert torch.allclose(scores[1].float(), alone[1][0], atol=1e-5)


def test_long_lists_are_split_into_order_independent_sets(model: SetEncoder) -> None:
    texts = [f"apple {w} {i}" for i, w in enumerate(["red", "fruit", "car", "tea", "dog", "song", "star"])]
    chunks = set_chunks(texts, 3)
    assert sorted(len(c) for c in chunks) == [2, 2, 3]
    assert sorted(i for c in chunks for i in c) == list(range(7))
    reversed_chunks = set_chunks(texts[::-1], 3)
    assert sorted(sorted(texts[::-1][i] for i in c) for c in reversed_chunks) == \
        sorted(sorted(texts[i] for i in c) for c in chunks)
    assert set_chunks(texts, 7) == [list(range(7))] and set_chunks([], 3) == []
    model.max_set_size = 3
    try:
        base = model.rerank_scores(["apple fruit"], [texts])[0]
        again = model.rerank_scores(["apple fruit"], [texts[::-1]])[0]
    finally:
        model.max_set_size = 100
    assert torch.allclose(again, base.flip(0), atol=1e-5)


def test_trains_saves_and_loads(backbone: Path, tmp_path: Path) -> None:
    groups = read_groups(write_groups(tmp_path / "g.jsonl", count=4, negatives=3))
    torch.manual_seed(0)
    model = build_model(SetEncoder, backbone, {"max_query_length": 8, "max_doc_length": 24})
    assert SetEncoder.training_defaults.loss == "listwise-ce" and model.hparams["encoder"] == "cross"
    assert SetEncoder.config_class is SetEncoderConfig
    batch = whole_groups_batch(model, groups)
    assert loss_drops_after_steps(model, batch, steps=4)
    save_model(model, tmp_path / "ck", {})
    config = json.loads((tmp_path / "ck" / "config.json").read_text())
    assert config["model_type"] == "rankkit-set-encoder" and config["encoder_config"]["model_type"] == "bert"
    from safetensors.torch import load_file

    names = set(load_file(str(tmp_path / "ck" / "model.safetensors")))
    assert "pairs.encoder.encoder.layer.1.attention.self.query.weight" in names  # BERT's own names
    again = load_model(tmp_path / "ck", expect="set-encoder")
    model.eval()
    query, texts = candidates()
    assert torch.equal(model.rerank_scores([query], [texts])[0], again.rerank_scores([query], [texts])[0])


def test_bad_options_are_user_errors(backbone: Path) -> None:
    with pytest.raises(RankkitError, match="set-encoder"):
        build_model(SetEncoder, backbone, {"encoder": "bi"})
    model = build_model(SetEncoder, backbone, {"max_query_length": 8})
    with pytest.raises(RankkitError, match="no room"):
        model.set_max_length(10)
    model.set_max_length(40)
    assert model.pairs.max_length == 40


def test_train_then_rerank_via_cli(backbone: Path, tmp_path: Path, cli: Any) -> None:
    from training_helpers import write_corpus, write_topics

    from rankkit.formats import write_run

    groups = write_groups(tmp_path / "groups.jsonl", count=16, negatives=4)
    corpus, topics = write_corpus(tmp_path / "corpus.jsonl"), write_topics(tmp_path / "topics.tsv")
    docids = [f"d{i}_{j}" for i in range(12) for j in range(3)]
    write_run(tmp_path / "first.txt", {"t0": {d: float(-k) for k, d in enumerate(docids[:12])},
                                       "t3": {d: float(-k) for k, d in enumerate(docids[6:18])}}, "first")
    ck = tmp_path / "ck"
    res = cli("train", "--model", "set-encoder", "--train", groups, "--output", ck, "--backbone", backbone,
              "--max-steps", "4", "--batch-size", "4", "--group-size", "5", "--lr", "3e-3", "--seed", "1",
              "--device", "cpu", "--max-doc-length", "24", "--max-query-length", "8")
    assert res.code == 0, res.stderr
    assert json.loads((ck / "rankkit.json").read_text())["training"]["loss"] == "listwise-ce"
    out = tmp_path / "re.txt"
    res = cli("rerank", "--model", "set-encoder", "--checkpoint", ck, "--run", tmp_path / "first.txt",
              "--topics", topics, "--corpus", corpus, "--output", out, "--depth", "10", "--device", "cpu")
    assert res.code == 0, res.stderr
    after = read_run(out)
    assert {q: len(d) for q, d in after.items()} == {"t0": 12, "t3": 12}
    # The head's scores are the checkpoint's set scores of the top 10 (texts alone decide them).
    from rankkit.docstore import open_docstore

    loaded = load_model(ck, expect="set-encoder")
    with open_docstore(corpus=corpus) as store:
        texts = store.get_many(docids[:10])
    scores = loaded.rerank_scores(["apple fruit"], [[texts[d] for d in docids[:10]]])[0]
    assert [after["t0"][d] for d in docids[:10]] == pytest.approx(scores.tolist(), abs=1e-4)
    res = cli("train", "--model", "set-encoder", "--train", groups, "--output", tmp_path / "bad",
              "--backbone", backbone, "--encoder", "bi", "--device", "cpu")
    assert res.code == 2 and ("--encoder is not an option of model set-encoder; set-encoder's options: --hidden"
                              in " ".join(res.stderr.split()))
