"""Start-up (issue 39): ``rankkit COMMAND --help`` of every command, and every mistake on the command line,
answer without importing torch, transformers, tokenizers or an inference backend; those load only when a
command runs a model. (``rankkit train --help`` took 4.9 s and 457 MB importing torch to list model options.)

Import sets rather than wall times are asserted (a busy machine stretches any time); docs/RESULTS.md has the
times measured with /usr/bin/time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers", "tokenizers", "onnxruntime", "openvino", "faiss", "jnius", "pyserini", "scipy",
         "pandas", "matplotlib", "safetensors")

#: Runs each command line in one process, in order, and reports its exit code, its stderr and what heavy
#: modules it imported (a command run earlier in the process would hide one imported later: the first one
#: that imports something is the one named).
PROGRAM = f"""
import contextlib, io, json, sys
from rankkit.cli import main
for args in json.loads(sys.argv[1]):
    err = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            main(args)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 0
    heavy = sorted(m for m in {HEAVY!r} if m in sys.modules)
    print(json.dumps({{"args": args, "code": code, "stderr": err.getvalue(), "heavy": heavy}}))
"""


def run_all(lines: list[list[str]], cwd: Path) -> list[dict[str, object]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", PROGRAM, json.dumps(lines)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def commands() -> list[str]:
    from rankkit.cli import click_command

    return sorted(click_command().commands)


def test_every_commands_help_imports_no_model_library(tmp_path: Path) -> None:
    lines = [["--help"], ["-h"], *([name, flag] for name in commands() for flag in ("--help", "-h")),
             ["train", "--model", "set-encoder", "--help"], ["index", "--kind", "dense", "--help"], ["models"],
             ["models", "mono"]]
    for result in run_all(lines, tmp_path):
        assert result["code"] == 0, result
        assert result["heavy"] == [], f"rankkit {' '.join(result['args'])} imported {result['heavy']}"  # type: ignore[arg-type]


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, str]:
    run = tmp_path / "run"
    run.write_text("q1 Q0 d1 1 1.0 bm25\n", encoding="utf-8")
    topics = tmp_path / "topics.tsv"
    topics.write_text("q1\tquery\n", encoding="utf-8")
    corpus = tmp_path / "corpus.tsv"
    corpus.write_text("d1\ttext\n", encoding="utf-8")
    groups = tmp_path / "groups.jsonl"
    groups.write_text('{"query": "q", "positives": ["p"], "negatives": ["n"]}\n', encoding="utf-8")
    return {"run": str(run), "topics": str(topics), "corpus": str(corpus), "groups": str(groups),
            "out": str(tmp_path / "out")}


def test_every_command_line_mistake_is_one_line_before_any_model_library(tmp_path: Path, inputs: dict[str, str]) -> None:
    rerank = ["rerank", "--run", inputs["run"], "--topics", inputs["topics"], "--corpus", inputs["corpus"],
              "--output", inputs["out"]]
    train = ["train", "--train", inputs["groups"], "--output", inputs["out"]]
    mistakes = {
        "unknown option": [*rerank, "--model", "mono", "--nope"],
        "unknown model (rerank)": [*rerank, "--model", "nope"],
        "an option of another model": [*rerank, "--model", "mono", "--max-set-size", "3"],
        "a missing input": ["rerank", "--model", "mono", "--run", "missing.run", "--topics", inputs["topics"],
                            "--corpus", inputs["corpus"], "--output", inputs["out"]],
        "a value out of range": [*rerank, "--model", "mono", "--depth", "0"],
        "an unknown backend (rerank)": [*rerank, "--model", "mono", "--backend", "nope"],
        "a quantization the backend lacks": [*rerank, "--model", "mono", "--backend", "torch", "--quantize", "int8"],
        "a backend on a device it does not run": [*rerank, "--model", "mono", "--backend", "onnx", "--device", "cuda"],
        "an unknown backend (dense index)": ["index", "--kind", "dense", "--model", "repbert", "--corpus",
                                             inputs["corpus"], "--index", inputs["out"], "--backend", "nope"],
        "unknown model (train)": [*train, "--model", "nope"],
        "a bad model setting": [*train, "--model", "mono", "--encoder", "tri"],
        "a setting of another model": [*train, "--model", "mono", "--interaction-token", "int"],
        "a missing training file": ["train", "--model", "mono", "--train", "missing.jsonl", "--output", inputs["out"]],
        "a bad --workers": [*train, "--model", "mono", "--workers", "many"],
        "not a first-stage model": ["retrieve", "--model", "mono", "--index", inputs["corpus"], "--topics",
                                    inputs["topics"], "--output", inputs["out"]],
        "dense index of an unknown model": ["index", "--kind", "dense", "--model", "nope", "--corpus", inputs["corpus"],
                                            "--index", inputs["out"]],
    }
    results = run_all(list(mistakes.values()), tmp_path)
    assert len(results) == len(mistakes)
    for what, result in zip(mistakes, results):
        lines = str(result["stderr"]).splitlines()
        assert result["code"] == 2 and len(lines) == 1 and lines[0].startswith("rankkit: error: "), (what, result)
        assert result["heavy"] == [], f"{what}: imported {result['heavy']}"
