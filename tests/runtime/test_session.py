"""rankkit/runtime/session.py and precision.py: the inference session every driver scores through.

On the CPU a default session must score exactly as rankkit did before sessions (the same batches, the same
tensors: byte-identical runs); bucketing, a token budget and prefetch must keep every score's place and value;
the numerics (bf16 encoder weights, autocast, TF32) are applied by the session, never by a driver.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Sequence

import pytest
import torch
from training_helpers import TOPICS, build_model, documents, tiny_backbone, write_corpus, write_topics

from rankkit.docstore import open_docstore
from rankkit.errors import RankkitError
from rankkit.formats import write_run
from rankkit.models.batching import Batching, length_order
from rankkit.models.bi_encoders.repbert import RepBERT
from rankkit.models.checkpoint import save_model
from rankkit.models.cross_encoders.matrank import MatRank
from rankkit.models.cross_encoders.mono import Mono
from rankkit.reranking import merge_tail, rerank_run, score_lists
from rankkit.runtime import InferenceSession, Runtime, load_for_inference
from rankkit.runtime.precision import Numerics, apply_numerics, cast_encoders, half_check

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_backbone(tmp_path_factory.mktemp("session") / "tiny", dropout=0.0)


def lists() -> tuple[list[str], list[list[str]]]:
    docs = list(documents().values())
    queries = [" ".join(t.split()[:2]) for t in TOPICS]
    return queries, [docs[i % 7::3][: 5 + i % 4] for i in range(len(queries))]


# -- the path before sessions, written out as it was (the oracle) ------------------------------------------
def old_pair_features(pairs: Any, queries: Sequence[str], texts: Sequence[str]) -> dict[str, torch.Tensor]:
    """CrossPairEncoder.features as it was: a tensor per row, segments filled row by row."""
    ids = pairs._ids(queries, texts)
    width = max(len(x) for x, _ in ids)
    input_ids = torch.full((len(ids), width), int(pairs.tokenizer.pad_token_id or 0), dtype=torch.long)
    attention = torch.zeros((len(ids), width), dtype=torch.long)
    for i, (row, _) in enumerate(ids):
        input_ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        attention[i, : len(row)] = 1
    feats = {"input_ids": input_ids, "attention_mask": attention}
    if pairs._uses_segments:
        segments = torch.zeros_like(input_ids)
        for row, (x, head) in enumerate(ids):
            segments[row, head: len(x)] = 1
        feats["token_type_ids"] = segments
    return feats


@torch.inference_mode()
def old_candidate_scores(model: Any, queries: Sequence[str], candidates: Sequence[Sequence[str]],
                         batch_size: int) -> list[torch.Tensor]:
    """CandidateListModel.rerank_scores as it was before sessions, on each list in its canonical order (issue 37:
    a permutation-invariant model scores that order) and mapped back."""
    from rankkit.models.base import from_canonical
    from rankkit.models.canonical import canonical_orders, to_canonical

    orders = canonical_orders(candidates)
    return from_canonical(_old_scores(model, queries, to_canonical(candidates, orders), batch_size), orders, candidates)


def _old_scores(model: Any, queries: Sequence[str], candidates: Sequence[Sequence[str]],
                batch_size: int) -> list[torch.Tensor]:
    model.eval()
    flat_q = [q for q, texts in zip(queries, candidates) for _ in texts]
    flat_t = [t for texts in candidates for t in texts]
    order = length_order(model.pairs.pair_lengths(flat_q, flat_t))
    h_all = None
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        feats = old_pair_features(model.pairs, [flat_q[i] for i in rows], [flat_t[i] for i in rows])
        h, _ = model.pairs(feats)
        if h_all is None:
            h_all = h.new_empty((len(flat_t), h.shape[-1]))
        h_all[torch.tensor(rows)] = h
    out, start = [], 0
    for texts in candidates:
        out.append(model.list_scores(h_all[start:start + len(texts)], None).double())
        start += len(texts)
    return out


@pytest.mark.parametrize("cls", [Mono, MatRank])
def test_default_cpu_session_scores_exactly_as_before(tiny: Path, cls: type) -> None:
    model = build_model(cls, tiny)
    queries, candidates = lists()
    for batch_size in (1, 4, 32):
        old = old_candidate_scores(model, queries, candidates, batch_size)
        new = InferenceSession.for_model(model, batch_size=batch_size).scores(queries, candidates)
        assert all(torch.equal(a, b) for a, b in zip(old, new))


def test_pair_tensors_equal_the_old_ones(tiny: Path) -> None:
    model = build_model(Mono, tiny)
    queries, candidates = lists()
    flat_q = [q for q, texts in zip(queries, candidates) for _ in texts]
    flat_t = [t for texts in candidates for t in texts]
    old, new = old_pair_features(model.pairs, flat_q, flat_t), model.pairs.features(flat_q, flat_t)
    assert old.keys() == new.keys() and all(torch.equal(old[k], new[k]) for k in old)


def test_bi_encoder_vectors_as_before(tiny: Path) -> None:
    model = build_model(RepBERT, tiny)
    texts = list(documents().values())
    ids = model.tokenize(texts, is_query=False)
    expected = torch.empty((len(texts), model.dim))
    with torch.inference_mode():
        order = length_order([len(x) for x in ids])
        for start in range(0, len(order), 5):
            rows = order[start:start + 5]
            expected[torch.tensor(rows)] = model.embed(model.features([ids[i] for i in rows], is_query=False),
                                                       is_query=False).float()
    assert torch.equal(InferenceSession.for_model(model, batch_size=5).encode(texts, is_query=False), expected)


def test_rerank_run_is_byte_identical_to_the_old_path(tiny: Path, tmp_path: Path) -> None:
    """``rankkit rerank``'s writer on the session's scores = the run written from the old path's scores."""
    model = build_model(Mono, tiny)
    corpus, topics = write_corpus(tmp_path / "corpus.jsonl"), write_topics(tmp_path / "topics.tsv")
    docs = documents()
    first = {f"t{i}": {d: float((7 * k + i) % 36) for k, d in enumerate(sorted(docs))} for i in range(len(TOPICS))}
    write_run(tmp_path / "first.run", first, "first")
    with open_docstore(corpus=corpus) as store:
        rerank_run(model, tmp_path / "first.run", topics, store, tmp_path / "new.run", depth=10)
    queries = {f"t{i}": " ".join(t.split()[:2]) for i, t in enumerate(TOPICS)}
    orders = {qid: [d for d, _ in sorted(ranking.items(), key=lambda kv: (-kv[1], kv[0]))] for qid, ranking in first.items()}
    # One chunk (120 pairs < 1,024), all queries' pairs batched together, as the old rerank did.
    old = old_candidate_scores(model, [queries[q] for q in orders], [[docs[d] for d in o[:10]] for o in orders.values()], 32)
    expected = {qid: merge_tail({d: float(s) for d, s in zip(order[:10], scores.tolist())}, order[10:])
                for (qid, order), scores in zip(orders.items(), old)}
    write_run(tmp_path / "old.run", expected, "rankkit-mono")
    assert (tmp_path / "new.run").read_bytes() == (tmp_path / "old.run").read_bytes()


