"""The Python API on rankkit's inference runtimes and with a progress bar: ``rankkit.rerank`` and
``rankkit.load_model`` take ``rankkit rerank``'s backend options, and ``rerank`` scores in the command's
chunks under a bar of pairs."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

import rankkit
from rankkit.errors import RankkitError
from rankkit.formats import read_topics
from rankkit.reranking import score_lists

CHECKPOINTS = Path(__file__).parents[1] / "data" / "checkpoints-v0.1.0"
SMALL = Path(__file__).parents[1] / "data" / "corpus_small"

PASSAGES = {f"d{i}": text for i, text in enumerate([
    "apple fruit red apple", "car engine fuel car", "river water flow", "apple red fruit", "the oil crisis of 1973",
    "fuel prices rose in october", "a red car by the river", "water, fruit and fuel",
])}


def small_run() -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    topics = dict(list(read_topics(SMALL / "topics.tsv").items())[:3])
    docids = list(PASSAGES)
    run = {qid: {d: float(-i) for i, d in enumerate(docids[k:k + 6])} for k, qid in enumerate(topics)}
    return run, topics


@pytest.fixture
def mono(tmp_path: Path) -> Path:
    """A copy of the bundled mono checkpoint: an exporting backend writes its export beside it."""
    return Path(shutil.copytree(CHECKPOINTS / "mono", tmp_path / "mono"))


def test_score_lists_equals_one_call_and_its_bar_counts_every_pair(monkeypatch: pytest.MonkeyPatch) -> None:
    import rankkit.reranking as reranking

    model = rankkit.load_model("mono", CHECKPOINTS / "mono")
    queries = ["apple fruit", "oil crisis", "red car", "water"]
    candidates = [list(PASSAGES.values())[k:k + n] for k, n in enumerate([3, 5, 1, 4])]
    whole = model.rerank_scores(queries, candidates, 2)
    seen: list[tuple[float, float]] = []
    details: list[str] = []

    class Bar:
        def __enter__(self) -> "Bar":
            return self

        def __exit__(self, *_: Any) -> None:
            return None

        def add_task(self, description: str, total: float) -> int:
            seen.append((0, total))
            return 7

        def update(self, task: int, completed: float, detail: str | None = None) -> None:
            assert task == 7
            seen.append((completed, seen[0][1]))
            if detail is not None:
                details.append(detail)

    monkeypatch.setattr(reranking, "progress_bar", lambda unit: Bar())
    chunked = score_lists(model, queries, candidates, batch_size=2, chunk_pairs=4)  # chunks of whole queries
    assert [len(s) for s in chunked] == [3, 5, 1, 4]
    for a, b in zip(chunked, whole):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)
    counts = [done for done, _ in seen]
    assert seen[0] == (0, 13) and counts == sorted(counts) and counts[-1] == 13 and len(set(counts)) > 3
    assert details[0] == "0/4 q" and details[-1] == "4/4 q"  # queries scored, as rankkit rerank shows them


def test_rerank_shows_progress_unless_asked_not_to(capfd: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANKKIT_HEARTBEAT", "0.001")  # off a terminal: a heartbeat line at every tick
    run, topics = small_run()
    model = rankkit.load_model("mono", CHECKPOINTS / "mono")
    capfd.readouterr()
    shown = rankkit.rerank(model, run, topics, PASSAGES, batch_size=1)
    err = capfd.readouterr().err
    assert "re-ranking" in err and "/18 pairs" in err.replace(",", ""), err
    assert rankkit.rerank(model, run, topics, PASSAGES, batch_size=1, show_progress=False) == shown
    assert capfd.readouterr().err == ""


def test_rerank_and_load_model_run_on_a_backend(mono: Path) -> None:
    run, topics = small_run()
    on_torch = rankkit.rerank("mono", run, topics, PASSAGES, checkpoint=mono, show_progress=False)
    on_onnx = rankkit.rerank("mono", run, topics, PASSAGES, checkpoint=mono, backend="onnx", show_progress=False)
    assert on_onnx.keys() == on_torch.keys()
    for qid in on_torch:
        assert on_onnx[qid].keys() == on_torch[qid].keys()
        assert max(abs(on_onnx[qid][d] - on_torch[qid][d]) for d in on_torch[qid]) < 1e-4
    assert not (mono / "onnx").exists(), "nothing is written into the checkpoint (the export is cached by content)"
    loaded = rankkit.load_model("mono", mono, backend="onnx")
    ranked = loaded.rank(topics[next(iter(topics))], list(PASSAGES.values()))
    torch_ranked = rankkit.load_model("mono", mono).rank(topics[next(iter(topics))], list(PASSAGES.values()))
    assert [r["score"] for r in ranked] == pytest.approx([r["score"] for r in torch_ranked], abs=1e-4)


def test_a_loaded_model_keeps_its_precision() -> None:
    """load_model(precision="bf16") keeps its inference session: rank() and rerank() run under it (bf16 autocast on
    the CPU), so both give the same scores, and they differ from fp32's (the precision is really applied)."""
    query, texts = "apple fruit", list(PASSAGES.values())
    bf16 = rankkit.load_model("mono", CHECKPOINTS / "mono", precision="bf16")
    fp32 = rankkit.load_model("mono", CHECKPOINTS / "mono")
    ranked = {r["corpus_id"]: r["score"] for r in bf16.rank(query, texts)}
    reranked = rankkit.rerank(bf16, {"q": {d: 0.0 for d in PASSAGES}}, {"q": query}, PASSAGES, show_progress=False)
    assert [reranked["q"][d] for d in PASSAGES] == [ranked[i] for i in range(len(texts))]
    plain = {r["corpus_id"]: r["score"] for r in fp32.rank(query, texts)}
    assert ranked != plain and max(abs(ranked[i] - plain[i]) for i in plain) < 0.1


