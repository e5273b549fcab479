"""The --kind/--model registries: lookup errors and per-entry options."""

from __future__ import annotations

import pytest

from rankkit.cli.registry import OptionRegistry
from rankkit.errors import RankkitError


def make() -> tuple[OptionRegistry[str], list[str]]:
    registry: OptionRegistry[str] = OptionRegistry("--model", "model", "models")
    calls: list[str] = []

    @registry.register("b", "second", options=("depth", "alpha"))
    def run_b(request: str) -> None:
        calls.append(f"b:{request}")

    @registry.register("a", "first", options=("alpha",))
    def run_a(request: str) -> None:
        calls.append(f"a:{request}")

    return registry, calls


def test_get_runs_the_registered_function() -> None:
    registry, calls = make()
    registry.get("a").run("x")
    assert calls == ["a:x"] and registry.names() == ["a", "b"]


def test_unknown_name_lists_known_ones() -> None:
    registry, _ = make()
    with pytest.raises(RankkitError, match=r"^unknown model 'c'; known models: a, b$"):
        registry.get("c")


def test_given_options_drop_unset_and_reject_foreign() -> None:
    registry, _ = make()
    assert registry.given_options(registry.get("b"), {"depth": 3, "alpha": None, "flag": False}) == {"depth": 3}
    with pytest.raises(RankkitError, match=r"^--depth applies to --model b, not a$"):
        registry.given_options(registry.get("a"), {"depth": 3})
