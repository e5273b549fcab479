"""Temporaries rankkit owns beside an output: named ``.NAME.rktmp-PID-RANDOM``, locked while in use.

The next write of the same output removes any such leftover whose lock is free and whose process is
gone (a SIGKILL cannot run clean-up code, so the next run does it). A temporary's name is recorded
before it is created, inside the ``try`` that removes it (signals are also held back meanwhile, but a
process with other threads, such as the JVM's, can still receive one there).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import time
from pathlib import Path
from typing import Callable, Iterator

from rankkit.errors import RankkitError
from rankkit.files.failures import write_failure, writing_to
from rankkit.files.paths import PathLike, first_existing

try:  # advisory locks tell a live writer's temporary from a killed one's (POSIX only)
    import fcntl
except ImportError:  # pragma: no cover - not on Linux/macOS
    fcntl = None  # type: ignore[assignment]


#: Marks every temporary file or folder rankkit creates beside an output: ``.NAME.rktmp-PID-RANDOM``.
TEMP_MARK = ".rktmp-"


#: A leftover whose lock is free but whose PID is alive (PID reuse) is stale after this long.
STALE_AFTER_SECONDS = 3600.0


_DEFERRED = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


def block_signals() -> object | None:
    """Hold back SIGINT/SIGTERM/SIGHUP (returns the previous mask, for :func:`unblock_signals`).

    Between creating a temporary and entering the ``try`` that removes it, an interrupt would leave
    it behind; blocked signals stay pending and arrive, inside the ``try``, once unblocked.
    """
    if not hasattr(signal, "pthread_sigmask"):
        return None
    return signal.pthread_sigmask(signal.SIG_BLOCK, _DEFERRED)


def unblock_signals(previous: object | None) -> None:
    if previous is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)  # type: ignore[arg-type]


def temp_prefix(target: Path) -> str:
    # Cut long names so prefix + PID + random part stay under the 255-byte name limit.
    return f".{target.name[:180]}{TEMP_MARK}"


def lock_fd(fd: int) -> bool:
    """Take an exclusive advisory lock on ``fd`` without waiting; False if someone holds it."""
    if fcntl is None:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:  # a file system without locks: fall back on the PID check alone
        return True
    return True


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    except (OverflowError, ValueError):
        return False
    return True


def _is_stale(path: Path, pid: int) -> bool:
    """A leftover nobody holds: its lock is free and its process is gone (or it is very old)."""
    if pid == os.getpid():
        return False
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        if not lock_fd(fd):
            return False  # a live writer holds it
        age = time.time() - os.fstat(fd).st_mtime
    finally:
        os.close(fd)  # closing drops the probe's own lock
    return not _pid_alive(pid) or age > STALE_AFTER_SECONDS


def remove_tree(folder: Path, attempts: int = 100) -> None:
    """Remove a folder even while a thread (an interrupted Java indexer) still creates files in it.

    A link is removed as a link: nothing is ever deleted through one (``shutil.rmtree`` follows no link
    inside the tree either)."""
    if os.path.islink(folder):
        with contextlib.suppress(OSError):
            os.unlink(folder)
        return
    for _ in range(attempts):
        shutil.rmtree(folder, ignore_errors=True)
        if not os.path.lexists(folder):
            return
        time.sleep(0.02)


def remove_stale_temporaries(target: PathLike) -> list[Path]:
    """Remove the leftovers of killed rankkit processes beside ``target``; returns what was removed.

    Only names carrying rankkit's temporary mark for this very output are considered, and only
    those whose lock is free and whose process no longer exists.
    """
    target = Path(target)
    prefix = temp_prefix(target)
    removed: list[Path] = []
    try:
        entries = [entry.name for entry in os.scandir(target.parent) if entry.name.startswith(prefix)]
    except OSError:
        return removed
    for name in entries:
        pid_text = name[len(prefix):].split("-", 1)[0]
        if not pid_text.isdigit():
            continue
        path = target.parent / name
        if not _is_stale(path, int(pid_text)):
            continue
        if path.is_dir() and not path.is_symlink():
            remove_tree(path, attempts=5)
        else:
            with contextlib.suppress(OSError):
                path.unlink()
        if not os.path.lexists(path):
            removed.append(path)
    return removed


def temporary_path(target: PathLike) -> Path:
    """A fresh name beside ``target`` with rankkit's temporary mark (for moving something out of the way)."""
    target = Path(target)
    return target.parent / f"{temp_prefix(target)}{os.getpid()}-{os.urandom(4).hex()}"


def writable_dir(folder: Path) -> bool:
    """A folder we may create files in; a folder with no write bit counts as read-only even for root."""
    try:
        mode = folder.stat().st_mode
    except OSError:
        return False
    return stat.S_ISDIR(mode) and bool(mode & 0o222) and os.access(folder, os.W_OK | os.X_OK)


def make_parent(folder: Path, shown: PathLike) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise RankkitError(f"cannot write {shown}: {first_existing(folder)} is not a directory") from None
    except NotADirectoryError:
        raise RankkitError(f"cannot write {shown}: {first_existing(folder)} is not a directory") from None
    except OSError as err:
        raise write_failure(err, shown) or RankkitError(
            f"cannot write {shown}: cannot create folder {folder}: {err.strerror or err}") from None


