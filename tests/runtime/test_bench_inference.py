"""bench/inference.py's sentence-transformers CrossEncoder twin of a mono checkpoint (the peer row of its table)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from rankkit.models.checkpoint import load_for_inference, model_class, save_model
from tests.training_helpers import build_model, tiny_backbone

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench_inference():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import inference
    finally:
        sys.path.remove(str(ROOT / "bench"))
    return inference


def _mono(tmp_path: Path, name: str, options: dict) -> Path:
    backbone = tiny_backbone(tmp_path / "backbone")
    model = build_model(model_class("mono"), backbone, options)
    return save_model(model, tmp_path / name, {})


def test_hf_head_mono_is_its_own_crossencoder(tmp_path: Path, bench_inference) -> None:
    checkpoint = _mono(tmp_path, "hf", {"encoder": "cross"})
    assert bench_inference.crossencoder_folder(checkpoint, tmp_path / "twin") == checkpoint


def test_rankkit_head_mono_gets_a_crossencoder_copy_with_its_scores(tmp_path: Path, bench_inference) -> None:
    from sentence_transformers import CrossEncoder

    checkpoint = _mono(tmp_path, "rankkit-head", {"encoder": "cross", "hf_head": False})
    twin = bench_inference.crossencoder_folder(checkpoint, tmp_path / "twin")
    assert twin == tmp_path / "twin" and (twin / "config.json").is_file()
    mono = load_for_inference("mono", checkpoint)
    query, passages = "alpha beta", ["alpha gamma delta", "beta epsilon", "zeta"]
    ours = mono.rerank_scores([query], [passages])[0]
    ce = CrossEncoder(str(twin), num_labels=1, max_length=64, device="cpu", activation_fn=torch.nn.Identity())
    theirs = torch.as_tensor(ce.predict([(query, p) for p in passages]))
    assert torch.allclose(torch.as_tensor(ours).float(), theirs.float(), atol=1e-3), (ours, theirs)


def test_bi_encoder_mono_has_no_crossencoder_twin(tmp_path: Path, bench_inference) -> None:
    checkpoint = _mono(tmp_path, "bi", {"encoder": "bi"})
    assert bench_inference.crossencoder_folder(checkpoint, tmp_path / "twin") is None
    assert not (tmp_path / "twin").exists()
