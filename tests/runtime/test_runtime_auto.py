"""``--backend auto`` / ``--precision auto``: the CPU class, the measured table, the quality gate, the fallbacks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from training_helpers import TOPICS, build_model, documents, tiny_backbone, write_corpus, write_topics

from rankkit import cpu, devices
from rankkit.devices import resolve_precision
from rankkit.formats import write_run
from rankkit.models import get_model_class
from rankkit.models.checkpoint import save_model
from rankkit.runtime import Runtime, auto, load_for_inference
from rankkit.runtime.adapter import OrtEncoder

QUERIES = [" ".join(t.split()[:2]) for t in TOPICS[:3]]
CANDIDATES = [sorted(documents().values())[i::3][:6] for i in range(3)]
AVX2 = frozenset({"sse4_2", "avx", "avx2", "fma", "f16c"})
ZEN4 = AVX2 | {"avx512f", "avx512bw", "avx512_vnni", "avx512_bf16"}


@pytest.fixture(scope="module")
def backbone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_backbone(tmp_path_factory.mktemp("auto") / "tiny", dropout=0.0)


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RANKKIT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def on_cpu(monkeypatch: pytest.MonkeyPatch, flags: frozenset[str]) -> None:
    """Pretend the CPU has ``flags``, and let ``auto`` consider tiny models (no size floor)."""
    monkeypatch.setattr(cpu, "cpu_flags", lambda: flags)
    monkeypatch.setattr(auto, "AUTO_MIN_PARAMETERS", 0)
    monkeypatch.setattr(devices, "AUTO_MIN_PARAMETERS", 0)  # the ONNX scorer's reading of it (rankkit rerank)


def with_int8_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """An AVX2 table whose first re-ranking rows are ONNX Runtime's int8, as before issue 41 dropped them: the
    checks of a lossy row (quality, properties, the user's own input) are tested on it."""
    int8 = ("onnx", "int8", "fp32", "1.7x (a test row)", "a test row")
    rows = [*auto._rows("avx2", "bi-encoder", "rerank", "a test", int8),
            *auto._rows("avx2", "cross-encoder", "rerank", "a test", int8)]
    monkeypatch.setattr(auto, "TABLE", (*rows, *auto.TABLE))


@pytest.mark.parametrize("flags, expected, bf16", [
    (AVX2, "avx2", False),
    (ZEN4, "avx512-bf16", True),
    (AVX2 | {"avx512f", "avx512_vnni"}, "avx512-vnni", False),
    (AVX2 | {"avx512f"}, "avx512", False),
    (ZEN4 | {"amx_bf16", "amx_int8", "amx_tile"}, "amx", True),
    (frozenset({"fp", "asimd", "asimddp", "bf16"}), "arm64", True),
    (frozenset({"sse2"}), "baseline", False),
])
def test_cpu_classes(flags: frozenset[str], expected: str, bf16: bool) -> None:
    assert cpu.cpu_class(flags) == expected and cpu.native_bf16(flags) is bf16
    assert cpu.describe_cpu(flags).startswith(expected)


def test_flags_from_the_environment_replace_the_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cpu.FLAGS_VARIABLE, "avx2,FMA  f16c")
    cpu.cpu_flags.cache_clear()
    try:
        assert cpu.cpu_flags() == {"avx2", "fma", "f16c"} and cpu.cpu_class() == "avx2"
        assert cpu.describe_cpu() == "avx2 (avx2 fma from RANKKIT_CPU_FLAGS)"
        monkeypatch.setenv(cpu.FLAGS_VARIABLE, " ")  # blank: the CPU's own flags
        cpu.cpu_flags.cache_clear()
        assert "from" not in cpu.describe_cpu() and cpu.cpu_flags() != {"avx2", "fma", "f16c"}
    finally:
        monkeypatch.delenv(cpu.FLAGS_VARIABLE)
        cpu.cpu_flags.cache_clear()


def test_every_table_row_runs_and_names_its_machine() -> None:
    for row in auto.TABLE:
        Runtime(row.backend, row.quantize, None, row.precision)  # a valid, runnable combination
        assert row.cpu in cpu.CPU_CLASSES and row.family in ("bi-encoder", "cross-encoder", "any")
        assert "flags" in row.measured and row.speed and row.quality
    for cls in ("amx", "avx512-bf16", "avx512-vnni", "avx512", "avx2"):
        for family in ("bi-encoder", "cross-encoder", "any"):
            assert auto.rows_for(cls, family), (cls, family)
    # AVX2: OpenVINO's static int8 is slower than torch there (issue 26), so it is never a candidate.
    assert all((r.backend, r.quantize) != ("openvino", "int8") for r in auto.rows_for("avx2", "cross-encoder"))


