"""rankkit: multi-stage neural text ranking from the command line and from Python.

The Python API (:mod:`rankkit.api`) is reachable from here: ``rankkit.search``, ``rankkit.dense_search``,
``rankkit.rerank``, ``rankkit.fuse``, ``rankkit.evaluate``, ``rankkit.load_model`` and the readers
(``rankkit.read_run``, ``rankkit.load_topics``, ...). They are imported on first use, so ``import
rankkit`` loads no torch, transformers or Java and changes no global state (environment, logging).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

from rankkit.version import __version__

#: Names forwarded to :mod:`rankkit.api` on first access.
API: tuple[str, ...] = ("dense_search", "evaluate", "fuse", "load_model", "load_qrels", "load_topics", "read_qrels",
                        "read_run", "read_topics", "rerank", "search", "write_run")

if TYPE_CHECKING:  # for type checkers and IDEs only; at run time __getattr__ imports lazily
    from rankkit.api import (  # noqa: F401
        dense_search, evaluate, fuse, load_model, load_qrels, load_topics, read_qrels, read_run, read_topics, rerank,
        search, write_run,
    )


class _CallableRerank(types.ModuleType):
    """``rankkit.rerank`` is both the subpackage (``rankkit.rerank.rerank_run``) and the API call.

    Python binds an imported subpackage to its parent's attribute of the same name, which would
    hide the API function ``rerank``; so the subpackage itself forwards a call to it.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return importlib.import_module("rankkit.api").rerank(*args, **kwargs)


class _Package(types.ModuleType):
    def __setattr__(self, name: str, value: Any) -> None:
        if name == "rerank" and isinstance(value, types.ModuleType) and not isinstance(value, _CallableRerank):
            value.__class__ = _CallableRerank
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    if name == "rerank":
        return importlib.import_module("rankkit.rerank")  # the callable subpackage, see _CallableRerank
    if name in API:
        value = getattr(importlib.import_module("rankkit.api"), name)
        globals()[name] = value  # later accesses skip this hook
        return value
    raise AttributeError(f"module 'rankkit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *API])


__all__ = ["__version__", *API]