@contextlib.contextmanager
def staging_dir(target: PathLike, *, shown: PathLike | None = None) -> Iterator[Path]:
    """A locked temporary folder beside ``target`` with rankkit's temporary mark, removed on any exit.

    Build into it, then rename what was built onto ``target``. Leftovers of killed earlier builds of
    the same target are removed first (see :func:`remove_stale_temporaries`). A full disk (or
    another failure of the machine) while building is one :class:`~rankkit.errors.EnvironmentFailure`
    naming ``shown`` (default ``target``; :func:`rankkit.files.failures.writing_to`).
    """
    target = Path(target)
    make_parent(target.parent, target)
    remove_stale_temporaries(target)
    blocked = block_signals()
    made: list[Path] = []
    fd: int | None = None
    try:
        # The name is recorded before the folder exists, and creating it is inside the ``try``: a signal
        # that reaches Python through another thread (the JVM's, which the mask above does not cover)
        # cannot leave it behind.
        try:
            folder = _new_name(target, lambda name: os.mkdir(name, 0o700), made)
            fd = os.open(folder, os.O_RDONLY)
        except OSError as err:
            raise write_failure(err, target) or RankkitError(
                f"cannot write {target}: {err.strerror or err} in {target.parent}") from None
        finally:
            unblock_signals(blocked)  # a signal held back since then arrives inside this ``try``
        lock_fd(fd)
        with writing_to(shown if shown is not None else target, folder, owned=[folder]):
            yield folder
    finally:
        try:
            for made_folder in made:
                remove_tree(made_folder)
        finally:
            if fd is not None:
                os.close(fd)


def _new_name(target: Path, create: Callable[[Path], object], made: list[Path], suffix: str = "",
              attempts: int = 100) -> Path:
    """Create a marked temporary beside ``target`` with ``create(name)`` under a fresh random name; its path.

    The name goes into ``made`` *before* it is created, so the caller's clean-up (which removes what
    ``made`` lists, present or not) covers an interrupt at any moment; a name another process holds
    (``FileExistsError``) is taken back out, so the clean-up never removes what it did not create."""
    for _ in range(attempts):
        name = Path(f"{temporary_path(target)}{suffix}")
        made.append(name)
        try:
            create(name)
        except FileExistsError:
            made.pop()
            continue
        return name
    raise FileExistsError(f"no free temporary name beside {target}")


def install_cache_folder(built: Path, final: Path) -> None:
    """Rename a cache folder built in :func:`staging_dir` onto ``final``, replacing an older one.

    The folder is first opened to the cache's other users (``mkdtemp`` makes it private); an old
    ``final`` is moved out of the way under a temporary name before it is removed, so a kill during
    the removal leaves only something the next build recognises and removes. The last rename raises
    ``OSError`` when another process has put its own ``final`` there meanwhile: the caller decides
    whether that one is fresh enough to use.
    """
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(built, 0o777 & ~umask)
    if final.exists():
        old = temporary_path(final)
        try:
            os.replace(final, old)
        finally:
            remove_tree(old)
    os.replace(built, final)


def publish_folder(built: Path, target: Path, *, last: str) -> None:
    """Move what was built in a staging folder onto ``target``.

    A missing (or empty) ``target`` is replaced by ``built`` in one rename. An existing one keeps
    its other contents (an index folder also holding its encoded chunks): its ``last`` file (the
    completion mark, e.g. an index manifest) is removed first, the built files are renamed in, and
    ``last`` comes in last, so at no moment does ``target`` look complete while it is mixed.
    """
    if not target.exists() or (target.is_dir() and not any(target.iterdir())):
        os.replace(built, target)
        return
    (target / last).unlink(missing_ok=True)
    names = sorted(p.name for p in built.iterdir())
    for name in [n for n in names if n != last] + [n for n in names if n == last]:
        os.replace(built / name, target / name)


@contextlib.contextmanager
def marked_temporary(target: Path, shown: PathLike, suffix: str = "") -> Iterator[tuple[int, Path]]:
    """A new temporary file beside ``target`` with rankkit's mark, locked: ``(descriptor, path)``.

    Its folder is made first and leftovers of killed earlier writes of ``target`` are removed. The file
    is created inside this generator's ``try`` under a name recorded first (and signals are held back
    meanwhile), so no interrupt can leave it behind, even one Python receives through another thread;
    an exception from the block removes it (on success the caller has renamed or removed it).
    The lock lives on the descriptor's open file description, held until it closes on exit: a concurrent
    run's clean-up sees the temporary as in use, never as a leftover. Failing to create it is one line
    naming ``shown``.
    """
    make_parent(target.parent, shown)
    remove_stale_temporaries(target)
    blocked = block_signals()
    created: list[Path] = []
    fd: int | None = None

    def create(name: Path) -> None:
        nonlocal fd
        fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)

    try:
        try:
            _new_name(target, create, created, suffix)
        except OSError as err:
            raise write_failure(err, shown) or RankkitError(
                f"cannot write {shown}: {err.strerror or err} in {target.parent}") from None
        finally:
            unblock_signals(blocked)  # a signal held back since then arrives inside this ``try``
        assert fd is not None
        lock_fd(fd)
        yield fd, created[0]
    except BaseException:
        for path in created:
            path.unlink(missing_ok=True)
        raise
    finally:
        if fd is not None:
            os.close(fd)


@contextlib.contextmanager
def scratch_path(target: PathLike, suffix: str = "", *, shown: PathLike | None = None) -> Iterator[Path]:
    """A temporary file beside ``target`` (rankkit's mark, locked, ``suffix`` kept) that is removed on any exit.

    For inputs handed to another process or library by name (calibration arrays for a child
    process); what should become ``target`` is written through :func:`rankkit.files.atomic_path`.
    A machine failure while it is in use is one line naming ``shown`` (default: ``target``).
    """
    target = Path(target)
    with marked_temporary(target, target, suffix) as (_, path):
        with writing_to(shown if shown is not None else target, target.parent, owned=[path]):
            yield path
        path.unlink(missing_ok=True)
