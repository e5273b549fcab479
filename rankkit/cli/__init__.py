"""Command-line interface. Thin: each ``*_cmd.py`` module parses options and calls library code.

Subcommand modules are discovered by name (``<stage>_cmd.py``), so adding a stage is adding a
file. Every failure the user can cause prints one line, ``rankkit: error: ...``, and exits with
code 2: :class:`rankkit.errors.RankkitError`, usage errors (unknown option, value out of range)
and operating-system errors on a named file. A failure of the machine rather than the command
(:class:`rankkit.errors.EnvironmentFailure`: a full disk, a read-only file system, an I/O error;
running out of memory) is one line too, with exit code 1. SIGTERM and SIGHUP are raised as
:class:`rankkit.errors.Terminated` (a ``KeyboardInterrupt``), so they clean up exactly as Ctrl-C.
Set ``RANKKIT_DEBUG=1`` to get the traceback of an operating-system error instead.

Model references (``--checkpoint``, ``--backbone``, ``--init-checkpoint``, ``--teacher-checkpoint``:
a local folder or a hub id) are resolved by :func:`resolve_model_references` before anything heavy
is imported. Only :func:`main` (the ``rankkit`` command) changes process-wide settings (:func:`command_settings`):
importing any rankkit module leaves ``os.environ`` and other libraries' logging as they were.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pkgutil
import signal
import sys
import threading
from types import FrameType
from typing import Any, Iterator, NoReturn

try:  # recent typer ships its own copy of click; its exceptions are the ones raised
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer on the real click
    from click import exceptions as click_exceptions  # type: ignore[no-redef]
try:
    from typer.exceptions import Abort
except ImportError:  # pragma: no cover
    from click.exceptions import Abort  # type: ignore[assignment]

from rankkit.cli.app import app, click_command
from rankkit.errors import RankkitError, Terminated
from rankkit.files.failures import ENVIRONMENT_ERRNOS


# Help lists subcommands in the order a pipeline uses them; unknown ones follow alphabetically.
PIPELINE_ORDER = ["index", "retrieve", "mine", "train", "rerank", "explain", "export", "fuse", "eval", "validate", "consistency",
                  "models", "doctor"]

#: Signals turned into :class:`Terminated` while a command runs (SIGINT keeps Python's KeyboardInterrupt).
TERMINATING_SIGNALS: tuple[int, ...] = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)


def _load_commands() -> None:
    def position(module: str) -> tuple[int, str]:
        stage = module.removesuffix("_cmd")
        return (PIPELINE_ORDER.index(stage) if stage in PIPELINE_ORDER else len(PIPELINE_ORDER), stage)

    modules = [m.name for m in pkgutil.iter_modules(__path__) if m.name.endswith("_cmd")]
    for module in sorted(modules, key=position):
        importlib.import_module(f"{__name__}.{module}")


_load_commands()

_received: list[int] = []


def _on_terminate(signum: int, _frame: FrameType | None) -> None:
    _received.append(signum)
    # A second signal must not interrupt the clean-up the first one started.
    for other in TERMINATING_SIGNALS:
        signal.signal(other, signal.SIG_IGN)
    raise Terminated(signum)


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """While inside, SIGTERM/SIGHUP raise :class:`Terminated`; the previous handlers come back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in TERMINATING_SIGNALS}
    _received.clear()
    for signum in TERMINATING_SIGNALS:
        signal.signal(signum, _on_terminate)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


#: The longest error line printed: a message quoting an input (an id, a line) is cut, never a whole file.
MAX_ERROR_CHARS = 1000


def _fail(message: str, code: int = 2) -> NoReturn:
    sys.stdout.flush()
    line = " ".join(message.split())
    if len(line) > MAX_ERROR_CHARS:
        line = f"{line[:MAX_ERROR_CHARS]}... ({len(line) - MAX_ERROR_CHARS:,} more characters cut)"
    sys.stderr.write(f"rankkit: error: {line}\n")
    sys.stderr.flush()
    sys.exit(code)


def _stopped(signum: int | None) -> NoReturn:
    sys.stdout.flush()
    if signum is None:
        sys.stderr.write("rankkit: interrupted\n")
        code = 130
    else:
        sys.stderr.write(f"rankkit: terminated by {signal.Signals(signum).name}\n")
        code = 128 + signum
    sys.stderr.flush()
    sys.exit(code)


def _usage_error(err: click_exceptions.ClickException) -> NoReturn:
    message = err.format_message().strip().rstrip(".")
    ctx = getattr(err, "ctx", None)
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    _fail(f"{message}{hint}", err.exit_code)


