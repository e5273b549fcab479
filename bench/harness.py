"""The harness every bench script uses: steps, machine description, timing, peak memory.

Bench scripts run as ``python bench/NAME.py ...``; Python puts ``bench/`` on ``sys.path``, so they
``import harness``, and rankkit is installed in the environment, so nothing edits ``sys.path``.

* :class:`Steps` runs a bench's commands (``rankkit`` subcommands or any program) in its output
  folder as steps: a step whose outputs all exist is skipped unless ``force`` (a rerun continues
  an interrupted bench); each is recorded for ``commands.sh`` with its wall seconds and peak
  resident memory.
* :func:`run_steps` runs the named steps chosen on the command line (``--steps a,b,c``, parsed
  by :func:`step_list`), records each step's result under its name in the results dictionary
  and saves the results file after every step (:func:`load_results`, :func:`save_json`), so a
  long bench keeps what it measured.
* :func:`machine` / :func:`machine_line`: CPU model, cores, torch threads, ``OMP_NUM_THREADS``,
  Python / torch / transformers versions and the date.
* :func:`median_seconds` (and :func:`interleaved` for several timers on shared cores): wall time.
* :func:`run_measured`: one child process, its wall seconds and peak resident memory.

Peak memory, the one measurement used here: the kernel's resident-set high-water mark of a
child process, as ``wait4`` reports it when the child exits (``ru_maxrss``, which is what
``/usr/bin/time -v`` prints as "Maximum resident set size"). It counts every page the process
held, torch's and faiss's allocations included (``tracemalloc`` sees only Python's allocator), and
it is one process's number. Two measurements used before are not: ``getrusage(RUSAGE_CHILDREN)``
is the largest of every child reaped so far, not this command's; and on Linux a child inherits
its parent's high-water mark across ``exec`` (the kernel keeps the old address space's peak,
and a ``vfork``-ed child's old address space is its parent's), so ``wait4`` on ``true`` spawned
straight from a bench process holding 800 MB reads 800 MB. :func:`run_measured` therefore starts
the command from a fresh small launcher (``python -S`` that forks, execs the command and reports
``wait4``'s ``ru_maxrss``): the same reading as ``/usr/bin/time -v``, whose ~10 MB is the floor of
any reading, without needing GNU time. A child that wants the peak of one section (a forward
pass, not its model loading) calls :func:`reset_peak_rss` just before it (Linux: ``5`` written to
``/proc/self/clear_refs`` resets the high-water mark to the current resident set); the reading
then covers the section and the exit after it.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: ``../shared/data`` beside the checkout: the public data the benches default to.
SHARED_DATA = ROOT.parent / "shared" / "data"

# -- peak memory -------------------------------------------------------------------------------

#: Forks, execs ``argv[2:]``, waits; writes ``{"maxrss", "seconds"}`` to ``argv[1]``; exits with
#: the command's status (128 + signal when killed). Ctrl-C reaches the command, not the wait.
_LAUNCHER = r"""
import json, os, signal, sys, time
report, argv = sys.argv[1], sys.argv[2:]
started = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(argv[0], argv)
    except OSError as err:
        os.write(2, f"{argv[0]}: {err.strerror}\n".encode())
        os._exit(127)
signal.signal(signal.SIGINT, signal.SIG_IGN)
_, status, usage = os.wait4(pid, 0)
seconds = time.perf_counter() - started
with open(report, "w") as handle:
    json.dump({"maxrss": usage.ru_maxrss, "seconds": seconds, "cpu": usage.ru_utime + usage.ru_stime}, handle)
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


@dataclass
class Measured:
    """One finished child process: exit status, wall seconds, peak resident memory, its output."""

    command: list[str]
    returncode: int
    seconds: float
    peak_rss_mb: float | None
    stdout: str = ""
    stderr: str = ""
    #: User + system CPU seconds of the command and every process it waited for (the launcher's wait4).
    cpu_seconds: float | None = None

    @property
    def ok(self) -> bool:
        """True when the command exited with status 0."""
        return self.returncode == 0

    def error_line(self) -> str:
        """The last non-empty line of stderr (or ``exit N`` when there is none)."""
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        return lines[-1] if lines else f"exit {self.returncode}"

    def tail(self, count: int = 5) -> str:
        """The last ``count`` lines of stderr, or of stdout when stderr is empty."""
        return "\n".join((self.stderr or self.stdout).strip().splitlines()[-count:])


