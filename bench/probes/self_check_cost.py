#!/usr/bin/env python
"""Probe (issue 41): what auto's self-check on the user's own input costs, against the run it guards.

    python bench/probes/self_check_cost.py [--mono CHECKPOINT] [--threads 2]

For the zero-shot bi-encoder (``repbert``, the packaged all-MiniLM-L6-v2) and, with ``--mono``, a trained mono:
loads the model on OpenVINO bf16 (auto's row on an AVX512-BF16 CPU; on other CPUs OpenVINO emulates bf16 in
fp32 and the numbers say nothing about auto) and a torch fp32 copy, times :func:`rankkit.runtime.auto.sample_check`
on the first queries of DL19's BM25 top 100 (``SAMPLE_QUERIES`` x ``SAMPLE_DEPTH`` pairs, uncached: the cost a
first run pays once per export, CPU and input length), then the whole DL19 top-100 re-ranking (43 x 100 pairs)
through the inference session on the same backend, and prints seconds and the share.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mono", default=None, help="a trained mono checkpoint folder (optional)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    from inference import dl19_candidates  # bench/inference.py: DL19's BM25 candidates with their texts

    from rankkit.runtime import InferenceSession, Runtime, auto, load_for_inference
    from rankkit.cpu import describe_cpu

    _, queries, _, passages = dl19_candidates(100, None)
    sample = auto.InputSample.of_lists(queries, passages)
    print(f"CPU: {describe_cpu()}; {auto.SAMPLE_QUERIES} queries x {auto.SAMPLE_DEPTH} candidates; "
          f"{len(queries)} queries x 100 in the run")
    models = [("repbert", None)] + ([("mono", args.mono)] if args.mono else [])
    for name, checkpoint in models:
        fast = load_for_inference(name, checkpoint, Runtime("openvino", "none", args.threads, "bf16"), "cpu")
        reference = load_for_inference(name, checkpoint, Runtime("torch", "none", args.threads, "fp32"), "cpu").model
        torch_modules = [(slot, ref.module) for slot, ref in
                         zip(fast.model.encoder_slots(), reference.encoder_slots())]
        start = time.perf_counter()
        verdict = auto.sample_check(fast.model, torch_modules, sample)
        check = time.perf_counter() - start
        session = InferenceSession.of(fast)
        start = time.perf_counter()
        session.scores(queries, passages)
        run = time.perf_counter() - start
        print(f"{name}: self-check {check:.2f} s ({verdict}); DL19 top-100 re-ranking on the same backend "
              f"{run:.1f} s; the check is {check / run:.1%} of it")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
