"""The import contracts of docs/ARCHITECTURE.md: every arrow points down, no cycles between packages.

Walks every ``import`` statement of ``rankkit/`` (function-level ones too) with :mod:`ast`, so a
lazy import that breaks the layering fails here as much as a top-level one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "rankkit"

#: Bottom to top; a unit may import its own layer's other units only where listed as allowed below.
LAYERS: list[tuple[str, ...]] = [
    ("rankkit", "rankkit.errors", "rankkit.console", "rankkit.cpu", "rankkit.devices", "rankkit.version",
     "rankkit.distributed"),
    ("rankkit.files", "rankkit.hub"),
    ("rankkit.formats",),
    ("rankkit.evaluation", "rankkit.fusion", "rankkit.indexes", "rankkit.datasets"),
    ("rankkit.lexical",),
    ("rankkit.docstore",),
    ("rankkit.models",),
    ("rankkit.runtime",),
    ("rankkit.dense", "rankkit.reranking", "rankkit.serve"),
    ("rankkit.training",),
    ("rankkit.doctor", "rankkit.testing"),
    ("rankkit.cli", "rankkit.__main__", "rankkit.api"),
]
#: The one downward exception: the package's top-level names forward to the Python API facade
#: (type-checking import plus a lazy ``__getattr__``), so ``rankkit.rerank(...)`` works while
#: ``import rankkit`` itself loads nothing (tests/api/test_api.py holds that).
FACADE = ("rankkit", "rankkit.api")
#: Units that must never import another unit (beyond the layer rule).
FORBIDDEN = {
    "rankkit.models": ("rankkit.runtime", "rankkit.training", "rankkit.dense", "rankkit.reranking", "rankkit.cli"),
    "rankkit.runtime": ("rankkit.training", "rankkit.dense", "rankkit.reranking", "rankkit.cli"),
    "rankkit.dense": ("rankkit.training", "rankkit.reranking", "rankkit.serve"),
    "rankkit.reranking": ("rankkit.training", "rankkit.dense", "rankkit.serve"),
    # The HTTP service runs models through the inference session only: no trainer, no run files, no indexes.
    "rankkit.serve": ("rankkit.training", "rankkit.dense", "rankkit.reranking", "rankkit.cli"),
    "rankkit.evaluation": ("rankkit.fusion", "rankkit.models"),
    "rankkit.fusion": ("rankkit.evaluation", "rankkit.models"),
}
LAYER_OF = {unit: i for i, units in enumerate(LAYERS) for unit in units}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def unit_of(module: str) -> str:
    """The layered unit a module belongs to: its top-level package or module under rankkit."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else "rankkit"


def imports() -> list[tuple[str, str, int]]:
    """``(importer module, imported rankkit module, line)`` for every import in the package."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        name = module_name(path)
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    targets = [".".join(base + ([node.module] if node.module else []))]
                else:
                    targets = [node.module or ""]
            else:
                continue
            found += [(name, t, node.lineno) for t in targets if t == "rankkit" or t.startswith("rankkit.")]
    return found


IMPORTS = imports()


def test_every_unit_has_a_layer() -> None:
    units = {unit_of(module_name(p)) for p in ROOT.rglob("*.py")}
    assert units <= set(LAYER_OF), f"give these a layer in LAYERS: {sorted(units - set(LAYER_OF))}"


def test_no_import_points_up() -> None:
    wrong = []
    for importer, imported, line in IMPORTS:
        a, b = unit_of(importer), unit_of(imported)
        if a != b and LAYER_OF[b] > LAYER_OF[a] and imported != "rankkit" and (importer, imported) != FACADE:
            wrong.append(f"{importer}:{line} imports {imported} (layer {LAYER_OF[b]} above {LAYER_OF[a]})")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("unit", sorted(FORBIDDEN))
def test_forbidden_imports(unit: str) -> None:
    wrong = [f"{i}:{line} imports {t}" for i, t, line in IMPORTS
             if unit_of(i) == unit and any(t == f or t.startswith(f + ".") for f in FORBIDDEN[unit])]
    assert not wrong, "\n".join(wrong)


def test_no_cycles_between_units() -> None:
    edges: dict[str, set[str]] = {}
    for importer, imported, _ in IMPORTS:
        a, b = unit_of(importer), unit_of(imported)
        if a != b and imported != "rankkit":
            edges.setdefault(a, set()).add(b)

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in edges.get(start, ()):
            if nxt == goal or (nxt not in seen and (seen.add(nxt) or reaches(nxt, goal, seen))):
                return True
        return False

    cycles = sorted(f"{a} <-> {b}" for a in edges for b in edges[a] if reaches(b, a, set()))
    assert not cycles, cycles


def test_model_library_never_imports_training() -> None:
    """The issue's headline contract, spelled out: models, rerank and dense never import training."""
    wrong = [f"{i}:{line}" for i, t, line in IMPORTS
             if unit_of(i) in ("rankkit.models", "rankkit.reranking", "rankkit.dense") and t.startswith("rankkit.training")]
    assert not wrong, wrong


def test_models_never_import_the_runtime_layer() -> None:
    """A model declares its encoder slots (rankkit.models.encoder_slots); exporting and swapping them is
    the runtime layer's business, one floor up."""
    wrong = [f"{i}:{line} imports {t}" for i, t, line in IMPORTS
             if unit_of(i) == "rankkit.models" and (t == "rankkit.runtime" or t.startswith("rankkit.runtime."))]
    assert not wrong, wrong


def test_inference_loads_models_through_the_one_composer() -> None:
    """rerank, explain, dense, the API and the CLI load a model for inference with
    rankkit.runtime.load_for_inference (one device rule), not the model library's loader."""
    wrong = [f"{i}:{line}" for i, t, line in IMPORTS
             if unit_of(i) in ("rankkit.dense", "rankkit.reranking", "rankkit.serve", "rankkit.cli", "rankkit.api")
             and t == "rankkit.models.checkpoint" and _names_imported(i, line) & {"load_for_inference"}]
    assert not wrong, wrong


def _names_imported(module: str, line: int) -> set[str]:
    """The names a ``from ... import`` statement at ``line`` of ``module`` imports."""
    path = ROOT.parent / (module.replace(".", "/") + ".py")
    if not path.is_file():
        path = ROOT.parent / module.replace(".", "/") / "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.lineno == line:
            return {a.name for a in node.names}
    return set()

