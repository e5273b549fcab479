"""What this CPU can do fast: its instruction-set features and the class ``--backend auto`` and
``--precision auto`` choose by.

Features come from ``/proc/cpuinfo`` (Linux ``flags`` on x86, ``Features`` on ARM), else from
``sysctl`` on macOS, else from torch's own dispatch level (``torch.backends.cpu.get_cpu_capability``).
``RANKKIT_CPU_FLAGS`` (space- or comma-separated Linux flag names) replaces them all: for containers that
hide ``/proc/cpuinfo``, to see what ``auto`` picks on another CPU class, and for ``bench/cpu_mask.py``,
which runs the numeric libraries with an older CPU's kernels.
The classes, fastest first, and what sets them apart for text encoders:

* ``amx``: AMX tiles (``amx_bf16``/``amx_int8``, Sapphire Rapids and later), with AVX-512 BF16 and VNNI;
* ``avx512-bf16``: AVX-512 with VNNI (int8 dot products in one instruction) and native bf16
  (``avx512_bf16``: AMD Zen 4/5, Cooper Lake);
* ``avx512-vnni``: AVX-512 with VNNI, bf16 emulated (Cascade Lake, Ice Lake);
* ``avx512``: AVX-512 without VNNI (Skylake-SP);
* ``avx2``: AVX2 + FMA, no VNNI, no native bf16 (Zen 1-3, Haswell to Coffee Lake): int8 dot products
  take three instructions (``vpmaddubsw``, ``vpmaddwd``, ``vpaddd``);
* ``arm64``: AArch64 with NEON (``asimd``); ``dotprod``/``i8mm``/``bf16`` listed when present;
* ``baseline``: anything else.
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess

#: Classes in the order the checks run (first match wins).
CPU_CLASSES = ("amx", "avx512-bf16", "avx512-vnni", "avx512", "avx2", "arm64", "baseline")
#: Environment variable whose flags replace the CPU's own (see the module docstring).
FLAGS_VARIABLE = "RANKKIT_CPU_FLAGS"
#: The flags shown with every speed number and by ``rankkit doctor`` (those that decide the class).
SHOWN_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8",
               "asimd", "asimddp", "i8mm", "bf16")


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (lower case, Linux names), as far as this platform tells."""
    given = os.environ.get(FLAGS_VARIABLE)
    if given is not None and given.strip():
        return frozenset(given.replace(",", " ").lower().split())
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return frozenset(value.split())
    except OSError:
        pass
    if platform.system() == "Darwin":
        try:
            out = subprocess.run(["sysctl", "-a"], capture_output=True, text=True, timeout=5).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        flags = {line.split(":")[0].rsplit(".", 1)[-1].lower() for line in out.splitlines()
                 if line.startswith("hw.optional.") and line.rstrip().endswith(": 1")}
        if platform.machine() == "arm64":
            flags |= {"asimd"}
            flags |= {"bf16"} if "feat_bf16" in flags else set()
            flags |= {"asimddp"} if "feat_dotprod" in flags else set()
            flags |= {"i8mm"} if "feat_i8mm" in flags else set()
        return frozenset(flags)
    return _from_torch()


def _from_torch() -> frozenset[str]:
    """Flags implied by torch's CPU dispatch level (the fallback where no flag list can be read)."""
    try:
        import torch

        level = str(torch.backends.cpu.get_cpu_capability()).upper()
    except Exception:  # noqa: BLE001 - a feature probe must not fail
        return frozenset()
    if level.startswith("AVX512"):
        return frozenset({"avx2", "fma", "avx512f"})
    if level == "AVX2":
        return frozenset({"avx2", "fma"})
    return frozenset({"asimd"}) if platform.machine().lower() in ("arm64", "aarch64") else frozenset()


def cpu_class(flags: frozenset[str] | None = None) -> str:
    """This CPU's class (:data:`CPU_CLASSES`)."""
    flags = cpu_flags() if flags is None else flags
    if {"amx_bf16", "amx_int8"} & flags:
        return "amx"
    if "avx512f" in flags:
        if "avx512_vnni" in flags:
            return "avx512-bf16" if "avx512_bf16" in flags else "avx512-vnni"
        return "avx512"
    if "avx2" in flags and "fma" in flags:
        return "avx2"
    if "asimd" in flags or platform.machine().lower() in ("arm64", "aarch64"):
        return "arm64"
    return "baseline"


def native_bf16(flags: frozenset[str] | None = None) -> bool:
    """Whether bf16 matrix products run in hardware (AVX512-BF16, AMX, or ARM's BF16 extension)."""
    flags = cpu_flags() if flags is None else flags
    return bool({"avx512_bf16", "amx_bf16", "bf16"} & flags)


def describe_cpu(flags: frozenset[str] | None = None) -> str:
    """``avx512-bf16 (avx2 fma avx512f avx512_vnni avx512_bf16)`` style summary for logs and benchmark rows."""
    given = " from " + FLAGS_VARIABLE if flags is None and os.environ.get(FLAGS_VARIABLE, "").strip() else ""
    flags = cpu_flags() if flags is None else flags
    shown = [f for f in SHOWN_FLAGS if f in flags]
    return f"{cpu_class(flags)} ({' '.join(shown) or 'no SIMD flags read'}{given})"


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), or the platform's processor string."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


__all__ = ["CPU_CLASSES", "FLAGS_VARIABLE", "SHOWN_FLAGS", "cpu_class", "cpu_flags", "cpu_model", "describe_cpu", "native_bf16"]
