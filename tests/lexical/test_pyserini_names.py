"""Pyserini's names (``--topics dl20``, ``--qrels dl20-passage``, ``--index NAME``) resolved offline from
Pyserini's caches, and a prebuilt index downloaded through Pyserini's own mechanism from 127.0.0.1.

Nothing reaches the network: the topics tests run rankkit in a subprocess whose JVM has its own
``user.home`` (Anserini's cache) and an HTTPS proxy on a closed local port; the index test patches
one test entry into Pyserini's index table, pointing at a local server."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from _lexical_index import QRELS, TOPICS, small_index

ROOT = Path(__file__).resolve().parents[2]


def rankkit(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           # Anserini's cache is <user.home>/.cache/pyserini; port 9 refuses, so a download fails at once.
           "RANKKIT_JAVA_OPTS": f"-Duser.home={home} -Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=9"}
    code = "import sys\nfrom rankkit.cli import main\nmain(sys.argv[1:])"
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=300,
                          check=False)


def test_topics_and_qrels_by_name_from_pyserinis_cache(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cache = home / ".cache" / "pyserini" / "topics-and-qrels"
    cache.mkdir(parents=True)
    shutil.copy(TOPICS, cache / "topics.dl20.txt")
    shutil.copy(QRELS, cache / "qrels.dl20-passage.txt")
    index = small_index()
    by_name = rankkit(home, "retrieve", "--model", "bm25", "--index", str(index), "--topics", "dl20", "--k", "10",
                      "--output", str(tmp_path / "name.run"))
    assert by_name.returncode == 0, by_name.stderr
    by_file = rankkit(home, "retrieve", "--model", "bm25", "--index", str(index), "--topics", str(TOPICS), "--k", "10",
                      "--output", str(tmp_path / "file.run"))
    assert by_file.returncode == 0, by_file.stderr
    assert (tmp_path / "name.run").read_bytes() == (tmp_path / "file.run").read_bytes()
    scored = rankkit(home, "eval", "--qrels", "dl20-passage", str(tmp_path / "name.run"), "-m", "nDCG@10",
                     "--format", "json")
    assert scored.returncode == 0, scored.stderr
    assert '"nDCG@10"' in scored.stdout


def test_a_name_missing_from_the_cache_is_one_line(tmp_path: Path) -> None:
    result = rankkit(tmp_path / "empty", "eval", "--qrels", "dl19-passage", str(tmp_path / "run"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stdout == ""  # Anserini's "Downloading ..." log went to Java's stdout, the process's
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1 and "qrels.dl19-passage.txt is not in its cache" in line
    assert "anserini-tools" in line
    unknown = rankkit(tmp_path / "empty", "eval", "--qrels", "no-such-set", str(tmp_path / "run"))
    assert unknown.returncode == 2 and "no-such-set: no such file" in unknown.stderr


class _Files(BaseHTTPRequestHandler):
    files: dict[str, bytes] = {}

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        data = self.files.get(self.path.strip("/"))
        if data is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def served() -> Iterator[tuple[str, dict[str, bytes]]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Files.files = {}
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", _Files.files
    finally:
        server.shutdown()
        server.server_close()


def _tarball(index: Path, name: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(index, arcname=name)
    return buffer.getvalue()


def test_a_prebuilt_index_by_name_downloads_once_through_pyserini(cli: Callable[..., Any], served: Any, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from pyserini import prebuilt_index_info

    url, files = served
    name = "rankkit-test-small"
    tarball = _tarball(small_index(), f"lucene-inverted.{name}.20261127")
    files[f"lucene-inverted.{name}.20261127.tar.gz"] = tarball
    monkeypatch.setenv("PYSERINI_CACHE", str(tmp_path / "pyserini"))
    monkeypatch.setitem(prebuilt_index_info.TF_INDEX_INFO, name, {
        "description": "rankkit test index", "filename": f"lucene-inverted.{name}.20261127.tar.gz",
        "urls": [f"{url}/lucene-inverted.{name}.20261127.tar.gz"], "md5": hashlib.md5(tarball).hexdigest(),
        "size compressed (bytes)": len(tarball), "documents": 2013, "unique_terms": -1, "downloaded": False})
    result = cli("retrieve", "--model", "bm25", "--index", name, "--topics", TOPICS, "--k", 10, "--output",
                 tmp_path / "name.run")
    assert result.code == 0, result.stderr
    assert result.stdout == ""  # pyserini's download messages go to stderr, never into results
    local = cli("retrieve", "--model", "bm25", "--index", small_index(), "--topics", TOPICS, "--k", 10, "--output",
                tmp_path / "local.run")
    assert local.code == 0 and (tmp_path / "name.run").read_bytes() == (tmp_path / "local.run").read_bytes()
    files.clear()  # the server forgets it: the cached copy is used with no request
    again = cli("retrieve", "--model", "bm25", "--index", name, "--topics", TOPICS, "--k", 10, "--output",
                tmp_path / "again.run")
    assert again.code == 0 and (tmp_path / "again.run").read_bytes() == (tmp_path / "local.run").read_bytes()


def test_a_damaged_prebuilt_index_download_is_refused(cli: Callable[..., Any], served: Any, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from pyserini import prebuilt_index_info

    url, files = served
    name = "rankkit-test-damaged"
    tarball = _tarball(small_index(), name)
    files[f"{name}.tar.gz"] = tarball[: len(tarball) // 2]
    monkeypatch.setenv("PYSERINI_CACHE", str(tmp_path / "pyserini"))
    monkeypatch.setitem(prebuilt_index_info.TF_INDEX_INFO, name, {
        "filename": f"{name}.tar.gz", "urls": [f"{url}/{name}.tar.gz"], "md5": hashlib.md5(tarball).hexdigest()})
    result = cli("retrieve", "--model", "bm25", "--index", name, "--topics", TOPICS, "--output", tmp_path / "x.run")
    assert result.code == 2 and "could not be downloaded" in result.stderr and "checksum" in result.stderr
    assert not (tmp_path / "x.run").exists()
    assert not list((tmp_path / "pyserini" / "indexes").glob(f"{name}.*/"))  # nothing unpacked to trust later
