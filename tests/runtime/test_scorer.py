"""The ONNX scorer (rankkit.runtime.scorer, issue 39): ``rankkit rerank`` of a one-label cross-encoder without
importing torch or transformers once its record is built, with the same bytes as ``--backend onnx`` through torch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rankkit.models.canonical import back_indices, canonical_orders, to_canonical
from rankkit.runtime.scorer import (
    PairTokenizer,
    ScorerRecord,
    ScorerSession,
    classifier_folder,
    find_record,
    record_path,
    safetensors_parameters,
    scorer_applies,
    scorer_key,
)
from rankkit.runtime.settings import Runtime

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers", "safetensors", "openvino", "scipy", "pandas")

#: Runs `rankkit rerank ARGS` in a fresh process and reports its exit code, stderr and the heavy modules it imported.
PROGRAM = f"""
import contextlib, io, json, sys
from rankkit.cli import main
err = io.StringIO()
code = 0
with contextlib.redirect_stderr(err):
    try:
        main(json.loads(sys.argv[1]))
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 0
print(json.dumps({{"code": code, "stderr": err.getvalue(), "heavy": sorted(m for m in {HEAVY!r} if m in sys.modules)}}))
"""


def rankkit(args: list[str], cache: Path) -> dict[str, object]:
    env = {**os.environ, "RANKKIT_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", PROGRAM, json.dumps(args)], env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny mono checkpoint (2-layer, 24-wide BERT, saved as rankkit train saves it) and a 5 x 12 run."""
    from rankkit.models import create_model
    from rankkit.models.checkpoint import save_model
    from rankkit.testing import TOPICS, tiny_backbone, tiny_documents

    root = tmp_path_factory.mktemp("scorer")
    save_model(create_model("mono", tiny_backbone(root / "backbone", max_positions=320)), root / "mono", {})
    docs = tiny_documents()
    # One long passage: the pair is cut by the length, as the torch model cuts it.
    docs["long"] = " ".join(list(docs.values())[:12]) * 3
    (root / "corpus.tsv").write_text("".join(f"{d}\t{t}\n" for d, t in docs.items()), encoding="utf-8")
    (root / "topics.tsv").write_text("".join(f"q{i}\t{t}\n" for i, t in enumerate(TOPICS[:5])), encoding="utf-8")
    ids = ["long", *list(docs)[:11]]
    lines = [f"q{i} Q0 {d} {r + 1} {20 - r} bm25\n" for i in range(5) for r, d in enumerate(ids)]
    (root / "run.trec").write_text("".join(lines), encoding="utf-8")
    return {"root": root, "mono": root / "mono", "run": root / "run.trec", "topics": root / "topics.tsv",
            "corpus": root / "corpus.tsv"}


def rerank_args(data: dict[str, Path], output: Path, *extra: str) -> list[str]:
    return ["rerank", "--model", "mono", "--checkpoint", str(data["mono"]), "--run", str(data["run"]), "--topics",
            str(data["topics"]), "--corpus", str(data["corpus"]), "--output", str(output), *extra]


def torch_onnx_run(data: dict[str, Path], output: Path, cache: Path, monkeypatch: pytest.MonkeyPatch,
                   **settings: object) -> bytes:
    """The run `--backend onnx` writes through torch (the OrtEncoder of rankkit.runtime.compose)."""
    from rankkit.docstore import open_docstore
    from rankkit.reranking import rerank_run
    from rankkit.runtime import InferenceSession, load_for_inference

    monkeypatch.setenv("RANKKIT_CACHE_DIR", str(cache))
    loaded = load_for_inference("mono", data["mono"], Runtime("onnx", "none", None, "fp32"), "cpu",
                                settings=settings)
    with open_docstore(corpus=data["corpus"], cache_dir=cache / "docstore") as store:
        rerank_run(InferenceSession.of(loaded), data["run"], data["topics"], store, output)
    return output.read_bytes()


