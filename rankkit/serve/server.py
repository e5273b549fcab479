"""Running the service: the listening socket, uvicorn, one-line logs, and the drain on SIGTERM.

uvicorn serves the Starlette application (:mod:`rankkit.serve.app`). The socket is bound before the model loads
(a port in use is one line at once, not after a minute of loading) and listens once the model is warm. SIGTERM,
SIGINT and SIGHUP start uvicorn's graceful shutdown: it stops accepting connections, closes idle ones, lets every
request already received finish (up to the request timeout plus 5 s), then the application's shutdown lets the
model worker finish its queue; the command then exits 0 with a summary line (requests accepted and answered). A
second SIGINT forces the exit. Logs are one line each, ``rankkit serve: ...``: a log record's traceback is cut
to its exception's type and message (:class:`OneLine`).
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import math
import signal
import socket
import threading
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Callable, Iterator

import uvicorn

from rankkit.errors import RankkitError
from rankkit.serve.app import Service

#: Signals that start the drain.
STOPPING = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


class OneLine(logging.Filter):
    """Every record one line: a traceback becomes `` (Type: message)``, newlines become spaces."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info:
            err = record.exc_info[1]
            if err is not None:
                record.msg = f"{record.getMessage()} ({type(err).__name__}: {' '.join(str(err).split())[:300]})"
                record.args = None
            record.exc_info = None
            record.exc_text = None
        if record.stack_info:
            record.stack_info = None
        message = record.getMessage()
        if "\n" in message:
            record.msg, record.args = " ".join(message.split()), None
        return True


def log_config(access_log: bool) -> dict[str, Any]:
    """uvicorn's and the service's loggers: one line each on stderr, ``rankkit serve: ...``."""
    handler = {"class": "logging.StreamHandler", "stream": "ext://sys.stderr", "formatter": "line",
               "filters": ["one_line"]}
    return {
        "version": 1, "disable_existing_loggers": False,
        "filters": {"one_line": {"()": OneLine}},
        "formatters": {"line": {"format": "rankkit serve: %(message)s"}},
        "handlers": {"stderr": handler},
        "loggers": {
            "uvicorn": {"handlers": ["stderr"], "level": "INFO", "propagate": False},
            "uvicorn.error": {"handlers": ["stderr"], "level": "INFO", "propagate": False},
            "uvicorn.access": {"handlers": ["stderr"], "level": "INFO" if access_log else "WARNING", "propagate": False},
            "rankkit.serve": {"handlers": ["stderr"], "level": "INFO", "propagate": False},
        },
    }


def bind(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (not listening yet); a host that does not resolve, or an address in use or
    not ours, is one line."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as err:
        raise RankkitError(f"--host {host!r} is not an address this machine can listen on ({err})") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(address)
    except OSError as err:
        sock.close()
        raise RankkitError(f"cannot listen on {host}:{port}: {err.strerror or err}") from None
    sock.set_inheritable(True)
    return sock


@dataclass
class ServeReport:
    """How the service ended: the signal that stopped it, requests accepted and answered."""

    signal: str | None = None
    accepted: int = 0
    answered: int = 0
    url: str = ""
    notes: list[str] = field(default_factory=list)


class _Server(uvicorn.Server):
    """uvicorn's server, with rankkit's signal handling (drain, then return: no signal re-raised) and a line
    naming the address once it listens."""

    def __init__(self, config: uvicorn.Config, url: str, on_listening: Callable[[str], None] | None,
                 in_flight: Callable[[], int] = lambda: 0) -> None:
        super().__init__(config)
        self.url = url
        self.on_listening = on_listening
        self.in_flight = in_flight
        self.received: list[int] = []
        #: Requests admitted and not yet answered when the first signal came.
        self.in_flight_at_signal: int | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            logging.getLogger("rankkit.serve").info("listening on %s", self.url)
            if self.on_listening is not None:
                self.on_listening(self.url)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {signum: signal.signal(signum, self._stop) for signum in STOPPING}
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        if not self.received:
            self.in_flight_at_signal = self.in_flight()
            logging.getLogger("rankkit.serve").info(
                "%s: finishing the %d requests in flight, then stopping", signal.Signals(signum).name,
                self.in_flight_at_signal)
        self.received.append(signum)
        self.handle_exit(signum, frame)


def make_server(service: Service, sock: socket.socket, *, access_log: bool = False, max_connections: int = 1024,
                on_listening: Callable[[str], None] | None = None) -> _Server:
    """A uvicorn server for ``service`` on the bound ``sock`` (``server.run(sockets=[sock])`` serves; setting
    ``server.should_exit`` drains and stops it, as SIGTERM does)."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    config = uvicorn.Config(
        service.app(), host=host, port=port, log_config=log_config(access_log), access_log=access_log,
        lifespan="on", limit_concurrency=max_connections + service.limits.max_queue,
        timeout_graceful_shutdown=int(math.ceil(service.limits.request_timeout)) + 5, timeout_keep_alive=5,
        server_header=False, proxy_headers=False,
    )
    return _Server(config, f"http://{shown}:{port}", on_listening, lambda: service.in_flight)


def exposed(host: str) -> bool:
    """Whether ``host`` is reachable from other machines (not a loopback address)."""
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host != "localhost"


def run(service: Service, sock: socket.socket, *, access_log: bool = False, max_connections: int = 1024,
        on_listening: Callable[[str], None] | None = None) -> ServeReport:
    """Serve ``service`` on the bound ``sock`` until a signal drains and stops it."""
    server = make_server(service, sock, access_log=access_log, max_connections=max_connections,
                         on_listening=on_listening)
    logger = logging.getLogger("rankkit.serve")
    if exposed(sock.getsockname()[0]):
        logger.warning("listening beyond this machine (%s): the service has no authentication; put it behind "
                       "your own proxy or firewall", sock.getsockname()[0])
    server.run(sockets=[sock])
    report = ServeReport(signal.Signals(server.received[0]).name if server.received else None,
                         service.accepted, service.answered, server.url)
    logger.info("stopped%s: %d requests accepted, %d answered", f" ({report.signal})" if report.signal else "",
                report.accepted, report.answered)
    return report


__all__ = ["OneLine", "ServeReport", "bind", "exposed", "log_config", "make_server", "run"]