@pytest.mark.parametrize("call, message", [
    (lambda: rankkit.rerank(rankkit.load_model("mono", CHECKPOINTS / "mono"), {"1": {"d0": 1.0}}, {"1": "q"},
                            PASSAGES, backend="onnx"), "apply to a model given by name"),
    (lambda: rankkit.load_model("mono", CHECKPOINTS / "mono", precision="tf32"), "tf32 needs a CUDA device"),
    (lambda: rankkit.load_model("mono", CHECKPOINTS / "mono", backend="tpu"), "tpu"),
    (lambda: rankkit.load_model("mono", CHECKPOINTS / "mono", quantize="int4"), "unknown quantization 'int4'"),
    (lambda: rankkit.load_model("mono", CHECKPOINTS / "mono", threads=0), "threads must be"),
    (lambda: rankkit.load_model("mono", CHECKPOINTS / "mono", backend=3), "backend must be"),
])
def test_runtime_mistakes_are_one_line(call: Any, message: str) -> None:
    with pytest.raises(RankkitError, match=message) as caught:
        call()
    assert "\n" not in str(caught.value)


def test_what_is_not_given_is_torch_fp32_on_torch_and_chosen_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    import rankkit.runtime as runtime
    from rankkit.api import ranking

    asked: list[Any] = []
    monkeypatch.setattr(runtime, "load_for_inference", lambda name, checkpoint, rt, device, sample=None: asked.append(rt))
    for backend, quantize, precision in [("torch", None, None), ("auto", None, None), ("openvino", None, "fp32"),
                                         ("auto", "none", None)]:
        ranking._load("mono", None, backend, quantize, precision, None, "cpu")
    assert [(r.backend, r.quantize, r.precision) for r in asked] == [
        ("torch", "none", "fp32"), ("auto", "auto", "auto"), ("openvino", "auto", "fp32"), ("auto", "none", "auto")]


def test_dense_search_encodes_queries_as_the_index_was_or_as_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import rankkit.dense as dense

    asked: list[Any] = []
    monkeypatch.setattr(dense, "dense_search", lambda index, texts, **options: asked.append(options["runtime"]) or {})
    rankkit.dense_search(tmp_path, {"q": "text"})
    rankkit.dense_search(tmp_path, {"q": "text"}, backend="torch")
    rankkit.dense_search(tmp_path, {"q": "text"}, backend="openvino", precision="fp32", threads=1)
    assert [(r.backend, r.quantize, r.precision, r.threads) for r in asked] == [
        ("auto", "auto", "auto", None), ("torch", "none", "fp32", None), ("openvino", "auto", "fp32", 1)]