@pytest.mark.parametrize("batching", [Batching(rows=3, tokens=40, bucket=8, prefetch=1),
                                      Batching(rows=1000, tokens=64, bucket=16, prefetch=2),
                                      Batching(rows=2, bucket=32)])
def test_buckets_budgets_and_prefetch_keep_every_score(tiny: Path, batching: Batching) -> None:
    """Other batches change the padding only: each score stays in its place, equal within float rounding, and the
    recorded shapes are the bucketed ones."""
    model = build_model(Mono, tiny)
    queries, candidates = lists()
    plain = InferenceSession.for_model(model).scores(queries, candidates)
    session = InferenceSession.for_model(model)
    session.batching = batching
    chunks = [(k, queries[k:k + 3], candidates[k:k + 3]) for k in range(0, len(queries), 3)]
    streamed = [s for _, part in session.stream_scores(chunks) for s in part]
    assert [len(s) for s in streamed] == [len(c) for c in candidates]
    assert max(float((a - b).abs().max()) for a, b in zip(plain, streamed)) < 1e-5
    assert all(width % batching.bucket == 0 for _, width in session.stats.shapes)
    assert session.stats.rows == sum(len(c) for c in candidates) and 0 <= session.stats.padded_share < 1
    if batching.tokens:
        assert all(rows == 1 or rows * width <= batching.tokens for rows, width in session.stats.shapes)


def test_stream_encode_in_order_with_prefetch(tiny: Path) -> None:
    model = build_model(RepBERT, tiny)
    texts = list(documents().values())
    whole = InferenceSession.for_model(model).encode(texts, is_query=False)
    session = InferenceSession.for_model(model)
    session.batching = Batching(rows=4, tokens=64, bucket=8, prefetch=1)
    parts = dict(session.stream_encode(((k, texts[k:k + 10]) for k in range(0, len(texts), 10)), is_query=False))
    assert torch.allclose(torch.cat([parts[k] for k in sorted(parts)]), whole, atol=1e-5)


def test_score_lists_and_session_summary(tiny: Path) -> None:
    model = build_model(Mono, tiny)
    queries, candidates = lists()
    session = InferenceSession.for_model(model)
    out = score_lists(session, queries, candidates, chunk_pairs=7, show_progress=False)
    # Chunks of whole queries batch other pairs together: equal within float rounding.
    whole = InferenceSession.for_model(model).scores(queries, candidates)
    assert max(float((a - b).abs().max()) for a, b in zip(out, whole)) < 1e-5
    summary = session.summary()
    assert "tokens/s" in summary and "padding" in summary and "batches" in summary


