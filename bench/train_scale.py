#!/usr/bin/env python
"""Training at the papers' scale: step time and peak memory of one optimiser step.

Two settings of the issue, both on the packaged all-MiniLM-L6-v2 (or ``--backbone``):

* ``matrank``: MatRank (Luo et al., 2022) with one group of 1 positive + 96 negatives (group size
  97, MatRank §4.1: "The positive to the hard negative ratio is set to be 1:96");
* ``set-encoder``: the Set-Encoder (Schlatt et al., 2024) with one list of 100 passages (§1:
  "fine-tuning on and re-ranking of 100 passages per query");

every pair 256 tokens long (query 32 + passage 221 + 3 special tokens; each candidate text is
several consecutive DL20-pool passages joined, so truncation fills every pair; checked). Each is
measured in fp32 and bf16 (``--precision``), with and without activation checkpointing
(``--gradient-checkpointing``): 2 models x 2 precisions x 2 = 8 settings. One setting is one fresh
child process (``_probe``) that builds the model, runs one warm-up step (AdamW states allocated),
resets its resident high-water mark (:func:`harness.reset_peak_rss`) and times ``--steps`` more
steps: tokenisation + forward + loss under :func:`rankkit.devices.autocast` (the loss in fp32, as
``rankkit train`` computes it) + backward + gradient clipping + AdamW. The parent reads the child's
peak RSS (:func:`harness.run_measured`); on CUDA the child also reports
``torch.cuda.max_memory_allocated`` over the timed steps.

    python bench/train_scale.py --output runs/bench-train-scale [--models matrank,set-encoder]
        [--precisions fp32,bf16] [--checkpointing off,on] [--steps 2] [--device cpu|cuda] [--backbone DIR]
        [--threads N] [--pairs N (a quick check with smaller groups)]

Writes OUTPUT/train_scale.md (table and commands) and OUTPUT/train_scale.json. The candidate texts
come from ``../shared/data/msmarco-passage-trec-dl/derived/dl20.passages.union5runs.tsv.gz`` (the
DL20 pool: training side; DL19 is never used here).
"""

from __future__ import annotations

import argparse
import gzip
import json
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import harness
from harness import ROOT, SHARED_DATA

PASSAGES = SHARED_DATA / "msmarco-passage-trec-dl" / "derived" / "dl20.passages.union5runs.tsv.gz"
QUERIES = SHARED_DATA / "msmarco-passage-trec-dl" / "derived" / "dl20.queries.tsv"
#: The group (list) size of each model, from its paper (see the module docstring).
GROUP_SIZES = {"matrank": 97, "set-encoder": 100}
QUERY_TOKENS, PAIR_TOKENS = 32, 256
#: Consecutive pool passages joined into one candidate text, enough for 221 word pieces.
JOINED = 6


def write_group(path: Path, size: int) -> None:
    """One training group (rankkit JSONL shape): the first DL20 query, ``size`` long candidates."""
    with open(QUERIES, encoding="utf-8") as handle:
        qid, query = handle.readline().rstrip("\n").split("\t", 1)
    texts: list[str] = []
    with gzip.open(PASSAGES, "rt", encoding="utf-8") as handle:
        for line in handle:
            texts.append(line.rstrip("\n").split("\t", 1)[1])
            if len(texts) == size * JOINED:
                break
    joined = [" ".join(texts[i * JOINED:(i + 1) * JOINED]) for i in range(size)]
    group = {"qid": qid, "query": query, "pos": [{"docid": "c0", "text": joined[0]}],
             "neg": [{"docid": f"c{i}", "text": t} for i, t in enumerate(joined[1:], start=1)]}
    harness.write_text(path, json.dumps(group) + "\n")


