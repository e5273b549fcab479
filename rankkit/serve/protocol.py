"""Request bodies in, response bodies out: the shapes TEI, infinity, Cohere and OpenAI clients already speak.

``POST /rerank`` (and ``/v1/rerank``)::

    {"query": "...", "texts": ["...", ...]}                      text-embeddings-inference (TEI)
        -> [{"index": 3, "score": 4.1}, ...]                       best first ("text" with "return_text")
    {"query": "...", "documents": ["...", ...], "top_n": 10}     infinity / Cohere
        -> {"object": "rerank", "results": [{"index": 3, "relevance_score": 4.1}, ...], "model": ...,
            "usage": {"prompt_tokens": ..., "total_tokens": ...}, "id": ..., "created": ...}

``documents`` may also hold Cohere's ``{"text": "..."}`` objects. ``top_n`` (or TEI's ``top_n``-less form: all)
keeps the best ``n``; ``return_documents`` / ``return_text`` add the texts. Scores are the model's own, exactly
as ``rankkit rerank`` writes them (a cross-encoder's logit, MatRank's vote); ``raw_scores`` is accepted for
compatibility and changes nothing. Equal scores keep the input order.

``POST /embed`` (TEI: ``{"inputs": "..." | [...], "normalize": bool}`` -> ``[[...], ...]``) and ``POST /embeddings``
/ ``/v1/embeddings`` (OpenAI and infinity: ``{"input": ..., "encoding_format": "float" | "base64"}`` ->
``{"object": "list", "data": [{"object": "embedding", "index": i, "embedding": ...}], ...}``): a bi-encoder's
vectors, as ``rankkit index --kind dense`` computes them (``"is_query": true`` encodes queries, as
``rankkit retrieve`` does; ``normalize`` unset keeps the model's own vectors).

Unknown fields are ignored (clients send their own: ``model``, ``truncation_direction``); a known field of the
wrong type, a missing one, or a body that is not a JSON object is one 4xx line (:class:`HttpError`).
"""

from __future__ import annotations

import base64
import json
import math
import time
import uuid
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from rankkit.serve.limits import Limits


class HttpError(Exception):
    """A request the service refuses: ``status``, one line of ``message``, extra ``headers`` (``Retry-After``)."""

    def __init__(self, status: int, message: str, *, kind: str = "validation",
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = " ".join(message.split())
        self.kind = kind
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        """TEI's error shape, ``{"error": ..., "error_type": ...}``."""
        return {"error": self.message, "error_type": self.kind}


def too_large(message: str) -> HttpError:
    return HttpError(413, message, kind="payload_too_large")


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def parse_body(body: bytes) -> dict[str, Any]:
    """The JSON object of a request body; 400 for anything else (empty, not UTF-8, not JSON, nested deeper than
    the parser's recursion limit, not an object)."""
    if not body.strip():
        raise HttpError(400, "the request body is empty: send a JSON object")
    if body[:3] == b"\xef\xbb\xbf":
        body = body[3:]
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as err:
        raise HttpError(400, f"the request body is not UTF-8 (byte {err.start}: {body[err.start:err.start + 1]!r})"
                        ) from None
    try:
        value = json.loads(text)
    except RecursionError:  # the C parser counts its depth against Python's recursion limit (about 1,000)
        raise HttpError(400, "the JSON body nests too deep (a request needs 3 levels)") from None
    except json.JSONDecodeError as err:
        raise HttpError(400, f"the body is not valid JSON: {err.msg} at line {err.lineno} column {err.colno}") from None
    except ValueError as err:  # e.g. an integer of more digits than Python converts
        raise HttpError(400, f"the body is not valid JSON: {str(err)[:200]}") from None
    if not isinstance(value, dict):
        raise HttpError(400, f"the body must be a JSON object, got {_type_name(value)}")
    return value


def _flag(body: dict[str, Any], *names: str, default: bool | None = False) -> bool | None:
    for name in names:
        if name in body and body[name] is not None:
            value = body[name]
            if not isinstance(value, bool):
                raise HttpError(422, f"{name!r} must be true or false, got {_type_name(value)}")
            return value
    return default


def _text(value: Any, where: str, limits: Limits) -> str:
    if not isinstance(value, str):
        raise HttpError(422, f"{where} must be a string, got {_type_name(value)}")
    if len(value) > limits.max_text_chars:
        raise too_large(f"{where} has {len(value):,} characters; this service takes at most {limits.max_text_chars:,} "
                        f"(rankkit serve --max-text-chars)")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        raise HttpError(422, f"{where} holds an unpaired surrogate {value[err.start]!r} at character {err.start} "
                        f"(not Unicode text)") from None
    return value


def _texts(body: dict[str, Any], field: str, limits: Limits, *, objects: bool = False,
           single: bool = False) -> list[str]:
    value = body[field]
    if single and isinstance(value, str):
        return [_text(value, repr(field), limits)]
    if not isinstance(value, list):
        shape = "a string or an array of strings" if single else "an array of strings"
        raise HttpError(422, f"{field!r} must be {shape}, got {_type_name(value)}")
    if len(value) > limits.max_texts:
        raise too_large(f"{field!r} has {len(value):,} entries; this service takes at most {limits.max_texts:,} a request "
                        f"(rankkit serve --max-texts)")
    out = []
    for i, item in enumerate(value):
        if objects and isinstance(item, dict):  # Cohere's {"text": ...}
            if "text" not in item:
                raise HttpError(422, f"{field}[{i}] is an object without 'text'")
            item = item["text"]
        out.append(_text(item, f"{field}[{i}]", limits))
    return out


@dataclass(frozen=True)
class RerankRequest:
    """One query and its candidate list (a list-wise model sees the whole list)."""

    query: str
    texts: list[str]
    #: ``texts`` (TEI: a list of results) or ``documents`` (infinity/Cohere: an object).
    shape: str
    top_n: int | None
    return_texts: bool
    truncate: bool
    model: str | None


def rerank_request(body: dict[str, Any], limits: Limits) -> RerankRequest:
    if "query" not in body:
        raise HttpError(422, "missing field 'query' (the query text)")
    query = _text(body["query"], "'query'", limits)
    given = [name for name in ("texts", "documents") if name in body]
    if len(given) != 1:
        raise HttpError(422, "give the candidates as 'texts' (TEI) or 'documents' (infinity, Cohere): exactly one"
                        if given else "missing field 'texts' (or 'documents'): the candidate texts to re-rank")
    shape = given[0]
    texts = _texts(body, shape, limits, objects=shape == "documents")
    top_n = body.get("top_n")
    if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1):
        raise HttpError(422, f"'top_n' must be a whole number of at least 1, got {json.dumps(top_n)[:40]}")
    truncate = _flag(body, "truncate", default=True)
    direction = body.get("truncation_direction")
    if direction is not None and (not isinstance(direction, str) or direction.lower() != "right"):
        raise HttpError(422, f"'truncation_direction' must be 'right': the model was trained on the start of each text, "
                        f"got {json.dumps(direction)[:40]}")
    _flag(body, "raw_scores")  # accepted and checked; the scores are always the model's own
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise HttpError(422, f"'model' must be a string, got {_type_name(model)}")
    return RerankRequest(query, texts, shape, top_n, bool(_flag(body, "return_documents", "return_text")),
                         bool(truncate), model)


