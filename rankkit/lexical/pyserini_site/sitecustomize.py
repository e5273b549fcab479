"""Put on ``PYTHONPATH`` by ``rankkit env``: installs rankkit's Pyserini import hook at Python start-up.

Python imports the first ``sitecustomize`` on ``sys.path``; this one then runs the one it shadows (a
distribution's or an environment's), so nothing that was there before is lost. A Python that cannot
import rankkit (another environment in the same shell) starts as if this file were not there.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys


def _install() -> None:
    try:
        from rankkit.lexical.pyserini_env import install_hook
    except ImportError:
        return
    install_hook()


def _run_shadowed() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    others = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


_install()
_run_shadowed()
