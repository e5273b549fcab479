"""Checkpoints written by earlier rankkit versions still load and re-rank to the same scores.

``tests/data/checkpoints-v0.1.0``: every model of rankkit 0.1.0; ``tests/data/checkpoints-issue17``:
the models added by issue 17 (MatRank Table 3 rows, AvgP, k-max), written when they were added.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from rankkit.models import MODELS
from rankkit.models.checkpoint import load_model, read_meta

DATA = Path(__file__).parents[1] / "data"
FIXTURE_SETS = [DATA / "checkpoints-v0.1.0", DATA / "checkpoints-issue17"]
EXPECTED = {folder: json.loads((folder / "expected_scores.json").read_text(encoding="utf-8")) for folder in FIXTURE_SETS}
CASES = [(folder, name) for folder in FIXTURE_SETS for name in sorted(EXPECTED[folder]["scores"])]


def test_every_registered_model_has_an_old_checkpoint() -> None:
    covered = {read_meta(folder / name)["model"] for folder, name in CASES}
    assert set(MODELS) <= covered


@pytest.mark.parametrize("folder,name", CASES, ids=[f"{f.name}/{n}" for f, n in CASES])
def test_old_checkpoint_loads_and_reranks_the_same(folder: Path, name: str) -> None:
    expected = EXPECTED[folder]
    model = load_model(folder / name)
    assert model.name == read_meta(folder / name)["model"]
    scores = model.rerank_scores(expected["queries"], expected["candidates"], batch_size=4)
    for got, want in zip(scores, expected["scores"][name]):
        torch.testing.assert_close(got, torch.tensor(want, dtype=torch.float64), rtol=0, atol=1e-6)
