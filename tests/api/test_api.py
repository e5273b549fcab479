"""The Python API (rankkit.api, reachable as rankkit.<name>) and library manners (issue 14, item 5).

``import rankkit`` (and rankkit's model modules) must leave ``os.environ`` and transformers' logging
as they were; only the ``rankkit`` command sets its offline/log settings. Checked in fresh
subprocesses, since pytest's own process has long imported everything.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

import rankkit
from rankkit.errors import RankkitError
from rankkit.formats import read_qrels, read_run, read_topics

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DL19 = Path(__file__).parents[1] / "data" / "dl19"


def run_python(code: str, env: dict[str, str] | None = None, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
                                                                    "TOKENIZERS_PARALLELISM", "TRANSFORMERS_VERBOSITY",
                                                                    "HF_HUB_DISABLE_PROGRESS_BARS", "HF_HUB_VERBOSITY")}
    environment["PYTHONPATH"] = str(ROOT) + os.pathsep + environment.get("PYTHONPATH", "")
    environment.update(env or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment,
                          timeout=timeout, check=False)


def test_importing_rankkit_leaves_the_environment_and_logging_alone() -> None:
    # The libraries rankkit builds on are imported first: importing transformers' models sets
    # TORCHINDUCTOR_CACHE_DIR (torch._dynamo does, through transformers' flash-attention module),
    # which is theirs to do; what is checked is that rankkit adds nothing to it.
    code = """
import json, os, sys
import faiss, numpy, torch, transformers, transformers.modeling_utils
before = dict(os.environ)
level = transformers.utils.logging.get_verbosity()
bars = transformers.utils.logging.is_progress_bar_enabled()
import rankkit, rankkit.api, rankkit.models, rankkit.models.backbone, rankkit.reranking, rankkit.dense, rankkit.formats
rankkit.evaluate  # the lazy API import
changed = sorted(k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k))
print(json.dumps({"changed": changed, "level": transformers.utils.logging.get_verbosity() == level,
                  "bars": transformers.utils.logging.is_progress_bar_enabled() == bars}))
"""
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"changed": [], "level": True, "bars": True}


def test_import_rankkit_is_light_and_the_api_is_lazy() -> None:
    code = """
import sys, rankkit
heavy = ("torch", "transformers", "faiss", "pyserini", "ir_measures", "pandas", "matplotlib", "tensorboard", "scipy")
print(sorted(m for m in (*heavy, "rankkit.api") if m in sys.modules))
# The API module, the DataFrame converters and the training curves import none of the optional packages either.
import rankkit.api, rankkit.formats.frames, rankkit.training.curves
print(sorted(m for m in ("pandas", "matplotlib", "tensorboard", "scipy") if m in sys.modules))
"""
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["[]", "[]"]
    assert set(rankkit.__all__) >= {"search", "dense_search", "rerank", "fuse", "evaluate", "__version__"}
    assert "rerank" in dir(rankkit)
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        rankkit.nope  # noqa: B018


def test_the_rankkit_command_sets_its_own_settings() -> None:
    code = """
import os
from rankkit.cli import main
try:
    main(["--version"])
except SystemExit:
    pass