def run_measured(
    command: Sequence[str | Path],
    *,
    cwd: Path | None = None,
    nice: int = 0,
    capture: bool = True,
    env: Mapping[str, str] | None = None,
) -> Measured:
    """Run ``command`` (under ``nice -n NICE`` when ``nice``) and measure it (see the module docstring).

    ``capture``: keep stdout and stderr as text (otherwise they go to this process's). The wall
    seconds are taken by the launcher around the command, so its own start-up is not in them.
    """
    argv = [str(a) for a in command]
    if nice:
        argv = ["nice", "-n", str(nice), *argv]
    with tempfile.TemporaryDirectory(prefix="bench-rss-") as tmp:
        report = Path(tmp) / "rusage.json"
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-S", "-c", _LAUNCHER, str(report), *argv], cwd=cwd, env=env,
            capture_output=capture, text=True, encoding="utf-8", errors="replace", check=False,
        )
        seconds = time.perf_counter() - started
        peak = cpu = None
        if report.exists():
            usage = json.loads(report.read_text(encoding="utf-8"))
            # ru_maxrss is in KiB on Linux, bytes on macOS.
            peak = usage["maxrss"] / (2**20 if sys.platform == "darwin" else 1024)
            seconds = usage["seconds"]
            cpu = usage.get("cpu")
    return Measured(argv, done.returncode, seconds, peak, done.stdout or "", done.stderr or "", cpu)


