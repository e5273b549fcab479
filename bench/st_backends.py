#!/usr/bin/env python
"""sentence-transformers' ONNX / OpenVINO backends, run by ``bench/inference.py`` in a peer environment.

    PEER_PYTHON bench/st_backends.py JOB.json RESULT.json

sentence-transformers' ``backend="onnx"`` and ``"openvino"`` load through optimum-onnx and
optimum-intel, which pin older transformers than rankkit's stack (optimum-onnx 0.1: transformers
< 4.58; optimum-intel 2.2: < 5.6), so they cannot be installed beside rankkit. ``bench/inference.py
--peer-python PYTHON`` writes the job (the same weights and inputs as its own rows) and runs this
script with each peer interpreter, one system after the other, in the same benchmark run. This file
imports only sentence-transformers, its backends, torch and numpy (no rankkit).

The job: ``{"threads", "batch_size", "systems": [...], "bi_folder", "ce_folder", "ce_max_length",
"queries", "passages" (per query), "chunks" ([start, end) query ranges), "texts" (to encode),
"work" (a writable folder)}``. Systems: ``torch``, ``onnx``, ``onnx-int8`` (dynamic int8,
``export_dynamic_quantized_onnx_model`` with the config for this CPU: ``avx512_vnni`` or ``avx2``),
``openvino``, ``openvino-int8`` (``export_static_quantized_openvino_model``: NNCF post-training
static int8 calibrated on the job's ``calibration`` texts, the sentence-transformers docs' setting).
The result: per system and task (``bi``, ``mono``, ``encode``) the scores or vectors (``.npy``
beside RESULT.json), the seconds of the timed call and the set-up seconds; or the error when a
system cannot run here.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
import traceback
from pathlib import Path
from typing import Any


def cpu_quantization_config() -> str:
    """sentence-transformers' dynamic int8 config that suits this CPU."""
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    return "avx512_vnni" if "avx512_vnni" in flags else "avx2"


def copy_folder(source: str, target: Path) -> Path:
    """A writable copy of a model folder (the exports are written into it)."""
    if not target.is_dir():
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("onnx", "openvino", "*.onnx"))
    return target


def load(kind: str, system: str, folder: Path, job: dict[str, Any]) -> Any:
    """The sentence-transformers model ``kind`` (bi or mono) on ``system``, exporting what it needs."""
    import torch
    from sentence_transformers import CrossEncoder, SentenceTransformer

    def make(backend: str, **model_kwargs: Any) -> Any:
        if kind == "bi":
            return SentenceTransformer(str(folder), device="cpu", backend=backend, model_kwargs=model_kwargs or None)
        return CrossEncoder(str(folder), num_labels=1, max_length=job["ce_max_length"], device="cpu",
                            backend=backend, activation_fn=torch.nn.Identity(), model_kwargs=model_kwargs or None)

    if system in ("torch", "onnx", "openvino"):
        return make(system)
    if system == "onnx-int8":
        from sentence_transformers import export_dynamic_quantized_onnx_model

        config = cpu_quantization_config()
        name = f"model_qint8_{config}.onnx"
        if not (folder / "onnx" / name).is_file():
            base = make("onnx")
            base.save_pretrained(str(folder))  # writes onnx/model.onnx beside the weights
            export_dynamic_quantized_onnx_model(base, config, str(folder), push_to_hub=False, create_pr=False)
        return make("onnx", file_name=f"onnx/{name}")
    if system == "openvino-int8":
        name = "openvino_model_qint8_quantized.xml"
        if not (folder / "openvino" / name).is_file():
            static_int8_openvino(make("openvino"), folder, name, job["calibration"])
        return make("openvino", file_name=f"openvino/{name}")
    raise ValueError(f"unknown system {system!r}")


def static_int8_openvino(model: Any, folder: Path, name: str, texts: list[str]) -> None:
    """``export_static_quantized_openvino_model``'s recipe (NNCF static int8, default ``OVQuantizationConfig``,
    calibration texts padded to 384 tokens) with the calibration texts given here: that function only
    loads a calibration set from the Hub (the default GLUE SST-2), which this offline machine cannot."""
    import tempfile

    import nncf
    from optimum.intel.openvino import OVConfig, OVQuantizationConfig, OVQuantizer

    config = OVConfig(quantization_config=OVQuantizationConfig(num_samples=len(texts)))
    quantizer = OVQuantizer.from_pretrained(model.transformers_model)
    items = []
    for text in texts:
        encoded = model.tokenizer([text], padding="max_length", max_length=384, truncation=True, return_tensors="np")
        items.append(dict(encoded))
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        quantizer.quantize(nncf.Dataset(items), save_directory=tmp, ov_config=config)
        (folder / "openvino").mkdir(exist_ok=True)
        xml = sorted(Path(tmp).rglob("*.xml"))
        if len(xml) != 1:
            raise RuntimeError(f"the quantizer wrote {[str(x) for x in Path(tmp).rglob('*')]}, not one OpenVINO model")
        for suffix in (".xml", ".bin"):
            xml[0].with_suffix(suffix).replace(folder / "openvino" / name.replace(".xml", suffix))


