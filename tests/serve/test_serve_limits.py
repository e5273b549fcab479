"""Limits and failure behaviour of ``rankkit serve``: bad bodies are one 4xx line and the server keeps serving;
a full queue is 429 with Retry-After; a request past its timeout is 503 and, still queued, never scored; a request
the model refuses fails alone; truncation is reported, or refused with ``"truncate": false``."""

from __future__ import annotations

import concurrent.futures
import json
import socket
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from serve_helpers import Reply, get, open_tiny, post, request, serving, tiny_checkpoint

from rankkit.serve import Limits

GOOD = {"query": "apple fruit", "texts": ["apple fruit red", "car engine fuel", "tea leaf cup"]}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from rankkit.testing import tiny_backbone

    root = tmp_path_factory.mktemp("serve-limits")
    return tiny_checkpoint("mono", tiny_backbone(root / "tiny"), root, max_doc_length=24)


@pytest.fixture(scope="module")
def url(checkpoint: Path) -> Iterator[str]:
    limits = Limits(max_texts=1_000, max_text_chars=100_000, max_body_bytes=8 * 1024 * 1024)
    with serving(open_tiny("mono", checkpoint, limits=limits)) as address:
        yield address


def still_serving(url: str) -> None:
    assert get(url, "/health").status == 200
    reply = post(url, "/rerank", GOOD)
    assert reply.status == 200 and len(reply.json) == 3


def one_line_error(reply: Reply, status: int, words: str) -> None:
    assert reply.status == status, (reply.status, reply.body[:300])
    assert reply.headers["content-type"] == "application/json"
    body = reply.json
    assert set(body) == {"error", "error_type"} and "\n" not in body["error"] and len(body["error"]) < 400
    assert words in body["error"], body["error"]
    assert "Traceback" not in reply.body.decode()


BAD_BODIES: list[tuple[str, Any, int, str]] = [
    ("query-a-number", {"query": 1, "texts": ["a"]}, 422, "'query' must be a string, got a number"),
    ("texts-a-string", {"query": "q", "texts": "a"}, 422, "'texts' must be an array of strings"),
    ("text-a-number", {"query": "q", "texts": ["a", 2]}, 422, "texts[1] must be a string"),
    ("text-null", {"query": "q", "documents": [None]}, 422, "documents[0] must be a string, got null"),
    ("document-object-without-text", {"query": "q", "documents": [{"title": "x"}]}, 422, "without 'text'"),
    ("top-n-zero", {**GOOD, "top_n": 0}, 422, "'top_n' must be a whole number"),
    ("top-n-string", {**GOOD, "top_n": "3"}, 422, "'top_n' must be a whole number"),
    ("top-n-float", {**GOOD, "top_n": 2.5}, 422, "'top_n' must be a whole number"),
    ("return-documents-string", {**GOOD, "return_documents": "yes"}, 422, "'return_documents' must be true or false"),
    ("truncate-number", {**GOOD, "truncate": 1}, 422, "'truncate' must be true or false"),
    ("left-truncation", {**GOOD, "truncation_direction": "Left"}, 422, "'truncation_direction' must be 'right'"),
    ("missing-query", {"texts": ["a"]}, 422, "missing field 'query'"),
    ("missing-texts", {"query": "q"}, 422, "missing field 'texts'"),
    ("texts-and-documents", {"query": "q", "texts": ["a"], "documents": ["b"]}, 422, "exactly one"),
    ("surrogate", {"query": "q", "texts": ["a\ud800b"]}, 422, "unpaired surrogate"),
    ("long-text", {"query": "q", "texts": ["word " * 40_000]}, 413, "at most 100,000"),
    ("million-texts", {"query": "q", "texts": ["a"] * 1_000_000}, 413, "1,000,000 entries"),
]


@pytest.mark.parametrize("case", BAD_BODIES, ids=[c[0] for c in BAD_BODIES])
def test_bad_body_is_one_4xx_line(url: str, case: tuple[str, Any, int, str]) -> None:
    _, body, status, words = case
    raw = json.dumps(body, ensure_ascii=True).encode()
    one_line_error(post(url, "/rerank", raw=raw), status, words)
    still_serving(url)


