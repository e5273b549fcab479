"""The command keeps compiled bytecode in its cache folder when the installed packages cannot keep their own
(issue 36: a read-only image or PYTHONDONTWRITEBYTECODE recompiled torch and transformers at every start)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = ("import sys; from rankkit.cli import bytecode_cache; print(bytecode_cache()); import transformers; "
         "print(transformers.MARK)")


def run(tmp_path: Path, **env: str) -> list[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    child = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120,
                           env={**base, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(ROOT)]),
                                "RANKKIT_CACHE_DIR": str(tmp_path / "cache"), **env})
    assert child.returncode == 0, child.stderr
    return child.stdout.split()


def fake_transformers(tmp_path: Path) -> Path:
    package = tmp_path / "site" / "transformers"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("MARK = 'fake'\n")
    return package


def test_bytecode_goes_to_the_cache_when_it_cannot_go_beside_the_package(tmp_path: Path) -> None:
    package = fake_transformers(tmp_path)
    first = run(tmp_path, PYTHONDONTWRITEBYTECODE="1")
    assert first == [str(tmp_path / "cache" / "pycache"), "fake"]
    compiled = list((tmp_path / "cache" / "pycache").rglob("__init__*.pyc"))
    assert any("transformers" in str(p) for p in compiled), compiled  # kept for the next command
    assert not (package / "__pycache__").exists()  # nothing written beside the package
    assert run(tmp_path, PYTHONDONTWRITEBYTECODE="1") == first


def test_nothing_changes_where_python_keeps_its_own_bytecode(tmp_path: Path) -> None:
    fake_transformers(tmp_path)
    assert run(tmp_path) == ["None", "fake"]  # writable, bytecode allowed: Python's own __pycache__
    assert run(tmp_path, PYTHONDONTWRITEBYTECODE="1") == ["None", "fake"]  # now the pyc exists beside it
    assert run(tmp_path, RANKKIT_BYTECODE_CACHE="0") == ["None", "fake"]
    assert not (tmp_path / "cache" / "pycache").exists()
