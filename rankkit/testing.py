"""Test helpers for rankkit and for plug-in authors: a tiny backbone, tiny data, and the model contract.

A plug-in model (one file plus one ``register()`` line, or a ``rankkit.models`` entry point) can run
the same contract the built-in models pass::

    from rankkit.testing import check_model_contract, tiny_backbone
    check_model_contract("my-model", tiny_backbone(tmp_path / "tiny"), tmp_path)

The contract: a fresh model prepares and scores a training batch (``[G, S]`` scores), its
re-ranking path (:meth:`~rankkit.models.base.RankingModel.rerank_scores`, a family's fast path) agrees
with the training ``forward`` (:meth:`~rankkit.models.base.RankingModel.forward_scores`, the one
scoring path) and is independent of how queries are batched, and a save + load round trip gives the
same scores.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

#: Twelve small topics; a query names two words of its topic (what the tiny backbone's vocabulary covers).
TOPICS = ("apple fruit red", "car engine fuel", "river water flow", "music guitar song", "space star planet",
          "bread flour bake", "dog bark pet", "rain cloud storm", "book page read", "code python bug",
          "chess king move", "tea leaf cup")
WORDS = tuple(sorted({word for topic in TOPICS for word in topic.split()}))


def tiny_documents(seed: int = 0) -> dict[str, str]:
    """Three documents per topic (``d{topic}_{j}``): the topic's words plus four random ones of it."""
    rng = random.Random(seed)
    docs: dict[str, str] = {}
    for i, topic in enumerate(TOPICS):
        words = topic.split()
        for j in range(3):
            docs[f"d{i}_{j}"] = topic + " " + " ".join(rng.choice(words) for _ in range(4))
    return docs


def tiny_backbone(folder: str | Path, *, hidden: int = 24, layers: int = 2, dropout: float = 0.0,
                  max_positions: int = 64) -> Path:
    """A randomly initialised 2-layer BERT (seeded) with a WordPiece vocabulary of :data:`WORDS`."""
    from rankkit.models.backbone import write_tiny_backbone

    return write_tiny_backbone(folder, words=WORDS, hidden=hidden, layers=layers, heads=2, intermediate=2 * hidden,
                               dropout=dropout, max_positions=max_positions)


@dataclass
class ContractReport:
    """What :func:`check_model_contract` measured (the largest score differences it allowed)."""

    model: str
    forward_vs_rerank: float
    batching: float
    round_trip: float
    #: Permutations compared bit for bit (0 for a model that does not declare permutation invariance).
    permutations: int = 0


def _largest(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> float:
    return max((float((x - y).abs().max()) for x, y in zip(a, b) if x.numel()), default=0.0)


def check_model_contract(name: str, backbone: str | Path, folder: str | Path, *, atol: float = 1e-4,
                         settings: dict[str, Any] | None = None, runtimes: Sequence[Any] | None = None) -> ContractReport:
    """Check the model contract (module doc) for registered model ``name`` on ``backbone``; raises
    ``AssertionError`` naming the broken clause. ``folder`` receives the round-trip checkpoint.

    A model that declares ``permutation_invariant`` must give bit-identical scores for its candidates given as
    they are, reversed and shuffled, under each of ``runtimes`` (:class:`rankkit.runtime.Runtime`; default torch
    fp32 and bf16, which reduced precision makes order-sensitive unless the model scores a canonical order)."""
    from rankkit.models import create_model
    from rankkit.models.checkpoint import load_model, save_model
    from rankkit.models.inputs import candidate_batch

    docs = list(tiny_documents().values())
    queries = ["apple fruit", "car fuel", "river flow", "tea cup"]
    candidates = [docs[0:5], docs[5:8], docs[8:14], docs[33:35]]
    torch.manual_seed(0)
    model = create_model(name, str(backbone), **(settings or {}))
    model.train()
    batch = model.prepare(candidate_batch(queries, candidates))
    output = model(batch)
    assert tuple(output.scores.shape) == tuple(batch.mask.shape), (
        f"{name}: forward gave scores of shape {tuple(output.scores.shape)} for a batch of {tuple(batch.mask.shape)}")
    model.eval()
    fast = model.rerank_scores(queries, candidates, batch_size=4)
    assert [len(s) for s in fast] == [len(c) for c in candidates], f"{name}: rerank_scores gave the wrong counts"
    slow = model.forward_scores(queries, candidates, batch_size=4)
    forward_vs_rerank = _largest(fast, slow)
    assert forward_vs_rerank <= atol, (
        f"{name}: rerank_scores differs from the training forward by {forward_vs_rerank:.2e} (> {atol:g})")
    alone = [model.rerank_scores([q], [c], batch_size=64)[0] for q, c in zip(queries, candidates)]
    batching = _largest(fast, alone)
    assert batching <= atol, f"{name}: a query's scores depend on the other queries of its batch ({batching:.2e})"
    target = Path(folder) / name
    save_model(model, target, {})
    again = load_model(target).rerank_scores(queries, candidates, batch_size=4)
    round_trip = _largest(fast, again)
    assert round_trip <= atol, f"{name}: a saved and reloaded model scores differently ({round_trip:.2e})"
    permutations = 0
    if type(model).permutation_invariant:
        permutations = check_permutation_invariance(name, target, queries, candidates, runtimes)
    return ContractReport(name, forward_vs_rerank, batching, round_trip, permutations)


def check_permutation_invariance(name: str, checkpoint: str | Path, queries: Sequence[str],
                                 candidates: Sequence[Sequence[str]], runtimes: Sequence[Any] | None = None) -> int:
    """Scores of ``candidates`` as given, reversed and shuffled (three seeds) must be bit-identical once mapped
    back, under each runtime (loaded from ``checkpoint`` on the CPU, scored through an inference session); a
    duplicated text is added to the first list. Returns the comparisons made; raises ``AssertionError``."""
    import random

    from rankkit.runtime import InferenceSession, Runtime, load_for_inference

    chosen = list(runtimes) if runtimes is not None else [Runtime("torch", "none", None, "fp32"),
                                                          Runtime("torch", "none", None, "bf16")]
    lists = [list(c) for c in candidates]
    lists[0] = lists[0] + [lists[0][0]]  # the same text twice: one score for both, whatever the order
    orders = [[list(range(len(c)))[::-1] for c in lists]]
    for seed in range(3):
        rng = random.Random(seed)
        orders.append([rng.sample(range(len(c)), len(c)) for c in lists])
    done = 0
    for runtime in chosen:
        session = InferenceSession.of(load_for_inference(name, checkpoint, runtime, "cpu"), batch_size=4)
        reference = session.scores(queries, lists)
        for order in orders:
            permuted = [[c[i] for i in o] for c, o in zip(lists, order)]
            got = session.scores(queries, permuted)
            for q, (ref, out, o) in enumerate(zip(reference, got, order)):
                back = torch.empty_like(out)
                back[torch.tensor(o, dtype=torch.long)] = out
                assert torch.equal(back, ref), (
                    f"{name} on {runtime.describe()}: query {q}'s scores change with the order of its candidates "
                    f"(largest difference {float((back - ref).abs().max()):.2e}): not permutation-invariant")
                done += 1
    return done


__all__ = ["ContractReport", "TOPICS", "WORDS", "check_model_contract", "check_permutation_invariance", "tiny_backbone",
           "tiny_documents"]
