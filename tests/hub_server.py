"""A small stand-in for the Hugging Face hub on 127.0.0.1, for the download tests (tests/test_hub.py).

It answers the few endpoints ``huggingface_hub.snapshot_download`` uses, with the hub's own shapes
and error codes: ``GET /api/models/ORG/NAME[/revision/REV]`` (the commit), ``GET
/api/models/ORG/NAME/tree/REV`` (the file listing), and ``HEAD``/``GET
/ORG/NAME/resolve/REV/PATH`` (file metadata headers and bytes, ``Range`` honoured). 404s carry
``X-Error-Code`` (``RepoNotFound``, ``RevisionNotFound``, ``EntryNotFound``) as the hub's do.

Faults for the tests: ``drop`` (file paths whose GET sends half its bytes and closes the
connection), ``delay`` (seconds slept between 4 KiB chunks, so a progress bar has time to beat),
and a count of the file GETs served (``downloads``).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse


@dataclass
class Repo:
    """One repository: commits (sha -> {path: bytes}) and refs (branch -> sha)."""

    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)

    def add_commit(self, files: dict[str, bytes], *, branch: str | None = "main") -> str:
        digest = hashlib.sha1()
        for name in sorted(files):
            digest.update(name.encode() + b"\0" + files[name])
        digest.update(str(len(self.commits)).encode())
        sha = digest.hexdigest()
        self.commits[sha] = dict(files)
        if branch is not None:
            self.refs[branch] = sha
        return sha

    def resolve(self, revision: str) -> str | None:
        if revision in self.commits:
            return revision
        return self.refs.get(revision)


def folder_files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by its relative path (a saved model folder as a repository's files)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class FakeHub:
    """The server; use as a context manager, then point ``HF_ENDPOINT`` at :attr:`url`."""

    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.drop: set[str] = set()
        self.delay = 0.0
        self.downloads: list[str] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def repo(self, repo_id: str) -> Repo:
        return self.repos.setdefault(repo_id, Repo())

    def __enter__(self) -> "FakeHub":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _json(self, data: Any) -> None:
                self._send(200, json.dumps(data).encode(), {"Content-Type": "application/json"})

            def _error(self, code: str, message: str) -> None:
                self._send(404, json.dumps({"error": message}).encode(),
                           {"Content-Type": "application/json", "X-Error-Code": code, "X-Error-Message": message})

            def _repo(self, parts: list[str]) -> tuple[str, Repo | None]:
                repo_id = "/".join(parts[:2])
                return repo_id, hub.repos.get(repo_id)

            def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
                self.do_GET()

            def do_GET(self) -> None:  # noqa: N802
                path = unquote(urlparse(self.path).path).strip("/")
                parts = path.split("/")
                if parts[:2] == ["api", "models"]:
                    self._api(parts[2:])
                elif len(parts) >= 5 and parts[2] == "resolve":
                    self._file(parts)
                else:
                    self._error("EntryNotFound", f"no route {path}")

            def _api(self, parts: list[str]) -> None:
                repo_id, repo = self._repo(parts)
                if repo is None:
                    self._error("RepoNotFound", f"Repository {repo_id} not found")
                    return
                rest = parts[2:]
                revision = "main"
                if rest[:1] in (["revision"], ["tree"]) and len(rest) >= 2:
                    revision = rest[1]
                commit = repo.resolve(revision)
                if commit is None:
                    self._error("RevisionNotFound", f"Invalid rev id: {revision}")
                    return
                files = repo.commits[commit]
                if rest[:1] == ["tree"]:
                    self._json([{"type": "file", "oid": _blob_id(data), "size": len(data), "path": name}
                                for name, data in sorted(files.items())])
                    return
                self._json({"id": repo_id, "modelId": repo_id, "sha": commit, "private": False,
                            "siblings": [{"rfilename": name} for name in sorted(files)]})

            def _file(self, parts: list[str]) -> None:
                repo_id, repo = self._repo(parts)
                if repo is None:
                    self._error("RepoNotFound", f"Repository {repo_id} not found")
                    return
                commit = repo.resolve(parts[3])
                if commit is None:
                    self._error("RevisionNotFound", f"Invalid rev id: {parts[3]}")
                    return
                name = "/".join(parts[4:])
                data = repo.commits[commit].get(name)
                if data is None:
                    self._error("EntryNotFound", f"{name} does not exist on {parts[3]}")
                    return
                headers = {"X-Repo-Commit": commit, "ETag": f'"{_blob_id(data)}"', "Accept-Ranges": "bytes",
                           "Content-Type": "application/octet-stream"}
                if self.command == "HEAD":
                    self._send(200, data, headers)
                    return
                hub.downloads.append(f"{repo_id}/{name}")
                start = 0
                ranged = self.headers.get("Range", "")
                if ranged.startswith("bytes="):
                    start = int(ranged[len("bytes="):].split("-", 1)[0] or 0)
                body = data[start:]
                self.send_response(206 if start else 200)
                for key, value in headers.items():
                    self.send_header(key, value)
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if name in hub.drop:
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                for offset in range(0, len(body), 4096):
                    self.wfile.write(body[offset:offset + 4096])
                    if hub.delay:
                        self.wfile.flush()
                        time.sleep(hub.delay)

        return Handler
