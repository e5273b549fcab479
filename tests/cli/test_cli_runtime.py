"""``--backend``, ``--quantize``, ``--threads``, ``--precision`` on rerank, explain, index --kind dense and retrieve."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from training_helpers import TOPICS, build_model, documents, tiny_backbone, write_corpus, write_topics

from rankkit.formats import read_run, write_run
from rankkit.indexes import read_manifest
from rankkit.models.checkpoint import save_model
from rankkit.models.cross_encoders.matrank import MatRank
from rankkit.models.cross_encoders.mono import Mono


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cli-runtime")
    backbone = tiny_backbone(root / "tiny", dropout=0.0)
    docids = sorted(documents())
    write_run(root / "first.txt", {f"t{i}": {d: float(-k) for k, d in enumerate(docids)} for i in range(len(TOPICS))},
              "first")
    return {"root": root, "backbone": backbone, "corpus": write_corpus(root / "corpus.jsonl"),
            "topics": write_topics(root / "topics.tsv"), "run": root / "first.txt",
            "mono": save_model(build_model(Mono, backbone), root / "mono", {}),
            "matrank": save_model(build_model(MatRank, backbone, {"encoder": "bi"}), root / "matrank", {})}


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RANKKIT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def rerank(cli: Any, data: dict[str, Path], out: Path, *extra: object) -> Any:
    return cli("rerank", "--model", "mono", "--checkpoint", data["mono"], "--run", data["run"], "--topics",
               data["topics"], "--corpus", data["corpus"], "--output", out, "--depth", 10, *extra)


def test_rerank_onnx_matches_torch_and_int8_runs(cli: Any, data: dict[str, Path], tmp_path: Path, cache: Path) -> None:
    runs = {}
    for name, extra in (("torch", ()), ("onnx", ("--backend", "onnx", "--threads", 1)),
                        ("int8", ("--backend", "onnx", "--quantize", "int8")), ("bf16", ("--precision", "bf16")),
                        ("openvino", ("--backend", "openvino", "--threads", 1)),
                        ("openvino-again", ("--backend", "openvino", "--threads", 1)),
                        ("openvino-bf16", ("--backend", "openvino", "--precision", "bf16")),
                        ("openvino-int8", ("--backend", "openvino", "--quantize", "int8", "--threads", 1)),
                        ("openvino-int8-again", ("--backend", "openvino", "--quantize", "int8", "--threads", 1))):
        result = rerank(cli, data, tmp_path / f"{name}.run", *extra)
        assert result.code == 0, result.stderr
        runs[name] = read_run(tmp_path / f"{name}.run")
    assert not (data["mono"] / "onnx").exists() and (cache / "onnx").is_dir()  # in the cache, never the checkpoint
    for qid, docs in runs["torch"].items():
        for docid, score in docs.items():
            assert runs["onnx"][qid][docid] == pytest.approx(score, abs=1e-4)
            assert runs["openvino"][qid][docid] == pytest.approx(score, abs=1e-4)
        assert set(runs["int8"][qid]) == set(docs) and set(runs["bf16"][qid]) == set(docs)
        assert set(runs["openvino-bf16"][qid]) == set(docs) and set(runs["openvino-int8"][qid]) == set(docs)
    # OpenVINO reruns byte for byte (same inputs, same threads), the static int8 from its cached IR too.
    assert (tmp_path / "openvino.run").read_bytes() == (tmp_path / "openvino-again.run").read_bytes()
    assert (tmp_path / "openvino-int8.run").read_bytes() == (tmp_path / "openvino-int8-again.run").read_bytes()
    assert len(list((cache / "onnx").rglob("*.ov-int8.xml"))) == 1


@pytest.mark.parametrize("extra, message", [
    (("--backend", "onnx", "--precision", "bf16"), "--precision bf16 runs on --backend torch or openvino"),
    (("--backend", "torch", "--quantize", "int8"), "--quantize int8 needs --backend onnx"),
    (("--backend", "openvino", "--precision", "fp16"), "--backend openvino runs --precision fp32 or bf16"),
    (("--backend", "tvm"), "unknown backend 'tvm'"),
    (("--backend", "onnx", "--device", "cpu", "--threads", 0), "--threads"),
])
def test_rerank_refusals_are_one_line(cli: Any, data: dict[str, Path], tmp_path: Path, extra: tuple[Any, ...],
                                      message: str) -> None:
    result = rerank(cli, data, tmp_path / "out.run", *extra)
    assert result.code == 2 and message in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert not (tmp_path / "out.run").exists()


def test_explain_on_onnx(cli: Any, data: dict[str, Path], tmp_path: Path) -> None:
    outs = {}
    for backend in ("torch", "onnx"):
        result = cli("explain", "--model", "matrank", "--checkpoint", data["matrank"], "--run", data["run"],
                     "--topics", data["topics"], "--corpus", data["corpus"], "--qid", "t0", "--depth", 5,
                     "--output", tmp_path / f"{backend}.png", "--backend", backend)
        assert result.code == 0, result.stderr
        outs[backend] = result.stdout
    assert outs["onnx"] == outs["torch"]  # the same table (votes, beta, omega to 3-4 decimals)


@pytest.mark.parametrize("model", ["repbert", "densetrans"])
def test_dense_index_and_retrieve_on_onnx(cli: Any, data: dict[str, Path], tmp_path: Path, model: str) -> None:
    checkpoint = data["backbone"]
    if model == "densetrans":
        from rankkit.models.bi_encoders.densetrans import DenseTrans

        checkpoint = save_model(build_model(DenseTrans, data["backbone"], {"d_model": 24, "num_heads": 2}),
                                tmp_path / "densetrans", {})
    runs = {}
    for backend in ("torch", "onnx", "openvino"):
        index = tmp_path / f"index-{backend}"
        result = cli("index", "--kind", "dense", "--model", model, "--checkpoint", checkpoint,
                     "--corpus", data["corpus"], "--index", index, "--backend", backend, "--threads", 1)
        assert result.code == 0, result.stderr
        meta = read_manifest(index, kinds=("dense",))
        assert meta["runtime"] == {"backend": backend, "quantize": "none", "precision": "fp32"}
        result = cli("retrieve", "--model", model, "--index", index, "--topics", data["topics"], "--output",
                     tmp_path / f"{backend}.run", "--k", 5, "--backend", backend)
        assert result.code == 0, result.stderr
        runs[backend] = read_run(tmp_path / f"{backend}.run")
    for qid, docs in runs["torch"].items():
        for backend in ("onnx", "openvino"):
            assert list(runs[backend][qid]) == list(docs)
            for docid, score in docs.items():
                assert runs[backend][qid][docid] == pytest.approx(score, abs=1e-4)


def test_resumed_encoding_must_use_the_same_backend(cli: Any, data: dict[str, Path], tmp_path: Path) -> None:
    index = tmp_path / "index"
    common = ["index", "--kind", "dense", "--model", "repbert", "--checkpoint", data["backbone"], "--corpus",
              data["corpus"], "--index", index]
    assert cli(*common, "--shard", "0/2").code == 0
    result = cli(*common, "--shard", "0/2", "--backend", "onnx", "--quantize", "int8")
    assert result.code == 2 and "other settings (runtime)" in result.stderr


def test_backend_options_of_bm25_are_refused(cli: Any, data: dict[str, Path], tmp_path: Path) -> None:
    result = cli("retrieve", "--model", "bm25", "--index", tmp_path, "--topics", data["topics"], "--output",
                 tmp_path / "x.run", "--backend", "onnx")
    assert result.code == 2 and "--backend applies to" in result.stderr


def test_one_device_rule_with_cuda_present(cli: Any, data: dict[str, Path], tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """With CUDA present, every command runs a CPU backend on the CPU under --device auto (retrieve used to
    refuse --backend openvino there while rerank ran it) and refuses it under --device cuda."""
    import torch

    index = tmp_path / "index"
    assert cli("index", "--kind", "dense", "--model", "repbert", "--checkpoint", data["backbone"], "--corpus",
               data["corpus"], "--index", index, "--backend", "openvino", "--device", "cpu").code == 0
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    runs = {"retrieve": ("retrieve", "--model", "repbert", "--index", index, "--topics", data["topics"], "--k", 3,
                         "--backend", "openvino", "--output"),
            "rerank": ("rerank", "--model", "mono", "--checkpoint", data["mono"], "--run", data["run"], "--topics",
                       data["topics"], "--corpus", data["corpus"], "--depth", 5, "--backend", "openvino", "--output"),
            "index": ("index", "--kind", "dense", "--model", "repbert", "--checkpoint", data["backbone"], "--corpus",
                      data["corpus"], "--backend", "onnx", "--index")}
    for name, command in runs.items():
        result = cli(*command, tmp_path / f"{name}.out")
        assert result.code == 0, f"{name}: {result.stderr}"
        refused = cli(*command[:-1], "--device", "cuda", command[-1], tmp_path / f"{name}.cuda")
        assert refused.code == 2 and "runs on the CPU; use --device cpu" in refused.stderr, f"{name}: {refused.stderr}"
        assert not (tmp_path / f"{name}.cuda").exists()