RAW_BODIES: list[tuple[str, bytes, int, str]] = [
    ("empty", b"", 400, "empty"),
    ("not-json", b"query=apple", 400, "not valid JSON"),
    ("truncated-json", b'{"query": "q", "texts": ["a"', 400, "not valid JSON"),
    ("array", b'["q", ["a"]]', 400, "must be a JSON object, got an array"),
    ("invalid-utf8", b'{"query": "\xff\xfeq", "texts": ["a"]}', 400, "not UTF-8"),
    ("nested-1e5", b'{"query": "q", "texts": ["a"], "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 400, "nests too deep"),
    ("huge-integer", b'{"query": "q", "texts": ["a"], "top_n": ' + b"9" * 5_000 + b"}", 400, "not valid JSON"),
    ("nan", b'{"query": "q", "texts": ["a"], "top_n": NaN}', 422, "'top_n' must be a whole number"),
]


@pytest.mark.parametrize("case", RAW_BODIES, ids=[c[0] for c in RAW_BODIES])
def test_malformed_body_is_one_4xx_line(url: str, case: tuple[str, bytes, int, str]) -> None:
    _, raw, status, words = case
    one_line_error(post(url, "/rerank", raw=raw), status, words)
    still_serving(url)


def _raw_exchange(url: str, head: bytes, body: Iterator[bytes]) -> bytes:
    """Send ``head`` then ``body`` chunks until the server answers (it may close early); the response's bytes."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(head)
        try:
            for chunk in body:
                sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server refused the rest, as it should
        data = b""
        while b"\r\n\r\n" not in data or len(data) < data.index(b"\r\n\r\n") + 4 + _length(data):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        return data


def _length(data: bytes) -> int:
    for line in data.split(b"\r\n\r\n")[0].split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":")[1])
    return 0


def test_a_100_mb_body_is_refused_before_it_is_read(url: str) -> None:
    size = 100 * 1024 * 1024
    head = (f"POST /rerank HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {size}\r\n\r\n"
            ).encode()
    started = time.perf_counter()
    mib = 1 << 20
    first = b'{"query": "q", "texts": ["' + b"a" * (mib - 26)
    response = _raw_exchange(url, head, iter([first] + [b"a" * mib] * 3))  # 4 MiB of the 100 are sent
    assert response.startswith(b"HTTP/1.1 413"), response[:200]
    assert b"8,388,608" in response and time.perf_counter() - started < 10
    still_serving(url)


def test_a_chunked_body_past_the_limit_is_refused(url: str) -> None:
    head = b"POST /rerank HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    piece = b"a" * (1 << 20)
    chunks = [b"%x\r\n%s\r\n" % (len(piece), piece) for _ in range(12)] + [b"0\r\n\r\n"]
    response = _raw_exchange(url, head, iter(chunks))
    assert response.startswith(b"HTTP/1.1 413"), response[:200]
    still_serving(url)


def test_wrong_route_and_method_are_json(url: str) -> None:
    one_line_error(get(url, "/nope"), 404, "no such endpoint")
    one_line_error(get(url, "/rerank"), 405, "method not allowed")
    one_line_error(post(url, "/embed", {"inputs": ["a"]}), 400, "not a bi-encoder")
    # A malformed HTTP request never reaches the application: uvicorn's parser answers 400 in one line.
    reply = request(url, "POST", "/rerank", raw=b"{}", headers={"Content-Length": "x"})
    assert reply.status == 400 and reply.body == b"Invalid HTTP request received."
    still_serving(url)


def test_no_traceback_in_the_log(checkpoint: Path, capfd: pytest.CaptureFixture[str]) -> None:
    with serving(open_tiny("mono", checkpoint)) as address:
        for _, raw, _, _ in RAW_BODIES:
            post(address, "/rerank", raw=raw)
        post(address, "/rerank", {"query": 1})
    _, err = capfd.readouterr()
    assert "Traceback" not in err and "Exception" not in err, err[-2000:]


def test_empty_lists_and_top_n(url: str) -> None:
    assert post(url, "/rerank", {"query": "q", "texts": []}).json == []
    assert post(url, "/rerank", {"query": "q", "documents": []}).json["results"] == []
    top = post(url, "/rerank", {**GOOD, "top_n": 2, "return_text": True}).json
    assert len(top) == 2 and all(set(r) == {"index", "score", "text"} for r in top)
    assert [GOOD["texts"][r["index"]] for r in top] == [r["text"] for r in top]


def test_truncation_is_reported_or_refused(url: str) -> None:
    long = "apple " * 80  # 80 tokens: over this mono's 59-token pairs (55 for a text after a one-token query)
    reply = post(url, "/rerank", {"query": "apple", "texts": [long, "apple fruit"]})
    assert reply.status == 200 and reply.headers["x-rankkit-truncated"] == "1"
    assert post(url, "/rerank", {"query": "apple", "texts": ["apple fruit"]}).headers["x-rankkit-truncated"] == "0"
    one_line_error(post(url, "/rerank", {"query": "apple", "texts": [long], "truncate": False}), 413,
                   "exceed the model's input length")
    assert post(url, "/rerank", {"query": "apple", "texts": ["apple"], "truncate": False}).status == 200
    metrics = get(url, "/metrics").body.decode()
    assert "rankkit_serve_truncated_texts_total" in metrics


def blocked(service: Any) -> tuple[threading.Event, list[int]]:
    """Make the service's model worker wait for the returned event before each batch (``service.entered`` is set
    once it waits); counts the batches scored."""
    release, calls = threading.Event(), []
    service.entered = threading.Event()
    original = service.batcher._score

    def score(batch: Any) -> Any:
        service.entered.set()
        assert release.wait(30)
        calls.append(len(batch))
        return original(batch)

    service.batcher._score = score
    return release, calls


def test_full_queue_is_429_with_retry_after(checkpoint: Path) -> None:
    service = open_tiny("mono", checkpoint, limits=Limits(max_queue=2, max_wait_ms=0))
    release, _ = blocked(service)
    with serving(service) as address, concurrent.futures.ThreadPoolExecutor(2) as pool:
        admitted = [pool.submit(post, address, "/rerank", GOOD) for _ in range(2)]
        deadline = time.monotonic() + 10
        while service.in_flight < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        refused = post(address, "/rerank", GOOD)
        one_line_error(refused, 429, "the queue is full")
        assert int(refused.headers["retry-after"]) >= 1
        assert get(address, "/health").status == 200  # health is never queued
        release.set()
        assert [f.result().status for f in admitted] == [200, 200]
        assert post(address, "/rerank", GOOD).status == 200
        metrics = get(address, "/metrics").body.decode()
    assert 'rankkit_serve_rejected_total{reason="queue_full"} 1.0' in metrics


def test_timeout_is_503_and_a_queued_request_is_never_scored(checkpoint: Path) -> None:
    service = open_tiny("mono", checkpoint, limits=Limits(request_timeout=0.5, max_wait_ms=0))
    release, calls = blocked(service)
    with serving(service) as address, concurrent.futures.ThreadPoolExecutor(2) as pool:
        first = pool.submit(post, address, "/rerank", GOOD)
        assert service.entered.wait(10)  # the first is in the worker (blocked); the second waits in the queue
        second = pool.submit(post, address, "/rerank", {"query": "car", "texts": ["car engine"]})
        scoring, waiting = first.result(), second.result()
        one_line_error(scoring, 503, "being scored")
        one_line_error(waiting, 503, "waiting in the queue (it was not scored)")
        assert int(waiting.headers["retry-after"]) >= 1
        release.set()
        time.sleep(0.2)
        assert calls == [1]  # only the first request's batch ran: the timed-out queued one left the queue
        assert post(address, "/rerank", GOOD).status == 200


def test_a_request_the_model_refuses_fails_alone(tmp_path: Path) -> None:
    """A mono whose pairs can outgrow the tiny backbone's 64 positions refuses a long text (422); the requests
    batched with it are answered."""
    from rankkit.testing import tiny_backbone

    checkpoint = tiny_checkpoint("mono", tiny_backbone(tmp_path / "tiny"), tmp_path)  # 259-token pairs
    service = open_tiny("mono", checkpoint, limits=Limits(max_wait_ms=300))
    with serving(service) as address, concurrent.futures.ThreadPoolExecutor(4) as pool:
        bodies = [GOOD, {"query": "apple", "texts": ["apple " * 80]}, GOOD, GOOD]
        replies = list(pool.map(lambda body: post(address, "/rerank", body), bodies))
        batches = get(address, "/metrics").body.decode()
    assert [r.status for r in replies] == [200, 422, 200, 200]
    one_line_error(replies[1], 422, "the model refuses this input")
    assert replies[0].json == replies[2].json == replies[3].json
    assert "rankkit_serve_batches_total" in batches
