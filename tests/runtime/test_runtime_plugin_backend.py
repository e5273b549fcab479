"""A new inference backend costs one file plus one registry line: a backend defined here runs through the CLI.

``OnnxBasic`` below is that one file: the checked ONNX export on ONNX Runtime with only its basic
graph optimisations (no fused attention or GELU kernels: a backend for tracking down a numerical
difference of the fused kernels). ``register_backend(OnnxBasic)`` is the one line; nothing else in
rankkit changes, yet ``rankkit rerank``, ``index --kind dense`` and ``retrieve`` take
``--backend onnx-basic``, refuse what it does not declare (``--quantize int8``, ``--device cuda``)
in one line, and ``rankkit doctor`` lists it with its install hint.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar, Iterator

import pytest
from torch import nn
from training_helpers import TOPICS, build_model, documents, tiny_backbone, write_corpus, write_topics

from rankkit.formats import read_run, write_run
from rankkit.indexes import read_manifest
from rankkit.models.checkpoint import save_model
from rankkit.models.cross_encoders.mono import Mono
from rankkit.models.encoder_slots import EncoderSlot
from rankkit.runtime import BACKENDS, Backend, RuntimeSettings, register_backend
from rankkit.runtime.adapter import OrtEncoder
from rankkit.runtime.export import prepare_export


class OnnxBasic(Backend):
    """The checked fp32 ONNX export on ONNX Runtime, basic graph optimisations only."""

    name = "onnx-basic"
    engine = "ONNX Runtime (basic optimisations)"
    quantizations: ClassVar[dict[str, str]] = {"none": "fp32"}
    requires = ("onnxruntime", "onnx")
    install_hint = "pip install onnxruntime onnx"

    def encoder(self, slot: EncoderSlot, runtime: RuntimeSettings, checkpoint: str | os.PathLike[str] | None,
                model: nn.Module) -> tuple[nn.Module, Path]:
        import onnxruntime as ort

        path = prepare_export(slot, checkpoint)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.intra_op_num_threads = runtime.threads or 1
        session = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
        return OrtEncoder(session, slot, getattr(slot.module, "config", None), path.name), path


@pytest.fixture(scope="module", autouse=True)
def registered() -> Iterator[None]:
    register_backend(OnnxBasic)  # the one registry line (undone afterwards, for the other test modules)
    yield
    del BACKENDS["onnx-basic"]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("plugin-backend")
    backbone = tiny_backbone(root / "tiny", dropout=0.0)
    docids = sorted(documents())
    write_run(root / "first.txt", {f"t{i}": {d: float(-k) for k, d in enumerate(docids)} for i in range(len(TOPICS))},
              "first")
    return {"backbone": backbone, "corpus": write_corpus(root / "corpus.jsonl"), "topics": write_topics(root / "topics.tsv"),
            "run": root / "first.txt", "mono": save_model(build_model(Mono, backbone), root / "mono", {})}


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RANKKIT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def rerank(cli: Any, data: dict[str, Path], out: Path, *extra: object) -> Any:
    return cli("rerank", "--model", "mono", "--checkpoint", data["mono"], "--run", data["run"], "--topics",
               data["topics"], "--corpus", data["corpus"], "--output", out, "--depth", 10, *extra)


def test_rerank_on_the_plugin_backend_matches_torch(cli: Any, data: dict[str, Path], tmp_path: Path) -> None:
    assert rerank(cli, data, tmp_path / "torch.run").code == 0
    result = rerank(cli, data, tmp_path / "basic.run", "--backend", "onnx-basic", "--threads", 1)
    assert result.code == 0, result.stderr
    assert "on ONNX Runtime (basic optimisations) (onnx-basic, 1 thread)" in result.stderr
    torch_run, basic = read_run(tmp_path / "torch.run"), read_run(tmp_path / "basic.run")
    for qid, docs in torch_run.items():
        for docid, score in docs.items():
            assert basic[qid][docid] == pytest.approx(score, abs=1e-4)


def test_dense_index_and_retrieve_on_the_plugin_backend(cli: Any, data: dict[str, Path], tmp_path: Path) -> None:
    index = tmp_path / "index"
    result = cli("index", "--kind", "dense", "--model", "repbert", "--checkpoint", data["backbone"], "--corpus",
                 data["corpus"], "--index", index, "--backend", "onnx-basic")
    assert result.code == 0, result.stderr
    assert read_manifest(index, kinds=("dense",))["runtime"]["backend"] == "onnx-basic"
    result = cli("retrieve", "--model", "repbert", "--index", index, "--topics", data["topics"], "--output",
                 tmp_path / "dense.run", "--k", 3, "--backend", "onnx-basic")
    assert result.code == 0, result.stderr
    assert len(read_run(tmp_path / "dense.run")) == len(TOPICS)


@pytest.mark.parametrize("extra, message", [
    (("--backend", "onnx-basic", "--quantize", "int8"),
     "--quantize int8 needs --backend onnx (ONNX Runtime's dynamic int8) or openvino (NNCF's static int8)"),
    (("--backend", "onnx-basic", "--device", "cuda"), "--backend onnx-basic runs on the CPU; use --device cpu"),
    (("--backend", "onnx-basic", "--precision", "bf16"), "--backend onnx-basic runs --precision fp32"),
])
def test_what_the_plugin_backend_does_not_declare_is_refused(cli: Any, data: dict[str, Path], tmp_path: Path,
                                                             extra: tuple[str, ...], message: str) -> None:
    result = rerank(cli, data, tmp_path / "out.run", *extra)
    assert result.code == 2 and message in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert not (tmp_path / "out.run").exists()


def test_doctor_lists_the_plugin_backend() -> None:
    from rankkit import doctor

    (line,) = [c for c in doctor.check_backends() if c.name == OnnxBasic.engine]
    assert line.ok and "onnxruntime" in line.detail and not line.required
