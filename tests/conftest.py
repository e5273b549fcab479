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

import json
import platform
import resource
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

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


#: Capability markers by test module (paths relative to tests/; a folder ends in "/"): ``java`` starts the JVM
#: (Anserini), ``openvino`` runs the OpenVINO backend. ``slow`` is not listed by hand: it follows from the measured
#: CPU time of each module in :data:`DURATIONS` (:func:`slow_modules`).
MODULE_MARKS: dict[str, tuple[str, ...]] = {
    "java": ("lexical/", "docstore/test_docstore.py", "training/test_mine.py", "test_pipeline_e2e.py",
             "reliability/test_interrupts.py", "reliability/test_bad_inputs.py", "api/test_api.py",
             "api/test_api_notebook.py", "api/test_readme_interop.py", "dense/test_dense_cli.py", "test_doctor.py",
             "formats/test_formats_corpus.py", "models/test_interop_sentence_transformers.py",
             "reliability/test_reliability_jvm.py"),
    "openvino": ("runtime/test_runtime.py", "cli/test_cli_runtime.py", "reliability/test_reliability_interrupts.py",
                 "reliability/test_reliability_concurrency.py", "runtime/test_runtime_auto.py"),
}
TESTS = Path(__file__).resolve().parent

#: CPU seconds (this process and the child processes it waited for: CLI subprocesses, notebook kernels) each test
#: module took, measured with ``make durations`` (``RANKKIT_RECORD_DURATIONS=1``: every module run is written back
#: here) and committed, with the machine, its load and the date.
DURATIONS = TESTS / "durations.json"
#: A module that took this much CPU or more is ``slow``: ``make test-fast`` (``pytest --fast``) leaves it out.
SLOW_MODULE_CPU_SECONDS = 1.2
#: ``pytest --fast`` fails when a module takes more than this many times its measured CPU (and at least the floor
#: more, for modules measured near zero), capped at twice the slow threshold: past that it belongs to the slow set.
BUDGET_FACTOR, BUDGET_FLOOR_SECONDS = 3.0, 1.0
#: ``pytest --fast`` fails when the run, as it measures itself at its end (collection and imports included), took more
#: CPU than this: 27 s leaves room for the interpreter's start and exit (~2-3 s) under make test-fast's 30 s.
FAST_RUN_CPU_SECONDS = 27.0
RECORD_ENV = "RANKKIT_RECORD_DURATIONS"
FAST_MARKERS = "not slow and not java and not openvino"


def cpu_seconds() -> float:
    """User + system CPU time of this process and of its finished children."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def module_of(item: pytest.Item) -> str:
    return item.path.resolve().relative_to(TESTS).as_posix()


def measured() -> dict[str, float]:
    """Each module's recorded CPU seconds (:data:`DURATIONS`)."""
    if not DURATIONS.is_file():
        return {}
    modules = json.loads(DURATIONS.read_text(encoding="utf-8"))["modules"]
    return {name: float(seconds) for name, seconds in modules.items()}


def slow_modules(modules: dict[str, float]) -> set[str]:
    """The modules ``make test-fast`` leaves out: measured at :data:`SLOW_MODULE_CPU_SECONDS` or more."""
    return {name for name, seconds in modules.items() if seconds >= SLOW_MODULE_CPU_SECONDS}


def budget(seconds: float) -> float:
    """The most CPU a fast module measured at ``seconds`` may take in a ``--fast`` run."""
    return min(max(BUDGET_FACTOR * seconds, seconds + BUDGET_FLOOR_SECONDS), 2 * SLOW_MODULE_CPU_SECONDS)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--fast", action="store_true",
                     help=f"make test-fast: only '{FAST_MARKERS}' (slow: measured at {SLOW_MODULE_CPU_SECONDS:g} s of "
                          f"CPU or more in tests/durations.json), each module within its CPU budget, the whole run "
                          f"within {FAST_RUN_CPU_SECONDS:g} s of CPU")


