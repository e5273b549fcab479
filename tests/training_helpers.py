"""Tiny inline data and a tiny random BERT shared by the model, training and dense tests.

Twelve topics, three documents each; a query names two words of its topic, its positives are
two documents of that topic and its negatives come from other topics. Small enough that a few
training steps of a 2-layer, 24-wide BERT run in about a second on CPU.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

TOPICS = [
    "apple fruit red", "car engine fuel", "river water flow", "music guitar song", "space star planet",
    "bread flour bake", "dog bark pet", "rain cloud storm", "book page read", "code python bug",
    "chess king move", "tea leaf cup",
]
WORDS = sorted({w for t in TOPICS for w in t.split()})


def documents() -> dict[str, str]:
    rng = random.Random(0)
    docs: dict[str, str] = {}
    for i, topic in enumerate(TOPICS):
        words = topic.split()
        for j in range(3):
            docs[f"d{i}_{j}"] = topic + " " + " ".join(rng.choice(words) for _ in range(4))
    return docs


def write_corpus(path: Path, extra: int = 0) -> Path:
    """The 36 topic documents plus ``extra`` filler documents (for IVFPQ, which needs more)."""
    rng = random.Random(1)
    with open(path, "w", encoding="utf-8") as out:
        for docid, text in documents().items():
            out.write(json.dumps({"id": docid, "contents": text}) + "\n")
        for n in range(extra):
            out.write(json.dumps({"id": f"x{n}", "contents": " ".join(rng.choice(WORDS) for _ in range(6))}) + "\n")
    return path


def write_groups(path: Path, count: int = 48, negatives: int = 5, seed: int = 0) -> Path:
    rng = random.Random(seed)
    docs = documents()
    with open(path, "w", encoding="utf-8") as out:
        for n in range(count):
            i = n % len(TOPICS)
            query = " ".join(rng.sample(TOPICS[i].split(), 2))
            pos = [{"docid": f"d{i}_{j}", "text": docs[f"d{i}_{j}"], "label": 1} for j in range(2)]
            others = [k for k in docs if not k.startswith(f"d{i}_")]
            neg = [{"docid": k, "text": docs[k], "score": 1.0} for k in rng.sample(others, negatives)]
            out.write(json.dumps({"qid": f"q{n}", "query": query, "pos": pos, "neg": neg}) + "\n")
    return path


def write_topics(path: Path) -> Path:
    with open(path, "w", encoding="utf-8") as out:
        for i, topic in enumerate(TOPICS):
            out.write(f"t{i}\t{' '.join(topic.split()[:2])}\n")
    return path


def tiny_backbone(folder: Path, *, hidden: int = 24, dropout: float = 0.1) -> Path:
    from rankkit.models.backbone import write_tiny_backbone

    return write_tiny_backbone(folder, words=WORDS, hidden=hidden, layers=2, heads=2, intermediate=48,
                               dropout=dropout, max_positions=64)


def loss_drops_after_steps(model, batch, steps: int = 15, lr: float = 3e-3, loss=None) -> bool:
    """Train ``model`` on one prepared ``batch`` for ``steps`` AdamW steps; True if the loss went down.

    ``loss`` is a :class:`rankkit.models.losses.Loss` (default: the model's training-default loss),
    computed as ``loss(model(batch), batch)``.
    """
    import torch

    from rankkit.models.losses import get_loss

    if loss is None:
        cls = type(model)
        loss = get_loss(cls.training_defaults.loss, cls.output_type, cls.name)

    def value():
        return loss(model(batch), batch)

    optim = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    first = float(value().detach())
    for _ in range(steps):
        optim.zero_grad()
        value().backward()
        optim.step()
    return float(value().detach()) < first


def build_model(cls, backbone, options=None):
    """``cls.for_training(backbone, config)`` with the config built from an options dict (the old
    ``for_training(backbone, options)`` form): ``None`` values = not given, derived defaults resolved."""
    return cls.for_training(backbone, cls.config_class.build(dict(options or {}), cls.name))


def small_model_options(name: str) -> dict[str, float]:
    """Settings that make the tiny topic documents several passages/pieces for the document models
    (and switch off the dropout of heads with their own, so a few steps on fixed groups must learn)."""
    if name == "matrank-attn":
        return {"attention_dropout": 0.0}
    if name in ("maxp", "sump", "avgp", "kmaxp") or name.startswith("parade-"):
        return {"window": 6, "stride": 4, "max_passages": 3}
    if name == "firstp":
        return {"window": 6}
    if name == "matrank-split":
        return {"piece_length": 41, "max_pieces": 2}  # 32 query + 3 special + 6 document tokens
    return {}


def whole_groups_batch(model, groups):
    """``model``'s prepared batch of every candidate of each group, in file order: what re-ranking scores."""
    from rankkit.training.sampling import all_candidates, collate

    return model.prepare(collate([all_candidates(g) for g in groups]))
