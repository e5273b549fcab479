"""``--freeze-position-embeddings`` (Set-Encoder): the authors' configs freeze ELECTRA's position table
(Schlatt et al., 2024, "Set-Encoder: Permutation-Invariant Inter-Passage Attention for Listwise Passage
Re-Ranking with Cross-Encoders"; webis-de/set-encoder, set-encoder.yaml ``freeze_position_embeddings: true``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from training_helpers import build_model, write_groups

from rankkit.errors import RankkitError
from rankkit.models.backbone import position_embeddings, read_safetensors
from rankkit.models.checkpoint import load_model, save_model
from rankkit.models.cross_encoders.set_encoder import SetEncoder

TABLE = "pairs.encoder.embeddings.position_embeddings.weight"
#: Backbone weights that must move in a few steps: the token table and an attention projection.
TRAINED = ("pairs.encoder.embeddings.word_embeddings.weight", "pairs.encoder.encoder.layer.0.attention.self.query.weight")


def frozen_names(model: torch.nn.Module) -> set[str]:
    return {name for name, p in model.named_parameters() if not p.requires_grad}


def test_the_option_freezes_exactly_the_position_table(backbone: Path) -> None:
    plain = build_model(SetEncoder, backbone, {"max_query_length": 8, "max_doc_length": 24})
    frozen = build_model(SetEncoder, backbone, {"max_query_length": 8, "max_doc_length": 24,
                                                "freeze_position_embeddings": True})
    assert plain.config.freeze_position_embeddings is False and TABLE not in frozen_names(plain)
    assert frozen_names(frozen) - frozen_names(plain) == {TABLE}
    assert position_embeddings(frozen.pairs.encoder) is dict(frozen.named_parameters())[TABLE]


def test_position_embeddings_need_a_learned_table() -> None:
    with pytest.raises(RankkitError, match="no learned absolute position embeddings"):
        position_embeddings(torch.nn.Linear(2, 2))


def train(cli: Any, backbone: Path, groups: Path, out: Path, *flags: str) -> dict[str, torch.Tensor]:
    result = cli("train", "--model", "set-encoder", "--train", groups, "--output", out, "--backbone", backbone,
                 "--max-steps", 3, "--batch-size", 2, "--group-size", 4, "--lr", "3e-3", "--seed", 1,
                 "--device", "cpu", "--precision", "fp32", "--max-query-length", 8, "--max-doc-length", 24, *flags)
    assert result.code == 0, result.stderr
    return read_safetensors(out / "model.safetensors")


def test_frozen_table_stays_as_pretrained_while_the_rest_trains(cli: Any, backbone: Path, tmp_path: Path) -> None:
    """Three AdamW steps with weight decay: the frozen table is the backbone's bit for bit, every other
    weight moved; without the option the table moves too (so the check can fail)."""
    groups = write_groups(tmp_path / "groups.jsonl", count=8, negatives=3)
    pretrained = read_safetensors(backbone / "model.safetensors")["embeddings.position_embeddings.weight"]
    start = build_model(SetEncoder, backbone, {"max_query_length": 8, "max_doc_length": 24}).state_dict()

    frozen = train(cli, backbone, groups, tmp_path / "frozen", "--freeze-position-embeddings")
    assert torch.equal(frozen[TABLE], pretrained)
    for name in TRAINED:
        assert not torch.equal(frozen[name], start[name]), f"{name} did not train"
    assert json.loads((tmp_path / "frozen" / "rankkit.json").read_text())["hparams"]["freeze_position_embeddings"]

    trained = train(cli, backbone, groups, tmp_path / "trained")
    assert not torch.equal(trained[TABLE], pretrained)
    assert json.loads((tmp_path / "trained" / "rankkit.json").read_text())["hparams"]["freeze_position_embeddings"] \
        is False


def test_the_option_round_trips_through_save_and_load(backbone: Path, tmp_path: Path) -> None:
    model = build_model(SetEncoder, backbone, {"max_query_length": 8, "max_doc_length": 24,
                                               "freeze_position_embeddings": True})
    save_model(model, tmp_path / "ck", {})
    again = load_model(tmp_path / "ck", expect="set-encoder")
    assert isinstance(again, SetEncoder) and again.config.freeze_position_embeddings is True
    assert frozen_names(again) == frozen_names(model)
    save_model(again, tmp_path / "ck2", {})
    assert json.loads((tmp_path / "ck2" / "rankkit.json").read_text())["hparams"]["freeze_position_embeddings"] is True


def test_only_the_set_encoder_takes_the_option(cli: Any, backbone: Path, tmp_path: Path) -> None:
    groups = write_groups(tmp_path / "groups.jsonl", count=4, negatives=3)
    result = cli("train", "--model", "mono", "--train", groups, "--output", tmp_path / "o", "--backbone", backbone,
                 "--freeze-position-embeddings", "--device", "cpu")
    assert result.code == 2 and "--freeze-position-embeddings is not an option of model mono" in result.stderr
