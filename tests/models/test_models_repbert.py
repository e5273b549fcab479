"""RepBERT (paper 001 §3): mean pooling, segment ids, in-batch MultiLabelMarginLoss, zero-shot MiniLM."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from training_helpers import build_model

from rankkit.errors import RankkitError
from rankkit.formats import Passage, TrainingGroup
from rankkit.models import MODELS, RepBERT, get_model_class
from rankkit.models.backbone import default_backbone_path, sentence_transformers_normalizes
from rankkit.models.pooling import cls_pool, mean_pool
from rankkit.models import losses
from rankkit.models.bi_encoders.repbert import RepBERTConfig
from rankkit.models.outputs import InBatchOutput
from rankkit.training import sampling



def test_registry() -> None:
    assert MODELS["repbert"] is RepBERT
    with pytest.raises(RankkitError, match=r"unknown model .colbert.; known: (.*, )?densetrans, (.*, )?repbert"):
        get_model_class("colbert")


def test_mean_pool_ignores_padding() -> None:
    hidden = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]],
                           [[2.0, 0.0], [0.0, 0.0], [0.0, 0.0]]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    assert torch.equal(mean_pool(hidden, mask), torch.tensor([[2.0, 3.0], [2.0, 0.0]]))
    assert torch.equal(cls_pool(hidden), torch.tensor([[1.0, 2.0], [2.0, 0.0]]))


def test_documents_in_segment_0_by_default(backbone: Path) -> None:
    model = build_model(RepBERT, backbone)
    assert model.hparams["doc_segment_id"] == 0 and model.hparams["normalize"] is False
    assert model.hparams["pooling"] == "mean" and model.hparams["query_prefix"] == ""
    feats = model.features(model.tokenize(["apple fruit", "car"], is_query=False), is_query=False)
    assert int(feats["token_type_ids"].sum()) == 0


def test_segment_ids_query_0_document_1(backbone: Path) -> None:
    model = build_model(RepBERT, backbone, {"doc_segment_id": 1})  # footnote 2
    assert model.hparams["doc_segment_id"] == 1 and model.hparams["normalize"] is False
    assert (model.max_query_length, model.max_doc_length) == (20, 256)  # §4.3.1
    ids = model.tokenize(["apple fruit", "car"], is_query=False)
    feats = model.features(ids, is_query=False)
    assert torch.equal(feats["token_type_ids"], feats["attention_mask"])  # 1 on tokens, 0 on padding
    q = model.features(model.tokenize(["apple"], is_query=True), is_query=True)
    assert int(q["token_type_ids"].sum()) == 0
    # Eq. 1: [CLS] ... [SEP]
    assert ids[0][0] == model.tokenizer.cls_token_id and ids[0][-1] == model.tokenizer.sep_token_id
    # The segment embedding really reaches the encoder: same text, different vector.
    with torch.no_grad():
        as_doc = model.embed(feats, is_query=False)
        as_query = model.embed({k: v for k, v in feats.items() if k != "token_type_ids"}, is_query=True)
    assert not torch.allclose(as_doc, as_query)


def test_zero_shot_keeps_segment_0(backbone: Path) -> None:
    model = RepBERT.zero_shot(backbone)
    feats = model.features(model.tokenize(["apple"], is_query=False), is_query=False)
    assert int(feats["token_type_ids"].sum()) == 0
    assert model.hparams["normalize"] is False  # the tiny backbone has no modules.json


def test_multilabel_margin_matches_torch_and_eq4() -> None:
    scores = torch.tensor([[0.5, 2.0, 1.0, -1.0], [1.0, 0.0, 3.0, 0.2]])
    positive = torch.tensor([[False, True, True, False], [True, False, False, False]])
    # Eq. 4 by hand, row 0: positives 2.0, 1.0 vs negatives 0.5, -1.0 -> hinge terms
    # max(0, 1-1.5)=0, max(0, 1-3)=0, max(0, 1-0.5)=0.5, max(0, 1-2)=0 -> 0.5 / 4
    # row 1: positive 1.0 vs 0.0, 3.0, 0.2 -> 0 + 3 + 0.2 -> 3.2 / 4
    expected = (0.5 / 4 + 3.2 / 4) / 2
    ours = losses.multilabel_margin(scores, positive)
    assert ours.item() == pytest.approx(expected)
    target = torch.tensor([[1, 2, -1, -1], [0, -1, -1, -1]])
    assert ours.item() == pytest.approx(torch.nn.MultiLabelMarginLoss()(scores, target).item())


def test_in_batch_positives_match_by_docid(backbone: Path) -> None:
    model = build_model(RepBERT, backbone)
    a = TrainingGroup("qa", "apple fruit", [Passage("dA", "apple fruit red"), Passage("dA2", "red apple")],
                      [Passage("dB", "car engine")])
    b = TrainingGroup("qb", "car engine", [Passage("dB", "car engine")], [Passage("dA2", "red apple")])
    rng = lambda i: sampling.group_rng(0, 0, i)  # noqa: E731
    batch = sampling.collate([sampling.sample_group(a, 2, rng(0)), sampling.sample_group(b, 2, rng(1))], 2)
    model.prepare(batch)
    out = model(batch)
    assert isinstance(out, InBatchOutput)
    scores, positive, target = out.in_batch, out.positive, out.target
    docids, _, _ = batch.flat_documents()
    assert scores.shape == (2, 4)
    # Query a: its own positive, and dA2 sitting in b's negatives, are positives; dB is not.
    assert [d for d, p in zip(docids, positive[0].tolist()) if p] == [d for d in docids if d in ("dA", "dA2")]
    assert [d for d, p in zip(docids, positive[1].tolist()) if p] == [d for d in docids if d == "dB"]
    assert docids[int(target[0])] in ("dA", "dA2") and docids[int(target[1])] == "dB"
    assert RepBERT.config_class is RepBERTConfig and RepBERT.training_defaults.loss == "multilabel-margin"
    loss = losses.get_loss(RepBERT.training_defaults.loss, RepBERT.output_type, RepBERT.name)(out, batch)
    assert loss.item() == pytest.approx(losses.multilabel_margin(scores, positive).item())
    loss.backward()
    assert model.encoder.embeddings.word_embeddings.weight.grad is not None


def test_segment_id_needs_segment_embeddings(tmp_path: Path) -> None:
    from rankkit.models.backbone import write_tiny_backbone

    folder = write_tiny_backbone(tmp_path / "one-type", hidden=8, layers=1, heads=1, intermediate=8, type_vocab_size=1)
    with pytest.raises(RankkitError, match="--doc-segment-id 0"):
        build_model(RepBERT, folder, {"doc_segment_id": 1})
    assert build_model(RepBERT, folder).doc_segment_id == 0


def test_zero_shot_minilm_equals_sentence_transformers() -> None:
    """The packaged MiniLM ends in Normalize, so zero-shot RepBERT is its cosine model exactly."""
    folder = default_backbone_path()
    assert sentence_transformers_normalizes(folder)
    model = RepBERT.zero_shot(None)
    assert model.hparams["normalize"] is True and model.hparams["doc_segment_id"] == 0
    texts = ["what is the capital of france", "Paris is the capital and largest city of France."]
    ours = model.encode(texts, is_query=False, batch_size=2)
    assert torch.allclose(ours.norm(dim=1), torch.ones(2), atol=1e-5)
    st = pytest.importorskip("sentence_transformers")
    reference = st.SentenceTransformer(str(folder), device="cpu").encode(texts, convert_to_tensor=True)
    assert torch.allclose(ours, reference.cpu(), atol=1e-5)
