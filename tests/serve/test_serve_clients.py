"""The Python clients the README shows work against ``rankkit serve`` as written there: plain ``requests`` for the
TEI and infinity shapes of /rerank, and the ``openai`` client for /v1/embeddings (it asks for base64 vectors)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from serve_helpers import open_tiny, serving, tiny_checkpoint

from rankkit.testing import tiny_backbone, tiny_documents


@pytest.fixture(scope="module")
def repbert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("serve-clients")
    return tiny_checkpoint("repbert", tiny_backbone(root / "tiny"), root)


def test_requests_rerank_both_shapes(repbert: Path) -> None:
    requests = pytest.importorskip("requests")
    texts = list(tiny_documents().values())[:5]
    with serving(open_tiny("repbert", repbert)) as url:
        tei = requests.post(f"{url}/rerank", json={"query": "apple fruit", "texts": texts}, timeout=30)
        infinity = requests.post(f"{url}/rerank", json={"query": "apple fruit", "documents": texts, "top_n": 2,
                                                        "return_documents": True}, timeout=30)
    tei.raise_for_status()
    infinity.raise_for_status()
    ranked = tei.json()
    assert sorted(r["index"] for r in ranked) == list(range(5))
    results = infinity.json()["results"]
    assert [r["index"] for r in results] == [r["index"] for r in ranked[:2]]
    assert [r["relevance_score"] for r in results] == [r["score"] for r in ranked[:2]]
    assert [r["document"] for r in results] == [texts[r["index"]] for r in ranked[:2]]


def test_openai_client_embeddings(repbert: Path) -> None:
    openai = pytest.importorskip("openai")
    import requests

    texts = list(tiny_documents().values())[:4]
    with serving(open_tiny("repbert", repbert)) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        answer = client.embeddings.create(model="repbert", input=texts)
        expected = requests.post(f"{url}/embed", json={"inputs": texts}, timeout=30).json()
    got = np.array([item.embedding for item in answer.data])
    assert got.shape == (4, len(expected[0])) and np.abs(got - np.array(expected)).max() <= 1e-6
    assert answer.usage.total_tokens > 0
