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


@pytest.fixture(scope="session")
def backbone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random BERT (2 layers, 24 wide, no dropout, 64 positions) most model tests share; read-only."""
    from rankkit.testing import tiny_backbone

    return tiny_backbone(tmp_path_factory.mktemp("backbone") / "tiny", dropout=0.0)


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


#: Markers by test module (paths relative to tests/; a folder ends in "/"): ``java`` starts the JVM
#: (Anserini), ``openvino`` runs the OpenVINO backend, ``slow`` is a module whose tests take 2.5 s or
#: more in all (measured with ``pytest --durations=0``). ``make test-fast`` runs the rest in under a minute.
MODULE_MARKS: dict[str, tuple[str, ...]] = {
    "java": ("lexical/", "docstore/test_docstore.py", "training/test_mine.py", "test_pipeline_e2e.py",
             "reliability/test_interrupts.py", "reliability/test_bad_inputs.py", "api/test_api.py",
             "api/test_api_notebook.py", "api/test_readme_interop.py", "dense/test_dense_cli.py", "test_doctor.py",
             "formats/test_formats_corpus.py", "models/test_interop_sentence_transformers.py",
             "reliability/test_reliability_jvm.py"),
    "openvino": ("runtime/test_runtime.py", "cli/test_cli_runtime.py", "reliability/test_reliability_interrupts.py",
                 "reliability/test_reliability_concurrency.py", "runtime/test_runtime_auto.py"),
    "slow": ("reliability/", "runtime/test_runtime.py", "reranking/test_distributed_inference.py", "api/",
             "models/test_plugin_entry_points.py", "test_hub.py", "test_console.py", "test_doctor.py",
             "test_pipeline_e2e.py", "training/test_training_ddp.py", "training/test_training_recipes.py",
             "training/test_training_precision.py", "training/test_training_curves.py",
             "training/test_training_frozen.py", "training/test_training_loader.py", "training/test_training_schedule.py",
             "training/test_training_engine.py", "training/test_training_data.py", "cli/test_cli_models.py",
             "cli/test_cli_runtime.py", "formats/test_formats_interop.py", "fusion/test_fusion.py",
             "models/test_models_bigbird.py", "lexical/", "runtime/test_gpu_suite.py", "serve/"),
}
TESTS = Path(__file__).resolve().parent


def pytest_configure(config: pytest.Config) -> None:
    for marker, what in (("java", "starts the JVM (Anserini through pyserini)"),
                         ("openvino", "runs the OpenVINO backend (compiles models, calibrates int8)"),
                         ("slow", "in a test module that takes 2.5 s or more (make test-fast leaves it out)")):
        config.addinivalue_line("markers", f"{marker}: {what}")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Markers from :data:`MODULE_MARKS`; and the tests whose DataLoader workers fork this process run
    first: a fork after OpenVINO (the backend tests) has started its thread pools hands the workers a
    broken copy of them (seen in the suite: batches that differ from the in-thread ones, once a segfault
    at worker shutdown). A `rankkit train` process never loads OpenVINO; only a test session mixes the two."""
    for item in items:
        where = item.path.resolve().relative_to(TESTS).as_posix()
        for marker, places in MODULE_MARKS.items():
            if any(where == place or (place.endswith("/") and where.startswith(place)) for place in places):
                item.add_marker(marker)
    forking = [item for item in items if item.path.name == "test_training_loader.py"]
    items[:] = forking + [item for item in items if item.path.name != "test_training_loader.py"]
