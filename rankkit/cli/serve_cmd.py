"""``rankkit serve``: a re-ranker or bi-encoder behind HTTP (``/rerank``, ``/embed``), with dynamic batching."""

from __future__ import annotations

from typing import Any, Optional

import typer

from rankkit.cli.app import MAX_COUNT, MAX_TOKENS, app, float_range, int_range
from rankkit.cli.model_options import RERANK_PANEL, declaration_of, model_options_of, rerank_options, rerank_settings
from rankkit.cli.runtime_options import (
    backend_option,
    device_for,
    max_tokens_option,
    precision_option,
    quantize_option,
    runtime_of,
    threads_option,
)

LIMITS = "Limits"


@app.command("serve")
@model_options_of("serve", rerank_options, RERANK_PANEL)
def serve_command(
    model: str = typer.Option(..., "--model", help="Any model rankkit rerank takes (rankkit models lists them): a re-ranker answers POST /rerank, a bi-encoder (repbert, densetrans) /rerank and /embed."),
    checkpoint: Optional[str] = typer.Option(None, "--checkpoint", help="A folder or a hub id ORG/NAME[@REVISION], as for rankkit rerank (without one: repbert's packaged all-MiniLM-L6-v2)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on: 127.0.0.1 (this machine only) unless told; 0.0.0.0 or :: for every interface (no authentication: put it behind your own proxy)."),
    port: int = typer.Option(8080, "--port", help="Port to listen on (0: any free port, printed).", callback=int_range(0, 65535)),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Pairs per encoder forward pass at most, as in rankkit rerank [default: 32 on the CPU; on CUDA as many as --max-tokens allows].", callback=int_range(1, MAX_COUNT)),
    max_length: Optional[int] = typer.Option(None, "--max-length", help="Tokens per input, as rankkit rerank --max-length [default: as trained].", callback=int_range(1, MAX_TOKENS)),
    served_model_name: Optional[str] = typer.Option(None, "--served-model-name", help="The name responses give as 'model' (unless set: the checkpoint as given, else the model's name)."),
    max_texts: int = typer.Option(1_000, "--max-texts", rich_help_panel=LIMITS, help="Texts per request at most (candidates of /rerank, inputs of /embed); more is 413.", callback=int_range(1, 1_000_000)),
    max_text_chars: int = typer.Option(100_000, "--max-text-chars", rich_help_panel=LIMITS, help="Characters per text (and query) at most; more is 413. Within it, texts are truncated to the model's tokens as it was trained (reported in X-Rankkit-Truncated).", callback=int_range(1, MAX_COUNT)),
    max_body_bytes: int = typer.Option(32 * 1024 * 1024, "--max-body-bytes", rich_help_panel=LIMITS, help="Bytes per request body at most; more is 413.", callback=int_range(1, MAX_COUNT)),
    max_queue: int = typer.Option(64, "--max-queue", rich_help_panel=LIMITS, help="Requests admitted at once (waiting or being scored); one more is answered 429 with Retry-After.", callback=int_range(1, 1_000_000)),
    max_wait_ms: float = typer.Option(5.0, "--max-wait-ms", rich_help_panel=LIMITS, help="Milliseconds a request waits for others to join its batch (0: none).", callback=float_range(0, 10_000)),
    batch_tokens: int = typer.Option(32_768, "--batch-tokens", rich_help_panel=LIMITS, help="Estimated tokens a dynamic batch gathers from concurrent requests (at least one request).", callback=int_range(1, MAX_COUNT)),
    request_timeout: float = typer.Option(300.0, "--request-timeout", rich_help_panel=LIMITS, help="Seconds a request may take from admission to answer; later is 503 (a request still queued leaves the queue).", callback=float_range(0, 86_400, min_open=True)),
    max_connections: int = typer.Option(1_024, "--max-connections", rich_help_panel=LIMITS, help="Open connections at most (beyond them and the queue, 503).", callback=int_range(1, 1_000_000)),
    access_log: bool = typer.Option(False, "--access-log", help="Log one line per request."),
    backend: str = backend_option(),
    quantize: str = quantize_option(),
    threads: Optional[int] = threads_option(),
    precision: str = precision_option(),
    max_tokens: Optional[int] = max_tokens_option(),
    **model_options: Any,
) -> None:
    """Serve a model over HTTP: POST /rerank (TEI's and infinity's shapes), POST /embed and /embeddings
    (bi-encoders), GET /health, /info and /metrics (Prometheus).

    Scores equal rankkit rerank's for the same texts and runtime. Concurrent requests are batched (whole
    lists); SIGTERM finishes the requests in flight, then exits 0.
    """
    runtime = runtime_of(backend, quantize, threads, precision)  # a bad value: one line, before torch loads
    from rankkit.models.checkpoint import model_class
    from rankkit.serve import Limits, open_service
    from rankkit.serve.server import bind, run

    model_class(model, checkpoint)  # an unknown model or a checkpoint of another model: one line, before any work
    # The same inference-time model options as rankkit rerank, checked by the model's declaration before any work.
    overrides = rerank_settings(declaration_of(model, checkpoint), model_options)
    limits = Limits(max_texts=max_texts, max_text_chars=max_text_chars, max_body_bytes=max_body_bytes,
                    max_queue=max_queue, max_wait_ms=max_wait_ms, batch_tokens=batch_tokens,
                    request_timeout=request_timeout)
    sock = bind(host, port)  # a port in use is one line now, not after the model loads
    try:
        service = open_service(model, checkpoint, runtime, device_for(device, runtime), batch_size=batch_size,
                               max_tokens=max_tokens, max_length=max_length, limits=limits,
                               served_name=served_model_name, settings=overrides)
        run(service, sock, access_log=access_log, max_connections=max_connections)
    finally:
        sock.close()
