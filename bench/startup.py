"""Start-up of a small ``rankkit rerank`` (issue 39): the whole command's wall time and peak memory, per path,
beside sentence-transformers' ``CrossEncoder`` scoring the same pairs in a fresh process (the peer a user would
otherwise script).

Two mono checkpoints, saved as ``rankkit train --model mono`` saves them: ``tiny`` (the tests' 2-layer, 24-wide BERT,
15k parameters) and ``minilm`` (the packaged all-MiniLM-L6-v2 with a new one-label head, 22.7M parameters); the
same 60 pairs (5 queries x 12 candidates of the bundled tiny corpus). Rows, each run ``--repeats`` times in turn
(interleaved), median wall and peak RSS (``harness.run_measured``):

* ``rankkit rerank --backend onnx``, the ONNX scorer's record built (rankkit/runtime/scorer.py): no torch;
* ``--backend onnx`` the first time (the export, its check and the record, through torch): once, not repeated;
* ``--backend torch``: the torch path;
* ``--backend auto``: the tiny model runs the scorer, MiniLM auto's table (OpenVINO bf16 or fp32, with its check);
* ``CrossEncoder``: ``python -c`` loading the checkpoint with sentence-transformers and scoring the 60 pairs.

    python bench/startup.py --output runs/bench/startup [--repeats 5] [--models tiny,minilm]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
from pathlib import Path
from typing import Any

import harness

CROSS_ENCODER = """
import sys
from sentence_transformers import CrossEncoder
folder, run, topics, corpus = sys.argv[1:5]
q = dict(l.rstrip("\\n").split("\\t", 1) for l in open(topics, encoding="utf-8"))
d = dict(l.rstrip("\\n").split("\\t", 1) for l in open(corpus, encoding="utf-8"))
pairs = [(q[l.split()[0]], d[l.split()[2]]) for l in open(run, encoding="utf-8")]
scores = CrossEncoder(folder, device="cpu").predict(pairs, batch_size=32, show_progress_bar=False)
assert len(scores) == len(pairs)
"""


def build(root: Path, models: list[str]) -> dict[str, Path]:
    """The checkpoints and the 60-pair inputs under ``root``."""
    from rankkit.models import create_model
    from rankkit.models.checkpoint import save_model
    from rankkit.testing import TOPICS, tiny_backbone, tiny_documents

    docs = tiny_documents()
    (root / "corpus.tsv").write_text("".join(f"{d}\t{t}\n" for d, t in docs.items()), encoding="utf-8")
    (root / "topics.tsv").write_text("".join(f"q{i}\t{t}\n" for i, t in enumerate(TOPICS[:5])), encoding="utf-8")
    ids = list(docs)[:12]
    (root / "run.trec").write_text("".join(f"q{i} Q0 {d} {r + 1} {20 - r} bm25\n" for i in range(5)
                                           for r, d in enumerate(ids)), encoding="utf-8")
    out = {}
    for name in models:
        folder = root / name
        if not (folder / "rankkit.json").is_file():
            backbone = tiny_backbone(root / "backbone") if name == "tiny" else None
            save_model(create_model("mono", backbone), folder, {})
        out[name] = folder
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--models", default="tiny,minilm")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    args.output.mkdir(parents=True, exist_ok=True)
    models = build(args.output, args.models.split(","))
    cache = args.output / "cache"
    env = {**os.environ, "RANKKIT_CACHE_DIR": str(cache)}
    rankkit = str(Path(sys.executable).with_name("rankkit"))
    threads = ["--threads", str(args.threads)] if args.threads else []
    inputs = ["--run", str(args.output / "run.trec"), "--topics", str(args.output / "topics.tsv"),
              "--corpus", str(args.output / "corpus.tsv")]
    results: dict[str, Any] = {"machine": harness.machine(), "repeats": args.repeats, "pairs": 60, "models": {}}
    for name, folder in models.items():
        shutil.rmtree(cache, ignore_errors=True)

        def command(backend: str, folder: Path = folder, name: str = name) -> list[str]:
            return [rankkit, "rerank", "--model", "mono", "--checkpoint", str(folder), *inputs, "--output",
                    str(args.output / f"{name}.{backend}.run"), "--backend", backend, *threads]

        first = harness.run_measured(command("onnx"), env=env)
        assert first.ok, first.tail()
        rows: dict[str, list[harness.Measured]] = {"onnx": [], "torch": [], "auto": [], "cross-encoder": []}
        for _ in range(args.repeats):
            for row in rows:
                argv = ([sys.executable, "-c", CROSS_ENCODER, str(folder), *inputs[1::2]] if row == "cross-encoder"
                        else command(row))
                done = harness.run_measured(argv, env=env)
                assert done.ok, (row, done.tail())
                rows[row].append(done)
        table = {"onnx first run (builds the record)": {"wall_s": round(first.seconds, 2),
                                                         "peak_mb": round(first.peak_rss_mb or 0, 1)}}
        for row, runs in rows.items():
            table[row] = {"wall_s": round(statistics.median(r.seconds for r in runs), 2),
                          "wall_s_all": [round(r.seconds, 2) for r in runs],
                          "peak_mb": round(statistics.median(r.peak_rss_mb or 0 for r in runs), 1)}
        peer = table["cross-encoder"]["wall_s"]
        for row in table.values():
            row["vs_cross_encoder"] = round(row["wall_s"] / peer, 3)
        results["models"][name] = table
        print(name, {k: (v["wall_s"], v["peak_mb"]) for k, v in table.items()}, flush=True)
    harness.save_json(args.output / "results.json", results)
    print(harness.machine_line(results["machine"]))


if __name__ == "__main__":
    main()
