"""PARADE (paper 004, Eqs. 1-7): every aggregator on hand-made passage vectors, masking, CNN shape, training,
checkpoints and one ``rankkit train --model parade-attn`` -> ``rankkit rerank`` run on tiny long documents."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from training_helpers import WORDS, build_model, loss_drops_after_steps, whole_groups_batch

from rankkit.formats import read_groups, read_run, write_run
from rankkit.models import MODELS
from rankkit.models.checkpoint import load_model, save_model
from rankkit.models.documents.base import PassageWindowConfig
from rankkit.models.documents.parade import CNN_LAYERS, Parade, ParadeAttn, ParadeCNN, ParadeMax, ParadeTransformer
from rankkit.models.losses import pairwise_hinge

PARADE = ["parade-max", "parade-avg", "parade-sum", "parade-attn", "parade-cnn", "parade-transformer"]
OPTIONS = {"window": 6, "stride": 5, "max_passages": 4, "max_query_length": 6}



def build(name: str, backbone: Path) -> Parade:
    torch.manual_seed(0)
    model = build_model(MODELS[name], backbone, OPTIONS)
    assert isinstance(model, Parade)
    return model.eval()


def hand_made(dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Three documents with 3, 1 and 2 real passages out of 3 slots; padded slots hold zeros."""
    torch.manual_seed(1)
    mask = torch.tensor([[True, True, True], [True, False, False], [True, True, False]])
    p = torch.randn(3, 3, dim) * mask[..., None]
    return p, mask


@pytest.mark.parametrize("name", PARADE)
def test_padded_passages_never_change_a_score(name: str, backbone: Path) -> None:
    model = build(name, backbone)
    p, mask = hand_made(model.pairs.dim)
    with torch.no_grad():
        base = model.document_scores(p, mask)
        assert base.shape == (3,) and torch.isfinite(base).all()
        garbage = p.clone()
        garbage[~mask] = torch.randn(int((~mask).sum()), p.shape[-1]) * 1e3
        wider_p = torch.cat([garbage, torch.randn(3, 1, p.shape[-1]) * 1e3], dim=1)  # one more padded slot
        wider_m = torch.cat([mask, torch.zeros(3, 1, dtype=torch.bool)], dim=1)
        assert torch.allclose(model.document_scores(garbage, mask), base, atol=1e-5)
        assert torch.allclose(model.document_scores(wider_p, wider_m), base, atol=1e-5)
        # Each document alone scores the same as in the batch.
        for d in range(3):
            n = int(mask[d].sum())
            alone = model.document_scores(p[d:d + 1, :n], mask[d:d + 1, :n])
            assert torch.allclose(alone, base[d:d + 1], atol=1e-5)
        # A real passage does matter.
        changed = p.clone()
        changed[0, 1] += 1.0
        assert not torch.allclose(model.document_scores(changed, mask)[0], base[0])
        # Group scores: [G, S]; padded document slots score 0, real ones as alone.
        dmask = torch.tensor([[True, True], [True, False]])
        gp = torch.stack([p[:2], torch.stack([p[2], torch.full_like(p[2], 7.0)])])
        gm = torch.stack([mask[:2], torch.stack([mask[2], torch.zeros(3, dtype=torch.bool)])])
        scores = model.group_scores(gp, gm, dmask)
        assert scores.shape == (2, 2) and scores[1, 1] == 0
        assert torch.allclose(scores[dmask], base, atol=1e-5)


def test_max_avg_sum_by_hand(backbone: Path) -> None:
    p, mask = hand_made(24)
    real = [p[0], p[1, :1], p[2, :2]]
    for name, reduce in (("parade-max", lambda x: x.max(dim=0).values), ("parade-avg", lambda x: x.mean(dim=0)),
                         ("parade-sum", lambda x: x.sum(dim=0))):
        model = build(name, backbone)
        with torch.no_grad():
            d = model.aggregate(p, mask)
            assert torch.allclose(d, torch.stack([reduce(x) for x in real]), atol=1e-6), name
            # Eq. 7: W_d d, no bias.
            assert torch.allclose(model.document_scores(p, mask), d @ model.score_layer.weight[0], atol=1e-5)
    # Eq. 2 is element-wise: a document's max vector mixes coordinates of different passages.
    two = torch.tensor([[[1.0, -5.0], [0.0, 3.0]]])
    model = build("parade-max", backbone)
    assert model.aggregate(two, torch.ones(1, 2, dtype=torch.bool)).tolist() == [[1.0, 3.0]]


