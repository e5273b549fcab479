"""``rankkit serve``: a model behind HTTP, with dynamic batching, through the inference session.

Layout:

* :mod:`rankkit.serve.limits`: what a request may carry and how long it may wait (:class:`Limits`);
* :mod:`rankkit.serve.protocol`: request and response bodies in the shapes TEI, infinity, Cohere and OpenAI
  clients speak, and the 4xx errors;
* :mod:`rankkit.serve.truncation`: which texts the model will cut (reported, never done here);
* :mod:`rankkit.serve.batcher`: the model worker thread and its queue (dynamic batching);
* :mod:`rankkit.serve.metrics`: Prometheus metrics;
* :mod:`rankkit.serve.app`: the Starlette application (:class:`Service`);
* :mod:`rankkit.serve.server`: uvicorn, the socket, the drain on SIGTERM.

:func:`open_service` loads a model exactly as ``rankkit rerank`` does (:func:`rankkit.runtime.load_for_inference`
and an :class:`~rankkit.runtime.session.InferenceSession`), warms it up and returns the :class:`Service`.
The stack is uvicorn + Starlette: a plain ASGI server and a small routing layer (no request models: bodies are
checked by hand so that every refusal is one line naming the field).
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from rankkit.serve.limits import Limits

#: Padded lengths of an OpenVINO service's batches are multiples of this many tokens (see :func:`open_service`).
OPENVINO_BUCKET = 32

#: Names importing :mod:`rankkit.serve` gives without loading Starlette, uvicorn or torch.
__all__ = ["Limits", "open_service"]


def open_service(model: str, checkpoint: str | os.PathLike[str] | None, runtime: Any, device: str = "auto", *,
                 batch_size: int | None = None, max_tokens: int | None = None, max_length: int | None = None,
                 limits: Limits | None = None, served_name: str | None = None, warm: bool = True,
                 settings: dict[str, Any] | None = None) -> Any:
    """Model ``model`` from ``checkpoint`` on ``runtime`` (a :class:`rankkit.runtime.Runtime`) and ``device``, in an
    inference session with ``batch_size`` rows and ``max_tokens`` (as ``rankkit rerank``'s options), ``max_length``
    tokens per input if given (``rankkit rerank --max-length``), behind a :class:`~rankkit.serve.app.Service`.
    ``settings``: the model's inference-time overrides (``rankkit rerank``'s model options, checked by the model's
    declaration), as :func:`rankkit.runtime.load_for_inference` takes them."""
    import torch

    from rankkit.console import log
    from rankkit.cpu import cpu_model, describe_cpu
    from rankkit.runtime import InferenceSession, load_for_inference
    from rankkit.runtime.session import default_batching
    from rankkit.serve.app import Service
    from rankkit.serve.batcher import warm_up
    from rankkit.version import __version__

    loaded = load_for_inference(model, checkpoint, runtime, device, settings=settings)
    batching = default_batching(loaded.device, batch_size, max_tokens)
    if loaded.runtime.backend == "openvino":
        # OpenVINO keeps ~1.2 MB for every input shape it has run (CPU_RUNTIME_CACHE_CAPACITY=0 and malloc_trim
        # change nothing; docs/RESULTS.md issue 40), and a server meets a new shape with almost every request.
        # Lengths in steps of OPENVINO_BUCKET bound the shapes to rows x max_length / OPENVINO_BUCKET; scores
        # move by < 1e-7 in fp32 (bf16: within its own noise).
        batching = replace(batching, bucket=max(batching.bucket, OPENVINO_BUCKET))
    session = InferenceSession.of(loaded, batching=batching)
    if max_length is not None:
        session.model.set_max_length(max_length)
    source = session.model.source
    provenance = source.provenance() if source is not None else None
    revision = None
    if source is not None:  # a hub commit, else the weights' SHA-256 (a local folder), else the package's name
        revision = source.commit or (f"sha256:{provenance['weights_sha256']}" if provenance and
                                     provenance.get("weights_sha256") else source.revision or source.package)
    info: dict[str, Any] = {
        "checkpoint": str(checkpoint) if checkpoint is not None else None,
        "revision": revision, "source": provenance,
        "cpu": describe_cpu(), "cpu_model": cpu_model(),
        "gpu": torch.cuda.get_device_name(loaded.device) if loaded.device.type == "cuda" else None,
        "rankkit": __version__,
    }
    service = Service(session, name=model, served_name=served_name or (str(checkpoint) if checkpoint else model),
                      limits=limits, info=info)
    if warm:
        warm_up(session, service.encodes, log)
    return service

