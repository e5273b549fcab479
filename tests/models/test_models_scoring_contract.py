"""One scoring path: for every registered model, re-ranking (a family's fast path) agrees with the training
``forward`` (``forward_scores``), does not depend on batching, and survives a save and load
(:func:`rankkit.testing.check_model_contract`, the contract plug-in authors can run too)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rankkit.models import MODELS
from rankkit.testing import check_model_contract

#: Settings a model needs on the tiny 64-position backbone (its defaults assume 512 positions).
SETTINGS = {"densetrans": {"d_model": 12, "num_heads": 2}, "matrank-split": {"piece_length": 48, "max_query_length": 8}}



@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_model_scores_one_way(name: str, backbone: Path, tmp_path: Path) -> None:
    report = check_model_contract(name, backbone, tmp_path, settings=SETTINGS.get(name))
    assert report.forward_vs_rerank <= 1e-4 and report.round_trip <= 1e-4


def test_the_contract_catches_a_fast_path_that_disagrees(backbone: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from rankkit.models.cross_encoders.mono import Mono

    original = Mono.rerank_scores
    monkeypatch.setattr(Mono, "rerank_scores", lambda self, q, c, batch_size=32: [
        s + 0.5 * (s.argsort().argsort() == 0) for s in original(self, q, c, batch_size)])
    with pytest.raises(AssertionError, match="rerank_scores differs from the training forward"):
        check_model_contract("mono", backbone, tmp_path)