#: Environment defaults of the ``rankkit`` command (a value the user set wins): tokenizers do not
#: fork thread pools, and transformers/huggingface_hub print no info lines or bars of their own
#: between rankkit's progress lines (a hub download shows rankkit's own bar). Offline is the user's
#: choice: ``HF_HUB_OFFLINE=1`` or ``rankkit --offline COMMAND``.
COMMAND_ENVIRONMENT: dict[str, str] = {
    "TOKENIZERS_PARALLELISM": "false",
    "TRANSFORMERS_VERBOSITY": "error",
    "HF_HUB_VERBOSITY": "error",  # its retry warnings carry tracebacks; rankkit reports a failed download itself
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
}
#: Set when TOKENIZERS_PARALLELISM is the command's default rather than the user's
#: (:func:`rankkit.runtime.session.tokenize_in_parallel` lifts it for GPU sessions).
TOKENIZERS_DEFAULT_MARK = "RANKKIT_TOKENIZERS_PARALLELISM_DEFAULT"
#: Options that take a model reference (a local folder or a hub id ORG/NAME[@REVISION], :mod:`rankkit.hub`).
MODEL_REFERENCE_OPTIONS = ("--checkpoint", "--backbone", "--init-checkpoint", "--teacher-checkpoint")


def command_settings(args: list[str] | None = None) -> None:
    """The process-wide settings of the ``rankkit`` command, set before transformers is imported;
    ``rankkit --offline ...`` (before the subcommand) sets ``HF_HUB_OFFLINE=1``."""
    if "TOKENIZERS_PARALLELISM" not in os.environ:  # the command's own default: a GPU session may lift it
        os.environ[TOKENIZERS_DEFAULT_MARK] = "1"
    for name, value in COMMAND_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    leading = []
    for arg in args or []:
        if not arg.startswith("-"):
            break
        leading.append(arg)
    if "--offline" in leading:
        os.environ["HF_HUB_OFFLINE"] = "1"
    transformers = sys.modules.get("transformers")
    if transformers is not None:  # already imported (python -c, tests): its logging read the env too early
        transformers.utils.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()


def resolve_model_references(args: list[str]) -> None:
    """Resolve (and download, with a progress bar) every model reference of the command line before
    torch and transformers are imported: a wrong path or hub id fails in a second, in one line."""
    if "--help" in args or "-h" in args:
        return
    from rankkit.hub import references, resolve_model

    for option, value in references(args, MODEL_REFERENCE_OPTIONS):
        resolve_model(value, option=option, what="backbone" if option == "--backbone" else "checkpoint")


def main(args: list[str] | None = None) -> None:
    """Entry point of the ``rankkit`` console script and ``python -m rankkit``."""
    code: Any = 0
    args = list(sys.argv[1:] if args is None else args)
    command_settings(args)
    try:
        with terminate_as_interrupt():
            resolve_model_references(args)  # downloads: SIGTERM stops them as Ctrl-C does
            from rankkit.lexical.pyserini_names import translate

            args = translate(args)  # --topics dl19-passage, --index msmarco-v1-passage: Pyserini's names
            from rankkit.cli.model_options import setup_for

            if setup_for(args):  # train/rerank: model options generated from the registry
                return
            # standalone_mode=False: usage errors come back to us, to be printed as one line.
            code = click_command().main(args=args, prog_name="rankkit", standalone_mode=False)
    except RankkitError as err:
        _fail(str(err), err.exit_code)
    except click_exceptions.NoArgsIsHelpError as err:
        err.show()  # `rankkit` alone, or a group without its subcommand: the help text
        sys.exit(err.exit_code)
    except click_exceptions.ClickException as err:
        _usage_error(err)
    except Abort as err:
        if isinstance(err.__cause__, EOFError):  # click turns EOFError into Abort
            _fail(f"unexpected end of input: {err.__cause__ or 'EOF'}")
        _fail("aborted", 1)
    except KeyboardInterrupt:
        _stopped(_received[0] if _received else None)
    except OSError as err:
        if _received:
            _stopped(_received[0])
        if os.environ.get("RANKKIT_DEBUG"):
            raise
        where = f"{err.filename}: " if err.filename else ""
        environment = err.errno in ENVIRONMENT_ERRNOS or not err.filename
        _fail(f"{where}{err.strerror or err}", 1 if environment else 2)
    except MemoryError:
        if _received:
            _stopped(_received[0])
        _fail("out of memory (lower --batch-size, or the input's size)", 1)
    except OverflowError as err:  # a number no option's range check caught: still one line, not a traceback
        if _received:
            _stopped(_received[0])
        _fail(f"a number is too large ({err})")
    except Exception:
        # The Terminated raised by the handler can come out wrapped (an import, __set_name__ and
        # other machinery re-raise it as another type): once a signal arrived, it is the reason.
        if _received:
            _stopped(_received[0])
        raise
    if code == 130:  # typer turns KeyboardInterrupt into Exit(130)
        _stopped(_received[0] if _received else None)
    if isinstance(code, int) and code != 0:
        sys.exit(code)


__all__ = ["app", "main", "terminate_as_interrupt"]
