"""``rankkit serve`` as a command: bad options are one line (exit 2) before any model loads; SIGTERM under load
drains the requests in flight (every request the server accepted is answered 200) and exits 0."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from serve_helpers import tiny_checkpoint

from rankkit.testing import tiny_backbone


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("serve-cli")
    return tiny_checkpoint("mono", tiny_backbone(root / "tiny"), root, max_doc_length=24)


def test_help_lists_the_limits(cli: Any) -> None:
    res = cli("serve", "--help")
    assert res.code == 0
    for option in ("--max-queue", "--max-texts", "--request-timeout", "--max-wait-ms", "--batch-tokens", "--host"):
        assert option in res.stdout
    # rankkit rerank's inference-time model options, generated from the models' declarations (issue 40)
    for option in ("--pooling", "--query-prefix", "--max-passages", "--max-set-size"):
        assert option in res.stdout, option


@pytest.mark.parametrize("options, words", [
    (["--port", "70000"], "--port must be between 0 and 65535"),
    (["--max-queue", "0"], "--max-queue must be between 1"),
    (["--request-timeout", "0"], "--request-timeout"),
    (["--max-wait-ms", "-1"], "--max-wait-ms"),
    (["--max-texts", "x"], "--max-texts"),
    (["--host", "no such host!"], "--host 'no such host!' is not an address"),
    (["--backend", "nope"], "backend"),
    (["--max-set-size", "0"], "--max-set-size"),
    (["--pooling", "cls"], "--pooling"),  # mono declares no pooling: refused as rankkit rerank refuses it
])
def test_bad_options_are_one_line(cli: Any, checkpoint: Path, options: list[str], words: str) -> None:
    res = cli("serve", "--model", "mono", "--checkpoint", checkpoint, *options)
    assert res.code == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rankkit: error:") and words in lines[0], res.stderr


def test_a_port_in_use_and_a_wrong_model_are_one_line(cli: Any, checkpoint: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = cli("serve", "--model", "mono", "--checkpoint", checkpoint, "--port", port)
    assert res.code == 2 and res.stderr.startswith(f"rankkit: error: cannot listen on 127.0.0.1:{port}")
    for args, words in ((["--model", "nope", "--checkpoint", checkpoint], "nope"),
                        (["--model", "mono"], "zero-shot")):
        res = cli("serve", *args, "--port", "0")
        assert res.code == 2 and len(res.stderr.strip().splitlines()) == 1 and words in res.stderr, res.stderr


def start(checkpoint: Path, *options: str) -> tuple[subprocess.Popen[str], str, list[str]]:
    """``rankkit serve`` in a child process on a free port; its URL and (growing) stderr lines."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    child = subprocess.Popen([sys.executable, "-m", "rankkit", "serve", "--model", "mono", "--checkpoint",
                              str(checkpoint), "--port", "0", "--backend", "torch", "--precision", "fp32", *options],
                             stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
    lines: list[str] = []
    found = threading.Event()

    def read() -> None:
        assert child.stderr is not None
        for line in child.stderr:
            lines.append(line.rstrip("\n"))
            if "listening on http://" in line:
                found.set()

    threading.Thread(target=read, daemon=True).start()
    if not found.wait(120):
        child.kill()
        raise AssertionError("\n".join(lines))
    url = next(line for line in lines if "listening on" in line).split("listening on ")[1]
    return child, url, lines


def test_sigterm_under_load_answers_every_accepted_request(checkpoint: Path) -> None:
    child, url, lines = start(checkpoint, "--max-wait-ms", "150")  # batches wait: requests are in flight at SIGTERM
    host, port = url.removeprefix("http://").rsplit(":", 1)
    body = json.dumps({"query": "apple fruit", "texts": ["apple fruit red", "car engine fuel", "tea leaf cup"] * 3})
    outcomes: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def client() -> None:
        while not stop.is_set():
            conn = http.client.HTTPConnection(host, int(port), timeout=60)
            try:
                conn.request("POST", "/rerank", body=body, headers={"Content-Type": "application/json"})
                response = conn.getresponse()
                data = response.read()
                ok = response.status == 200 and len(json.loads(data)) == 9
                outcome = "ok" if ok else f"bad {response.status} {data[:200]!r}"
            except (ConnectionRefusedError, ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected):
                outcome = "not accepted"  # the server had stopped listening, or closed an idle connection
                time.sleep(0.05)
            finally:
                conn.close()
            with lock:
                outcomes.append(outcome)

    threads = [threading.Thread(target=client, daemon=True) for _ in range(8)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    while outcomes.count("ok") < 16 and time.monotonic() < deadline:
        time.sleep(0.05)
    while time.monotonic() < deadline:  # signal while requests are admitted and unanswered
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("GET", "/info")
        in_flight = json.loads(conn.getresponse().read())["load"]["in_flight"]
        conn.close()
        if in_flight >= 2:
            break
    child.send_signal(signal.SIGTERM)
    code = child.wait(60)
    stop.set()
    for thread in threads:
        thread.join(30)
    log = "\n".join(lines)
    assert code == 0, log
    summary = [line for line in lines if "requests accepted" in line]
    assert summary, log
    accepted, answered = (int(w) for w in summary[-1].split(": ")[-1].replace(",", "").split()[::3][:2])
    assert [o for o in outcomes if o.startswith("bad")] == []
    assert accepted == answered == outcomes.count("ok") >= 16, (summary, outcomes.count("ok"))
    assert "Traceback" not in log
    # Requests were in flight when the signal came (the server counts them), and every one was answered.
    drained = [line for line in lines if "SIGTERM: finishing the" in line]
    assert drained and int(drained[0].split("finishing the ")[1].split()[0]) >= 1, log
