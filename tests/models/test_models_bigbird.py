"""A BigBird backbone (MatRank Table 3's +BigBird / BigBird / MatRank+BigBird rows need one).

A tiny random ``BigBirdModel`` with a SentencePiece-style (Unigram) ``BigBirdTokenizer`` is saved
to a folder, as a user's local copy of google/bigbird-roberta-base would be, and the cross-encoder,
document and bi-encoder models train and re-rank on it through the CLI. BigBird's tokenizer takes
no token type ids and its block-sparse attention switches itself to full attention on short inputs:
both are handled generically (``rankkit.models.backbone.reset_attention_type``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest
import torch
from training_helpers import WORDS, build_model, documents, whole_groups_batch, write_corpus, write_groups, write_topics

from rankkit.formats import read_groups, read_run, write_run
from rankkit.models.cross_encoders.mono import Mono

transformers = pytest.importorskip("transformers")


def write_tiny_bigbird(folder: Path, *, block_size: int = 2, random_blocks: int = 1) -> Path:
    """A random 2-layer BigBird (block-sparse attention) plus a Unigram BigBirdTokenizer over the test words."""
    folder.mkdir(parents=True, exist_ok=True)
    specials = ["<pad>", "</s>", "<s>", "<unk>", "[SEP]", "[MASK]", "[CLS]"]
    chars = list("abcdefghijklmnopqrstuvwxyz0123456789")
    vocab = [(t, 0.0) for t in specials] + [("\u2581" + w, -1.0) for w in WORDS] + [("\u2581", -2.0)]
    vocab += [(c, -3.0) for c in chars]
    transformers.BigBirdTokenizer(vocab=vocab).save_pretrained(str(folder))
    config = transformers.BigBirdConfig(
        vocab_size=len(vocab), hidden_size=24, num_hidden_layers=2, num_attention_heads=2, intermediate_size=48,
        max_position_embeddings=256, block_size=block_size, num_random_blocks=random_blocks,
        attention_type="block_sparse", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, pad_token_id=0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        transformers.BigBirdModel(config).save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="module")
def bigbird(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_bigbird(tmp_path_factory.mktemp("bigbird") / "tiny-bigbird")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bigbird-data")
    docids = sorted(documents())
    write_run(root / "first.run", {f"t{i}": {d: float(k) for k, d in enumerate(docids[:8])} for i in range(3)}, "first")
    return {"corpus": write_corpus(root / "corpus.jsonl"), "topics": write_topics(root / "topics.tsv"),
            "groups": write_groups(root / "groups.jsonl", count=8), "run": root / "first.run"}


EXTRA: dict[str, list[object]] = {
    "firstp": ["--window", 40],  # Table 3's "BigBird" document row: one long input per document
    "maxp": ["--window", 6, "--stride", 4, "--max-passages", 3],
    "matrank-split": ["--piece-length", 51, "--max-pieces", 2],
}


@pytest.mark.parametrize("name", ["mono", "matrank", "listwise", "matrank-attn", "listwise-joint", "firstp", "maxp",
                                  "matrank-split", "repbert"])
def test_bigbird_backbone_trains_and_reranks(cli: Callable[..., object], bigbird: Path, data: dict[str, Path],
                                             tmp_path: Path, name: str) -> None:
    ck = tmp_path / "ck"
    train = cli("train", "--model", name, "--train", data["groups"], "--output", ck, "--backbone", bigbird,
                "--max-steps", 1, "--batch-size", 2, "--group-size", 3, "--device", "cpu", "--seed", 0,
                *EXTRA.get(name, []))
    assert train.code == 0, train.stderr
    out = tmp_path / "x.run"
    rerank = cli("rerank", "--model", name, "--checkpoint", ck, "--run", data["run"], "--topics", data["topics"],
                 "--corpus", data["corpus"], "--depth", 5, "--output", out, "--device", "cpu")
    assert rerank.code == 0, rerank.stderr
    assert set(read_run(out)) == set(read_run(data["run"]))


def test_block_sparse_attention_does_not_depend_on_earlier_batches(bigbird: Path, tmp_path: Path) -> None:
    model = build_model(Mono, bigbird, {"max_query_length": 8, "max_doc_length": 120})
    model.eval()
    encoder = model.pairs.encoder.base_model  # mono's encoder is a BigBirdForSequenceClassification
    long_text = " ".join(WORDS * 3)  # well past BigBird's full-attention threshold (7 blocks of 2)
    first = model.rerank_scores(["apple fruit"], [[long_text]])[0]
    assert encoder.attention_type == "block_sparse"
    model.rerank_scores(["apple fruit"], [["apple"]])  # a short input: BigBird switches to full attention
    again = model.rerank_scores(["apple fruit"], [[long_text]])[0]
    assert encoder.attention_type == "block_sparse"  # reset before the call: block-sparse again
    assert torch.equal(first, again)
    # Training steps on short groups leave the recorded attention type alone too.
    groups = read_groups(write_groups(tmp_path / "g.jsonl", count=2, negatives=2))
    model.train()
    model(whole_groups_batch(model, groups))
    assert encoder.config.attention_type == "block_sparse"