def test_rerank_command_reports_tokens_and_padding(cli: Any, tmp_path: Path, tiny: Path) -> None:
    model = build_model(Mono, tiny)
    checkpoint = save_model(model, tmp_path / "mono", {})
    corpus, topics = write_corpus(tmp_path / "corpus.jsonl"), write_topics(tmp_path / "topics.tsv")
    write_run(tmp_path / "first.run", {"t0": {d: 1.0 + i for i, d in enumerate(sorted(documents()))}}, "first")
    result = cli("rerank", "--model", "mono", "--checkpoint", checkpoint, "--run", tmp_path / "first.run",
                 "--topics", topics, "--corpus", corpus, "-o", tmp_path / "out.run", "--device", "cpu",
                 "--backend", "torch", "--precision", "fp32")
    assert result.code == 0, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert "re-ranked 36 candidates" in last and "padding" in last and "tokens/s" in last


@pytest.mark.parametrize("args, message", [
    (["--precision", "tf32"], "--precision tf32 needs a CUDA device"),
    (["--precision", "fp16"], "--precision fp16 needs a CUDA device"),
    (["--max-tokens", "0"], "--max-tokens"),
    (["--precision", "fp8"], "unknown precision 'fp8'"),
])
def test_runtime_mistakes_are_one_line(cli: Any, tmp_path: Path, args: list[str], message: str) -> None:
    write_run(tmp_path / "first.run", {"t0": {"d0_0": 1.0}}, "first")
    corpus, topics = write_corpus(tmp_path / "corpus.jsonl"), write_topics(tmp_path / "topics.tsv")
    result = cli("rerank", "--model", "repbert", "--run", tmp_path / "first.run", "--topics", topics,
                 "--corpus", corpus, "-o", tmp_path / "out.run", "--device", "cpu", "--backend", "torch", *args)
    assert result.code == 2 and message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "out.run").exists()


# -- numerics ---------------------------------------------------------------------------------------------
def test_numerics_of_each_precision(tiny: Path) -> None:
    model = build_model(Mono, tiny)
    cpu = torch.device("cpu")
    assert apply_numerics(model, "torch", "fp32", cpu) == Numerics()
    assert apply_numerics(model, "torch", "bf16", cpu) == Numerics(autocast=torch.bfloat16)  # CPU: autocast
    assert apply_numerics(model, "onnx", "bf16", cpu) == Numerics()  # the backend's encoder runs its own precision
    with pytest.raises(RankkitError, match="needs a CUDA device"):
        apply_numerics(model, "torch", "tf32", cpu)
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_cast_encoders_keeps_the_head_and_outputs_fp32(tiny: Path, tmp_path: Path) -> None:
    """bf16 encoder weights (what a half precision does on CUDA; bf16 runs on the CPU too): the classifier head
    stays fp32, scores come back in fp32 resolution and near fp32's."""
    from transformers import BertForSequenceClassification

    folder = tmp_path / "hf"
    BertForSequenceClassification.from_pretrained(str(tiny), num_labels=1).save_pretrained(str(folder))
    for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"):
        if (tiny / name).is_file():
            (folder / name).write_bytes((tiny / name).read_bytes())
    queries, candidates = lists()
    fp32 = load_for_inference("mono", folder, Runtime("torch", "none", None, "fp32"), "cpu")
    reference = InferenceSession.of(fp32).scores(queries, candidates)
    half = load_for_inference("mono", folder, Runtime("torch", "none", None, "fp32"), "cpu")
    assert cast_encoders(half.model, torch.bfloat16) == ["encoder"]
    classifier = half.model.pairs.encoder
    assert classifier.bert.encoder.layer[0].attention.self.query.weight.dtype == torch.bfloat16
    assert classifier.classifier.weight.dtype == torch.float32
    got = InferenceSession.of(half).scores(queries, candidates)
    assert all(s.dtype == torch.float64 for s in got)
    assert max(float((a - b).abs().max()) for a, b in zip(reference, got)) < 0.05
    distinct = {round(float(v), 9) for s in got for v in s}
    assert len(distinct) > 20  # fp32 resolution: not a handful of bf16 steps


def test_half_check_leaves_the_model_in_fp32(tiny: Path) -> None:
    """The check compares a half copy with fp32 on the bundled DL20 texts; whatever the outcome, the model it was
    given is unchanged (a random tiny model's scores are noise, which the band refuses)."""
    model = build_model(Mono, tiny)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    try:
        measure = half_check(model, "bf16", torch.device("cpu"), model.tokenizer, 16)
        assert "16 bundled DL20 texts and 48 long out-of-domain ones" in measure
    except RankkitError as err:
        assert "score correlation" in str(err) or "pooled cosine" in str(err)
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) and after[k].dtype == before[k].dtype for k in before)


