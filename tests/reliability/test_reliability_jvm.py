"""The JVM under an address-space limit (issue 38): `index --kind bm25` under ``ulimit -v`` ends in a complete
index or one rankkit line (exit 1: the machine's limit), never only the JVM's own words, never a JVM abort that
leaves ``hs_err_pid*.log`` in the working folder and a staging folder behind (docs/RELIABILITY.md)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "corpus_small" / "passages.tsv.gz"


@pytest.mark.parametrize("limit_mb", [1536, 2048, 3072, 4096])
def test_bm25_indexing_under_an_address_space_limit(tmp_path: Path, limit_mb: int) -> None:
    """Before: 2-3 GB gave "Error occurred during initialization of VM / Could not allocate compressed class
    space" and exit 1 with no rankkit line; 4 GB a JVM abort (native memory for metaspace) writing
    hs_err_pid*.log into the working folder. Now the JVM is sized to the space left (checked first in a
    child ``java -version`` under the same limit): the index is built, or one line says what is missing."""
    work = tmp_path / "work"
    work.mkdir()
    limit = limit_mb << 20

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "RANKKIT_HEARTBEAT": "0", "RANKKIT_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("RANKKIT_JAVA_OPTS", None)
    index = tmp_path / "ix"
    result = subprocess.run([sys.executable, "-m", "rankkit", "index", "--kind", "bm25", "--corpus", str(CORPUS),
                             "--index", str(index)], cwd=work, env=env, capture_output=True, text=True, timeout=300,
                            preexec_fn=cap, check=False)
    errors = [line for line in result.stderr.splitlines() if line.startswith("rankkit: error:")]
    if result.returncode == 0:
        assert (index / "rankkit-index.json").is_file(), result.stderr
    else:
        assert result.returncode == 1 and len(errors) == 1, result.stderr[-2000:]
        assert "address space" in errors[0] and "Traceback" not in result.stderr, errors[0]
        assert "Error occurred during initialization of VM" not in result.stderr
        assert not index.exists()
    assert not list(work.iterdir()), list(work.iterdir())  # no hs_err_pid*.log where the command ran
    assert not [p for p in tmp_path.iterdir() if ".rktmp-" in p.name]
    if limit_mb <= 1536:
        assert result.returncode == 1, result.stderr  # 1.5 GB cannot hold Java's reservations
    if limit_mb >= 3072:
        assert result.returncode == 0, result.stderr  # 3 GB and more: the index, built


@pytest.mark.parametrize("options, reason", [("-Xmx1k", "Too small maximum heap"),
                                             ("-XX:+NoSuchOption", "Unrecognized VM option 'NoSuchOption'")])
def test_java_options_that_do_not_start_are_one_line(tmp_path: Path, options: str, reason: str) -> None:
    """``RANKKIT_JAVA_OPTS`` the JVM refuses: its own words ended the process (exit 1, no rankkit line), or came
    before rankkit's. Now the options are tried in a child first: one line naming them, exit 2."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "RANKKIT_HEARTBEAT": "0", "RANKKIT_CACHE_DIR": str(tmp_path / "cache"), "RANKKIT_JAVA_OPTS": options}
    result = subprocess.run([sys.executable, "-m", "rankkit", "index", "--kind", "bm25", "--corpus", str(CORPUS),
                             "--index", str(tmp_path / "ix")], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300, check=False)
    lines = [line for line in (result.stderr + result.stdout).splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1, result.stderr + result.stdout
    assert lines[0].startswith("rankkit: error: Java does not start with RANKKIT_JAVA_OPTS=") and reason in lines[0]
    assert not (tmp_path / "ix").exists()
