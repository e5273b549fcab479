"""Checkpoints written by rankkit 0.1.0 still load and re-rank to the same scores (tests/data/checkpoints-v0.1.0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from rankkit.models import MODELS
from rankkit.models.checkpoint import load_model, read_meta

FIXTURES = Path(__file__).parent / "data" / "checkpoints-v0.1.0"
EXPECTED = json.loads((FIXTURES / "expected_scores.json").read_text(encoding="utf-8"))


def test_every_registered_model_has_an_old_checkpoint() -> None:
    assert set(MODELS) <= set(EXPECTED["scores"])


@pytest.mark.parametrize("name", sorted(EXPECTED["scores"]))
def test_old_checkpoint_loads_and_reranks_the_same(name: str) -> None:
    folder = FIXTURES / name
    model = load_model(folder)
    assert model.name == read_meta(folder)["model"]
    scores = model.rerank_scores(EXPECTED["queries"], EXPECTED["candidates"], batch_size=4)
    for got, want in zip(scores, EXPECTED["scores"][name]):
        torch.testing.assert_close(got, torch.tensor(want, dtype=torch.float64), rtol=0, atol=1e-6)