def probe(model_name: str, group_file: Path, precision: str, checkpointing: bool, steps: int, device_name: str,
          backbone: Path | None, threads: int) -> None:
    """Child process: the model's training steps on the one group; prints JSON (see module doc)."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    from rankkit.devices import autocast, pick_device
    from rankkit.formats import read_groups
    from rankkit.models import create_model
    from rankkit.models.losses import get_loss
    from rankkit.training.objective import TrainingObjective
    from rankkit.training.optim import build_optimizer
    from rankkit.training.sampling import collate, sample_group

    import numpy as np

    device = pick_device(device_name)
    torch.manual_seed(0)
    model = create_model(model_name, backbone, max_query_length=QUERY_TOKENS,
                         max_doc_length=PAIR_TOKENS - QUERY_TOKENS - 3)
    if checkpointing:
        model.enable_gradient_checkpointing()
    model.to(device).train()
    cls = type(model)
    objective = TrainingObjective(model, get_loss(cls.training_defaults.loss, cls.output_type, cls.name))
    optimizer = build_optimizer(model, "adamw", 1e-5, 0.01)
    group = read_groups(group_file)[0]
    size = 1 + len(group.neg)
    lengths: list[int] = []

    def step() -> float:
        batch = model.prepare(collate([sample_group(group, size, np.random.default_rng(0))]))
        lengths.extend(batch.features.pairs["attention_mask"].sum(dim=1).tolist())  # type: ignore[union-attr]
        batch = batch.to(device)
        with autocast(precision, device):
            loss = objective(batch).float()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return float(loss.detach())

    step()  # warm-up: AdamW states allocated, kernels chosen
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    reset = harness.reset_peak_rss()
    seconds, losses = [], []
    for _ in range(steps):
        started = time.perf_counter()
        losses.append(step())
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - started)
    print(json.dumps({
        "step_seconds": seconds, "losses": losses, "pairs": size, "pair_tokens": sorted(set(lengths)),
        "before_mb": reset.rss_mb, "loading_peak_mb": reset.previous_peak_mb,
        "gpu_peak_mb": torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else None,
        "device": str(device), "threads": torch.get_num_threads()}))


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_probe"]:
        inner = argparse.ArgumentParser(prog="train_scale.py _probe")
        inner.add_argument("--model", required=True)
        inner.add_argument("--group", type=Path, required=True)
        inner.add_argument("--precision", required=True)
        inner.add_argument("--checkpointing", action="store_true")
        inner.add_argument("--steps", type=int, required=True)
        inner.add_argument("--device", default="cpu")
        inner.add_argument("--backbone", type=Path, default=None)
        inner.add_argument("--threads", type=int, default=0)
        a = inner.parse_args(argv[1:])
        probe(a.model, a.group, a.precision, a.checkpointing, a.steps, a.device, a.backbone, a.threads)
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=ROOT / "runs" / "bench-train-scale")
    parser.add_argument("--models", type=harness.step_list(tuple(GROUP_SIZES)), default=",".join(GROUP_SIZES))
    parser.add_argument("--precisions", type=harness.step_list(("fp32", "bf16", "fp16")), default="fp32,bf16")
    parser.add_argument("--checkpointing", type=harness.step_list(("off", "on")), default="off,on")
    parser.add_argument("--steps", type=int, default=2, help="timed steps after the warm-up step")
    parser.add_argument("--pairs", type=int, default=0, help="candidates per group (0: the papers' 97 and 100)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--backbone", type=Path, default=None, help="HF folder (default: packaged MiniLM-L6)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads in each probe (0: torch's default)")
    parser.add_argument("--nice", type=int, default=0, help="niceness of each probe")
    args = parser.parse_args(argv)
    for path in (PASSAGES, QUERIES):
        if not path.exists():
            parser.error(f"no such file: {path}")
    out = args.output.resolve()
    out.mkdir(parents=True, exist_ok=True)
    where = harness.machine(torch_threads=True)
    results: dict[str, Any] = {}
    commands: list[str] = []
    started = time.perf_counter()
    for name in args.models:
        size = args.pairs or GROUP_SIZES[name]
        group_file = out / f"group-{size}.jsonl"
        write_group(group_file, size)
        for precision in args.precisions:
            for ckpt in args.checkpointing:
                cmd = [sys.executable, str(Path(__file__).resolve()), "_probe", "--model", name, "--group",
                       str(group_file), "--precision", precision, "--steps", str(args.steps), "--device", args.device,
                       "--threads", str(args.threads), *(["--checkpointing"] if ckpt == "on" else []),
                       *(["--backbone", str(args.backbone)] if args.backbone else [])]
                commands.append(shlex.join(cmd))
                print(f"train_scale.py: {name} {precision} checkpointing {ckpt} ...", file=sys.stderr, flush=True)
                done = harness.run_measured(cmd, nice=args.nice)
                if not done.ok or done.peak_rss_mb is None:
                    raise SystemExit(f"train_scale.py: probe failed:\n{done.stderr.strip()[-1500:]}")
                probed = json.loads(done.stdout.strip().splitlines()[-1])
                if probed["pair_tokens"] != [PAIR_TOKENS]:
                    raise SystemExit(f"train_scale.py: pairs of {probed['pair_tokens']} tokens, not {PAIR_TOKENS}")
                results[f"{name}/{precision}/{ckpt}"] = {
                    **probed, "median_step_seconds": statistics.median(probed["step_seconds"]),
                    "step_peak_rss_mb": done.peak_rss_mb,
                    "process_peak_rss_mb": max(done.peak_rss_mb, probed["loading_peak_mb"])}
                harness.save_json(out / "train_scale.json", {"args": {k: str(v) for k, v in vars(args).items()},
                                                             "machine": where, "results": results})
                r = results[f"{name}/{precision}/{ckpt}"]
                print(f"  {r['median_step_seconds']:.2f} s/step, step peak RSS {r['step_peak_rss_mb']:.0f} MB"
                      + (f", GPU peak {r['gpu_peak_mb']:.0f} MB" if r["gpu_peak_mb"] is not None else ""),
                      file=sys.stderr, flush=True)
    total = time.perf_counter() - started
    lines = [f"# Training at paper scale ({where['date']})", "", f"Machine: {harness.machine_line(where)}.", "",
             f"Command: `{shlex.join(['python', 'bench/train_scale.py', *argv])}` ({total:.0f} s).", "",
             "| model | pairs x tokens | precision | activation checkpointing | s / step (median) | "
             "pairs / s | step peak RSS MB | GPU peak MB | losses |", "|---|---|---|---|---|---|---|---|---|"]
    for key, r in results.items():
        name, precision, ckpt = key.split("/")
        gpu = f"{r['gpu_peak_mb']:.0f}" if r["gpu_peak_mb"] is not None else "-"
        lines.append(f"| {name} | {r['pairs']} x {PAIR_TOKENS} | {precision} | {ckpt} | "
                     f"{r['median_step_seconds']:.2f} | {r['pairs'] / r['median_step_seconds']:.1f} | "
                     f"{r['step_peak_rss_mb']:.0f} | {gpu} | {', '.join(f'{x:.4f}' for x in r['losses'])} |")
    lines += ["", "Commands:", "", "```", *commands, "```", ""]
    harness.write_text(out / "train_scale.md", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
