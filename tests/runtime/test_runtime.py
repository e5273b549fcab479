"""Inference backends (:mod:`rankkit.runtime`): ONNX export round trips per model family, int8,
the export cache (reuse, invalidation, damage), and the refusals."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from training_helpers import TOPICS, build_model, documents

from rankkit.errors import RankkitError
from rankkit.models import get_model_class
from rankkit.models.checkpoint import load_for_inference, save_model
from rankkit.runtime import Runtime, export, openvino_backend, use_runtime
from rankkit.runtime.adapter import OrtEncoder

QUERIES = [" ".join(t.split()[:2]) for t in TOPICS[:3]]
CANDIDATES = [sorted(documents().values())[i::3][:7] for i in range(3)]
DOC_CANDIDATES = [[" ".join([text] * 12) for text in texts[:4]] for texts in CANDIDATES]  # several windows each

#: (model, settings, long documents?) for each family that runs on ONNX Runtime.
FAMILIES = [
    ("mono", {}, False),
    ("mono", {"encoder": "bi"}, False),
    ("matrank", {"hidden": 8}, False),
    ("matrank-row", {"encoder": "bi"}, False),
    ("maxp", {"window": 12, "stride": 10}, True),
    ("firstp", {"window": 12}, True),
    ("parade-transformer", {"window": 12, "stride": 10, "max_passages": 4}, True),
    ("parade-cnn", {"window": 12, "stride": 10, "max_passages": 4}, True),
    ("matrank-split", {"piece_length": 47, "hidden": 8}, True),  # 32 query + 3 special + 12 document tokens
    ("set-encoder", {}, False),
]



@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("RANKKIT_CACHE_DIR", str(folder))
    return folder


def kendall(a: torch.Tensor, b: torch.Tensor) -> float:
    """Kendall's tau-a of two score lists (pairs ordered alike minus pairs ordered differently)."""
    n = len(a)
    signs = [float(torch.sign(a[i] - a[j]) * torch.sign(b[i] - b[j])) for i in range(n) for j in range(i + 1, n)]
    return sum(signs) / max(1, len(signs))


