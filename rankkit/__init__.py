"""rankkit: multi-stage neural text ranking from the command line and from Python.

The Python API (:mod:`rankkit.api`) is reachable from here: ``rankkit.search``, ``rankkit.dense_search``,
``rankkit.rerank``, ``rankkit.fuse``, ``rankkit.evaluate``, ``rankkit.experiment``, ``rankkit.mine``, ``rankkit.train``,
``rankkit.load_model``, the readers (``rankkit.read_run``, ``rankkit.load_topics``, ...) and the
DataFrame converters ``rankkit.to_frame`` / ``rankkit.from_frame``. They are imported on first use, so ``import
rankkit`` loads no torch, transformers or Java and changes no global state (environment, logging).

``rankkit.rerank`` is the API function; the re-ranking subpackage is :mod:`rankkit.reranking`
(the library behind ``rankkit rerank``: ``rerank_run``, ``explain``). The subpackage used to be
``rankkit.rerank`` too, made callable by swapping the package's module class; the function kept the
name users call, the subpackage took a name of its own.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from rankkit.version import __version__

#: Names forwarded to :mod:`rankkit.api` on first access.
API: tuple[str, ...] = ("dense_search", "evaluate", "experiment", "from_frame", "fuse", "load_model", "load_qrels",
                        "load_topics", "mine", "read_qrels", "read_run", "read_topics", "rerank", "search", "to_frame",
                        "train", "write_run")

if TYPE_CHECKING:  # for type checkers and IDEs only; at run time __getattr__ imports lazily
    from rankkit.api import (  # noqa: F401
        dense_search, evaluate, experiment, from_frame, fuse, load_model, load_qrels, load_topics, mine, read_qrels,
        read_run, read_topics, rerank, search, to_frame, train, write_run,
    )


def __getattr__(name: str) -> Any:
    if name in API:
        value = getattr(importlib.import_module("rankkit.api"), name)
        globals()[name] = value  # later accesses skip this hook
        return value
    raise AttributeError(f"module 'rankkit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *API])


__all__ = ["__version__", *API]
