"""What ``eval "$(rankkit env)"`` exports: a shell whose ``java``, ``python`` and start-up hook make Pyserini's own
tools work on rankkit's Java (:mod:`rankkit.lexical.pyserini_env` says why each is needed).

Apart from the hook's module, which a Python started in that shell imports at every start and which therefore
needs nothing of rankkit's Java set-up (:mod:`rankkit.lexical.java`), which this module uses.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Sequence

from rankkit.lexical.java import check_java
from rankkit.lexical.pyserini_env import SITE_DIR


def _prepend(first: Sequence[str], rest: str) -> str:
    """A search path with ``first`` in front and every other copy of them taken out (so rerunning is harmless)."""
    tail = [p for p in rest.split(os.pathsep) if p and p not in first]
    return os.pathsep.join([*first, *tail])


def shell_exports() -> dict[str, str]:
    """The variables ``rankkit env`` sets: ``JAVA_HOME``, ``PATH`` and ``PYTHONPATH`` (:mod:`rankkit.lexical.pyserini_env`'s doc).

    Raises :class:`rankkit.lexical.java.JavaError` when the runtime is missing or too old.
    """
    home, _ = check_java()
    # This environment's own bin folder (not the resolved interpreter): its python has pyserini, its rankkit is this.
    python_bin = str(Path(sys.executable).parent)
    return {
        "JAVA_HOME": str(home),
        "PATH": _prepend([str(home / "bin"), python_bin], os.environ.get("PATH", "")),
        "PYTHONPATH": _prepend([str(SITE_DIR)], os.environ.get("PYTHONPATH", "")),
    }


def format_exports(exports: dict[str, str]) -> str:
    """POSIX shell ``export`` lines (bash, zsh, dash), values quoted for ``eval``."""
    import shlex

    return "".join(f"export {name}={shlex.quote(value)}\n" for name, value in exports.items())


__all__ = ["format_exports", "shell_exports"]