def test_second_run_imports_no_torch_and_writes_the_bytes_of_the_torch_onnx_path(
        data: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    first = rankkit(rerank_args(data, tmp_path / "first", "--backend", "onnx"), cache)
    assert first["code"] == 0, first
    assert "wrote the ONNX scorer record" in str(first["stderr"])
    second = rankkit(rerank_args(data, tmp_path / "second", "--backend", "onnx"), cache)
    assert second["code"] == 0, second
    assert second["heavy"] == [], f"the second run imported {second['heavy']}"
    assert "the ONNX scorer, without torch" in str(second["stderr"])
    assert (tmp_path / "first").read_bytes() == (tmp_path / "second").read_bytes()
    assert torch_onnx_run(data, tmp_path / "through-torch", cache, monkeypatch) == (tmp_path / "second").read_bytes()


def test_auto_runs_a_small_mono_on_the_scorer_as_the_python_api_does(
        data: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import rankkit as api

    cache = tmp_path / "cache"
    results = [rankkit(rerank_args(data, tmp_path / name), cache) for name in ("first", "second")]
    assert all(r["code"] == 0 for r in results), results
    assert "--backend auto: onnx fp32" in str(results[1]["stderr"]) and results[1]["heavy"] == []
    monkeypatch.setenv("RANKKIT_CACHE_DIR", str(cache))
    scores = api.rerank("mono", str(data["run"]), str(data["topics"]), str(data["corpus"]),
                            checkpoint=data["mono"], backend="auto", show_progress=False)
    written: dict[str, dict[str, float]] = {}
    for line in (tmp_path / "second").read_text(encoding="utf-8").splitlines():
        qid, _, docid, _, score, _ = line.split()
        written.setdefault(qid, {})[docid] = float(score)
    assert {q: {d: round(s, 6) for d, s in docs.items()} for q, docs in scores.items()} == \
        {q: {d: round(s, 6) for d, s in docs.items()} for q, docs in written.items()}


def test_max_length_and_batch_size_apply_and_match_torch(data: dict[str, Path], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    for name in ("first", "second"):
        result = rankkit(rerank_args(data, tmp_path / name, "--backend", "onnx", "--max-length", "40",
                                     "--batch-size", "5"), cache)
        assert result["code"] == 0, result
    assert result["heavy"] == []
    from rankkit.docstore import open_docstore
    from rankkit.reranking import rerank_run
    from rankkit.runtime import InferenceSession, load_for_inference

    monkeypatch.setenv("RANKKIT_CACHE_DIR", str(cache))
    loaded = load_for_inference("mono", data["mono"], Runtime("onnx", "none", None, "fp32"), "cpu")
    with open_docstore(corpus=data["corpus"], cache_dir=cache / "docstore") as store:
        rerank_run(InferenceSession.of(loaded, batch_size=5), data["run"], data["topics"], store, tmp_path / "torch",
                   max_length=40)
    assert (tmp_path / "torch").read_bytes() == (tmp_path / "second").read_bytes()


def test_tokenisation_equals_the_models_on_long_and_odd_texts(data: dict[str, Path], tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from rankkit.runtime.scorer_build import build_record

    monkeypatch.setenv("RANKKIT_CACHE_DIR", str(tmp_path / "cache"))
    record, why = build_record("mono", data["mono"], "k" * 64, settings={}, max_length=None, threads=1)
    assert record is not None, why
    from rankkit.models.checkpoint import load_model

    model = load_model(data["mono"], expect="mono")
    queries = ["what is x", "", "ÜNÏCÖDE query  with   spaces", "a " * 200]
    passages = ["short", "x" * 5000, "ÜNÏCÖDE passage, punctuation! (and) [brackets]", "word " * 3000]
    ours = PairTokenizer(record).pair_rows(queries, passages)
    theirs = model.pairs.pair_tokens(queries, passages).data  # type: ignore[union-attr]
    assert [(list(a), b) for a, b in ours] == [(list(a), b) for a, b in theirs]


def test_a_permuted_list_gets_the_same_scores(data: dict[str, Path], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from rankkit.runtime.scorer_build import build_record

    monkeypatch.setenv("RANKKIT_CACHE_DIR", str(tmp_path / "cache"))
    record, _ = build_record("mono", data["mono"], "p" * 64, settings={}, max_length=None, threads=1)
    assert record is not None
    session = ScorerSession.of(record, threads=1, batch_size=3)
    texts = [line.split("\t", 1)[1] for line in data["corpus"].read_text(encoding="utf-8").splitlines()][:9]
    forward = session.scores(["a query"], [texts])[0]
    backward = session.scores(["a query"], [texts[::-1]])[0][::-1]
    assert forward.dtype == np.float64 and np.array_equal(forward, backward)


def test_a_changed_export_or_record_is_rebuilt_not_used(data: dict[str, Path], tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    assert rankkit(rerank_args(data, tmp_path / "a", "--backend", "onnx"), cache)["code"] == 0
    records = [p for p in (cache / "scorers").glob("*.json") if not p.name.endswith(".tokenizer.json")]
    assert len(records) == 1
    record = ScorerRecord.read(records[0])
    Path(record.export).write_bytes(Path(record.export).read_bytes() + b"\0")  # the export changed on disk
    result = rankkit(rerank_args(data, tmp_path / "b", "--backend", "onnx"), cache)
    assert result["code"] == 0, result
    assert "missing or changed; rebuilding it" in str(result["stderr"])
    assert (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes()
    records[0].write_text("{not json", encoding="utf-8")
    result = rankkit(rerank_args(data, tmp_path / "c", "--backend", "onnx"), cache)
    assert result["code"] == 0 and (tmp_path / "a").read_bytes() == (tmp_path / "c").read_bytes()


def test_a_two_label_classifier_is_not_the_scorers(tmp_path: Path) -> None:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from rankkit.testing import tiny_backbone

    backbone = tiny_backbone(tmp_path / "backbone")
    for labels in (1, 2):
        folder = tmp_path / f"labels-{labels}"
        AutoModelForSequenceClassification.from_pretrained(backbone, num_labels=labels).save_pretrained(folder)
        AutoTokenizer.from_pretrained(backbone).save_pretrained(folder)
        assert classifier_folder(folder) == (labels == 1)
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        for name in ("id2label", "label2id", "num_labels"):  # transformers then reads two labels (its default)
            config.pop(name, None)
        (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
        assert not classifier_folder(folder)


def test_a_declined_checkpoint_goes_to_torch_at_once_the_next_time(data: dict[str, Path], tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from rankkit.runtime import scorer_build

    monkeypatch.setenv("RANKKIT_CACHE_DIR", str(tmp_path))
    calls = []

    def declining(*args: object, **kwargs: object) -> tuple[None, str]:
        calls.append(args)
        return None, "a reason"

    monkeypatch.setattr(scorer_build, "build_record", declining)
    onnx = Runtime("onnx", "none", None, "fp32")
    assert scorer_build.open_scorer("mono", data["mono"], onnx, settings={}) is None
    assert scorer_build.open_scorer("mono", data["mono"], onnx, settings={}) is None
    assert len(calls) == 1
    assert scorer_build.declined_path(scorer_key(data["mono"], "mono", {}, None)).read_text(encoding="utf-8") == "a reason\n"


def test_when_the_scorer_applies(data: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    onnx, auto = Runtime("onnx", "none", None, "fp32"), Runtime("auto", "auto", None, "auto")
    mono = data["mono"]
    assert scorer_applies("mono", mono, onnx, "cpu") is None
    assert scorer_applies("mono", mono, auto, "cpu") is None
    assert scorer_applies("mono", mono, auto, "cpu", small=10) is not None  # a larger model: auto's table decides
    assert scorer_applies("matrank", mono, onnx, "cpu") is not None
    assert scorer_applies("mono", "org/name", onnx, "cpu") is not None  # a hub id
    assert scorer_applies("mono", mono, Runtime("onnx", "int8", None, "fp32"), "cpu") is not None
    assert scorer_applies("mono", mono, Runtime("torch", "none", None, "fp32"), "cpu") is not None
    assert scorer_applies("mono", mono, auto, "cuda") is not None
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert scorer_applies("mono", mono, onnx, "cpu") == "torchrun"
    monkeypatch.delenv("WORLD_SIZE")
    parameters = safetensors_parameters(mono)
    assert parameters is not None and 10_000 < parameters < 100_000
    monkeypatch.setenv("RANKKIT_CACHE_DIR", str(tmp_path))
    key = scorer_key(mono, "mono", {}, None)
    assert key != scorer_key(mono, "mono", {}, 40) and key != scorer_key(mono, "mono", {"max_query_length": 8}, None)
    assert find_record(key) is None and record_path(key).parent == tmp_path / "scorers"


def test_back_indices_give_identical_texts_one_score() -> None:
    lists = [["b", "a", "b", "c"], []]
    orders = canonical_orders(lists)
    assert to_canonical(lists, orders) == [["a", "b", "b", "c"], []]
    scores = [0.1, 0.2, 0.25, 0.3]  # in canonical order; the second "b" would get 0.25 in inexact arithmetic
    assert [scores[i] for i in back_indices(orders[0], lists[0])] == [0.2, 0.1, 0.2, 0.3]


def test_a_hostile_folder_is_left_to_the_torch_path_without_reading_it_whole(data: dict[str, Path],
                                                                              tmp_path: Path) -> None:
    """The scorer's look at a folder reads its JSON bounded (a link to /dev/zero once grew a test process to 24 GB
    before the OOM killer); tests/reliability has the torch path's one-line refusals of the same folders."""
    import shutil

    for name, target in (("config.json", "/dev/zero"), ("rankkit.json", "/dev/zero")):
        folder = tmp_path / name
        shutil.copytree(data["mono"], folder)
        (folder / name).unlink()
        (folder / name).symlink_to(target)
        assert not classifier_folder(folder)
    deep = tmp_path / "deep"
    shutil.copytree(data["mono"], deep)
    (deep / "config.json").write_text('{"a":' + "[" * 100_000 + "]" * 100_000 + "}", encoding="utf-8")
    assert not classifier_folder(deep)


def test_an_export_that_fails_is_autos_next_row_and_the_users_error(data: dict[str, Path], tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """BigBird's tiny mono: its export fails on the second probe shape. auto goes on to torch (as auto.choose does);
    an explicit --backend onnx gets the refusal (tests/models/test_models_bigbird.py runs the real case)."""
    from rankkit.errors import RankkitError
    from rankkit.runtime import scorer_build

    monkeypatch.setenv("RANKKIT_CACHE_DIR", str(tmp_path))

    def failing(*args: object, **kwargs: object) -> None:
        raise RankkitError("the ONNX export of encoder fails on a batch of another shape")

    monkeypatch.setattr(scorer_build, "build_record", failing)
    with pytest.raises(RankkitError, match="another shape"):
        scorer_build.open_scorer("mono", data["mono"], Runtime("onnx", "none", None, "fp32"), settings={})
    assert scorer_build.open_scorer("mono", data["mono"], Runtime("auto", "auto", None, "auto"), settings={}) is None


def test_the_key_follows_the_model_files_not_the_training_runs(data: dict[str, Path], tmp_path: Path) -> None:
    import shutil

    from rankkit.models.card import TRAINING_FILES

    folder = tmp_path / "ck"
    shutil.copytree(data["mono"], folder)
    key = scorer_key(folder, "mono", {}, None)
    for name in {*TRAINING_FILES, "README.md"} - {"tensorboard"}:
        (folder / name).write_text("grows while a run trains", encoding="utf-8")
    assert scorer_key(folder, "mono", {}, None) == key
    (folder / "config.json").write_text((folder / "config.json").read_text(encoding="utf-8") + " ", encoding="utf-8")
    assert scorer_key(folder, "mono", {}, None) != key
