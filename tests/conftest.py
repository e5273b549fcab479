"""Shared test helpers: run the CLI in-process and capture its exit code and output."""

from __future__ import annotations

import os
import tempfile

# Tiny models run fastest single-threaded, and a busy 2-core machine thrashes when every test
# process (and CLI subprocess) starts its own pool of torch threads.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
# No heartbeat lines (printed off a terminal every few seconds) in tests that compare stderr
# line by line; tests/test_console.py turns it on where it is the subject.
os.environ.setdefault("RANKKIT_HEARTBEAT", "0")
# Docid tables go to the user cache by default; the tests keep theirs in a throw-away folder.
os.environ.setdefault("RANKKIT_CACHE_DIR", tempfile.mkdtemp(prefix="rankkit-test-cache-"))
# Nothing in the suite reaches the network, and no test sees the developer's own Hugging Face cache:
# hub ids resolve from a throw-away cache (tests/test_hub.py fills it, or serves it from 127.0.0.1).
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="rankkit-test-hf-home-")
os.environ.pop("HF_HUB_CACHE", None)
os.environ["HF_HUB_OFFLINE"] = "1"

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from rankkit.cli import main

DATA = Path(__file__).parent / "data"


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str


@pytest.fixture
def data_dir() -> Path:
    """``tests/data``: small real slices with their PROVENANCE files."""
    return DATA


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """Run ``rankkit ARGS...`` in-process; returns exit code, stdout and stderr."""

    def run(*args: object) -> CliResult:
        capsys.readouterr()
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    return run


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests whose DataLoader workers fork this process run first: a fork after OpenVINO (the backend
    tests) has started its thread pools hands the workers a broken copy of them (seen in the suite:
    batches that differ from the in-thread ones, once a segfault at worker shutdown). A `rankkit train`
    process never loads OpenVINO; only a test session mixes the two."""
    forking = [item for item in items if item.path.name == "test_training_loader.py"]
    items[:] = forking + [item for item in items if item.path.name != "test_training_loader.py"]
