"""The service's limits: what one request may carry, how long it may wait, how much may queue.

Every limit is named, has a default sized for a CPU re-ranking service (a request is one query and its
top 100-1,000 candidates) and an option of ``rankkit serve``; :meth:`Limits.describe` is what ``/info``
reports. What happens past each one:

=========================  ================================================================================
limit                      past it
=========================  ================================================================================
``max_body_bytes``         413, before the body is read further (``Content-Length`` or the bytes so far)
``max_texts``              413 (a request of more candidates than this is refused, not cut)
``max_text_chars``         413 (a text this long is refused: document models read a whole document, so
                           cutting characters would change its score silently)
model's tokens per text    the text is truncated as the model was trained (``rankkit rerank`` does the
                           same) and the response says how many were (``X-Rankkit-Truncated``); a request
                           with ``"truncate": false`` gets 413 instead
``max_queue``              429 with ``Retry-After`` (seconds, from the recent throughput)
``request_timeout``        503 with ``Retry-After``; a request still waiting leaves the queue unscored
JSON nested too deep       400 (past the parser's recursion limit, about 1,000 levels)
=========================  ================================================================================
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from rankkit.errors import RankkitError


@dataclass(frozen=True)
class Limits:
    """What ``rankkit serve`` accepts and holds (see the module doc)."""

    #: Texts (candidates, or inputs to embed) per request.
    max_texts: int = 1_000
    #: Characters per text (and per query).
    max_text_chars: int = 100_000
    #: Bytes of a request body.
    max_body_bytes: int = 32 * 1024 * 1024
    #: Requests admitted at once (waiting plus being scored); one more is answered 429.
    max_queue: int = 64
    #: How long the first request of a batch waits for others to join it, in milliseconds (0: never).
    max_wait_ms: float = 5.0
    #: Estimated tokens a dynamic batch gathers from concurrent requests (at least one request a batch).
    batch_tokens: int = 32_768
    #: Seconds a request may take from admission to its answer (a full queue of CPU re-rankings takes minutes:
    #: the queue's limit, not the timeout, is what pushes back first).
    request_timeout: float = 300.0

    def __post_init__(self) -> None:
        for name in ("max_texts", "max_text_chars", "max_body_bytes", "max_queue", "batch_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise RankkitError(f"--{name.replace('_', '-')} must be a whole number of at least 1, got {value!r}")
        if not 0 <= self.max_wait_ms <= 10_000:
            raise RankkitError(f"--max-wait-ms must be between 0 and 10000, got {self.max_wait_ms}")
        if not 0 < self.request_timeout <= 86_400:
            raise RankkitError(f"--request-timeout must be above 0 and at most 86400 seconds, got {self.request_timeout}")

    def describe(self) -> dict[str, Any]:
        """The limits as ``/info`` reports them."""
        return asdict(self)


__all__ = ["Limits"]