def pytest_configure(config: pytest.Config) -> None:
    for marker, what in (("java", "starts the JVM (Anserini through pyserini)"),
                         ("openvino", "runs the OpenVINO backend (compiles models, calibrates int8)"),
                         ("slow", f"in a test module measured at {SLOW_MODULE_CPU_SECONDS:g} s of CPU or more "
                                  "(tests/durations.json; make test-fast leaves it out)")):
        config.addinivalue_line("markers", f"{marker}: {what}")
    if config.getoption("--fast"):
        config.option.markexpr = FAST_MARKERS
    if config.getoption("--fast") or os.environ.get(RECORD_ENV):
        # torch and transformers' model classes imported up front: their ~4 s of CPU would otherwise land on whichever
        # module first needs them, so a module's measured time would depend on the order the run took.
        import rankkit.models.backbone  # noqa: F401


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Markers from :data:`MODULE_MARKS`; and the tests whose DataLoader workers fork this process run
    first: a fork after OpenVINO (the backend tests) has started its thread pools hands the workers a
    broken copy of them (seen in the suite: batches that differ from the in-thread ones, once a segfault
    at worker shutdown). A `rankkit train` process never loads OpenVINO; only a test session mixes the two."""
    modules = measured()
    slow = slow_modules(modules)
    unmeasured: set[str] = set()
    for item in items:
        where = module_of(item)
        for marker, places in MODULE_MARKS.items():
            if any(where == place or (place.endswith("/") and where.startswith(place)) for place in places):
                item.add_marker(marker)
        if where in slow:
            item.add_marker("slow")
        elif where not in modules:
            item.add_marker("slow")  # left out of the fast run until measured (pytest --fast says so)
            if not any(item.get_closest_marker(capability) for capability in MODULE_MARKS):
                unmeasured.add(where)
    config.stash[UNMEASURED] = unmeasured
    forking = [item for item in items if item.path.name == "test_training_loader.py"]
    items[:] = forking + [item for item in items if item.path.name != "test_training_loader.py"]


UNMEASURED = pytest.StashKey[set[str]]()
_module_cpu: dict[str, float] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Each test's CPU (setup, call, teardown; a module-scoped fixture counts in its module) added to its module's."""
    start = cpu_seconds()
    yield
    where = module_of(item)
    _module_cpu[where] = _module_cpu.get(where, 0.0) + cpu_seconds() - start


def fast_run_problems(module_cpu: dict[str, float], unmeasured: set[str], total: float,
                      modules: dict[str, float]) -> list[str]:
    """Why a ``--fast`` run breaks its promise: a module that could be fast but was never measured, a module over its
    budget (its marker drifted: it belongs to the slow set now), the whole run over :data:`FAST_RUN_CPU_SECONDS`."""
    problems = [f"{name}: not measured in tests/durations.json (make durations, or {RECORD_ENV}=1 pytest tests/{name}); "
                "it is left out of the fast run until it is" for name in sorted(unmeasured)]
    for name, seconds in sorted(module_cpu.items()):
        if name in modules and seconds > budget(modules[name]):
            problems.append(f"{name}: took {seconds:.1f} s of CPU, over its budget of {budget(modules[name]):.1f} s "
                            f"(measured {modules[name]:.2f} s): make it faster, or re-measure (make durations) and it "
                            f"moves to the slow set at {SLOW_MODULE_CPU_SECONDS:g} s")
    if total > FAST_RUN_CPU_SECONDS:
        problems.append(f"the fast run took {total:.1f} s of CPU, over its {FAST_RUN_CPU_SECONDS:g} s")
    return problems


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    total = cpu_seconds()
    if os.environ.get(RECORD_ENV) and _module_cpu:
        record_durations(_module_cpu)
    if config.getoption("--fast"):
        problems = fast_run_problems(_module_cpu, config.stash.get(UNMEASURED, set()), total, measured())
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"fast run: {total:.1f} s of CPU (budget {FAST_RUN_CPU_SECONDS:g} s), "
                                f"{len(_module_cpu)} modules")
            for problem in problems:
                reporter.write_line(f"FAST RUN BUDGET: {problem}", red=True)
        if problems and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def record_durations(cpu: dict[str, float]) -> None:
    """Write the modules just run into :data:`DURATIONS` (the others keep their values), with where and when."""
    data = json.loads(DURATIONS.read_text(encoding="utf-8")) if DURATIONS.is_file() else {"modules": {}}
    data["modules"].update({name: round(seconds, 2) for name, seconds in cpu.items()})
    data["modules"] = dict(sorted(data["modules"].items()))
    data["measured"] = {"machine": platform.machine(), "cores": os.cpu_count(),
                        "load_average": [round(x, 2) for x in os.getloadavg()], "date": time.strftime("%Y-%m-%d"),
                        "what": "CPU seconds per test module: user + system, this process and its waited-for "
                                "children, setup and teardown included, torch imported before the first module"}
    DURATIONS.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