@dataclass(frozen=True)
class EmbedRequest:
    """Texts to encode with a bi-encoder."""

    texts: list[str]
    #: ``tei`` (a bare list of vectors) or ``openai`` (infinity and OpenAI's list object).
    shape: str
    is_query: bool
    normalize: bool | None
    truncate: bool
    base64: bool
    model: str | None


def embed_request(body: dict[str, Any], limits: Limits, shape: str) -> EmbedRequest:
    field = "inputs" if shape == "tei" else "input"
    if field not in body:
        raise HttpError(422, f"missing field {field!r} (a text or an array of texts)")
    texts = _texts(body, field, limits, single=True)
    fmt = body.get("encoding_format", "float")
    if shape == "tei" or fmt is None:
        fmt = "float"
    if fmt not in ("float", "base64"):
        raise HttpError(422, f"'encoding_format' must be 'float' or 'base64', got {json.dumps(fmt)[:40]}")
    direction = body.get("truncation_direction")
    if direction is not None and (not isinstance(direction, str) or direction.lower() != "right"):
        raise HttpError(422, f"'truncation_direction' must be 'right', got {json.dumps(direction)[:40]}")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise HttpError(422, f"'model' must be a string, got {_type_name(model)}")
    return EmbedRequest(texts, shape, bool(_flag(body, "is_query")), _flag(body, "normalize", default=None),
                        bool(_flag(body, "truncate", default=True)), fmt == "base64", model)


# -- responses --------------------------------------------------------------------------------------------
def _finite(values: Sequence[float]) -> None:
    if not all(math.isfinite(v) for v in values):
        raise HttpError(500, "the model gave a score that is not a finite number", kind="model")


def rerank_response(request: RerankRequest, scores: Sequence[float], model: str, tokens: int) -> Any:
    """The ranked candidates, best first (equal scores in input order), in the request's shape."""
    _finite(scores)
    order = sorted(range(len(scores)), key=lambda i: -scores[i])[: request.top_n]
    if request.shape == "texts":
        out = []
        for i in order:
            entry: dict[str, Any] = {"index": i, "score": float(scores[i])}
            if request.return_texts:
                entry["text"] = request.texts[i]
            out.append(entry)
        return out
    results = []
    for i in order:
        result: dict[str, Any] = {"relevance_score": float(scores[i]), "index": i}
        if request.return_texts:
            result["document"] = request.texts[i]
        results.append(result)
    return {"object": "rerank", "results": results, "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            "id": f"rankkit-{uuid.uuid4()}", "created": int(time.time())}


def embed_response(request: EmbedRequest, vectors: np.ndarray, model: str, tokens: int) -> Any:
    """The vectors (float32, input order) in the request's shape."""
    if request.normalize:
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = vectors / np.maximum(norms, 1e-12)
    if not np.isfinite(vectors).all():
        raise HttpError(500, "the model gave a vector that is not finite", kind="model")
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if request.shape == "tei":
        return vectors.tolist()
    data = []
    for i, row in enumerate(vectors):
        embedding: Any = base64.b64encode(row.astype("<f4").tobytes()).decode("ascii") if request.base64 else row.tolist()
        data.append({"object": "embedding", "embedding": embedding, "index": i})
    return {"object": "list", "data": data, "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}, "id": f"rankkit-{uuid.uuid4()}",
            "created": int(time.time())}


__all__ = ["EmbedRequest", "HttpError", "RerankRequest", "embed_request", "embed_response", "parse_body",
           "rerank_request", "rerank_response", "too_large"]
