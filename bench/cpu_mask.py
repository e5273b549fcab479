#!/usr/bin/env python
"""Run rankkit's numeric libraries as on an older CPU class: AVX2 kernels on an AVX-512 machine.

    python bench/cpu_mask.py build [--into runs/cpu-mask]          # once: copy and patch the libraries
    python bench/cpu_mask.py check [--into runs/cpu-mask]          # what each library now detects
    python bench/cpu_mask.py run [--into DIR] [--mask avx2] -- python bench/inference.py ...

Issue 26 needs numbers from AVX2-only CPUs (no AVX-512, no VNNI, no native bf16), and sessions do not
choose their machine. torch, ONNX Runtime, OpenVINO, numpy and faiss each pick their kernels (and JIT
their code) from the CPUID instruction. ``build`` copies those packages from this interpreter's
site-packages into ``DIR/site`` and replaces every CPUID instruction in their shared libraries (found by
``objdump -d``) with two bytes that fault (``06 06``); ``bench/cpu_mask/cpuid_mask.c``, compiled here
and loaded with ``LD_PRELOAD`` by ``run``, answers each fault with the real CPUID minus the features the
emulated class lacks. The libraries then run their AVX2 code paths natively: the same arithmetic as an
AVX2-only CPU (int8 products through ``vpmaddubsw`` with its 16-bit saturation, bf16 emulated in fp32,
so quality numbers are exact), at this core's speed for AVX2 code (so speed ratios are an estimate of,
not a substitute for, a real AVX2 machine: a Zen 5 core runs 256-bit code with its own port layout and
caches). ``run`` also sets ``RANKKIT_CPU_FLAGS`` (rankkit's ``--backend auto`` then chooses for the
emulated class) and glibc's ``hwcaps`` tunable (its string functions, the only code not patched).

Needs gcc and objdump (binutils) and Linux x86-64; ``build`` takes a few minutes and ~1.3 GB of disk. Under
pytest add ``-p no:faulthandler`` (its handler takes SIGILL first).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "bench" / "cpu_mask" / "cpuid_mask.c"
#: Packages whose libraries choose kernels by CPUID (and the wheels' vendored library folders).
PACKAGES = ("torch", "onnxruntime", "openvino", "numpy", "numpy.libs", "faiss", "faiss_cpu.libs")
CPUID = b"\x0f\xa2"
FAULTING = b"\x06\x06"  # PUSH ES twice: invalid in 64-bit mode, never emitted by a compiler
#: The flags each mask leaves (Linux /proc/cpuinfo names), for RANKKIT_CPU_FLAGS.
MASKED_FLAGS = {"avx2": "avx avx2 fma f16c bmi1 bmi2 sse4_2",
                "avx512": "avx avx2 fma f16c bmi1 bmi2 sse4_2 avx512f avx512cd avx512bw avx512dq avx512vl"}
#: glibc's string functions choose by its own (unpatched) CPUID at start-up.
GLIBC_TUNABLES = {"avx2": "glibc.cpu.hwcaps=-AVX512F,-AVX512CD,-AVX512BW,-AVX512DQ,-AVX512VL,-AVX512_VNNI,"
                          "-AVX512_BF16,-AVX_VNNI,-AVX512_VBMI,-AVX512_VBMI2",
                  "avx512": "glibc.cpu.hwcaps=-AVX512_VNNI,-AVX512_BF16,-AVX_VNNI"}


def is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(4) == b"\x7fELF"
    except OSError:
        return False


def load_segments(data: bytes) -> list[tuple[int, int, int, bool]]:
    """(virtual address, file offset, file size, executable) of each PT_LOAD segment of a 64-bit ELF file."""
    if data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    segments = []
    for index in range(phnum):
        p_type, p_flags, p_offset, p_vaddr, _, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + index * phentsize)
        if p_type == 1:  # PT_LOAD
            segments.append((p_vaddr, p_offset, p_filesz, bool(p_flags & 1)))
    return segments


def cpuid_addresses(path: Path) -> list[int]:
    """Virtual addresses of the CPUID instructions in ``path``'s code, as objdump disassembles it."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(path)], capture_output=True, text=True,
                         check=True).stdout
    return [int(match.group(1), 16) for match in re.finditer(r"^\s*([0-9a-f]+):\s+cpuid\s*$", out, re.MULTILINE)]


