"""bench/cpu_mask.py: a patched CPUID answers with AVX-512, VNNI and BF16 removed; an unpatched one is untouched."""

from __future__ import annotations

import importlib.util
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = r"""
#include <cpuid.h>
#include <stdio.h>
int main(void) {
    unsigned a, b, c, d, a1, b1, c1, d1;
    __cpuid_count(7, 0, a, b, c, d);
    __cpuid_count(7, 1, a1, b1, c1, d1);
    /* AVX2 (EBX 5), AVX512F (EBX 16), AVX512_VNNI (ECX 11), AVX_VNNI and AVX512_BF16 (7.1 EAX 4, 5). */
    printf("%u %u %u %u %u\n", (b >> 5) & 1, (b >> 16) & 1, (c >> 11) & 1, (a1 >> 4) & 1, (a1 >> 5) & 1);
    return 0;
}
"""

pytestmark = pytest.mark.skipif(
    platform.machine() != "x86_64" or sys.platform != "linux" or not shutil.which("gcc") or not shutil.which("objdump"),
    reason="bench/cpu_mask.py needs Linux x86-64, gcc and objdump")


def load_tool() -> object:
    spec = importlib.util.spec_from_file_location("cpu_mask", ROOT / "bench" / "cpu_mask.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_patched_cpuid_hides_the_newer_features(tmp_path: Path) -> None:
    tool: object = load_tool()
    source = tmp_path / "features.c"
    source.write_text(PROGRAM, encoding="utf-8")
    library = tmp_path / "libfeatures.so"
    # A shared library, as the patched packages are: the program is its code, run through a tiny main.
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", "-Dmain=features_main", "-o", str(library), str(source)],
                   check=True)
    runner = tmp_path / "runner.c"
    runner.write_text("int features_main(void); int main(void) { return features_main(); }\n", encoding="utf-8")
    program = tmp_path / "features"
    subprocess.run(["gcc", "-o", str(program), str(runner), str(library), f"-Wl,-rpath,{tmp_path}"], check=True)
    trap = tmp_path / "libcpuid_mask.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(trap), str(ROOT / "bench/cpu_mask/cpuid_mask.c")],
                   check=True)

    real = subprocess.run([str(program)], capture_output=True, text=True, check=True).stdout.split()
    assert real[0] == "1", "the test machine has AVX2"

    assert tool.patch(library) == 2  # type: ignore[attr-defined]
    assert library.read_bytes().count(b"\x06\x06") >= 2
    env = {**os.environ, "LD_PRELOAD": str(trap), "CPUID_MASK": "avx2", "CPUID_MASK_COUNT": "1"}
    masked = subprocess.run([str(program)], capture_output=True, text=True, env=env, check=True)
    assert masked.stdout.split() == ["1", "0", "0", "0", "0"]  # AVX2 kept; AVX-512, VNNI, AVX-VNNI, BF16 gone
    assert "2 CPUID instructions answered" in masked.stderr

    kept = subprocess.run([str(program)], capture_output=True, text=True, check=True,
                          env={**env, "CPUID_MASK": "avx512"}).stdout.split()
    assert kept == ["1", real[1], "0", "0", "0"]  # AVX-512 F as the CPU has it; VNNI and BF16 gone

    # Without the trap library a patched CPUID is an illegal instruction, not a silent wrong answer.
    crashed = subprocess.run([str(program)], capture_output=True, text=True)
    assert crashed.returncode == -4  # SIGILL
