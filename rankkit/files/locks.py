"""One rankkit process at a time on a shared resource: a training folder, an index folder, a cache entry.

:func:`exclusive` takes an advisory lock (``flock``) named after the resource's real path, in
``<cache root>/locks/`` (or a folder the caller names: a cache locks inside itself). A second
process either waits for the first (caches: it then finds the entry built) or is refused with one
line (outputs: two runs into one training folder would mix their checkpoints). The lock is the
open file's, so a process killed in any way (SIGKILL included) releases it; the small lock files
stay (they hold only the last holder's process id, shown in messages).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path
from typing import Iterator

from rankkit.console import log
from rankkit.errors import RankkitError
from rankkit.files.paths import PathLike, user_cache_root

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Linux/macOS: no locking
    fcntl = None  # type: ignore[assignment]

LOCKS = "locks"


class ResourceBusy(RankkitError):
    """Another rankkit process holds the resource (exit code 2: run it later, or elsewhere)."""


def lock_path(resource: PathLike, lock_dir: PathLike | None = None) -> Path:
    """The lock file of ``resource``: named by the SHA-256 of its real path."""
    key = hashlib.sha256(os.path.realpath(resource).encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return Path(lock_dir) / f".{key}.lock" if lock_dir is not None else user_cache_root() / LOCKS / f"{key}.lock"


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return f" (pid {text})" if text.isdigit() else ""


@contextlib.contextmanager
def exclusive(resource: PathLike, what: str, *, wait: bool, lock_dir: PathLike | None = None,
              on_folder: bool = False) -> Iterator[None]:
    """Hold ``resource``'s lock inside the block.

    ``wait``: block until the holder is done (a log line says so); otherwise raise
    :class:`ResourceBusy` naming ``what`` (the option, e.g. ``--output``) and the resource. When no
    lock file can be made (an unwritable cache), the block runs unlocked. ``on_folder``: lock the
    existing folder ``resource`` itself (its own descriptor; no lock file anywhere).
    """
    if fcntl is None:
        yield
        return
    try:
        if on_folder:
            fd = os.open(resource, os.O_RDONLY)
        else:
            path = lock_path(resource, lock_dir)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            if not wait:
                raise ResourceBusy(f"{what} {resource} is in use by another rankkit process{holder}; "
                                   "wait for it to finish or pick another") from None
            log(f"waiting for another rankkit process{holder} using {resource}")
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # a file system without locks
            pass
        if not on_folder:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        yield
    finally:
        os.close(fd)  # releases the lock