@pytest.mark.parametrize("flags, first", [(AVX2, ("openvino", "none", "fp32")), (ZEN4, ("openvino", "none", "bf16"))])
def test_candidates_follow_the_cpu_class(backbone: Path, monkeypatch: pytest.MonkeyPatch, flags: frozenset[str],
                                         first: tuple[str, str, str]) -> None:
    on_cpu(monkeypatch, flags)
    model = build_model(get_model_class("mono"), backbone).eval()
    options = auto.candidates(Runtime("auto", "auto", None, "auto"), model, torch.device("cpu"))
    assert (options[0][0].backend, options[0][0].quantize, options[0][0].precision) == first
    assert options[-1][0] == Runtime("torch", "none", None, "fp32")  # always ends with plain torch
    assert "cross-encoder" in options[0][1] and "measured on" in options[0][1]
    # A fixed part narrows the choice: --quantize none leaves only unquantized rows.
    fixed = auto.candidates(Runtime("auto", "none", None, "auto"), model, torch.device("cpu"))
    assert all(r.quantize == "none" for r, _ in fixed)


def test_small_models_cuda_and_unmeasured_cpus_run_torch(backbone: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = build_model(get_model_class("mono"), backbone).eval()
    # A tiny one-label mono: the ONNX scorer's model (rankkit.runtime.scorer), then torch fp32.
    (scorer, why_scorer), (runtime, why) = auto.candidates(Runtime("auto", "auto", None, "auto"), model,
                                                            torch.device("cpu"))
    assert scorer == Runtime("onnx", "none", None, "fp32") and "one-label cross-encoder" in why_scorer
    assert runtime == Runtime("torch", "none", None, "fp32") and "parameters" in why  # tiny: under the floor
    matrank = build_model(get_model_class("matrank"), backbone).eval()
    ((runtime, why),) = auto.candidates(Runtime("auto", "auto", None, "auto"), matrank, torch.device("cpu"))
    assert runtime == Runtime("torch", "none", None, "fp32") and "parameters" in why
    ((runtime, why),) = auto.candidates(Runtime("auto", "auto", None, "auto"), model, torch.device("cpu"), "encode")
    assert runtime == Runtime("torch", "none", None, "fp32")
    on_cpu(monkeypatch, frozenset({"fp", "asimd"}))
    ((runtime, why),) = auto.candidates(Runtime("auto", "auto", None, "auto"), model, torch.device("cpu"))
    assert runtime.backend == "torch" and "no measured row" in why and "arm64" in why
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    on_cuda = auto.candidates(Runtime("auto", "auto", None, "auto"), model, torch.device("cuda"))
    assert [(r.backend, r.precision) for r, _ in on_cuda] == [("torch", "bf16"), ("torch", "tf32"), ("torch", "fp32")]
    assert all(why.startswith("CUDA") for _, why in on_cuda)


@pytest.mark.parametrize("flags, backend, expected", [
    (ZEN4, "openvino", "bf16"), (AVX2, "openvino", "fp32"), (ZEN4, "torch", "bf16"), (ZEN4, "onnx", "fp32"),
])
def test_explicit_backend_with_precision_auto(backbone: Path, monkeypatch: pytest.MonkeyPatch, flags: frozenset[str],
                                              backend: str, expected: str) -> None:
    on_cpu(monkeypatch, flags)
    model = build_model(get_model_class("mono"), backbone).eval()
    ((runtime, why),) = auto.candidates(Runtime(backend, "auto", 1, "auto"), model, torch.device("cpu"))
    assert runtime == Runtime(backend, "none", 1, expected) and why.startswith("--precision auto")


def test_auto_runs_the_first_row_that_passes_its_quality_check(backbone: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """On an AVX2 CPU mono's first row is onnx int8; a failed check on real text moves on to the lossless row."""
    on_cpu(monkeypatch, AVX2)
    with_int8_rows(monkeypatch)
    model = build_model(get_model_class("mono"), backbone).eval()
    reference = model.rerank_scores(QUERIES, CANDIDATES)
    monkeypatch.setattr(auto, "MIN_CORRELATION", 1.01)  # no int8 run can agree this well
    loaded = load_for_inference_of(model, monkeypatch)
    err = capsys.readouterr().err
    assert "--backend auto: not onnx int8" in err and "score correlation" in err
    assert loaded.runtime == Runtime("openvino", "none", None, "fp32")
    assert isinstance(model.pairs.encoder, OrtEncoder)
    for ref, out in zip(reference, model.rerank_scores(QUERIES, CANDIDATES)):
        assert torch.allclose(out, ref, atol=1e-4, rtol=0)  # the fp32 row: the same scores


def test_auto_int8_passes_the_check_on_real_text(backbone: Path, monkeypatch: pytest.MonkeyPatch, cache: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    on_cpu(monkeypatch, AVX2)
    with_int8_rows(monkeypatch)
    monkeypatch.setattr(auto, "MIN_CORRELATION", -1.0)  # the tiny random model's int8 need not be good
    model = build_model(get_model_class("repbert"), backbone).eval()
    monkeypatch.setattr(auto, "MIN_COSINE_MEAN", -1.0)
    monkeypatch.setattr(auto, "MIN_COSINE", -1.0)
    loaded = load_for_inference_of(model, monkeypatch)
    assert loaded.runtime == Runtime("onnx", "int8", None, "fp32")
    err = capsys.readouterr().err
    assert "checked here: pooled cosine to torch fp32" in err and "48 bundled DL20 texts and 48 long out-of-domain ones" in err
    # The next command on the same export reuses the check (remembered beside the export).
    checks = list(cache.rglob("*.checks.json"))
    assert len(checks) == 1
    again = build_model(get_model_class("repbert"), backbone).eval()
    assert load_for_inference_of(again, monkeypatch).runtime == Runtime("onnx", "int8", None, "fp32")
    assert "(checked before)" in capsys.readouterr().err


def load_for_inference_of(model: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The composer on an already built model (the checkpoint loader returns it)."""
    from rankkit.models import checkpoint

    monkeypatch.setattr(checkpoint, "load_for_inference", lambda name, ck: model)
    return load_for_inference(model.name, None, Runtime("auto", "auto", None, "auto"), "cpu")


def test_auto_refuses_a_backend_that_breaks_what_the_model_keeps(backbone: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 37: a faster row that breaks a property the model states is not taken: the log line says why, the
    model's encoder is put back, and the next row runs."""
    on_cpu(monkeypatch, AVX2)
    with_int8_rows(monkeypatch)
    for name in ("MIN_CORRELATION", "MIN_COSINE_MEAN", "MIN_COSINE"):
        monkeypatch.setattr(auto, name, -1.0)  # the tiny random model's int8 need not be good
    checked = auto.property_check

    def breaks_on_int8(model: Any) -> str:
        if any(isinstance(m, OrtEncoder) and "int8" in m.label for m in model.modules()):
            raise auto.RankkitError("makes a text's vector depend on its batch (cosine 0.9890 batched vs alone)")
        return checked(model)

    monkeypatch.setattr(auto, "property_check", breaks_on_int8)
    model = build_model(get_model_class("repbert"), backbone).eval()
    loaded = load_for_inference_of(model, monkeypatch)
    err = capsys.readouterr().err
    assert "--backend auto: not onnx int8 (makes a text's vector depend on its batch" in err
    assert loaded.runtime == Runtime("openvino", "none", None, "fp32")


@pytest.mark.parametrize("broken, message", [("order", "breaks permutation invariance"),
                                             ("batch", "makes a text's vector depend on its batch")])
def test_the_property_check_catches_what_it_names(backbone: Path, monkeypatch: pytest.MonkeyPatch, broken: str,
                                                  message: str) -> None:
    model = build_model(get_model_class("repbert"), backbone).eval()
    if broken == "order":  # scores that follow the input position, as a concatenating model's may
        monkeypatch.setattr(model, "rerank_scores", lambda q, c, b=32: [torch.arange(len(t), dtype=torch.float64)
                                                                        for t in c])
    else:  # vectors that follow the batch they are in, as a per-batch quantization scale makes them
        encode = model.encode
        monkeypatch.setattr(model, "encode", lambda texts, is_query, batch_size=64, on_batch=None: torch.nn.functional.normalize(
            encode(texts, is_query=is_query) + 0.05 * len(texts), dim=-1))
    with pytest.raises(auto.RankkitError, match=message):
        auto.property_check(model)


def test_auto_checks_the_properties_of_what_it_chooses(backbone: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    on_cpu(monkeypatch, AVX2)
    with_int8_rows(monkeypatch)
    for name in ("MIN_CORRELATION", "MIN_COSINE_MEAN", "MIN_COSINE"):
        monkeypatch.setattr(auto, name, -1.0)
    model = build_model(get_model_class("repbert"), backbone).eval()
    assert load_for_inference_of(model, monkeypatch).runtime == Runtime("onnx", "int8", None, "fp32")
    err = capsys.readouterr().err
    assert "permutation-invariant, batch-independent (cosine 1.0000)" in err


def test_cli_default_is_auto_and_logs_its_choice(cli: Any, backbone: Path, tmp_path: Path) -> None:
    """The tiny test model is under the size floor: a one-label mono runs the ONNX scorer (issue 39), byte for byte
    the explicit --backend onnx run; a MatRank runs torch fp32, byte for byte the explicit run."""
    docids = sorted(documents())
    write_run(tmp_path / "first.run", {f"t{i}": {d: float(-k) for k, d in enumerate(docids)} for i in range(2)}, "x")
    inputs = ["--run", tmp_path / "first.run", "--topics", write_topics(tmp_path / "topics.tsv"), "--corpus",
              write_corpus(tmp_path / "corpus.jsonl"), "--depth", 5]
    for name, chosen, explicit in (("mono", "onnx fp32", ["--backend", "onnx"]),
                                   ("matrank", "torch", ["--backend", "torch", "--precision", "fp32"])):
        checkpoint = save_model(build_model(get_model_class(name), backbone), tmp_path / name, {})
        common = ["rerank", "--model", name, "--checkpoint", checkpoint, *inputs]
        result = cli(*common, "--output", tmp_path / "auto.run")
        assert result.code == 0 and f"--backend auto: {chosen}" in result.stderr and "parameters" in result.stderr
        assert cli(*common, "--output", tmp_path / "explicit.run", *explicit).code == 0
        assert (tmp_path / "auto.run").read_bytes() == (tmp_path / "explicit.run").read_bytes()


def test_training_precision_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpu, "cpu_flags", lambda: ZEN4)
    assert resolve_precision("auto", torch.device("cpu"), 22_700_000)[0] == "bf16"
    assert resolve_precision("auto", torch.device("cpu"), 10_000)[0] == "fp32"
    monkeypatch.setattr(cpu, "cpu_flags", lambda: AVX2)
    precision, why = resolve_precision("auto", torch.device("cpu"), 22_700_000)
    assert precision == "fp32" and "no native bf16" in why
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "H100")
    for supported, expected in ((True, "bf16"), (False, "fp16")):
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda supported=supported: supported)
        assert resolve_precision("auto", torch.device("cuda", 0))[0] == expected
    assert resolve_precision("fp32", torch.device("cuda", 0)) == ("fp32", "as given")


def test_train_records_the_precision_that_ran(cli: Any, backbone: Path, tmp_path: Path) -> None:
    from training_helpers import write_groups

    groups = write_groups(tmp_path / "groups.jsonl")
    result = cli("train", "--model", "mono", "--backbone", backbone, "--train", groups, "--output", tmp_path / "ck",
                 "--max-steps", 1, "--batch-size", 1, "--group-size", 2, "--device", "cpu")
    assert result.code == 0, result.stderr
    assert "fp32 (--precision auto: " in result.stderr
    meta = json.loads((tmp_path / "ck" / "rankkit.json").read_text(encoding="utf-8"))
    assert meta["training"]["precision"] == "fp32"


# -- the self-check on the user's own input (issue 41) ----------------------------------------------------------
def test_the_sample_is_the_first_queries_and_candidates() -> None:
    lists = [[f"q{i} text {j}" for j in range(30)] for i in range(5)]
    sample = auto.InputSample.of_lists([f"query {i}" for i in range(5)], [lists[0], ["alone"], *lists[2:]])
    assert sample.queries == ("query 0", "query 2", "query 3", "query 4")  # a one-candidate list tells nothing
    assert [len(c) for c in sample.candidates] == [auto.SAMPLE_DEPTH] * 4 and bool(sample)
    assert not auto.InputSample() and len(auto.InputSample.of_texts(["t"] * 100).texts) == auto.SAMPLE_TEXTS


def test_rank_agreement_measures() -> None:
    assert auto.kendall_tau([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0
    assert auto.kendall_tau([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0
    assert auto.kendall_tau([1, 1, 1], [1, 1, 1]) == 1.0
    assert auto.top_agreement(list(range(20)), list(range(20))) == 1.0
    assert auto.top_agreement(list(range(20)), list(range(20))[::-1]) == 0.0


def sampled_load(model: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    from rankkit.models import checkpoint

    monkeypatch.setattr(checkpoint, "load_for_inference", lambda name, ck: model)
    sample = auto.InputSample.of_lists(QUERIES, CANDIDATES)
    return load_for_inference(model.name, None, Runtime("auto", "auto", None, "auto"), "cpu", sample=sample)


def test_auto_falls_back_when_its_choice_disagrees_on_the_users_input(backbone: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A lossy row that passes the bundled-text check but reorders the run's own first lists is not taken; the log
    names the numbers; the lossless row runs. The outcome is remembered for inputs of the same lengths."""
    on_cpu(monkeypatch, AVX2)
    with_int8_rows(monkeypatch)
    for name in ("MIN_CORRELATION", "MIN_COSINE_MEAN", "MIN_COSINE"):
        monkeypatch.setattr(auto, name, -1.0)
    monkeypatch.setattr(auto, "MIN_SAMPLE_TAU", 1.01)  # no int8 ranking can agree this well
    torch.manual_seed(0)
    model = build_model(get_model_class("mono"), backbone).eval()
    assert sampled_load(model, monkeypatch).runtime == Runtime("openvino", "none", None, "fp32")
    err = capsys.readouterr().err
    assert "not onnx int8 (on this input's first 3 queries (18 pairs): Kendall's tau to torch fp32 mean" in err
    assert not isinstance(model.pairs.encoder, OrtEncoder) or "fp32" in model.pairs.encoder.label
    torch.manual_seed(0)  # the same weights: the same export, whose remembered failure is reused
    again = build_model(get_model_class("mono"), backbone).eval()
    monkeypatch.setattr(auto, "sample_check", lambda *a: pytest.fail("the remembered outcome is not reused"))
    assert sampled_load(again, monkeypatch).runtime == Runtime("openvino", "none", None, "fp32")
    assert "not onnx int8 (on this input's first 3 queries" in capsys.readouterr().err


def test_auto_keeps_a_choice_that_agrees_on_the_users_input(backbone: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    on_cpu(monkeypatch, AVX2)
    with_int8_rows(monkeypatch)
    for name in ("MIN_CORRELATION", "MIN_COSINE_MEAN", "MIN_COSINE", "MIN_SAMPLE_TAU", "MIN_SAMPLE_TOP10"):
        monkeypatch.setattr(auto, name, -1.0)
    torch.manual_seed(0)
    model = build_model(get_model_class("mono"), backbone).eval()
    assert sampled_load(model, monkeypatch).runtime == Runtime("onnx", "int8", None, "fp32")
    assert "on this input's first 3 queries (18 pairs)" in capsys.readouterr().err
    torch.manual_seed(0)
    again = build_model(get_model_class("mono"), backbone).eval()
    sampled_load(again, monkeypatch)
    assert "(checked before)" in capsys.readouterr().err


def test_rerank_checks_auto_on_the_runs_own_pairs(cli: Any, backbone: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    on_cpu(monkeypatch, AVX2)
    with_int8_rows(monkeypatch)
    for name in ("MIN_CORRELATION", "MIN_COSINE_MEAN", "MIN_COSINE", "MIN_SAMPLE_TAU", "MIN_SAMPLE_TOP10"):
        monkeypatch.setattr(auto, name, -1.0)
    checkpoint = save_model(build_model(get_model_class("mono"), backbone), tmp_path / "mono", {})
    corpus, topics = write_corpus(tmp_path / "corpus.jsonl"), write_topics(tmp_path / "topics.tsv")
    write_run(tmp_path / "first.run", {f"t{i}": {d: float(k) for k, d in enumerate(sorted(documents()))}
                                       for i in range(4)}, "first")
    args = ["rerank", "--model", "mono", "--checkpoint", checkpoint, "--run", tmp_path / "first.run", "--topics",
            topics, "--corpus", corpus, "--device", "cpu"]
    result = cli(*args, "-o", tmp_path / "auto.run")
    assert result.code == 0 and "on this input's first 4 queries (64 pairs)" in result.stderr, result.stderr
    explicit = cli(*args, "-o", tmp_path / "int8.run", "--backend", "onnx", "--quantize", "int8")
    assert explicit.code == 0 and "this input's" not in explicit.stderr  # the user's own choice is not second-guessed
