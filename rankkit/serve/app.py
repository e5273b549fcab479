"""The ASGI application of ``rankkit serve`` (Starlette): routes, admission, timeouts, errors as one JSON line.

Routes: ``POST /rerank`` and ``/v1/rerank`` (every model), ``POST /embed``, ``/embeddings`` and ``/v1/embeddings``
(bi-encoders), ``GET /health``, ``/info`` and ``/metrics`` (:mod:`rankkit.serve.protocol` has the bodies,
:mod:`rankkit.serve.metrics` the metrics).

A scoring request is admitted first (at most ``max_queue`` at once, else 429 with ``Retry-After``, before its
body is read), then its body is read up to ``max_body_bytes`` (413 past it), parsed and checked (4xx, one line),
its truncation predicted (:mod:`rankkit.serve.truncation`), and it joins the model worker's queue
(:mod:`rankkit.serve.batcher`) until it is scored or ``request_timeout`` passes (503; a request still waiting
leaves the queue). Every failure is an answer, never an exception out of the application: the server logs no
traceback (one line for an unexpected error, ``rankkit serve: internal error ...``), the client gets
``{"error": "...", "error_type": "..."}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any, AsyncIterator, Awaitable, Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from rankkit.errors import EnvironmentFailure, RankkitError
from rankkit.models.base import BiEncoder
from rankkit.runtime.session import InferenceSession
from rankkit.serve.batcher import Batcher, Job, estimate_tokens
from rankkit.serve.limits import Limits
from rankkit.serve.metrics import Metrics
from rankkit.serve.protocol import (
    HttpError,
    embed_request,
    embed_response,
    parse_body,
    rerank_request,
    rerank_response,
    too_large,
)
from rankkit.serve.truncation import Truncation

logger = logging.getLogger("rankkit.serve")

#: Bodies above this many bytes are parsed, checked and answered on a thread, not on the event loop.
OFF_LOOP_BYTES = 64 * 1024
#: Requests answered (and their counts) by endpoint, for the metrics' labels.
ENDPOINTS = ("rerank", "embed", "embeddings")


def _error(err: HttpError) -> JSONResponse:
    return JSONResponse(err.body(), status_code=err.status, headers=err.headers)


class Service:
    """One model behind HTTP: its session, worker, limits, metrics and what ``/info`` says."""

    def __init__(self, session: InferenceSession, *, name: str, served_name: str | None = None,
                 limits: Limits | None = None, info: dict[str, Any] | None = None) -> None:
        self.session = session
        self.name = name
        self.served_name = served_name or name
        self.limits = limits or Limits()
        self.metrics = Metrics()
        self.batcher = Batcher(session, self.limits, self.metrics)
        self.truncation = Truncation(session.model)
        self.encodes = isinstance(session.model, BiEncoder)
        #: Requests admitted now (waiting, being read or scored); at most ``limits.max_queue``.
        self.in_flight = 0
        #: Scoring requests admitted and answered since the start (the drain summary).
        self.accepted = 0
        self.answered = 0
        self._info = dict(info or {})

    # -- the application ------------------------------------------------------------------------------------
    def app(self) -> Starlette:
        scoring: list[tuple[str, str, Callable[[Request], Awaitable[Response]]]] = [
            ("/rerank", "rerank", self._rerank), ("/v1/rerank", "rerank", self._rerank),
            ("/embed", "embed", lambda r: self._embed(r, "tei")),
            ("/embeddings", "embeddings", lambda r: self._embed(r, "openai")),
            ("/v1/embeddings", "embeddings", lambda r: self._embed(r, "openai")),
        ]
        routes = [Route(path, self._admitted(endpoint, handler), methods=["POST"])
                  for path, endpoint, handler in scoring]
        routes += [Route("/health", self._health, methods=["GET"]), Route("/info", self._info_route, methods=["GET"]),
                   Route("/metrics", self._metrics, methods=["GET"])]

        async def not_found(_request: Request, exc: Exception) -> Response:
            status = exc.status_code if isinstance(exc, HTTPException) else 500
            what = {404: "no such endpoint: POST /rerank, /embed, /embeddings; GET /health, /info, /metrics",
                    405: "method not allowed here: scoring endpoints take POST, the others GET"}
            return JSONResponse({"error": what.get(status, "request refused"), "error_type": "not_found"
                                 if status == 404 else "validation"}, status_code=status)

        @contextlib.asynccontextmanager
        async def lifespan(_app: Starlette) -> AsyncIterator[None]:
            self.batcher.start()
            try:
                yield
            finally:  # after the server drained its connections: finish what is queued, then stop the worker
                await asyncio.to_thread(self.batcher.stop)

        return Starlette(routes=routes, exception_handlers={HTTPException: not_found}, lifespan=lifespan)

    # -- admission, timing and errors -----------------------------------------------------------------------
    def _admitted(self, endpoint: str, handler: Callable[[Request], Awaitable[Response]]
                  ) -> Callable[[Request], Awaitable[Response]]:
        async def serve(request: Request) -> Response:
            started = time.perf_counter()
            admitted = False
            try:
                if self.in_flight >= self.limits.max_queue:
                    self.metrics.rejected.labels("queue_full").inc()
                    wait = self.batcher.retry_after()
                    raise HttpError(429, f"the queue is full ({self.in_flight} requests admitted, rankkit serve "
                                    f"--max-queue {self.limits.max_queue}): retry after {wait} s",
                                    kind="overloaded", headers={"Retry-After": str(wait)})
                if not self.batcher.alive:
                    raise HttpError(503, f"the model worker is not running ({self.batcher.crashed or 'stopped'})",
                                    kind="unhealthy")
                admitted = True
                self.in_flight += 1
                self.accepted += 1
                self.metrics.in_flight.set(self.in_flight)
                response = await handler(request)
            except HttpError as err:
                if err.status == 413:
                    self.metrics.rejected.labels("too_large").inc()
                elif err.status in (400, 422):
                    self.metrics.rejected.labels("invalid").inc()
                response = _error(err)
            except ClientDisconnect:
                response = Response(status_code=400)  # nobody to answer; counted, not logged
            except Exception as err:  # noqa: BLE001 - never a traceback out of the application
                logger.error("internal error on %s: %s: %s", request.url.path, type(err).__name__,
                             " ".join(str(err).split())[:300])
                response = _error(HttpError(500, f"internal error: {type(err).__name__}", kind="internal"))
            finally:
                if admitted:
                    self.in_flight -= 1
                    self.answered += 1
                    self.metrics.in_flight.set(self.in_flight)
            self.metrics.requests.labels(endpoint, str(response.status_code)).inc()
            self.metrics.latency.labels(endpoint).observe(time.perf_counter() - started)
            return response

        return serve

    async def _body(self, request: Request) -> bytes:
        limit = self.limits.max_body_bytes
        length = request.headers.get("content-length")
        if length is not None:
            if not length.strip().isdigit():
                raise HttpError(400, f"Content-Length is not a number: {length[:40]!r}")
            if int(length) > limit:
                raise too_large(f"the body has {int(length):,} bytes; this service takes at most {limit:,} "
                                f"(rankkit serve --max-body-bytes)")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise too_large(f"the body is over {limit:,} bytes (rankkit serve --max-body-bytes)")
            chunks.append(chunk)
        return b"".join(chunks)

    @staticmethod
    async def _work(size: int, function: Callable[[], Any]) -> Any:
        """``function()`` on a thread for a large body (the event loop keeps answering), inline for a small one."""
        if size > OFF_LOOP_BYTES:
            return await asyncio.to_thread(function)
        return function()

    async def _result(self, job: Job, started: float) -> Any:
        """The job's result from the model worker, within the request's timeout."""
        try:
            self.batcher.submit(job)
        except RuntimeError as err:
            raise HttpError(503, str(err), kind="unhealthy") from None
        remaining = self.limits.request_timeout - (time.perf_counter() - started)
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(job.future)), max(remaining, 0.001))
        except asyncio.TimeoutError:
            waiting = self.batcher.discard(job)
            self.metrics.rejected.labels("timeout").inc()
            where = "waiting in the queue (it was not scored)" if waiting else "being scored"
            raise HttpError(503, f"the request took longer than rankkit serve --request-timeout "
                            f"{self.limits.request_timeout:g} s ({where})", kind="timeout",
                            headers={"Retry-After": str(self.batcher.retry_after())}) from None
        except EnvironmentFailure as err:
            raise HttpError(503, str(err), kind="overloaded", headers={"Retry-After": "5"}) from None
        except RankkitError as err:
            raise HttpError(422, f"the model refuses this input: {err}", kind="model") from None

    # -- scoring endpoints ----------------------------------------------------------------------------------
    async def _rerank(self, request: Request) -> Response:
        started = time.perf_counter()
        body = await self._body(request)

        def check() -> tuple[Any, list[int] | None, bool]:
            parsed = rerank_request(parse_body(body), self.limits)
            cut = self.truncation.texts(parsed.query, parsed.texts) if parsed.texts else []
            return parsed, cut, bool(parsed.texts) and self.truncation.query(parsed.query)

        parsed, cut, query_cut = await self._work(len(body), check)
        if not parsed.truncate and (cut or query_cut):
            what = f"{len(cut)} of its texts" if cut else "its query"
            raise too_large(f"{what} exceed the model's input length ({self.truncation.rule}) and the request says "
                            f"\"truncate\": false")
        headers = self._truncation_headers(cut, query_cut)
        if not parsed.texts:
            return JSONResponse(rerank_response(parsed, [], self.served_name, 0), headers=headers)
        job = Job("rerank", parsed.query, parsed.texts,
                  estimate_tokens(parsed.query, parsed.texts, self.truncation.tokens_per_text))
        scores = await self._result(job, started)
        payload = await self._work(len(body), lambda: rerank_response(parsed, scores.tolist(), self.served_name,
                                                                     job.tokens))
        return JSONResponse(payload, headers=headers)

    async def _embed(self, request: Request, shape: str) -> Response:
        started = time.perf_counter()
        if not self.encodes:
            raise HttpError(400, f"model {self.name!r} is a re-ranker, not a bi-encoder: it has no embeddings "
                            f"(POST /rerank; /embed serves repbert and densetrans)")
        body = await self._body(request)

        def check() -> tuple[Any, list[int] | None]:
            parsed = embed_request(parse_body(body), self.limits, shape)
            return parsed, self.truncation.texts(None, parsed.texts, is_query=parsed.is_query)

        parsed, cut = await self._work(len(body), check)
        if not parsed.truncate and cut:
            raise too_large(f"{len(cut)} of its texts exceed the model's input length ({self.truncation.rule}) and "
                            f"the request says \"truncate\": false")
        headers = self._truncation_headers(cut, False)
        if not parsed.texts:
            import numpy as np

            return JSONResponse(embed_response(parsed, np.zeros((0, 0), dtype=np.float32), self.served_name, 0),
                                headers=headers)
        job = Job("query" if parsed.is_query else "document", "", parsed.texts,
                  estimate_tokens("", parsed.texts, self.truncation.tokens_per_text))
        vectors = await self._result(job, started)
        payload = await self._work(len(parsed.texts) * 4096, lambda: embed_response(parsed, vectors, self.served_name,
                                                                                    job.tokens))
        return JSONResponse(payload, headers=headers)

    def _truncation_headers(self, cut: list[int] | None, query_cut: bool) -> dict[str, str]:
        if cut is None:
            return {}
        if cut:
            self.metrics.truncated.inc(len(cut))
        headers = {"X-Rankkit-Truncated": str(len(cut))}
        if query_cut:
            headers["X-Rankkit-Query-Truncated"] = "true"
        return headers

    # -- the others -----------------------------------------------------------------------------------------
    async def _health(self, _request: Request) -> Response:
        if self.batcher.alive:
            return JSONResponse({"status": "ok"})
        return JSONResponse({"status": "unhealthy", "error": self.batcher.crashed or "the model worker is not running"},
                            status_code=503)

    async def _info_route(self, _request: Request) -> Response:
        return JSONResponse(self.info())

    def info(self) -> dict[str, Any]:
        """Model, revision, backend, precision, device, CPU or GPU, batching, limits, truncation, load now."""
        runtime = self.session.runtime
        out: dict[str, Any] = {
            "model": self.name, "served_model_name": self.served_name,
            "family": "bi-encoder" if self.encodes else "re-ranker",
            "endpoints": ["/rerank", "/v1/rerank"] + (["/embed", "/embeddings", "/v1/embeddings"] if self.encodes else []),
            "lists": "each /rerank request is one list, scored whole (list-wise models see the whole set)",
            "permutation_invariant": bool(type(self.session.model).permutation_invariant),
            "backend": runtime.backend, "quantize": runtime.quantize, "precision": runtime.precision,
            "threads": runtime.threads, "runtime": runtime.describe(), "device": str(self.session.device),
            "session": self.session.describe(),
            "limits": self.limits.describe(), "truncation": self.truncation.describe(),
        }
        out.update(self._info)
        out["load"] = {"in_flight": self.in_flight, "accepted": self.accepted, "answered": self.answered,
                       "texts_per_second": self.batcher.rate}
        return out

    async def _metrics(self, _request: Request) -> Response:
        return Response(self.metrics.render(), media_type=self.metrics.content_type)


__all__ = ["Service"]
