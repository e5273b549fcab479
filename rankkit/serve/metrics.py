"""Prometheus metrics of ``rankkit serve`` (``GET /metrics``, the text exposition format).

One registry per service (not the process-wide default), so two services in one process (the tests) keep
their own counts. Names start with ``rankkit_serve_``:

* ``requests_total{endpoint,status}``, ``request_seconds{endpoint}`` (a histogram, admission to answer);
* ``batch_requests`` and ``batch_texts`` (histograms of what each dynamic batch gathered), ``batches_total``;
* ``queue_depth`` (requests waiting, not yet in a batch), ``in_flight`` (admitted, not yet answered);
* ``tokens_total`` and ``model_seconds_total`` (tokens through the model and the seconds it ran: their rates'
  ratio is tokens/s), ``tokens_per_second`` (of the last batch), ``texts_total`` (pairs scored, texts encoded);
* ``rejected_total{reason}`` (``queue_full``, ``timeout``, ``too_large``, ``invalid``, ``draining``),
  ``truncated_texts_total``.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

#: Latency buckets in seconds: a CPU re-ranking of 100 passages takes 0.05-5 s.
LATENCY = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)


class Metrics:
    """The service's counters, gauges and histograms (see the module doc)."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("rankkit_serve_requests", "Requests answered, by endpoint and HTTP status",
                                ("endpoint", "status"), registry=r)
        self.latency = Histogram("rankkit_serve_request_seconds", "Seconds from a request's arrival to its answer",
                                 ("endpoint",), buckets=LATENCY, registry=r)
        self.batch_requests = Histogram("rankkit_serve_batch_requests", "Requests gathered into one dynamic batch",
                                        buckets=SIZES, registry=r)
        self.batch_texts = Histogram("rankkit_serve_batch_texts", "Texts (pairs or inputs) in one dynamic batch",
                                     buckets=SIZES, registry=r)
        self.batches = Counter("rankkit_serve_batches", "Dynamic batches run through the model", registry=r)
        self.queue_depth = Gauge("rankkit_serve_queue_depth", "Requests waiting for a batch", registry=r)
        self.in_flight = Gauge("rankkit_serve_in_flight", "Requests admitted and not yet answered", registry=r)
        self.tokens = Counter("rankkit_serve_tokens", "Tokens through the model (real, not padding)", registry=r)
        self.model_seconds = Counter("rankkit_serve_model_seconds", "Seconds the model ran", registry=r)
        self.tokens_per_second = Gauge("rankkit_serve_tokens_per_second", "Tokens/s in the model, last batch",
                                       registry=r)
        self.texts = Counter("rankkit_serve_texts", "Pairs scored and texts encoded", registry=r)
        self.rejected = Counter("rankkit_serve_rejected", "Requests refused, by reason", ("reason",), registry=r)
        self.truncated = Counter("rankkit_serve_truncated_texts", "Texts the model truncated to its input length",
                                 registry=r)

    def render(self) -> bytes:
        return generate_latest(self.registry)


__all__ = ["Metrics"]
