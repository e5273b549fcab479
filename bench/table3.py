#!/usr/bin/env python
"""MatRank Table 3's passage rows at CPU scale, in one process: mono (Point-wise), listwise
(List-wise), matrank-attn (+Attention), matrank-row, matrank-col and matrank, same backbone,
same budget, same seed, on a prepared WikiQA or SemEval-2016 task (examples/*/prepare.py).

    python bench/table3.py --data runs/semeval-data --output runs/table3-semeval

Every model is trained by rankkit's own trainer (:func:`rankkit.training.train`, what ``rankkit
train`` runs) with ``--encoder bi`` (frozen all-MiniLM-L6-v2 features, the CPU variant of
docs/RERANKING.md; options :data:`SETTING` plus the task's lengths) and re-ranks every test
candidate with :func:`rankkit.reranking.rerank_run` (what ``rankkit rerank`` runs); then one
``rankkit eval -m AP -m RR -b <baseline run>`` compares every run with the point-wise row
(paired randomization, Holm). Why in one process: the frozen encoder's vectors are identical
for every model, so they are computed once and shared (``BiPairEncoder``'s per-instance cache is
pointed at one dictionary); on these shared cores encoding the texts is nearly all of the cost, so
six CLI runs would encode them twelve times. ``commands.sh`` lists the equivalent CLI commands.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import harness
import torch
from harness import ROOT

from rankkit.models.cross_encoders import pair_encoders

MODELS = ("mono", "listwise", "matrank-attn", "matrank-row", "matrank-col", "matrank")
PAPER_ROW = {"mono": "Point-wise", "listwise": "List-wise", "matrank-attn": "+Attention",
             "matrank-row": "MatRank_row", "matrank-col": "MatRank_col (\"same as row\")", "matrank": "MatRank"}
PAPER_MRR10 = {"mono": "41.9", "listwise": "41.9", "matrank-attn": "42.3", "matrank-row": "42.4",
               "matrank-col": "(= row)", "matrank": "42.6"}
#: ``rankkit train`` options shared by every row (bench/rerank.py's ``bi`` setting).
SETTING = ["--encoder", "bi", "--group-size", "16", "--lr", "1e-3", "--epochs", "3", "--batch-size", "4"]
LENGTHS = {"wikiqa": (32, 128), "semeval": (96, 160)}

#: One frozen-vector cache for every model of the process (see the module docstring).
SHARED_CACHE: dict[bytes, torch.Tensor] = {}
_original_init = pair_encoders.BiPairEncoder.__init__


def _shared_cache_init(self: Any, *args: Any, **kwargs: Any) -> None:
    _original_init(self, *args, **kwargs)
    if self.frozen:
        self._cache = SHARED_CACHE


pair_encoders.BiPairEncoder.__init__ = _shared_cache_init  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="a folder written by examples/{wikiqa,semeval}/prepare.py")
    parser.add_argument("--task", choices=sorted(LENGTHS), required=True)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    from rankkit.docstore import open_docstore
    from rankkit.models.checkpoint import load_for_inference
    from rankkit.reranking import rerank_run
    from rankkit.training import TrainConfig, train

    out = args.output
    out.mkdir(parents=True, exist_ok=True)
    data = args.data
    qlen, dlen = LENGTHS[args.task]
    models = [m for m in args.models.split(",") if m]
    store = open_docstore(corpus=data / "corpus.jsonl")
    commands: list[str] = []
    record: dict[str, Any] = {"machine": harness.machine(), "uptime_before": harness_uptime(), "rows": {}}
    runs: dict[str, Path] = {}
    for name in models:
        ck, run = out / "ck" / name, out / f"{name}.test.run"
        commands.append(shlex.join(["rankkit", "train", "--model", name, "--train", str(data / "train.groups.jsonl"),
                                    "--output", str(ck), *SETTING, "--max-query-length", str(qlen),
                                    "--max-doc-length", str(dlen), "--seed", str(args.seed), "--device", "cpu"]))
        commands.append(shlex.join(["rankkit", "rerank", "--model", name, "--checkpoint", str(ck), "--run",
                                    str(data / "test.candidates.run"), "--topics", str(data / "test.topics.tsv"),
                                    "--corpus", str(data / "corpus.jsonl"), "--depth", "1000", "--device", "cpu",
                                    "--output", str(run)]))
        started = time.perf_counter()
        if not (ck / "rankkit.json").is_file():
            config = TrainConfig(model=name, train=[data / "train.groups.jsonl"], output=ck, epochs=3, batch_size=4,
                                 group_size=16, lr=1e-3, max_query_length=qlen, max_doc_length=dlen, seed=args.seed,
                                 device="cpu", model_options={"encoder": "bi"})
            train(config)
        trained = time.perf_counter()
        if not run.is_file():
            model = load_for_inference(name, ck)
            rerank_run(model, data / "test.candidates.run", data / "test.topics.tsv", store, run, depth=1000)
        record["rows"][name] = {"train_s": round(trained - started, 1), "rerank_s": round(time.perf_counter() - trained, 1)}
        runs[name] = run
        print(f"{name}: {record['rows'][name]}", flush=True)
    baseline = runs.get("mono")
    others = [runs[m] for m in models if m != "mono"]
    evaluation: dict[str, Any] = {}
    for fmt, target in (("json", out / "eval.json"), ("markdown", out / "eval.md")):
        cmd = [sys.executable, "-m", "rankkit", "eval", "-m", "AP", "-m", "RR", "--qrels", str(data / "test.qrels.txt"),
               *(["-b", str(baseline)] if baseline else []), str(data / "test.candidates.run"), *map(str, others),
               "-f", fmt, "-o", str(target)]
        subprocess.run(cmd, check=True, cwd=ROOT)
        commands.append(shlex.join(["rankkit", *cmd[3:]]))
    evaluation = json.loads((out / "eval.json").read_text(encoding="utf-8"))
    record["eval"] = evaluation
    record["uptime_after"] = harness_uptime()
    (out / "table3.json").write_text(json.dumps(record, indent=1, default=str) + "\n", encoding="utf-8")
    (out / "commands.sh").write_text("# equivalent CLI commands (bench/table3.py runs them in one process)\n"
                                     + "\n".join(commands) + "\n", encoding="utf-8")
    print((out / "eval.md").read_text(encoding="utf-8"))


def harness_uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


if __name__ == "__main__":
    main()
