"""The typer application every ``rankkit/cli/*_cmd.py`` module adds its subcommand to.

Also the parse-time checks of numeric options: ``typer.Option(..., callback=int_range(1))``
refuses a value out of range (or a float that is not finite) while the command line is parsed,
before any file is read, with a one-line error naming the option.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import typer

from rankkit.errors import RankkitError

#: ``-h`` as well as ``--help``, on every command.
HELP_OPTIONS = ["-h", "--help"]

app = typer.Typer(
    name="rankkit",
    help="Multi-stage neural text ranking: index, retrieve, mine, train, re-rank, fuse, evaluate.",
    no_args_is_help=True,
    # typer's shell completion: `rankkit --install-completion` (bash, zsh, fish, PowerShell; README).
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": HELP_OPTIONS},
)



def _print_version(value: bool) -> None:
    if value:
        from rankkit.version import __version__

        typer.echo(f"rankkit {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print rankkit's version and exit."),
    offline: bool = typer.Option(
        False, "--offline", help="Never contact the Hugging Face hub: hub ids resolve from the local cache only "
                                 "(the same as HF_HUB_OFFLINE=1; set by rankkit.cli.main before anything is imported)."),
) -> None:
    """Options of the rankkit command itself (before the subcommand)."""


Check = Callable[[typer.CallbackParam, Any], Any]


def _name(param: typer.CallbackParam) -> str:
    # The first long name is the option's own (--k, not its alias --hits; --output, not -o).
    names = [o for o in param.opts if o.startswith("--")] or list(param.opts)
    first = names[0] if names else (param.name or "value")
    return first if first.startswith("-") else first.upper()


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


def _each(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


#: Ceilings of integer options that have no natural one: a count of items (depth, batch size) and a
#: number of tokens. Past them a value only comes from a typo, and would reach C code as an overflow.
MAX_COUNT = 2**31 - 1
MAX_TOKENS = 1 << 20


def int_range(minimum: int | None = None, maximum: int | None = None) -> Check:
    """A callback refusing integers below ``minimum`` or above ``maximum`` (``None``: unbounded)."""

    def check(param: typer.CallbackParam, value: Any) -> Any:
        for item in _each(value):
            low = minimum is not None and item < minimum
            high = maximum is not None and item > maximum
            if low or high:
                if maximum is None:
                    need = f"at least {minimum}"
                elif minimum is None:
                    need = f"at most {maximum}"
                else:
                    need = f"between {minimum} and {maximum}"
                shown = item if len(str(item)) <= 24 else f"{float(item):.3g}"
                raise RankkitError(f"{_name(param)} must be {need}, got {shown}")
        return value

    return check


def float_range(
    minimum: float | None = None,
    maximum: float | None = None,
    *,
    min_open: bool = False,
    max_open: bool = False,
) -> Check:
    """A callback refusing NaN, infinities and values outside ``[minimum, maximum]`` (open ends optional)."""

    def check(param: typer.CallbackParam, value: Any) -> Any:
        for item in _each(value):
            bad = not math.isfinite(item)
            bad = bad or (minimum is not None and (item <= minimum if min_open else item < minimum))
            bad = bad or (maximum is not None and (item >= maximum if max_open else item > maximum))
            if not math.isfinite(item):
                raise RankkitError(f"{_name(param)} must be a finite number, got {item}")
            if bad:
                left = "(" if min_open else "["
                right = ")" if max_open else "]"
                if minimum is None and maximum is None:
                    need = "a finite number"
                elif maximum is None:
                    need = f"{'greater than' if min_open else 'at least'} {_fmt(minimum)}"  # type: ignore[arg-type]
                elif minimum is None:
                    need = f"{'less than' if max_open else 'at most'} {_fmt(maximum)}"
                else:
                    need = f"in {left}{_fmt(minimum)}, {_fmt(maximum)}{right}"
                shown = item if len(str(item)) <= 24 else f"{float(item):.3g}"
                raise RankkitError(f"{_name(param)} must be {need}, got {shown}")
        return value

    return check


def click_command() -> Any:
    """The click command the ``rankkit`` command runs: the typer application with rankkit's help conventions
    (a flag shows no ``<bool>`` value type, as it takes no value)."""
    import typer.main

    command = typer.main.get_command(app)
    for each in [command, *getattr(command, "commands", {}).values()]:
        # The help option is made per command on first use and kept: make it now, to give it the same look.
        context = each.context_class(each, help_option_names=HELP_OPTIONS)
        for param in [*each.params, each.get_help_option(context)]:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""
    return command


__all__ = ["app", "click_command", "float_range", "int_range"]
