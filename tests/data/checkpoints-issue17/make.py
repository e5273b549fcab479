"""Writes this folder's checkpoints (see PROVENANCE.md): python tests/data/checkpoints-issue17/make.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from test_models_parade import long_groups  # noqa: E402
from training_helpers import tiny_backbone, write_groups  # noqa: E402

#: name -> (model, extra rankkit train options)
FOLDERS: dict[str, tuple[str, list[str]]] = {
    "listwise": ("listwise", ["--list-size", "8"]),
    "matrank-attn": ("matrank-attn", []),
    "matrank-col": ("matrank-col", []),
    "listwise-joint": ("listwise-joint", []),
    "avgp": ("avgp", ["--window", "6", "--stride", "5", "--max-passages", "4"]),
    "kmaxp": ("kmaxp", ["--window", "6", "--stride", "5", "--max-passages", "4", "--k", "2"]),
}
QUERIES = ["apple fruit", "car engine"]
CANDIDATES = [
    ["apple fruit red apple red", "car engine fuel car fuel", "apple pie with red fruit on the table today",
     "river water flow", "music guitar song"],
    ["car engine fuel car fuel", "apple fruit red", "the engine of the car runs on fuel all day long today",
     "bread flour bake", "dog bark pet", "chess king move"],
]


def main() -> None:
    work = HERE / "_work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    backbone = tiny_backbone(work / "tiny", hidden=16, dropout=0.0)
    groups = write_groups(work / "groups.jsonl", count=4, negatives=3)
    long = long_groups(work / "long.jsonl", count=4)
    scores: dict[str, list[list[float]]] = {}
    for folder, (model, extra) in FOLDERS.items():
        out = HERE / folder
        shutil.rmtree(out, ignore_errors=True)
        data = long if extra and extra[0] == "--window" else groups
        subprocess.run([sys.executable, "-m", "rankkit", "train", "--model", model, "--train", str(data), "--output",
                        str(out), "--backbone", str(backbone), "--max-steps", "1", "--batch-size", "2", "--group-size",
                        "3", "--seed", "0", "--max-doc-length", "24", "--device", "cpu", *extra], check=True)
        for name in ("train.log",):
            (out / name).unlink(missing_ok=True)
        from rankkit.models.checkpoint import load_model

        loaded = load_model(out)
        scores[folder] = [s.tolist() for s in loaded.rerank_scores(QUERIES, CANDIDATES, batch_size=4)]
    (HERE / "expected_scores.json").write_text(
        json.dumps({"queries": QUERIES, "candidates": CANDIDATES, "scores": scores}, indent=1) + "\n", encoding="utf-8")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
