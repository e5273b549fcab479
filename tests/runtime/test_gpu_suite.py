"""bench/gpu_suite.py --dry-run: the GPU suite's whole code path on the CPU with tiny sizes (what CI can run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_gpu_suite_dry_run(tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    child = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_suite.py"), "--dry-run", "--output",
                            str(tmp_path)], env=env, capture_output=True, text=True, timeout=600)
    assert child.returncode == 0, child.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    training = results["training"]
    # 3 models x 3 precisions x checkpointing on/off, plus the two --workers rows.
    assert len(training) == 20 and {r["model"] for r in training} == {"mono", "matrank", "set-encoder"}
    for row in training:
        if row["precision"] == "fp16":
            assert "needs CUDA" in row["note"]  # the dry run is on the CPU
        else:
            assert row["step_s"] > 0 and row["steps_timed"] == 2 and row["loss"] == row["loss"], row
    assert [r["workers"] for r in training[-2:]] == [2, 2]
    inference = {(r["system"], r["precision"]): r for r in results["inference"]}
    assert len(inference) == 4 and all(r["pairs_per_s"] > 0 for r in inference.values())
    # The same weights scored by rankkit and by sentence-transformers' CrossEncoder: the same scores in fp32.
    assert inference[("sentence-transformers CrossEncoder", "fp32")]["max_abs_diff"] < 1e-4
    smoke = results["torchrun"]
    assert smoke["exit"] == 0 and smoke["checkpoint"], smoke
    table = (tmp_path / "results.md").read_text(encoding="utf-8")
    assert "DRY RUN" in table and "| set-encoder | 6 x 1 | bf16 | yes | 0 |" in table
