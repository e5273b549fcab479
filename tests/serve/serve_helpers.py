"""A service on 127.0.0.1 in a thread (the real uvicorn server, a real socket) and a small HTTP client."""

from __future__ import annotations

import contextlib
import http.client
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from rankkit.serve.app import Service


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


def request(url: str, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
            headers: dict[str, str] | None = None, timeout: float = 60.0) -> Reply:
    """One request on a fresh connection: ``body`` sent as JSON, or ``raw`` bytes as they are."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        response = conn.getresponse()
        return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
    finally:
        conn.close()


def post(url: str, path: str, body: Any = None, **kwargs: Any) -> Reply:
    return request(url, "POST", path, body, **kwargs)


def get(url: str, path: str) -> Reply:
    return request(url, "GET", path)


@contextlib.contextmanager
def serving(service: Service) -> Iterator[str]:
    """``service`` listening on a free port of 127.0.0.1 in a thread; yields its URL; drains and stops it after."""
    from rankkit.serve.server import bind, make_server

    sock = bind("127.0.0.1", 0)
    listening = threading.Event()
    server = make_server(service, sock, on_listening=lambda _url: listening.set())
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        assert listening.wait(30), "the service did not start"
        yield server.url
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def tiny_checkpoint(name: str, backbone: Path, folder: Path, **settings: Any) -> Path:
    """A freshly initialised ``name`` on the tiny backbone (seeded), saved as a checkpoint."""
    import torch

    from rankkit.models import create_model
    from rankkit.models.checkpoint import save_model

    torch.manual_seed(0)
    target = folder / name
    save_model(create_model(name, str(backbone), **settings), target, {})
    return target


def open_tiny(name: str, checkpoint: Path, **kwargs: Any) -> Service:
    from rankkit.runtime import Runtime
    from rankkit.serve import open_service

    return open_service(name, checkpoint, Runtime("torch", "none", None, "fp32"), "cpu", **kwargs)
