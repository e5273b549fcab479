"""Command-line interface. Thin: each ``*_cmd.py`` module parses options and calls library code.

Subcommand modules are discovered by name (``<stage>_cmd.py``), so adding a stage is adding a
file. User mistakes (:class:`rankkit.errors.RankkitError`) print one line and exit with code 2.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

from rankkit.cli.app import app
from rankkit.errors import RankkitError


# Help lists subcommands in the order a pipeline uses them; unknown ones follow alphabetically.
PIPELINE_ORDER = ["index", "retrieve", "mine", "train", "rerank", "explain", "fuse", "eval", "validate", "consistency", "doctor"]


def _load_commands() -> None:
    def position(module: str) -> tuple[int, str]:
        stage = module.removesuffix("_cmd")
        return (PIPELINE_ORDER.index(stage) if stage in PIPELINE_ORDER else len(PIPELINE_ORDER), stage)

    modules = [m.name for m in pkgutil.iter_modules(__path__) if m.name.endswith("_cmd")]
    for module in sorted(modules, key=position):
        importlib.import_module(f"{__name__}.{module}")


_load_commands()


def main(args: list[str] | None = None) -> None:
    """Entry point of the ``rankkit`` console script and ``python -m rankkit``."""
    try:
        app(args=args, prog_name="rankkit")
    except RankkitError as err:
        message = " ".join(str(err).split("\n"))
        sys.stderr.write(f"rankkit: error: {message}\n")
        sys.stderr.flush()
        sys.exit(2)
    except KeyboardInterrupt:
        sys.stderr.write("rankkit: interrupted\n")
        sys.exit(130)


__all__ = ["app", "main"]
