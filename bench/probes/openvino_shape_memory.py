#!/usr/bin/env python
"""Probe (issue 40): OpenVINO's memory per input shape, as a re-ranking service meets it.

    python bench/probes/openvino_shape_memory.py --checkpoint runs/serve/mono --mode new-shapes --bucket 1
    python bench/probes/openvino_shape_memory.py --checkpoint runs/serve/mono --mode new-shapes --bucket 32
    python bench/probes/openvino_shape_memory.py --checkpoint runs/serve/mono --mode cycle --bucket 1

Loads ``--model`` from ``--checkpoint`` on OpenVINO (``--precision``, 2 threads) in an inference session as
``rankkit serve``'s worker does, with padded lengths in steps of ``--bucket`` tokens, then scores ``--requests``
requests: each one query of DL19 with its first 1-32 BM25 passages cut to 5-400 words (seeded), so almost every
request is a new (rows, length) shape (``new-shapes``) or one of 40 shapes over and over (``cycle``). Prints the
process's resident memory every ``--every`` requests.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="mono")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--precision", default="bf16", choices=["fp32", "bf16"])
    parser.add_argument("--mode", default="new-shapes", choices=["new-shapes", "cycle"])
    parser.add_argument("--bucket", type=int, default=1)
    parser.add_argument("--requests", type=int, default=800)
    parser.add_argument("--every", type=int, default=100)
    args = parser.parse_args()

    from harness import resident_mb
    from serve_load import requests_of  # bench/serve_load.py: DL19 queries with their BM25 passages

    from rankkit.cpu import describe_cpu
    from rankkit.models.batching import Batching
    from rankkit.runtime import InferenceSession, Runtime, load_for_inference

    requests = requests_of(ROOT / "examples" / "data" / "dl19", 100)
    loaded = load_for_inference(args.model, args.checkpoint, Runtime("openvino", "none", 2, args.precision), "cpu")
    session = InferenceSession.of(loaded, batching=Batching(32, None, args.bucket, 0))
    print(f"CPU: {describe_cpu()}; {args.mode}, bucket {args.bucket}, {args.precision}; loaded: "
          f"{resident_mb():.0f} MB", flush=True)
    draw = random.Random(0)
    for i in range(1, args.requests + 1):
        pick = random.Random(i % 40) if args.mode == "cycle" else draw
        _, query, passages = requests[pick.randrange(len(requests))]
        rows, words = pick.randrange(1, 33), pick.randrange(5, 400)
        session.scores([query], [[" ".join((passage * 4).split()[:words]) for passage in passages[:rows]]])
        if i % args.every == 0:
            print(f"{i} requests: {resident_mb():.0f} MB, {len(session.stats.shapes)} shapes", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