def test_auto_on_cuda_tries_bf16_then_tf32_then_fp32(monkeypatch: pytest.MonkeyPatch) -> None:
    from rankkit.runtime import auto

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    chosen = [r.precision for r, _ in auto.cuda_candidates(Runtime("auto", "auto", None, "auto"))]
    assert chosen == ["bf16", "tf32", "fp32"]
    assert [r.precision for r, _ in auto.cuda_candidates(Runtime("torch", "none", None, "fp32"))] == ["fp32"]


# -- the drivers ------------------------------------------------------------------------------------------
DRIVERS = [*sorted((ROOT / "rankkit" / "reranking").glob("*.py")), *sorted((ROOT / "rankkit" / "dense").glob("*.py")),
           *sorted((ROOT / "rankkit" / "cli").glob("*.py")), *sorted((ROOT / "rankkit" / "api").glob("*.py")),
           *sorted((ROOT / "rankkit" / "serve").glob("*.py"))]
#: The benchmarks set up their peers' precision (a CrossEncoder in bf16, a bare loop under autocast); rankkit's own
#: rows in them go through the session: no rankkit autocast, no Runtime.torch_precision.
BENCHES = [ROOT / "bench" / "inference.py", ROOT / "bench" / "gpu_suite.py", ROOT / "bench" / "api_rerank.py"]
PRECISIONS = {"fp32", "bf16", "fp16", "tf32"}


def driver_problems(path: Path, strict: bool) -> list[str]:
    problems = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        where = f"{path.name}:{getattr(node, 'lineno', 0)}"
        name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
        if name == "torch_precision" or (strict and name == "autocast"):
            problems.append(f"{where}: {name}")
        if isinstance(node, ast.ImportFrom) and any(a.name == "autocast" for a in node.names):
            problems.append(f"{where}: imports autocast from {node.module}")
        if strict and isinstance(node, ast.Compare):
            constants = [c.value for c in [node.left, *node.comparators] if isinstance(c, ast.Constant)]
            if any(c in PRECISIONS for c in constants):
                problems.append(f"{where}: compares a precision string")
    return problems


def test_drivers_never_touch_autocast_or_precision_strings() -> None:
    """Issue 36: rerank, dense encoding, retrieval, the API and the benchmarks run models through the session; none
    of them enters autocast, names Runtime.torch_precision, or compares a precision string (the benchmarks may set
    up their peers' precision, never rankkit's)."""
    problems = [p for path in DRIVERS for p in driver_problems(path, strict=True)]
    problems += [p for path in BENCHES for p in driver_problems(path, strict=False)]
    assert not problems, problems


def test_the_driver_test_catches_the_old_code(tmp_path: Path) -> None:
    """The test above fails on what the drivers did before sessions."""
    old = tmp_path / "old.py"
    old.write_text("from rankkit.devices import autocast\n"
                   "def score(model, loaded, device):\n"
                   "    with autocast(loaded.runtime.torch_precision, device):\n"
                   "        return model.rerank_scores([], [])\n"
                   "def check(precision):\n"
                   "    return precision == 'bf16'\n", encoding="utf-8")
    found = driver_problems(old, strict=True)
    assert any("imports autocast" in p for p in found) and any("torch_precision" in p for p in found)
    assert any("compares a precision string" in p for p in found) and any(p.endswith(": autocast") for p in found)


@pytest.mark.parametrize("quantize", ["int8", "int8-u8"])
def test_dynamic_int8_keeps_a_text_independent_of_its_batch(quantize: str, tmp_path: Path) -> None:
    """Issue 37: ONNX Runtime's dynamic int8 scales each activation tensor by its range, so a batched text's
    vector depended on its batch-mates (cosine 0.989 min against alone on MiniLM); run a sequence at a time it
    equals the text encoded alone, bit for bit, as a bi-encoder's vectors must."""
    from rankkit.runtime.adapter import OrtEncoder

    model = build_model(RepBERT, tiny_backbone(tmp_path / "tiny", dropout=0.0))
    folder = save_model(model, tmp_path / "repbert", {})
    session = InferenceSession.of(load_for_inference("repbert", folder, Runtime("onnx", quantize, 1, "fp32"), "cpu",
                                                     task="encode"), batch_size=8)
    assert any(isinstance(m, OrtEncoder) and m.per_sequence for m in session.model.modules())
    texts = list(documents().values())[:12]
    together = session.encode(texts, is_query=False)
    alone = torch.cat([session.encode([t], is_query=False) for t in texts])
    assert torch.equal(together, alone)
