#!/usr/bin/env python
"""``--encoder bi`` epoch time with frozen features computed once vs encoded inside every step.

Trains ``matrank --encoder bi`` (frozen packaged MiniLM, a head on top) on WikiQA's training
groups (``python examples/wikiqa/prepare.py --output DATA``) for ``--epochs`` epochs, in a fresh
process per variant (peak memory as bench/harness.py measures it):

* ``per-step``: the path before frozen features were precomputed: each step runs the encoder on
  the texts it has not met yet (vectors cached in memory by token ids), so every epoch still
  encodes the candidates its sampling draws for the first time;
* ``once``: :mod:`rankkit.training.frozen`: every distinct text encoded once before step 1.

Reports the set-up encoding, each epoch's seconds, the speed-up per epoch and whether the two
variants' loss curves agree (relative 1e-5).

    python bench/frozen_features.py --data runs/wikiqa --output runs/bench-frozen [--epochs 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import harness
from harness import ROOT

SETTINGS = dict(model="matrank", epochs=3, batch_size=16, group_size=5, lr=1e-3, seed=0,
                max_query_length=32, max_doc_length=128, log_every=1)


def child(variant: str, data: Path, output: Path, epochs: int) -> None:
    """Train one variant; print ``{"epochs": [...], "setup": s, "losses": [...]}`` on stdout."""
    import rankkit.training.loop as loop
    from rankkit.training import TrainConfig, train
    from rankkit.training import frozen

    setup = {"seconds": 0.0}
    if variant == "per-step":
        loop.precompute_frozen_features = lambda *args, **kwargs: None  # type: ignore[assignment]
    else:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            table = frozen.precompute_frozen_features(*args, **kwargs)
            setup["seconds"] = time.perf_counter() - started
            return table
        loop.precompute_frozen_features = timed  # type: ignore[assignment]
    marks: list[tuple[int, float]] = []
    config = TrainConfig(train=[data / "train.groups.jsonl"], output=output, device="cpu",
                         model_options={"encoder": "bi"}, **{**SETTINGS, "epochs": epochs})  # type: ignore[arg-type]
    started = time.perf_counter()
    train(config, [lambda info: marks.append((info.epoch, time.perf_counter()))])
    per_epoch = [0.0] * epochs
    previous = started + setup["seconds"]
    for epoch, at in marks:
        per_epoch[epoch] += at - previous
        previous = at
    log = [json.loads(line) for line in (output / "train.log").read_text().splitlines()]
    print(json.dumps({"epochs": per_epoch, "setup": setup["seconds"], "losses": [r["loss"] for r in log if "loss" in r]}))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="WikiQA folder of examples/wikiqa/prepare.py")
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--child", choices=("per-step", "once"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.data, args.output, args.epochs)
        return
    args.output.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"machine": harness.machine(torch_threads=True), "settings": SETTINGS,
                               "epochs": args.epochs, "variants": {}}
    for variant in ("per-step", "once"):
        folder = args.output / variant
        shutil.rmtree(folder, ignore_errors=True)
        run = harness.run_measured([sys.executable, __file__, "--data", args.data, "--output", folder,
                                    "--epochs", str(args.epochs), "--child", variant], cwd=ROOT)
        if not run.ok:
            sys.exit(f"{variant}: {run.tail()}")
        measured = json.loads(run.stdout.strip().splitlines()[-1])
        results["variants"][variant] = {**measured, "wall": run.seconds, "peak_rss_mb": run.peak_rss_mb}
    before, after = results["variants"]["per-step"], results["variants"]["once"]
    results["speedup_per_epoch"] = [b / a for b, a in zip(before["epochs"], after["epochs"])]
    results["losses_agree"] = all(abs(x - y) <= 1e-5 * max(1.0, abs(x)) for x, y in zip(before["losses"], after["losses"]))
    harness.save_json(args.output / "frozen_features.json", results)
    print(f"# --encoder bi epochs, {harness.machine_line(results['machine'])}")
    print("| variant | set-up encoding | " + " | ".join(f"epoch {e + 1}" for e in range(args.epochs))
          + " | total | peak RSS |")
    print("|---|---|" + "---|" * args.epochs + "---|---|")
    for name, v in results["variants"].items():
        print(f"| {name} | {v['setup']:.1f} s | " + " | ".join(f"{s:.1f} s" for s in v["epochs"])
              + f" | {v['wall']:.1f} s | {v['peak_rss_mb']:.0f} MB |")
    print("| speed-up | | " + " | ".join(f"{x:.1f}x" for x in results["speedup_per_epoch"]) + " | | |")
    print(f"loss curves agree (rel 1e-5): {results['losses_agree']}")


if __name__ == "__main__":
    main()