def run_task(kind: str, model: Any, job: dict[str, Any]) -> tuple[Any, float]:
    """Score the job's candidates (bi: cosine of normalised MiniLM vectors; mono: CrossEncoder) or encode."""
    import numpy as np

    queries, passages, batch = job["queries"], job["passages"], job["batch_size"]
    started = time.perf_counter()
    if kind == "encode":
        vectors = model.encode(job["texts"], batch_size=batch, convert_to_numpy=True)
        return np.asarray(vectors, dtype=np.float32), time.perf_counter() - started
    out: list[list[float]] = []
    for a, b in job["chunks"]:
        if kind == "bi":
            q = model.encode(queries[a:b], batch_size=batch, convert_to_numpy=True)
            d = model.encode([t for p in passages[a:b] for t in p], batch_size=batch, convert_to_numpy=True)
            start = 0
            for i, p in enumerate(passages[a:b]):
                out.append((d[start:start + len(p)] @ q[i]).astype(float).tolist())
                start += len(p)
        else:
            flat = [(q, t) for q, p in zip(queries[a:b], passages[a:b]) for t in p]
            s = model.predict(flat, batch_size=batch, show_progress_bar=False)
            start = 0
            for p in passages[a:b]:
                out.append([float(x) for x in s[start:start + len(p)]])
                start += len(p)
    return out, time.perf_counter() - started


def main() -> None:
    import numpy as np
    import torch

    job_path, result_path = Path(sys.argv[1]), Path(sys.argv[2])
    job = json.loads(job_path.read_text(encoding="utf-8"))
    torch.set_num_threads(job["threads"])
    work = Path(job["work"])
    versions = {}
    for package in ("sentence_transformers", "transformers", "torch", "optimum", "onnxruntime", "openvino"):
        try:
            versions[package] = __import__(package).__version__
        except Exception:  # noqa: BLE001 - a missing package is reported as such
            versions[package] = None
    result: dict[str, Any] = {"versions": versions, "rows": []}
    for system in job["systems"]:
        for kind in job["tasks"]:
            row: dict[str, Any] = {"system": system, "task": kind}
            try:
                source = job["bi_folder"] if kind in ("bi", "encode") else job["ce_folder"]
                folder = copy_folder(source, work / f"{system}-{'bi' if kind != 'mono' else 'mono'}")
                started = time.perf_counter()
                model = load("mono" if kind == "mono" else "bi", system, folder, job)
                row["setup_s"] = time.perf_counter() - started
                if system.startswith("openvino"):  # OpenVINO's CPU default is bf16 where the CPU has it natively
                    compiled = getattr(getattr(model, "transformers_model", None), "request", None)
                    if compiled is not None and hasattr(compiled, "get_property"):
                        row["precision"] = str(compiled.get_property("INFERENCE_PRECISION_HINT"))
                # Warm-up: the first call builds the backend's kernels.
                if kind == "mono":
                    model.predict([(job["queries"][0], job["passages"][0][0])], show_progress_bar=False)
                else:
                    model.encode(job["texts"][:8])
                value, seconds = run_task(kind, model, job)
                row["seconds"] = seconds
                if kind == "encode":
                    vectors_path = result_path.parent / f"st-{system}-encode.npy"
                    np.save(vectors_path, value)
                    row["vectors"] = str(vectors_path)
                else:
                    row["scores"] = value
                print(f"    peer {system:14} {kind:6} {seconds:7.1f} s", file=sys.stderr, flush=True)
            except Exception as error:  # noqa: BLE001 - the reason a peer cannot run is the result
                row["error"] = f"{type(error).__name__}: {error}".splitlines()[0][:400]
                row["traceback"] = traceback.format_exc()[-2000:]
                print(f"    peer {system:14} {kind:6} failed: {row['error']}", file=sys.stderr, flush=True)
            result["rows"].append(row)
            result_path.write_text(json.dumps(result), encoding="utf-8")
    result_path.write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main()