@pytest.mark.parametrize("name, settings, long", FAMILIES, ids=lambda v: v if isinstance(v, str) else "")
def test_export_round_trip(backbone: Path, name: str, settings: dict[str, Any], long: bool,
                           capsys: pytest.CaptureFixture[str]) -> None:
    """fp32 on ONNX Runtime scores as torch does (within 1e-4); int8's ranking agreement is reported."""
    cls = get_model_class(name)
    torch.manual_seed(0)
    model = build_model(cls, backbone, settings).eval()
    candidates = DOC_CANDIDATES if long else CANDIDATES
    reference = model.rerank_scores(QUERIES, candidates, batch_size=5)
    fp32 = copy.deepcopy(model)
    paths = use_runtime(fp32, Runtime("onnx"))
    assert [p.suffixes[-2:] for p in paths] == [[".fp32", ".onnx"]]
    got = fp32.rerank_scores(QUERIES, candidates, batch_size=5)
    for ref, out in zip(reference, got):
        assert out.shape == ref.shape
        assert torch.allclose(out, ref, atol=1e-4, rtol=0), float((out - ref).abs().max())
    int8 = copy.deepcopy(model)
    use_runtime(int8, Runtime("onnx", "int8"))
    quantized = int8.rerank_scores(QUERIES, candidates, batch_size=5)
    taus = [kendall(ref, out) for ref, out in zip(reference, quantized)]
    record = json.loads(next(Path(paths[0]).parent.glob("*.int8.json")).read_text(encoding="utf-8"))
    with capsys.disabled():
        print(f"\n{name} {settings}: int8 Kendall tau to torch per query {[round(t, 3) for t in taus]}, "
              f"probe cosine to fp32 min {record['cosine_min']:.4f} mean {record['cosine_mean']:.4f}")
    assert all(-1.0 <= t <= 1.0 for t in taus)
    assert record["quantize"] == "int8" and record["cosine_mean"] > 0.9
    # OpenVINO runs the same export: fp32 within 1e-4 of torch, bf16 (native bf16 CPUs) close.
    on_openvino = copy.deepcopy(model)
    use_runtime(on_openvino, Runtime("openvino"))
    for ref, out in zip(reference, on_openvino.rerank_scores(QUERIES, candidates, batch_size=5)):
        assert torch.allclose(out, ref, atol=1e-4, rtol=0), float((out - ref).abs().max())
    bf16 = copy.deepcopy(model)
    use_runtime(bf16, Runtime("openvino", precision="bf16"))
    taus = [kendall(ref, out) for ref, out in zip(reference, bf16.rerank_scores(QUERIES, candidates, batch_size=5))]
    with capsys.disabled():
        print(f"{name} {settings}: OpenVINO bf16 Kendall tau to torch per query {[round(t, 3) for t in taus]}")
    # NNCF's static int8 on OpenVINO, calibrated on the bundled DL20 texts through the model's tokenizer.
    static = copy.deepcopy(model)
    (ir,) = use_runtime(static, Runtime("openvino", "int8"))
    assert ir.suffixes[-2:] == [".ov-int8", ".xml"] and ir.with_suffix(".bin").is_file()
    taus = [kendall(ref, out) for ref, out in zip(reference, static.rerank_scores(QUERIES, candidates, batch_size=5))]
    record = json.loads(ir.with_suffix(".json").read_text(encoding="utf-8"))
    with capsys.disabled():
        print(f"{name} {settings}: OpenVINO static int8 Kendall tau to torch per query {[round(t, 3) for t in taus]}, "
              f"probe cosine to fp32 min {record['cosine_min']:.4f}")
    assert record["quantize"] == "openvino-int8" and record["calibration"] and record["bin_sha256"]
    assert record["cosine_mean"] > 0.9


def test_bi_encoder_round_trip_and_zero_shot_cache(backbone: Path, cache: Path) -> None:
    """RepBERT (a Hugging Face folder used zero-shot) encodes alike on both backends; the export sits
    in the cache folder keyed by the weights, and the next load reuses it."""
    model = load_for_inference("repbert", backbone)
    texts = sorted(documents().values())[:9]
    reference = model.encode(texts, is_query=False, batch_size=4)
    first = load_for_inference("repbert", backbone)
    (path,) = use_runtime(first, Runtime("onnx"), checkpoint=backbone)
    assert path.parent.parent == cache / "onnx"
    assert torch.allclose(first.encode(texts, is_query=False, batch_size=4), reference, atol=1e-4, rtol=0)
    stamp = path.stat().st_mtime_ns
    second = load_for_inference("repbert", backbone)
    assert use_runtime(second, Runtime("onnx"), checkpoint=backbone) == [path]
    assert path.stat().st_mtime_ns == stamp  # reused, not rebuilt


