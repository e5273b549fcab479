"""Installing rankkit prints no setuptools warnings (issue 39: 55 lines of them for the deprecated ``license``
table, and an "Editable installation" notice): the package metadata and the editable wheel build with warnings as
errors, and the metadata carries the SPDX licence and its file."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_metadata_builds_without_a_warning(tmp_path: Path) -> None:
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "rankkit", tmp_path / "rankkit", ignore=shutil.ignore_patterns("__pycache__"))
    # The metadata, and the editable wheel `pip install -e .` (make install) builds.
    code = ("from setuptools import build_meta\nbuild_meta.build_editable('wheel')\n"
            "print(build_meta.prepare_metadata_for_build_wheel('meta'))")
    (tmp_path / "meta").mkdir()
    (tmp_path / "wheel").mkdir()
    done = subprocess.run([sys.executable, "-W", "error", "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "warning" not in done.stderr.lower(), done.stderr[-2000:]
    metadata = (tmp_path / "meta" / done.stdout.split()[-1] / "METADATA").read_text(encoding="utf-8")
    assert "License-Expression: Apache-2.0" in metadata and "License-File: LICENSE" in metadata
