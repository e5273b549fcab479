"""Name -> implementation registries behind ``--kind`` / ``--model`` options.

``rankkit index --kind`` and ``rankkit retrieve --model`` share one option list across every
entry; each entry declares the entry-specific options it accepts, so an option given to an entry
that does not take it is a one-line error ("--k1 applies to --model bm25, not repbert"), never
silently ignored. Adding a kind or model is one ``@registry.register(...)`` function.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar

from rankkit.errors import RankkitError

Request = TypeVar("Request")


@dataclass(frozen=True)
class Entry(Generic[Request]):
    """A registered name: its help line, the function it runs and the specific options it takes."""

    name: str
    help: str
    run: Callable[[Request], None]
    options: frozenset[str] = frozenset()


class OptionRegistry(Generic[Request]):
    """Entries chosen by ``flag`` (e.g. ``--model``); ``noun``/``plural`` word the error messages."""

    def __init__(self, flag: str, noun: str, plural: str,
                 others: Callable[[], list[str]] = lambda: ["others"]) -> None:
        self.flag = flag
        self.noun = noun
        self.plural = plural
        #: The names of entries made outside the registry (asked only to word an error).
        self.others = others
        self.entries: dict[str, Entry[Request]] = {}

    def register(
        self, name: str, help: str, options: tuple[str, ...] = ()
    ) -> Callable[[Callable[[Request], None]], Callable[[Request], None]]:
        """Decorator registering ``name`` with the entry-specific ``options`` it accepts."""

        def add(run: Callable[[Request], None]) -> Callable[[Request], None]:
            self.entries[name] = Entry(name, help, run, frozenset(options))
            return run

        return add

    def names(self) -> list[str]:
        """Registered names, sorted (for help texts and errors)."""
        return sorted(self.entries)

    def get(self, name: str) -> Entry[Request]:
        """The entry ``name``, or a one-line error listing the known ones."""
        if name not in self.entries:
            raise RankkitError(f"unknown {self.noun} {name!r}; known {self.plural}: {', '.join(self.names())}")
        return self.entries[name]

    def given_options(self, entry: Entry[Request], options: dict[str, Any]) -> dict[str, Any]:
        """The entry-specific options that were given (not None/False), checked against ``entry``."""
        given = {name: value for name, value in options.items() if value is not None and value is not False}
        for name in given:
            if name not in entry.options:
                owners = sorted(e.name for e in self.entries.values() if name in e.options) or self.others()
                raise RankkitError(
                    f"--{name.replace('_', '-')} applies to {self.flag} {' or '.join(owners)}, not {entry.name}"
                )
        return given