def test_openvino_int8_cache_reuse_damage_and_calibration(backbone: Path, cache: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The static int8 IR is reused; a damaged weights file or other calibration inputs rebuild it."""
    texts = sorted(documents().values())[:6]
    first = load_for_inference("repbert", backbone)
    (ir,) = use_runtime(first, Runtime("openvino", "int8"), checkpoint=backbone)
    vectors = first.encode(texts, is_query=False, batch_size=4)
    stamp = ir.stat().st_mtime_ns
    again = load_for_inference("repbert", backbone)
    assert use_runtime(again, Runtime("openvino", "int8"), checkpoint=backbone) == [ir]
    assert ir.stat().st_mtime_ns == stamp
    assert torch.equal(again.encode(texts, is_query=False, batch_size=4), vectors)  # deterministic
    ir.with_suffix(".bin").write_bytes(b"damaged")
    rebuilt = load_for_inference("repbert", backbone)
    assert use_runtime(rebuilt, Runtime("openvino", "int8"), checkpoint=backbone) == [ir]
    assert torch.equal(rebuilt.encode(texts, is_query=False, batch_size=4), vectors)  # same calibration, same IR
    other = tmp_path / "calibration.tsv"
    other.write_text("passage\tanother calibration text entirely\npair\ta query\ta passage\n", encoding="utf-8")
    monkeypatch.setattr(openvino_backend, "CALIBRATION_FILE", other)
    record = json.loads(ir.with_suffix(".json").read_text(encoding="utf-8"))
    recalibrated = load_for_inference("repbert", backbone)
    use_runtime(recalibrated, Runtime("openvino", "int8"), checkpoint=backbone)
    assert json.loads(ir.with_suffix(".json").read_text(encoding="utf-8"))["calibration"] != record["calibration"]


def test_openvino_int8_refuses_a_model_without_tokenizer(backbone: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = load_for_inference("repbert", backbone)
    monkeypatch.setattr(openvino_backend, "model_tokenizer", lambda model: None)
    with pytest.raises(RankkitError, match="has no tokenizer; use --backend onnx --quantize int8"):
        use_runtime(model, Runtime("openvino", "int8"))


def test_export_keyed_by_content_in_the_cache_rebuilt_when_weights_change(backbone: Path, tmp_path: Path,
                                                                          cache: Path) -> None:
    """A checkpoint's export lives in the cache under its weights' key, never in the checkpoint's folder
    (issue 38: CHECKPOINT/onnx was written, even into a read-only checkpoint, and cleaned through a link)."""
    mono = get_model_class("mono")
    ck = save_model(build_model(mono, backbone), tmp_path / "ck", {})
    before = sorted(p.name for p in ck.iterdir())
    (path,) = use_runtime(load_for_inference("mono", ck), Runtime("onnx"), checkpoint=ck)
    assert path.parent.parent == cache / "onnx" and sorted(p.name for p in ck.iterdir()) == before
    assert use_runtime(load_for_inference("mono", ck), Runtime("onnx"), checkpoint=ck) == [path]
    # "Re-train": other encoder weights saved into the same folder -> a new export under another key.
    changed = load_for_inference("mono", ck)
    with torch.no_grad():
        changed.pairs.encoder.base_model.embeddings.word_embeddings.weight.mul_(1.5)
    save_model(changed, ck, {})
    (new,) = use_runtime(load_for_inference("mono", ck), Runtime("onnx"), checkpoint=ck)
    assert new != path and new.is_file() and new.parent != path.parent and new.parent.parent == cache / "onnx"
    assert sorted(p.name for p in new.parent.iterdir()) == sorted([new.name, new.with_suffix(".json").name])
    assert not (ck / "onnx").exists()


def test_damaged_cached_export_is_rebuilt(backbone: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mono = get_model_class("mono")
    model = build_model(mono, backbone).eval()
    reference = model.rerank_scores(QUERIES, CANDIDATES)
    (path,) = use_runtime(copy.deepcopy(model), Runtime("onnx"))
    path.write_bytes(path.read_bytes()[:1000])  # truncated
    capsys.readouterr()
    again = copy.deepcopy(model)
    assert use_runtime(again, Runtime("onnx")) == [path]
    assert "is damaged" in capsys.readouterr().err
    for ref, out in zip(reference, again.rerank_scores(QUERIES, CANDIDATES)):
        assert torch.allclose(out, ref, atol=1e-4, rtol=0)


def test_failed_check_refuses_and_leaves_nothing(backbone: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = build_model(get_model_class("mono"), backbone).eval()
    monkeypatch.setattr(export, "TOLERANCE", -1.0)  # any difference is too large
    with pytest.raises(RankkitError, match="differs from torch by .* refusing it"):
        use_runtime(model, Runtime("onnx"))
    assert not [p for p in cache.rglob("*") if p.is_file()]
    assert not isinstance(model.pairs.encoder, OrtEncoder)


def test_openvino_check_refuses_a_differing_run(backbone: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenVINO's fp32 run is checked against torch each time it is compiled, and refused when it differs."""
    model = build_model(get_model_class("mono"), backbone).eval()
    use_runtime(copy.deepcopy(model), Runtime("onnx"))  # the checked ONNX export, now cached
    monkeypatch.setattr(export, "TOLERANCE", -1.0)
    with pytest.raises(RankkitError, match="OpenVINO's fp32 run of .* differs from torch"):
        use_runtime(model, Runtime("openvino"))
    assert not isinstance(model.pairs.encoder, OrtEncoder)


def test_export_uses_eager_attention_and_restores_the_model(backbone: Path) -> None:
    """The export runs a transformers encoder with eager attention (no SDPA mask nodes) and gives it back as it was."""
    import onnx

    model = build_model(get_model_class("mono"), backbone).eval()
    encoder = model.pairs.encoder
    before = encoder.config._attn_implementation
    (path,) = use_runtime(copy.deepcopy(model), Runtime("onnx"))
    assert encoder.config._attn_implementation == before
    ops = {node.op_type for node in onnx.load(str(path)).graph.node}
    assert "IsNaN" not in ops and "Softmax" in ops


def test_a_model_without_encoder_slots_refuses_onnx(backbone: Path) -> None:
    from rankkit.models.base import RankingModel

    class Plain(RankingModel):  # a plug-in that declares no exportable encoder
        name = "plain"

        def __init__(self) -> None:
            super().__init__(get_model_class("mono").config_class())
            self.weight = torch.nn.Parameter(torch.zeros(1))

        for_training = load = save = prepare = forward = None  # type: ignore[assignment]

    with pytest.raises(RankkitError, match="model 'plain' runs on --backend torch only"):
        use_runtime(Plain(), Runtime("onnx"))
    use_runtime(Plain(), Runtime("torch", threads=1))  # torch is always available


def test_set_encoder_scores_stay_permutation_invariant_on_onnx(backbone: Path) -> None:
    model = build_model(get_model_class("set-encoder"), backbone).eval()
    use_runtime(model, Runtime("onnx"))
    texts = CANDIDATES[0]
    order = [3, 0, 6, 1, 5, 2, 4]
    (a,), (b,) = model.rerank_scores(QUERIES[:1], [texts]), model.rerank_scores(QUERIES[:1], [[texts[i] for i in order]])
    assert torch.allclose(a[order], b, atol=1e-5)


@pytest.mark.parametrize("variant", ["densetrans", "no-top-dense", "no-dense", "concat"])
def test_densetrans_round_trip(backbone: Path, variant: str) -> None:
    """DenseTrans exports through its explicit-attention form, checked against the network itself."""
    model = build_model(get_model_class("densetrans"), backbone,
                        {"d_model": 24, "num_heads": 2, "num_layers": 2, "variant": variant}).eval()
    texts = sorted(documents().values())[:9] + ["apple"]
    reference = model.encode(texts, is_query=False, batch_size=4)
    fp32 = copy.deepcopy(model)
    use_runtime(fp32, Runtime("onnx"))
    assert torch.allclose(fp32.encode(texts, is_query=False, batch_size=4), reference, atol=1e-4, rtol=0)
    int8 = copy.deepcopy(model)
    use_runtime(int8, Runtime("onnx", "int8"))
    cosine = torch.nn.functional.cosine_similarity(int8.encode(texts, is_query=False, batch_size=4), reference)
    assert float(cosine.min()) > 0.9


def test_int8_u8_quantizes_the_weights_unsigned(backbone: Path, cache: Path) -> None:
    """--quantize int8-u8: its own cached export (QUInt8 weights, so u8 x u8 products), close to fp32, beside int8."""
    import onnx

    model = build_model(get_model_class("mono"), backbone).eval()
    reference = model.rerank_scores(QUERIES, CANDIDATES, batch_size=5)
    unsigned, signed = copy.deepcopy(model), copy.deepcopy(model)
    (u8,) = use_runtime(unsigned, Runtime("onnx", "int8-u8"))
    (s8,) = use_runtime(signed, Runtime("onnx", "int8"))
    assert u8.name.endswith(".int8-u8.onnx") and s8.name.endswith(".int8.onnx") and u8.parent == s8.parent

    def weight_types(path: Path) -> set[int]:
        graph = onnx.load(str(path)).graph
        return {t.data_type for t in graph.initializer if t.name.endswith("_quantized")}

    assert weight_types(u8) == {onnx.TensorProto.UINT8} and onnx.TensorProto.INT8 in weight_types(s8)
    record = json.loads(u8.with_name(u8.name.replace(".onnx", ".json")).read_text(encoding="utf-8"))
    assert record["quantize"] == "int8-u8" and record["cosine_mean"] > 0.9
    for ref, out in zip(reference, unsigned.rerank_scores(QUERIES, CANDIDATES, batch_size=5)):
        assert out.shape == ref.shape and float((out - ref).abs().max()) < 1e-2  # scores ~5e-3 apart
    assert Runtime("onnx", "int8-u8", 2).describe() == "onnx int8-u8, 2 threads"
    with pytest.raises(RankkitError, match="int8-u8 needs --backend onnx"):
        use_runtime(copy.deepcopy(model), Runtime("openvino", "int8-u8"))


@pytest.mark.parametrize("settings, device, message", [
    ({"backend": "onnx", "precision": "bf16"}, None, "--precision bf16 runs on --backend torch or openvino"),
    ({"backend": "openvino", "precision": "fp16"}, None, "--backend openvino runs --precision fp32 or bf16"),
    ({"backend": "openvino"}, torch.device("cuda"), "--backend openvino runs on the CPU"),
    ({"backend": "torch", "quantize": "int8"}, None, "--quantize int8 needs --backend onnx"),
    ({"backend": "onnx"}, torch.device("cuda"), "--backend onnx runs on the CPU"),
    ({"backend": "tensorrt"}, None, "unknown backend 'tensorrt'"),
    ({"backend": "onnx", "quantize": "int4"}, None, "unknown quantization 'int4'"),
    ({"threads": 0}, None, "--threads must be at least 1"),
    ({"precision": "fp16"}, torch.device("cpu"), "fp16 needs a CUDA device"),
])
def test_runtime_refusals(settings: dict[str, Any], device: torch.device | None, message: str) -> None:
    """A bad value or combination is refused when the runtime is made; one the device cannot run, by its check."""
    with pytest.raises(RankkitError, match=message):
        Runtime(**settings).check(device if device is not None else torch.device("cpu"))


def test_bf16_torch_backend_scores_close_to_fp32(backbone: Path) -> None:
    from rankkit.devices import autocast

    model = build_model(get_model_class("mono"), backbone).eval()
    reference = model.rerank_scores(QUERIES, CANDIDATES)
    with autocast("bf16", torch.device("cpu")):
        got = model.rerank_scores(QUERIES, CANDIDATES)
    for ref, out in zip(reference, got):
        assert out.dtype == torch.float64 and torch.allclose(out, ref, atol=0.05)


def test_the_device_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """``auto`` is CUDA for torch when present and the CPU for a CPU backend; an explicit device a backend
    cannot use is refused by name, before a device is picked."""
    from rankkit.runtime import device_name, inference_device

    assert inference_device("auto", Runtime("onnx")) == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert inference_device("auto", Runtime()) == torch.device("cuda", 0)
    assert inference_device(None, Runtime(), local_rank=3) == torch.device("cuda", 1)
    for backend in ("onnx", "openvino"):
        assert device_name("auto", Runtime(backend)) == "cpu"
        assert inference_device("auto", Runtime(backend)) == torch.device("cpu")
        with pytest.raises(RankkitError, match=f"--backend {backend} runs on the CPU"):
            inference_device("cuda", Runtime(backend))