def _status_mb(name: str) -> float:
    """A memory field of ``/proc/self/status`` (``VmRSS``, ``VmHWM``) in MB."""
    for line in Path("/proc/self/status").read_text(encoding="utf-8").splitlines():
        if line.startswith(name + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {name} in /proc/self/status (peak memory needs Linux)")


def resident_mb() -> float:
    """This process's resident set now, in MB (Linux)."""
    return _status_mb("VmRSS")


@dataclass(frozen=True)
class PeakReset:
    """What :func:`reset_peak_rss` saw: the resident set then and the high-water mark it discarded."""

    rss_mb: float
    previous_peak_mb: float


def reset_peak_rss() -> PeakReset:
    """Reset this process's resident high-water mark to its current resident set (Linux).

    Called in a measured child just before the section of interest: the child's peak that
    :func:`run_measured` reads then covers that section (and the exit), not what came before.
    """
    previous = _status_mb("VmHWM")
    Path("/proc/self/clear_refs").write_text("5", encoding="utf-8")
    return PeakReset(rss_mb=_status_mb("VmRSS"), previous_peak_mb=previous)


# -- steps -------------------------------------------------------------------------------------

@dataclass
class StepResult:
    """One step: its label, the command line recorded, and what running it gave (None: reused)."""

    label: str
    command: str
    seconds: float | None = None
    peak_rss_mb: float | None = None
    error: str | None = None

    @property
    def reused(self) -> bool:
        """True when the step's outputs existed and nothing ran."""
        return self.seconds is None and self.error is None

    def record(self) -> dict[str, Any]:
        """The step as a JSON record: command, wall seconds and peak RSS (or ``reused``)."""
        if self.reused:
            return {"command": self.command, "reused": True}
        entry: dict[str, Any] = {
            "command": self.command,
            "seconds": None if self.seconds is None else round(self.seconds, 1),
            "peak_rss_mb": None if self.peak_rss_mb is None else round(self.peak_rss_mb, 1),
        }
        if self.error is not None:
            entry["error"] = self.error
        return entry


@dataclass
class Steps:
    """Runs a bench's commands in its output folder as steps and keeps them for ``commands.sh``.

    Paths inside ``out`` are written relative to it (short command lines; commands run there),
    other paths absolute. Wall seconds add up and peak RSS is the largest per label.
    """

    out: Path
    force: bool = False
    nice: int = 0
    prog: str = "bench"
    commands: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    peak_rss_mb: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: The precision each ``rankkit train`` step ran in (its rankkit.json; ``--precision auto`` resolves per machine).
    precision: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.out = self.out.resolve()
        self.out.mkdir(parents=True, exist_ok=True)

    def rel(self, path: Path) -> str:
        """A path inside the output folder relative to it, any other absolute."""
        resolved = path.resolve()
        try:
            return str(resolved.relative_to(self.out))
        except ValueError:
            return str(resolved)

    def argv(self, args: Sequence[Any]) -> list[str]:
        """Arguments as strings, paths through :meth:`rel`."""
        return [self.rel(a) if isinstance(a, Path) else str(a) for a in args]

    def done(self, outputs: Sequence[Path], always: bool = False) -> bool:
        """True when the step can be skipped: not ``always``, not forced, and every output exists."""
        return not always and not self.force and bool(outputs) and all(p.exists() for p in outputs)

    def skip(self, label: str, line: str) -> StepResult:
        """Record a step whose outputs are kept from an earlier run (not run again)."""
        self.commands.append(line + "    # output reused")
        print(f"==> {label}: done already, skipped", file=sys.stderr)
        return StepResult(label, line)

    def rankkit(self, label: str, args: Sequence[Any], outputs: Sequence[Path] = (), *, always: bool = False,
                check: bool = True, nice: int | None = None, reuse: bool = False) -> StepResult:
        """``rankkit ARGS`` (as ``python -m rankkit``) unless its ``outputs`` exist; see :meth:`run`."""
        argv = self.argv(args)
        result = self.run(label, [sys.executable, "-m", "rankkit", *argv], outputs, always=always, check=check,
                          nice=nice, reuse=reuse, line=shlex.join(["rankkit", *argv]))
        if argv[:1] == ["train"] and "--output" in argv:
            self.record_precision(label, self.out / argv[argv.index("--output") + 1])
        return result

    def record_precision(self, label: str, checkpoint: Path) -> None:
        """Say which precision a training step ran in (timings depend on it): in commands.sh and on stderr."""
        try:
            training = json.loads((checkpoint / "rankkit.json").read_text(encoding="utf-8")).get("training", {})
        except (OSError, ValueError):
            return
        precision = training.get("precision")
        if precision:
            self.precision[label] = str(precision)
            self.commands[-1] += f"    # trained in {precision}"
            print(f"    {label}: trained in {precision}", file=sys.stderr)

    def run(self, label: str, command: Sequence[Any], outputs: Sequence[Path] = (), *, always: bool = False,
            check: bool = True, nice: int | None = None, reuse: bool = False, line: str | None = None) -> StepResult:
        """Run ``command`` in the output folder unless :meth:`done`; record and measure it.

        ``reuse``: record the step without running it whatever exists (a pass that only tabulates).
        A failed command stops the bench (``SystemExit`` with its last lines) when ``check``;
        otherwise the result carries the last stderr line as ``error`` and the recorded command
        line says ``# FAILED``.
        """
        argv = self.argv(command)
        line = line or shlex.join(argv)
        if reuse or self.done(outputs, always):
            return self.skip(label, line)
        self.commands.append(line)
        print(f"==> {label}\n    $ {line}", file=sys.stderr)
        measured = run_measured(argv, cwd=self.out, nice=self.nice if nice is None else nice)
        self.seconds[label] = self.seconds.get(label, 0.0) + measured.seconds
        if measured.peak_rss_mb is not None:
            self.peak_rss_mb[label] = max(self.peak_rss_mb.get(label, 0.0), measured.peak_rss_mb)
        result = StepResult(label, line, measured.seconds, measured.peak_rss_mb)
        if not measured.ok:
            if check:
                raise SystemExit(f"{self.prog}: step failed ({label}), exit {measured.returncode}:\n"
                                 + measured.tail())
            result.error = measured.error_line()
            self.commands[-1] += f"    # FAILED: {result.error}"
        return result

    def write_commands(self, path: Path, header: str = "") -> None:
        """``commands.sh``: every command recorded, to be run in the output folder."""
        lines = ["#!/usr/bin/env bash", f"# Run in {self.out}", *([f"# {header}"] if header else []),
                 "set -euo pipefail", *self.commands]
        write_text(path, "\n".join(lines) + "\n")


# -- named steps and the results file ------------------------------------------------------------

def step_list(known: Sequence[str]) -> Callable[[str], list[str]]:
    """An argparse ``type`` for ``--steps a,b,c``: the names in the order given, each one of ``known``."""

    def parse(text: str) -> list[str]:
        names = [name.strip() for name in text.split(",") if name.strip()]
        unknown = [name for name in names if name not in known]
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown step(s) {', '.join(unknown)}; known: {', '.join(known)}")
        return names

    return parse


def run_steps(names: Sequence[str], steps: Mapping[str, Callable[[dict[str, Any]], dict[str, Any] | None]],
              results: dict[str, Any], save: Callable[[], None] | None = None) -> dict[str, Any]:
    """Run the steps ``names`` in order, each on its section ``results[name]``; save after each.

    A step receives its section as it stands (what an earlier run recorded, or empty), updates it
    or returns a new one that replaces it; ``save`` writes the results file, so an interrupted
    bench keeps every step it finished.
    """
    for name in names:
        section = results.setdefault(name, {})
        print(f"==> step {name}", file=sys.stderr)
        replaced = steps[name](section)
        if replaced is not None:
            results[name] = replaced
        if save is not None:
            save()
    return results


def load_results(path: Path) -> dict[str, Any]:
    """The results file of an earlier run (the bench resumes from it), or an empty dictionary."""
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def write_text(path: Path, text: str) -> None:
    """Write a text file through a temporary file renamed into place (never half-written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def save_json(path: Path, data: Any, indent: int = 2) -> None:
    """``data`` as JSON (paths and other objects as strings), written atomically."""
    write_text(path, json.dumps(data, indent=indent, default=str) + "\n")


# -- machine description -------------------------------------------------------------------------

def _cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(package: str) -> str | None:
    """An installed distribution's version, without importing it."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def machine(*, torch_threads: bool = False) -> dict[str, Any]:
    """Where and when a bench ran: date, CPU, cores, threads, GPU, Python/torch/transformers versions.

    ``torch_threads`` imports torch for its thread count and GPU; without it, they are reported
    only when the script has imported torch already.
    """
    cores = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    info: dict[str, Any] = {
        "date": datetime.date.today().isoformat(),
        "cpu": _cpu_model(),
        "cpu_flags": _cpu_flags(),
        "arch": platform.machine(),
        "system": platform.system(),
        "cores": cores,
        "usable_cores": usable,
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "torch_threads": None,
        "gpu": None,
        "python": platform.python_version(),
        "torch": _version("torch"),
        "transformers": _version("transformers"),
    }
    if torch_threads or "torch" in sys.modules:
        import torch

        info["torch_threads"] = torch.get_num_threads()
        info["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    return info


def _cpu_flags() -> str:
    """The CPU's class and the flags that decide it (``rankkit.cpu``), named with every speed number."""
    from rankkit.cpu import describe_cpu

    return describe_cpu()


def machine_line(info: Mapping[str, Any] | None = None) -> str:
    """:func:`machine` in one line for a report's title (the date left out: titles show it)."""
    m = dict(info or machine())
    parts = [f"{m['cpu']} ({m['arch']}, {m['system']}{', ' + m['cpu_flags'] if m.get('cpu_flags') else ''})",
             f"{m['cores']} CPU cores" + (f" ({m['usable_cores']} usable)" if m["usable_cores"] != m["cores"] else "")]
    if m["torch_threads"] is not None:
        parts.append(f"torch threads {m['torch_threads']}")
    parts.append(f"OMP_NUM_THREADS={m['OMP_NUM_THREADS'] or 'unset'}")
    if m["gpu"] is not None:
        parts.append("no GPU" if m["gpu"] == "none" else f"GPU {m['gpu']}")
    parts.append(f"Python {m['python']}" + "".join(
        f", {name} {m[name]}" for name in ("torch", "transformers") if m[name]))
    return ", ".join(parts)


# -- timing ------------------------------------------------------------------------------------

def time_calls(fn: Callable[[], Any], repeats: int) -> list[float]:
    """Wall seconds of each of ``repeats`` calls of ``fn``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def median_seconds(fn: Callable[[], Any], repeats: int) -> float:
    """Median wall time of ``repeats`` calls of ``fn``."""
    return statistics.median(time_calls(fn, repeats))


def interleaved(timers: Mapping[str, Callable[[], Any]], repeats: int) -> dict[str, list[float]]:
    """Wall seconds of each timer, ``repeats`` rounds of one call each, so load changes hit all alike."""
    samples: dict[str, list[float]] = {name: [] for name in timers}
    for _ in range(repeats):
        for name, fn in timers.items():
            samples[name] += time_calls(fn, 1)
    return samples


# -- data shared by the benches ------------------------------------------------------------------

def dl_pool_corpus(dl_dir: Path, target: Path, limit: int | None = None) -> int:
    """The DL19 + DL20 candidate pools as one TSV (first occurrence of each pid; texts agree).

    ``limit``: only the first ``limit`` passages. Returns the number of passages written.
    """
    from rankkit.formats import atomic_write

    seen: set[str] = set()
    with atomic_write(target) as out:
        for year in ("dl19", "dl20"):
            with gzip.open(dl_dir / "derived" / f"{year}.passages.union5runs.tsv.gz", "rt", encoding="utf-8") as src:
                for line in src:
                    pid = line.split("\t", 1)[0]
                    if pid not in seen and (limit is None or len(seen) < limit):
                        seen.add(pid)
                        out.write(line if line.endswith("\n") else line + "\n")
    return len(seen)

