"""bench/gpu_suite.py --dry-run: the GPU suite's whole code path on the CPU with tiny sizes (what CI can run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_gpu_suite_dry_run(tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "RANKKIT_CACHE_DIR": str(tmp_path / "cache")}
    child = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_suite.py"), "--dry-run", "--output",
                            str(tmp_path / "out")], env=env, capture_output=True, text=True, timeout=900)
    assert child.returncode == 0, child.stderr[-3000:]
    results = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    inference = {(r["system"], r["precision"]): r for r in results["inference"]}
    crossencoder = inference[("sentence-transformers CrossEncoder (batch 64)", "fp32")]
    session = inference[("rankkit session (rankkit.rerank, rankkit rerank)", "fp32")]
    assert crossencoder["cold"] > 0 and session["warm"] > 0 and session["correlation"] == 1.0
    # The same folder scored by rankkit and by sentence-transformers' CrossEncoder: the same scores in fp32.
    assert session["crossencoder_max_abs_diff"] < 1e-4
    assert "needs CUDA" in inference[("rankkit session", "tf32")]["note"]
    assert inference[("rankkit session encode (index --kind dense), passages", "bf16")]["warm"] > 0
    quality = {r["row"]: r for r in results["quality"]}
    assert quality["mono (trained here) fp32"]["ndcg10"] > 0 and "correlation" in quality["mono (trained here) bf16"]
    assert quality["repbert (zero-shot all-MiniLM-L6-v2) bf16"]["correlation"] > 0.99
    commands = {r["command"]: r for r in results["commands"]}
    assert all(r["exit"] == 0 for r in commands.values()), commands
    assert commands["rankkit rerank --precision fp32"]["pairs_per_s"] > 0
    assert "padding" in commands["rankkit rerank defaults"]["last_line"]
    training = {r["system"]: r for r in results["training"]}
    assert training["bare transformers loop (pre-tokenised batches: the floor)"]["step_s"] > 0
    command = training["rankkit train command (defaults)"]
    assert command["exit"] == 0 and command["workers"] == "0" and command["step_s"] > 0  # --workers auto: 0 on a CPU
    assert any(r.get("note", "").startswith("fp16 needs CUDA") for r in results["training"])
    assert {r["model"] for r in results["training"] if "step_s" in r} >= {"mono", "matrank", "set-encoder"}
    smoke = results["torchrun"]
    assert smoke["exit"] == 0 and smoke["checkpoint"], smoke
    table = (tmp_path / "out" / "results.md").read_text(encoding="utf-8")
    assert "DRY RUN" in table and "| rankkit Trainer set-encoder (--workers auto) | 6 x 1 | bf16 |" in table


def test_gpu_suite_ndcg_equals_rankkit_evaluation() -> None:
    """The suite computes DL19 nDCG@10 itself (the GPU image has no ir_measures); it must equal rankkit eval's."""
    sys.path.insert(0, str(ROOT / "bench"))
    import gpu_suite

    from rankkit.evaluation import evaluate
    from rankkit.formats import read_qrels, read_run

    qrels = read_qrels(gpu_suite.DL19 / "qrels.dl19-passage.txt")
    for name in ("BM25.dl19.txt", "SPLADE_P_P_ENSEMBLE_DISTIL.dl19.txt"):  # SPLADE++ has tied scores
        run = read_run(gpu_suite.DL19 / "runs" / name)
        qids = list(run)
        ours = gpu_suite.ndcg10(qids, [list(run[q]) for q in qids], [list(run[q].values()) for q in qids])
        assert ours == evaluate({"r": run}, qrels, ["nDCG@10"]).runs["r"].aggregates["nDCG@10"]
