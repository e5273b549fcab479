"""What a path is: its type, whether it is gzip by name, a stream rather than a file, and rankkit's cache root."""

from __future__ import annotations

import os
import stat
from pathlib import Path


PathLike = str | os.PathLike[str]


def is_gzip(path: PathLike) -> bool:
    """True for files named ``*.gz`` (how writers decide to compress)."""
    return str(path).endswith(".gz")


def is_stream(path: PathLike) -> bool:
    """Outputs written through rather than renamed over: ``-``, ``/dev/*``, ``/proc/*``, FIFOs, devices."""
    text = str(path)
    if text == "-":
        return True
    if text.startswith(("/dev/", "/proc/")):
        return True
    try:
        mode = os.stat(text).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def first_existing(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists (as anything)."""
    current = path
    while not os.path.lexists(current) and current.parent != current:
        current = current.parent
    return current


def user_cache_root() -> Path:
    """rankkit's cache folder, always absolute: ``$RANKKIT_CACHE_DIR`` (a relative one taken from the working
    folder), else ``${XDG_CACHE_HOME:-~/.cache}/rankkit``. A relative ``XDG_CACHE_HOME`` is ignored, as the XDG
    specification says, so a stray one never puts caches into whatever folder a command runs in."""
    explicit = os.environ.get("RANKKIT_CACHE_DIR")
    if explicit:
        return Path(os.path.abspath(os.path.expanduser(explicit)))
    base = os.path.expanduser(os.environ.get("XDG_CACHE_HOME") or "")
    if not os.path.isabs(base):
        base = str(Path.home() / ".cache")
    return Path(base) / "rankkit"