def test_attention_weights_eqs_3_4(backbone: Path) -> None:
    model = build("parade-attn", backbone)
    assert isinstance(model, ParadeAttn)
    p, mask = hand_made(model.pairs.dim)
    with torch.no_grad():
        w = model.weights(p, mask)
        logits = p[2, :2] @ model.attention.weight[0]
        assert torch.allclose(w[2, :2], torch.softmax(logits, dim=0), atol=1e-6)
        assert w[2, 2] == 0 and w[1].tolist() == [1.0, 0.0, 0.0]
        assert torch.allclose(w.sum(dim=1), torch.ones(3))
        assert torch.allclose(model.aggregate(p, mask)[2], w[2, 0] * p[2, 0] + w[2, 1] * p[2, 1], atol=1e-6)


def test_cnn_has_four_halving_layers_and_sums_every_output(backbone: Path) -> None:
    model = build("parade-cnn", backbone)
    assert isinstance(model, ParadeCNN)
    assert len(model.convs) == CNN_LAYERS == 4
    for conv in model.convs:
        assert conv.kernel_size == (2,) and conv.stride == (2,)
    assert not hasattr(model, "score_layer")
    dim = model.pairs.dim
    p = torch.randn(3, 16, dim)
    mask = torch.zeros(3, 16, dtype=torch.bool)
    mask[0, :16] = True
    mask[1, :3] = True
    mask[2, :1] = True
    with torch.no_grad():
        layers = model.layers(p, mask)
        assert [x.shape[1] for x, _ in layers] == [8, 4, 2, 1]
        assert [m[1].sum().item() for _, m in layers] == [2, 1, 1, 1]
        # A FFN that outputs 1 everywhere: the score counts the real outputs of all layers.
        last = model.ffn[2]
        assert isinstance(last, nn.Linear)
        nn.init.zeros_(last.weight)
        nn.init.ones_(last.bias)
        assert model.document_scores(p, mask).tolist() == [8 + 4 + 2 + 1, 2 + 1 + 1 + 1, 4.0]
        # 17 passages: padded to 32, the last layer has two outputs (the second one real).
        p17 = torch.randn(1, 17, dim)
        assert model.document_scores(p17, torch.ones(1, 17, dtype=torch.bool)).tolist() == [9 + 5 + 3 + 2]


def test_transformer_sees_cls_and_passage_order(backbone: Path) -> None:
    model = build("parade-transformer", backbone)
    assert isinstance(model, ParadeTransformer)
    assert len(model.aggregator.layers) == 2
    tok_cls = model.pairs.encoder.get_input_embeddings().weight[model.tokenizer.cls_token_id]
    assert torch.equal(model.cls_embedding.detach(), tok_cls.detach())
    assert model.positions.shape == (OPTIONS["max_passages"] + 1, model.pairs.dim)
    p, mask = hand_made(model.pairs.dim)
    with torch.no_grad():
        base = model.document_scores(p, mask)
        swapped = p[:, [1, 0, 2]]
        assert not torch.allclose(model.document_scores(swapped, mask)[0], base[0])