print(os.environ.get("HF_HUB_OFFLINE"), os.environ.get("TRANSFORMERS_VERBOSITY"))
"""
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    # Offline is the user's choice: the command no longer forces HF_HUB_OFFLINE.
    assert result.stdout.split() == ["rankkit", rankkit.__version__, "None", "error"]
    kept = run_python(code, env={"HF_HUB_OFFLINE": "0", "TRANSFORMERS_VERBOSITY": "info"})  # a value the user set wins
    assert kept.stdout.split()[-2:] == ["0", "info"]
    offline = run_python(code.replace('main(["--version"])', 'main(["--offline", "--version"])'))
    assert offline.stdout.split()[-2:] == ["1", "error"]


def test_py_typed_is_shipped() -> None:
    assert (ROOT / "rankkit" / "py.typed").is_file()
    assert re.search(r'\[tool\.setuptools\.package-data\]\s*(#[^\n]*\n)?\s*rankkit = \["py\.typed"[,\]]',
                     (ROOT / "pyproject.toml").read_text())


def test_evaluate_and_fuse_on_in_memory_runs() -> None:
    qrels = read_qrels(DL19 / "qrels.dl19-passage.txt")
    bm25 = read_run(DL19 / "BM25.trec_results_dl19.txt")
    ada2 = read_run(DL19 / "OPEN_AI_ADA2.trec_results_dl19.txt")
    scores = rankkit.evaluate(bm25, qrels, ["nDCG@10", "ndcg_cut.10", "map"])
    assert scores["nDCG@10"] == scores["ndcg_cut.10"] == pytest.approx(0.5058, abs=5e-5)  # trec_eval's value
    assert scores["map"] == pytest.approx(0.2993, abs=5e-5)
    per_query = rankkit.evaluate(bm25, qrels, ["RR@10"], per_query=True)
    assert len(per_query) == 43 and all(set(v) == {"RR@10"} for v in per_query.values())
    fused = rankkit.fuse([bm25, ada2], method="rrf", k=100)
    assert set(fused) == set(bm25) and all(len(docs) == 100 for docs in fused.values())
    assert rankkit.evaluate(fused, DL19 / "qrels.dl19-passage.txt", ["nDCG@10"])["nDCG@10"] > scores["nDCG@10"]


def test_search_matches_the_retrieve_command(tmp_path: Path, cli: Callable[..., Any]) -> None:
    from _lexical_index import TOPICS, small_index

    index = small_index()
    queries = read_topics(TOPICS)
    run = rankkit.search(index, queries, k=10)
    out = tmp_path / "bm25.run"
    result = cli("retrieve", "--index", index, "--topics", TOPICS, "--hits", "10", "-o", out)
    assert result.code == 0, result.stderr
    assert run == read_run(out) and len(run) == len(queries)


def test_rerank_errors_are_one_line() -> None:
    with pytest.raises(RankkitError, match="query 'q9' of the run has no text"):
        rankkit.rerank("repbert", {"q9": {"d": 1.0}}, {"q1": "x"}, {"d": "y"})
    with pytest.raises(RankkitError, match="passage 'd' has no text"):
        rankkit.rerank("repbert", {"q1": {"d": 1.0}}, {"q1": "x"}, {})


def readme_block(name: str) -> tuple[str, str]:
    """The python code of README's ``<!-- NAME:start -->`` block and the output printed under it."""
    text = README.read_text(encoding="utf-8")
    block, after = text.split(f"<!-- {name}:start -->")[1].split(f"<!-- {name}:end -->")
    printed = after.split("```", 1)[1].split("```")[0].strip("\n")
    return block.split("```python")[1].split("```")[0], printed


def test_readme_api_example_runs() -> None:
    code, printed = readme_block("api-example")
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    out = result.stdout.strip().splitlines()
    lines = dict(line.split(" {", 1) for line in out[:3])
    assert lines["first stage"] == "'RR@10': 0.3333333333333333, 'nDCG@10': 0.5}"
    assert lines["re-ranked"] == "'RR@10': 1.0, 'nDCG@10': 1.0}"
    assert lines["fused"].startswith("'RR@10': 0.5")
    assert out[3].startswith("[{'corpus_id': 0, 'score': ")  # rank(): the passage that answers q1 first
    assert [line.split(" {")[0] for line in out] == [line.split(" {")[0] for line in printed.splitlines()]


def test_readme_notebook_example_runs() -> None:
    """The DataFrame + experiment session of README.md prints what README.md says it prints."""
    pytest.importorskip("pandas")
    code, printed = readme_block("api-notebook")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=False,
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")})
    assert result.returncode == 0, result.stderr
    # Re-ranking scores may differ in the last printed digit across CPUs: numbers compared to 1e-3.
    got, want = result.stdout.strip().splitlines(), printed.splitlines()
    assert len(got) == len(want), result.stdout
    for a, b in zip(got, want):
        assert a.split() == b.split() or [_number(x) for x in a.split()] == pytest.approx(
            [_number(x) for x in b.split()], abs=1e-3), (a, b)


def _number(token: str) -> Any:
    try:
        return float(token)
    except ValueError:
        return token


def test_rankkit_rerank_is_the_api_call_and_reranking_the_subpackage() -> None:
    code = """
import rankkit
first = rankkit.rerank
import rankkit.reranking  # importing the subpackage binds rankkit.reranking, never rankkit.rerank
from rankkit.reranking import rerank_run
import rankkit.api
print(first is rankkit.api.rerank, rankkit.rerank is rankkit.api.rerank, rankkit.reranking.rerank_run is rerank_run,
      type(rankkit).__name__)
"""
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True", "True", "module"]
