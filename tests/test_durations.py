"""The fast subset is derived from measured CPU time, and kept to its promise (issue 39): a hand list of slow modules
drifted (a convention test grew to 23 s while marked fast, the fusion tests took 1.7 s while marked slow) and
make test-fast took 64 s. tests/durations.json holds each module's measured CPU; tests/conftest.py marks the slow
ones from it, and pytest --fast (make test-fast) fails a module over its budget, an unmeasured one, or a run over
its CPU."""

from __future__ import annotations

import json
from pathlib import Path

import conftest

TESTS = Path(__file__).resolve().parent


def test_every_test_module_is_measured_and_no_other() -> None:
    modules = {path.relative_to(TESTS).as_posix() for path in TESTS.rglob("test_*.py")}
    recorded = set(conftest.measured())
    assert not modules - recorded, f"not measured (make durations): {sorted(modules - recorded)}"
    assert not recorded - modules, f"measured but gone: {sorted(recorded - modules)}"
    data = json.loads(conftest.DURATIONS.read_text(encoding="utf-8"))
    assert {"machine", "cores", "load_average", "date", "what"} <= set(data["measured"])


def test_the_measured_fast_subset_fits_its_cpu_budget() -> None:
    """The modules the fast run keeps took, when measured, well under its budget: the rest of the run (collection,
    the torch import) took ~8 s of CPU on the measuring machine."""
    modules = conftest.measured()
    capabilities = {name for name in modules for places in conftest.MODULE_MARKS.values()
                    if any(name == p or (p.endswith("/") and name.startswith(p)) for p in places)}
    fast = {name: seconds for name, seconds in modules.items()
            if name not in conftest.slow_modules(modules) and name not in capabilities}
    assert len(fast) >= 30
    assert sum(fast.values()) <= conftest.FAST_RUN_CPU_SECONDS - 8.0, sorted(fast.items(), key=lambda kv: -kv[1])[:5]
    assert max(fast.values()) < conftest.SLOW_MODULE_CPU_SECONDS


def test_a_module_over_its_budget_an_unmeasured_one_and_a_long_run_fail_the_fast_run() -> None:
    slow = conftest.SLOW_MODULE_CPU_SECONDS
    near = slow - 0.1  # a fast module measured just under the threshold: its budget is capped at twice it
    measured = {"a.py": 0.1, "b.py": near}
    assert conftest.budget(0.1) == 1.1 and conftest.budget(near) == 2 * slow
    assert conftest.slow_modules({"a.py": 0.1, "c.py": slow}) == {"c.py"}
    assert conftest.fast_run_problems({"a.py": 1.0, "b.py": 2 * slow - 0.1}, set(), 20.0, measured) == []
    problems = conftest.fast_run_problems({"a.py": 1.2, "b.py": 2 * slow + 0.1}, {"new.py"}, 31.0, measured)
    assert len(problems) == 4
    assert problems[0].startswith("new.py: not measured") and problems[1].startswith("a.py: took 1.2 s of CPU, over")
    assert problems[2].startswith(f"b.py: took {2 * slow + 0.1:.1f} s") and "the fast run took 31.0 s of CPU" in problems[3]