def patch(path: Path) -> int:
    """Replace each CPUID instruction in ``path`` (in place) with :data:`FAULTING`; the number replaced."""
    data = bytearray(path.read_bytes())
    segments = load_segments(bytes(data))
    count = 0
    for address in cpuid_addresses(path):
        for vaddr, offset, size, executable in segments:
            if executable and vaddr <= address < vaddr + size:
                at = offset + address - vaddr
                if data[at:at + 2] != CPUID:
                    raise ValueError(f"{path}: objdump's cpuid at {address:#x} is not 0f a2 in the file")
                data[at:at + 2] = FAULTING
                count += 1
                break
    if count:
        path.write_bytes(bytes(data))
    return count


def build(into: Path) -> dict[str, object]:
    """Copy :data:`PACKAGES` into ``into/site``, patch their CPUID instructions, compile the trap library."""
    site = Path(sysconfig.get_paths()["purelib"])
    target = into / "site"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    started = time.time()
    patched: dict[str, int] = {}
    for name in PACKAGES:
        source = site / name
        if not source.exists():
            continue
        shutil.copytree(source, target / name, symlinks=True)
        for path in sorted((target / name).rglob("*")):
            if path.is_file() and not path.is_symlink() and ".so" in path.name and is_elf(path):
                count = patch(path)
                if count:
                    patched[str(path.relative_to(target))] = count
    # The packages' dist-info folders, so importlib.metadata versions resolve the same.
    for info in site.glob("*.dist-info"):
        if info.name.split("-")[0].lower().replace("_", "") in {p.replace("_", "").replace(".libs", "")
                                                                  for p in PACKAGES}:
            shutil.copytree(info, target / info.name, symlinks=True)
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(into / "libcpuid_mask.so"), str(SOURCE)],
                   check=True)
    summary = {"site": str(target), "from": str(site), "patched": patched,
               "cpuid_instructions": sum(patched.values()), "seconds": round(time.time() - started, 1)}
    (into / "cpu-mask.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def environment(into: Path, mask: str) -> dict[str, str]:
    """The environment that runs a command under the mask."""
    if not (into / "libcpuid_mask.so").exists():
        raise SystemExit(f"cpu_mask: {into} is not built; run: python bench/cpu_mask.py build --into {into}")
    env = dict(os.environ)
    env["LD_PRELOAD"] = " ".join(filter(None, [str((into / "libcpuid_mask.so").resolve()),
                                               env.get("LD_PRELOAD", "")]))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str((into / "site").resolve()), str(ROOT),
                                                      env.get("PYTHONPATH", "")]))
    env["CPUID_MASK"] = mask
    env["RANKKIT_CPU_FLAGS"] = MASKED_FLAGS[mask]
    env["GLIBC_TUNABLES"] = GLIBC_TUNABLES[mask]
    return env


CHECK = r"""
import json, sys
import numpy, torch
report = {"python": sys.version.split()[0], "torch": torch.__file__,
          "torch_capability": torch.backends.cpu.get_cpu_capability()}
try:
    from numpy._core._multiarray_umath import __cpu_features__ as features
    report["numpy_avx512f"], report["numpy_avx2"] = features.get("AVX512F"), features.get("AVX2")
except Exception as error:
    report["numpy"] = repr(error)
try:
    import openvino
    caps = openvino.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    report["openvino_capabilities"] = list(caps)
except Exception as error:
    report["openvino"] = repr(error)
try:
    import onnxruntime
    report["onnxruntime"] = onnxruntime.__file__
except Exception as error:
    report["onnxruntime"] = repr(error)
from rankkit.cpu import describe_cpu
report["rankkit_cpu"] = describe_cpu()
print(json.dumps(report, indent=2))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("build", "check", "run"))
    parser.add_argument("--into", type=Path, default=ROOT / "runs" / "cpu-mask")
    parser.add_argument("--mask", choices=sorted(MASKED_FLAGS), default="avx2")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="after --: the command to run (run)")
    args = parser.parse_args()
    if args.action == "build":
        summary = build(args.into)
        print(json.dumps({k: v for k, v in summary.items() if k != "patched"}, indent=2))
        print(f"{len(summary['patched'])} libraries patched (list in {args.into / 'cpu-mask.json'})")  # type: ignore[arg-type]
        return 0
    env = environment(args.into, args.mask)
    env["CPUID_MASK_COUNT"] = "1"
    if args.action == "check":
        return subprocess.run([sys.executable, "-c", CHECK], env=env).returncode
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("run needs a command after --")
    return subprocess.run(command, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
