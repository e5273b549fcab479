"""The short version of bench/serve_load.py: rankkit serve under a bounded load on the loopback interface, then
above its queue's limit (429 with Retry-After and nothing else)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from serve_helpers import tiny_checkpoint

from rankkit.testing import tiny_backbone

BENCH = Path(__file__).resolve().parents[2] / "bench" / "serve_load.py"


def test_bounded_load_and_overload(tmp_path: Path) -> None:
    checkpoint = tiny_checkpoint("mono", tiny_backbone(tmp_path / "tiny"), tmp_path, max_doc_length=24)
    out = tmp_path / "bench"
    done = subprocess.run([sys.executable, str(BENCH), "--checkpoint", str(checkpoint), "--systems", "rankkit",
                           "--concurrency", "1,4", "--requests", "8", "--depth", "10", "--warmup", "2",
                           "--overload-queue", "2", "--overload-args", "--max-wait-ms 150", "--output", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    normal, overload = results["systems"]
    assert normal["exit_code"] == 0 and normal["warmup_errors"] == 0
    for row in normal["levels"]:  # below the queue's limit: every request answered
        assert row["ok"] == row["requests"] == 8 and row["errors"] == 0 and row["rejected_429"] == 0
        assert row["pairs_per_s"] > 0 and row["p50_s"] <= row["p95_s"] <= row["p99_s"]
        assert row["rss_mb_end"] - row["rss_mb_start"] < 100
    row = overload["levels"][0]  # 4 clients, 2 admitted at once, batches waiting 150 ms: some are turned away
    assert row["rejected_429"] > 0 and row["rejected_with_retry_after"] == row["rejected_429"]
    assert row["errors"] == 0 and row["ok"] + row["rejected_429"] == row["requests"]
    assert "| rankkit-torch | 4 | 8 / 8 |" in (out / "results.md").read_text()