def test_hinge_loss_by_hand() -> None:
    scores = torch.tensor([[2.0, 1.5, -1.0, 9.0]])
    labels = torch.tensor([[1.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[True, True, True, False]])
    # Pairs (0,1): max(0, 1 - 0.5) = 0.5; (0,2): max(0, 1 - 3) = 0; the masked slot is ignored.
    assert pairwise_hinge(scores, labels, mask).item() == pytest.approx(0.25)
    assert pairwise_hinge(scores, torch.zeros_like(labels), mask).item() == 0.0


def long_groups(path: Path, count: int = 8) -> Path:
    """Groups whose documents are about 30 words long: the topic words sit somewhere in the middle."""
    rng = random.Random(0)
    topics = ["apple fruit red", "car engine fuel", "river water flow", "music guitar song"]
    filler = [w for w in WORDS if not any(w in t.split() for t in topics)]

    def doc(topic: str) -> str:
        words = [rng.choice(filler) for _ in range(30)]
        at = rng.randrange(5, 25)
        return " ".join(words[:at] + topic.split() + words[at:])

    with open(path, "w", encoding="utf-8") as out:
        for n in range(count):
            i = n % len(topics)
            pos = [{"docid": f"p{n}", "text": doc(topics[i]), "label": 1}]
            neg = [{"docid": f"n{n}_{j}", "text": doc(topics[(i + 1 + j) % len(topics)])} for j in range(3)]
            out.write(json.dumps({"qid": f"q{n}", "query": " ".join(topics[i].split()[:2]), "pos": pos,
                                  "neg": neg}) + "\n")
    return path


@pytest.mark.parametrize("name", PARADE)
def test_trains_and_round_trips(name: str, backbone: Path, tmp_path: Path) -> None:
    groups = read_groups(long_groups(tmp_path / "g.jsonl", count=2))
    model = build(name, backbone).train()
    batch = whole_groups_batch(model, groups)
    assert batch.features.slots[:, 2].max() == OPTIONS["max_passages"] - 1  # 33 tokens: 7 windows -> 4
    assert loss_drops_after_steps(model, batch, steps=4)
    save_model(model, tmp_path / "ck", {})
    again = load_model(tmp_path / "ck", expect=name)
    assert json.loads((tmp_path / "ck" / "config.json").read_text())["model_type"] == f"rankkit-{name}"
    model.eval()
    queries = [g.query for g in groups[:2]]
    texts = [[c.text for c in g.pos + g.neg] for g in groups[:2]]
    a = model.rerank_scores(queries, texts, batch_size=3)
    b = again.rerank_scores(queries, texts, batch_size=64)
    assert all(x.dtype == torch.float64 and x.shape == (4,) for x in a)
    assert all(torch.allclose(x, y, atol=1e-5) for x, y in zip(a, b))
    # Inference scores equal the training-path scores of the same (evenly spaced) passages.
    evaluated = whole_groups_batch(again, groups[:2])
    with torch.no_grad():
        assert torch.allclose(again(evaluated).scores.double(), torch.stack(b), atol=1e-5)


def test_train_then_rerank_parade_attn_via_cli(backbone: Path, tmp_path: Path, cli: Any) -> None:
    groups_path = long_groups(tmp_path / "groups.jsonl", count=16)
    groups = read_groups(groups_path)
    corpus = tmp_path / "corpus.jsonl"
    topics = tmp_path / "topics.tsv"
    run: dict[str, dict[str, float]] = {}
    with open(corpus, "w", encoding="utf-8") as c_out, open(topics, "w", encoding="utf-8") as t_out:
        for g in groups[:4]:
            t_out.write(f"{g.qid}\t{g.query}\n")
            run[g.qid] = {}
            for k, cand in enumerate(g.pos + g.neg):
                c_out.write(json.dumps({"id": cand.docid, "contents": cand.text}) + "\n")
                run[g.qid][cand.docid] = float(k)
    write_run(tmp_path / "first.txt", run, "first")
    ck = tmp_path / "ck"
    res = cli("train", "--model", "parade-attn", "--train", groups_path, "--output", ck, "--backbone", backbone,
              "--max-steps", "6", "--batch-size", "2", "--group-size", "4", "--lr", "3e-3", "--seed", "1",
              "--device", "cpu", "--window", "8", "--stride", "6", "--max-passages", "3", "--max-query-length", "6",
              "--loss", "hinge")
    assert res.code == 0, res.stderr
    meta = json.loads((ck / "rankkit.json").read_text())
    assert meta["model"] == "parade-attn" and meta["training"]["loss"] == "hinge"
    assert meta["hparams"]["window"] == 8 and meta["hparams"]["stride"] == 6 and meta["hparams"]["max_passages"] == 3
    out = tmp_path / "re.txt"
    res = cli("rerank", "--model", "parade-attn", "--checkpoint", ck, "--run", tmp_path / "first.txt",
              "--topics", topics, "--corpus", corpus, "--output", out, "--depth", "3", "--device", "cpu")
    assert res.code == 0, res.stderr
    after = read_run(out)
    assert {q: set(d) for q, d in after.items()} == {q: set(d) for q, d in run.items()}
    loaded = load_model(ck, expect="parade-attn")
    g = groups[0]
    head = [c.docid for c in g.pos + g.neg][::-1][:3]  # the run's top 3 (score descending)
    texts = {c.docid: c.text for c in g.pos + g.neg}
    scores = loaded.rerank_scores([g.query], [[texts[d] for d in head]])[0]
    assert [after[g.qid][d] for d in head] == pytest.approx(scores.tolist(), abs=1e-4)
    # Options of other models are refused.
    res = cli("train", "--model", "parade-attn", "--train", groups_path, "--output", tmp_path / "x",
              "--backbone", backbone, "--max-pieces", "3")
    assert res.code == 2 and ("--max-pieces is not an option of model parade-attn; parade-attn's options: "
                              "--window, --stride, --max-passages") in " ".join(res.stderr.split())


def test_registry_has_every_document_model() -> None:
    for name in [*PARADE, "maxp", "firstp", "sump", "matrank-split"]:
        assert MODELS[name].name == name
    assert ParadeMax.config_class is PassageWindowConfig
    assert [s.name for s in ParadeMax.config_class.model_options()] == ["window", "stride", "max_passages"]
