"""DenseTrans (paper 002 §3): growing widths, dense connectivity, the Table 3 ablations, save/load."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from training_helpers import build_model, tiny_backbone

from rankkit.errors import RankkitError
from rankkit.models import DenseTrans
from rankkit.models import losses
from rankkit.models.bi_encoders.densetrans import DenseTransConfig, layer_widths, representation_width
from rankkit.models.checkpoint import load_model, read_meta, save_model

D = 24  # the tiny backbone's width; 6 heads of 4


@pytest.fixture(scope="module")
def backbone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_backbone(tmp_path_factory.mktemp("tiny"), hidden=D)


def layer_inputs(model: DenseTrans, texts: list[str]) -> list[int]:
    """Widths of what each Transformer layer actually receives in a forward pass."""
    seen: list[int] = []
    hooks = [layer.register_forward_pre_hook(lambda _m, args: seen.append(args[0].shape[-1]))
             for layer in model.network.layers]
    model.encode(texts, is_query=True)
    for hook in hooks:
        hook.remove()
    return seen


def test_widths_double_with_dense_connections() -> None:
    assert layer_widths(384, 3, dense=True) == [384, 768, 1536]  # Eq. 5: [E0], [E0;E1], [E0;E1;E2]
    assert layer_widths(384, 3, dense=False) == [384, 384, 384]
    assert layer_widths(384, 3, dense="below-top") == [384, 768, 768]  # -TopDense: the top reads E^2 only
    assert layer_widths(384, 1, dense="below-top") == [384]
    assert representation_width(384, 3, True, True) == 8 * 384
    assert representation_width(384, 3, True, False) == 4 * 384
    assert representation_width(384, 3, False, False) == 384
    assert representation_width(384, 3, False, True) == 4 * 384


@pytest.mark.parametrize(
    ("variant", "inputs", "dim"),
    [
        ("densetrans", [D, 2 * D, 4 * D], 4 * D),  # §3.2.2: [CLS] of the last layer
        ("densetrans/all-layers", [D, 2 * D, 4 * D], 8 * D),  # [CLS] of [E^0; ...; E^3]
        ("no-top-dense", [D, 2 * D, 2 * D], 2 * D),  # -TopDense: the top layer reads E^2 only
        ("no-top-dense/all-layers", [D, 2 * D, 2 * D], D + 5 * D),
        ("no-dense", [D, D, D], D),  # -AllDense
        ("concat", [D, D, D], 4 * D),  # +Concat
    ],
)
def test_ablations(backbone: Path, variant: str, inputs: list[int], dim: int) -> None:
    torch.manual_seed(0)
    name, _, representation = variant.partition("/")
    model = build_model(DenseTrans, backbone, {"variant": name, "representation": representation or None})
    assert model.hparams["num_layers"] == 3 and model.hparams["num_heads"] == 6  # N=3, H=6
    assert [layer.self_attn.embed_dim for layer in model.network.layers] == inputs
    assert layer_inputs(model, ["apple fruit red", "car"]) == inputs
    vectors = model.encode(["apple fruit red", "car"], is_query=True)
    assert vectors.shape == (2, dim) and model.dim == dim
    assert torch.allclose(vectors.norm(dim=1), torch.ones(2), atol=1e-5)  # cosine similarity


def test_input_layer_and_initialisation(backbone: Path) -> None:
    from rankkit.models.backbone import load_encoder

    torch.manual_seed(0)
    model = build_model(DenseTrans, backbone, {"max_query_length": 3})
    table = load_encoder(backbone).get_input_embeddings().weight
    assert torch.equal(model.network.tokens.weight.detach(), table.detach())  # pretrained token vectors
    ids = model.tokenize(["apple fruit red car engine"], is_query=True)[0]
    assert ids[0] == model.tokenizer.cls_token_id and len(ids) == 4  # [CLS] + 3 word pieces, no [SEP]
    assert model.tokenizer.sep_token_id not in ids
    random_init = build_model(DenseTrans, backbone, {"embedding_init": "random"})
    weights = random_init.network.tokens.weight.detach()
    assert float(weights.min()) >= -0.2 and float(weights.max()) <= 0.2  # OOV init U(-0.2, 0.2)
    assert build_model(DenseTrans, backbone).max_query_length == 30  # §4.2.3


def test_padding_does_not_change_the_vector(backbone: Path) -> None:
    torch.manual_seed(0)
    model = build_model(DenseTrans, backbone)
    alone = model.encode(["car"], is_query=True)
    padded = model.encode(["car", "apple fruit red apple fruit red"], is_query=True)[:1]
    assert torch.allclose(alone, padded, atol=1e-5)


def test_softmax_cross_entropy_eq7() -> None:
    scores = torch.tensor([[2.0, 1.0, 0.0], [0.0, 1.0, 5.0]])
    target = torch.tensor([0, 1])
    exclude = torch.tensor([[False, False, False], [False, False, True]])  # another positive of q2
    expected0 = -torch.log_softmax(torch.tensor([2.0, 1.0, 0.0]), 0)[0]
    expected1 = -torch.log_softmax(torch.tensor([0.0, 1.0]), 0)[1]
    got = losses.softmax_cross_entropy(scores, target, exclude)
    assert got.item() == pytest.approx(((expected0 + expected1) / 2).item())


def test_save_load_restores_ablation(backbone: Path, tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = build_model(DenseTrans, backbone, {"variant": "no-top-dense", "scale": 20.0})
    model.eval()
    save_model(model, tmp_path / "ckpt", {"steps": 0})
    meta = read_meta(tmp_path / "ckpt")
    assert meta["model"] == "densetrans" and meta["hparams"]["variant"] == "no-top-dense"
    loaded = load_model(tmp_path / "ckpt")
    assert isinstance(loaded, DenseTrans)
    assert loaded.network.dense and not loaded.network.concat_output and loaded.scale == 20.0
    texts = ["apple fruit", "dog bark pet"]
    assert torch.equal(model.encode(texts, is_query=False), loaded.encode(texts, is_query=False))
    with pytest.raises(RankkitError, match="--variant must be one of densetrans, no-top-dense, no-dense, concat"):
        build_model(DenseTrans, backbone, {"variant": "sparse"})
    # A config made without the checks (e.g. by hand) is still refused by the model itself.
    with pytest.raises(RankkitError, match="unknown DenseTrans variant"):
        DenseTrans.for_training(backbone, DenseTransConfig(variant="sparse"))


def test_no_zero_shot_form() -> None:
    with pytest.raises(RankkitError, match="no zero-shot form"):
        DenseTrans.zero_shot(None)


def test_smaller_width_projects_the_pretrained_table(backbone: Path) -> None:
    from rankkit.models.backbone import load_encoder
    from rankkit.models.bi_encoders.densetrans import principal_components

    table = load_encoder(backbone).get_input_embeddings().weight.detach().float()
    projected = principal_components(table, 12)
    assert projected.shape == (table.shape[0], 12)
    assert torch.equal(projected, principal_components(table, 12))  # deterministic
    # The leading directions keep more variance than any trailing one.
    variances = projected.var(dim=0)
    assert bool((variances[:-1] >= variances[1:] - 1e-6).all())
    model = build_model(DenseTrans, backbone, {"d_model": 12, "num_heads": 6})
    assert model.network.tokens.weight.shape == (table.shape[0], 12)
    assert torch.allclose(model.network.tokens.weight.detach(), projected)
    assert model.dim == representation_width(12, 3, True, False)  # the last layer's [CLS] by default
    with pytest.raises(RankkitError, match="exceeds"):
        build_model(DenseTrans, backbone, {"d_model": 48})


@pytest.mark.parametrize(("recorded", "variant", "representation"), [
    ("densetrans", "densetrans", "all-layers"),  # the pre-issue-17 default concatenated every layer
    ("no-top-dense", "densetrans", "last"),  # the old -TopDense: dense throughout, last layer's [CLS]
    ("no-dense", "no-dense", "last"),
    ("concat", "concat", "all-layers"),
])
def test_configs_recorded_before_representation_keep_their_network(recorded: str, variant: str,
                                                                   representation: str) -> None:
    old = DenseTransConfig.from_dict({"variant": recorded, "d_model": 12}, "rankkit.json")
    assert (old.variant, old.representation) == (variant, representation)
    new = DenseTransConfig.from_dict({"variant": recorded, "representation": "last", "d_model": 12}, "rankkit.json")
    assert new.representation == "last" and new.variant == recorded


def test_old_no_top_dense_checkpoint_loads_with_its_weights(backbone: Path, tmp_path: Path) -> None:
    import json

    torch.manual_seed(0)
    model = build_model(DenseTrans, backbone, {"variant": "densetrans", "d_model": 12, "num_heads": 6})
    save_model(model, tmp_path / "ck", {})
    meta_path = tmp_path / "ck" / "rankkit.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta["hparams"]["variant"] = "no-top-dense"  # how the same network was recorded before issue 17
    del meta["hparams"]["representation"]
    meta_path.write_text(json.dumps(meta), encoding="utf-8")
    loaded = load_model(tmp_path / "ck")
    texts = ["apple fruit", "dog bark pet"]
    model.eval()
    assert torch.equal(model.encode(texts, is_query=False), loaded.encode(texts, is_query=False))
