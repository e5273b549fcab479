#!/usr/bin/env python
"""Set-Encoder benchmark (paper 003) on TREC DL19, through the rankkit CLI.

Every step but the memory probe is a ``rankkit`` command run as a subprocess, as a user's script
would; a step whose outputs exist is skipped (a rerun continues an interrupted benchmark) unless
``--force``. Changing a knob needs ``--force`` or a new ``--output``.

1. ``train``: BM25 over the DL20 pool (``rankkit index --kind bm25``, ``rankkit retrieve --k 100``),
   training groups from it (``rankkit mine --min-rel 2 --negatives 30 --strategy random``; DL19 is
   the test set and never trains). ``mono``, ``matrank`` and ``set-encoder`` on the same groups,
   backbone (packaged MiniLM-L6 unless ``--backbone``) and budget: ``--loss listwise-ce`` (LCE,
   §4.4), ``--group-size 8 --batch-size 2 --lr 3e-5 --max-steps N``. Then the Set-Encoder's
   second stage (§4.2-4.3: hard negatives first, then distillation): ``--loss ranknet --teacher``
   the SPLADE++ DL20 run (copied into the output folder), continuing from the LCE model's encoder.
   ``rankkit train --backbone`` takes a Hugging Face folder only, and a rankkit checkpoint is not
   one (its config.json is ``model_type: rankkit-set-encoder``), so the bench exports the LCE
   checkpoint's encoder weights and tokenizer as one (:func:`export_encoder`); the stage-2 score
   head starts fresh, as every ``rankkit train`` head does.
2. ``dl19``: ``rankkit rerank`` of the DL19 BM25 top ``--depth`` with each model, then
   ``rankkit eval -m nDCG@10 -m "RR(rel=2)@10" -m "AP(rel=2)@100"`` against BM25 and against mono
   (paired randomization test, Holm).
3. ``permutation`` (§5.3): the BM25 top ``--perm-depth`` given in four orders (BM25, seeded
   random, ideal by the DL19 qrels with ties by BM25 rank, reversed ideal), each written as a run
   whose distinct scores ``D, D-1, ..., 1`` encode the order; each re-ranked by the two-stage
   set-encoder, mono and matrank. The written scores of every (query, passage) must agree across
   the orders within 1e-5 for the set-encoder (checked; the bench exits 1 otherwise) and are
   reported for mono and matrank. A position-aware control shows that the check can fail:
   ``--control-model`` re-ranks passages whose text starts with their first-stage rank
   (``rank 3: <passage>``), via per-query docids ``<docid>@<qid>`` in a derived corpus and run,
   mapped back before evaluation.
4. ``memory``: peak resident memory (of a fresh process per measurement, as bench/harness.py
   measures it: tracemalloc misses torch's allocations) and seconds to re-rank one DL19 query's
   10 / 30 / 100 BM25 candidates in one forward pass, ``set-encoder`` vs ``mono`` (Python API:
   ``load_model(...).rerank_scores``), median of ``--repeats`` processes per setting.

    python bench/set_encoder.py --output runs/bench-set-encoder
        [--parts train,dl19,permutation,memory] [--max-steps 50] [--depth 100] [--perm-depth 30]
        [--queries 0] [--memory-sizes 10,30,100] [--repeats 3] [--backbone DIR] [--seed 0] [--force]

Writes OUTPUT/set_encoder.md (tables and every command), OUTPUT/commands.sh and
OUTPUT/set_encoder.json. The ``train`` steps always run first (skipped when done): the other parts
use their checkpoints. Default cost on 2 quiet CPU cores: see docs/SET_ENCODER.md, "Measured".
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import shutil
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import harness
from harness import ROOT, Steps

from rankkit.formats import (
    atomic_write,
    read_qrels,
    read_run,
    read_topics,
    sort_ranking,
    write_run,
    write_topics,
)

DL19 = ROOT / "examples" / "data" / "dl19"
DL20 = ROOT / "examples" / "data" / "dl20"
TEACHER = Path("/work/shared/data/msmarco-passage-trec-dl/runs-with-text/SPLADE_P_P_ENSEMBLE_DISTIL/"
               "trec_results_dl20.txt")
PARTS = ("train", "dl19", "permutation", "memory")
MEASURES = ["nDCG@10", "RR(rel=2)@10", "AP(rel=2)@100"]
ORDERS = ("bm25", "random", "ideal", "reverse-ideal")
#: Largest score difference across input orders that still counts as "the same score" (§5.3).
TOLERANCE = 1e-5
#: Models of the DL19 table: name -> (rankkit model, checkpoint folder name).
SYSTEMS = {"mono": "mono", "matrank": "matrank", "set-encoder-lce": "set-encoder", "set-encoder": "set-encoder"}


# -- 1. training -------------------------------------------------------------------------------

def export_encoder(checkpoint: Path, target: Path) -> Path:
    """The encoder of a rankkit cross-encoder checkpoint as a Hugging Face folder, for ``--backbone``.

    The Set-Encoder keeps BERT's state-dict names (its attention modules hold the original
    query/key/value Linear layers), so the saved folder is a plain BERT/MiniLM checkpoint with the
    trained weights; the score head is not part of it.
    """
    from rankkit.models.checkpoint import load_model

    if (target / "config.json").exists():
        return target
    model = load_model(checkpoint)
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.pairs.encoder.save_pretrained(str(tmp), safe_serialization=True)  # type: ignore[union-attr]
    model.tokenizer.save_pretrained(str(tmp))  # type: ignore[union-attr]
    tmp.rename(target)
    return target


def train_part(steps: Steps, args: argparse.Namespace) -> dict[str, Path]:
    """BM25 on DL20, mined groups, the three LCE models and the distilled Set-Encoder; their checkpoints."""
    out = steps.out
    index = out / "dl20.bm25"
    steps.rankkit("index DL20 pool", ["index", "--kind", "bm25", "--corpus", args.dl20 / "passages.dl20-pool.tsv.gz",
                                      "--index", index, "--threads", 2, "--force"], [index / "rankkit-index.json"])
    run = out / "runs" / "bm25.dl20.run"
    topics, qrels = args.dl20 / "topics.dl20-judged.tsv", args.dl20 / "qrels.dl20-passage.txt"
    steps.rankkit("retrieve DL20", ["retrieve", "--model", "bm25", "--index", index, "--topics", topics, "--k", 100,
                                    "--threads", 2, "--runtag", "bm25", "--output", run], [run])
    groups = out / "groups" / "dl20.jsonl"
    steps.rankkit("mine DL20", ["mine", "--run", run, "--qrels", qrels, "--topics", topics, "--index", index,
                                "--depth", 100, "--min-rel", 2, "--negatives", 30, "--strategy", "random",
                                "--seed", args.seed, "--output", groups], [groups])
    backbone: list[Any] = ["--backbone", args.backbone.resolve()] if args.backbone else []
    budget: list[Any] = ["--group-size", 8, "--max-steps", args.max_steps, "--batch-size", 2, "--lr", 3e-5,
                         "--seed", args.seed, "--device", "cpu"]
    checkpoints: dict[str, Path] = {}
    for name, model in (("mono", "mono"), ("matrank", "matrank"), ("set-encoder-lce", "set-encoder")):
        ck = out / "checkpoints" / name
        steps.rankkit(f"train {name}", ["train", "--model", model, "--train", groups, "--output", ck, *backbone,
                                        "--loss", args.matrank_loss if model == "matrank" else "listwise-ce",
                                        *budget], [ck / "rankkit.json"])
        checkpoints[name] = ck
    teacher = out / "teacher" / "SPLADE_P_P_ENSEMBLE_DISTIL.dl20.run"
    if args.force or not teacher.exists():
        teacher.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(args.teacher, teacher)
    stage1 = export_encoder(checkpoints["set-encoder-lce"], out / "backbones" / "set-encoder-lce.encoder")
    steps.commands.append(f"# export_encoder: the encoder of {steps.rel(checkpoints['set-encoder-lce'])} "
                          f"as a Hugging Face folder -> {steps.rel(stage1)}")
    ck = out / "checkpoints" / "set-encoder"
    steps.rankkit("train set-encoder (stage 2)", ["train", "--model", "set-encoder", "--train", groups, "--output", ck,
                                                  "--backbone", stage1, "--loss", "ranknet", "--teacher", teacher,
                                                  *budget], [ck / "rankkit.json"])
    checkpoints["set-encoder"] = ck
    return checkpoints


# -- 2. DL19 -----------------------------------------------------------------------------------

def test_inputs(steps: Steps, args: argparse.Namespace) -> tuple[Path, Path]:
    """The DL19 BM25 run and topics, cut to the first ``--queries`` queries of the run when asked."""
    run, topics = args.dl19 / "runs" / "BM25.dl19.txt", args.dl19 / "topics.dl19-passage.txt"
    if not args.queries:
        return run, topics
    ranked = read_run(run)
    qids = list(ranked)[: args.queries]
    texts = read_topics(topics)
    small_run, small_topics = steps.out / "data" / "bm25.dl19.run", steps.out / "data" / "topics.dl19.tsv"
    write_run(small_run, {q: ranked[q] for q in qids}, tag="bm25")
    write_topics(small_topics, {q: texts[q] for q in qids})
    return small_run, small_topics


def evaluate(steps: Steps, label: str, qrels: Path, runs: Sequence[Path], measures: Sequence[str],
             baseline: Path | None) -> tuple[str, dict[str, Any]]:
    """``rankkit eval`` of ``runs``: (markdown report, json report keyed by the runs' relative paths)."""
    common: list[Any] = ["eval", "--qrels", qrels, *runs, *[a for m in measures for a in ("-m", m)]]
    if baseline is not None:
        common += ["--baseline", baseline]
    md, js = steps.out / f"eval-{label}.md", steps.out / f"eval-{label}.json"
    steps.rankkit(f"eval {label}", [*common, "--format", "markdown", "--output", md], [], always=True)
    steps.rankkit(f"eval {label} (json)", [*common, "--format", "json", "--output", js], [], always=True)
    return md.read_text(encoding="utf-8"), json.loads(js.read_text(encoding="utf-8"))


def rerank(steps: Steps, label: str, model: str, checkpoint: Path, run: Path, topics: Path, corpus: Path,
           depth: int, output: Path) -> None:
    """``rankkit rerank`` of ``run`` into ``output`` (skipped when it exists)."""
    steps.rankkit(label, ["rerank", "--model", model, "--checkpoint", checkpoint, "--run", run, "--topics", topics,
                          "--corpus", corpus, "--depth", depth, "--device", "cpu", "--runtag", output.stem.split(".")[0],
                          "--output", output], [output])


def dl19_part(steps: Steps, args: argparse.Namespace, checkpoints: dict[str, Path]) -> dict[str, Any]:
    """Each trained model re-ranks DL19's BM25 top ``--depth``; evaluated against BM25 and mono."""
    run, topics = test_inputs(steps, args)
    corpus, qrels = args.dl19 / "passages.dl19-pool.tsv.gz", args.dl19 / "qrels.dl19-passage.txt"
    runs = {"bm25": run}
    for name, model in SYSTEMS.items():
        runs[name] = steps.out / "runs" / f"{name}.dl19.run"
        rerank(steps, f"rerank DL19 {name}", model, checkpoints[name], run, topics, corpus, args.depth, runs[name])
    vs_bm25, scores = evaluate(steps, "dl19-vs-bm25", qrels, list(runs.values()), MEASURES, run)
    vs_mono, _ = evaluate(steps, "dl19-vs-mono", qrels, [p for n, p in runs.items() if n != "bm25"], MEASURES,
                          runs["mono"])
    return {"vs_bm25": vs_bm25, "vs_mono": vs_mono, "scores": scores}


# -- 3. permutation invariance -----------------------------------------------------------------

def orderings(ranked: dict[str, dict[str, float]], qrels: dict[str, dict[str, int]], depth: int,
              seed: int) -> dict[str, dict[str, list[str]]]:
    """The four input orders of §5.3 for each query's BM25 top ``depth``: order -> qid -> docids."""
    result: dict[str, dict[str, list[str]]] = {name: {} for name in ORDERS}
    for qid, docs in ranked.items():
        bm25 = [d for d, _ in sort_ranking(docs)[:depth]]
        shuffled = list(bm25)
        random.Random(f"{seed}:{qid}").shuffle(shuffled)
        grades = qrels.get(qid, {})
        # Ideal: grade descending (unjudged = 0), ties in BM25 order (sorted() is stable).
        ideal = sorted(bm25, key=lambda d: -grades.get(d, 0))
        result["bm25"][qid], result["random"][qid] = bm25, shuffled
        result["ideal"][qid], result["reverse-ideal"][qid] = ideal, ideal[::-1]
    return result


def order_run(order: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    """Distinct scores ``D, D-1, ..., 1`` so that rankkit's sort (score descending) keeps the order."""
    return {qid: {d: float(len(docids) - i) for i, d in enumerate(docids)} for qid, docids in order.items()}


def control_inputs(order: dict[str, list[str]], passages: dict[str, str], folder: Path, name: str) -> tuple[Path, Path]:
    """Derived corpus and run for the position-aware control: ``<docid>@<qid>`` reads ``rank R: <passage>``."""
    corpus, run = folder / f"control.{name}.tsv", folder / f"control.{name}.run"
    with atomic_write(corpus) as handle:
        for qid, docids in order.items():
            for rank, d in enumerate(docids, start=1):
                handle.write(f"{d}@{qid}\trank {rank}: {passages[d]}\n")
    write_run(run, {qid: {f"{d}@{qid}": float(len(docids) - i) for i, d in enumerate(docids)}
                    for qid, docids in order.items()}, tag=f"control-{name}")
    return corpus, run


def max_difference(runs: Sequence[dict[str, dict[str, float]]]) -> float:
    """Largest |score difference| of one (query, passage) between the first run and any other."""
    first, worst = runs[0], 0.0
    for other in runs[1:]:
        if other.keys() != first.keys():
            return float("inf")
        for qid, docs in first.items():
            if other[qid].keys() != docs.keys():
                return float("inf")
            worst = max(worst, max((abs(v - other[qid][d]) for d, v in docs.items()), default=0.0))
    return worst


def permutation_part(steps: Steps, args: argparse.Namespace, checkpoints: dict[str, Path]) -> dict[str, Any]:
    """§5.3: nDCG@10 per input order and model, and the largest score change across the orders."""
    from rankkit.docstore import open_docstore

    folder = steps.out / "permutation"
    run, topics = test_inputs(steps, args)
    corpus, qrels_path = args.dl19 / "passages.dl19-pool.tsv.gz", args.dl19 / "qrels.dl19-passage.txt"
    orders = orderings(read_run(run), read_qrels(qrels_path), args.perm_depth, args.seed)
    wanted = sorted({d for docids in orders["bm25"].values() for d in docids})
    passages = open_docstore(corpus=corpus).get_many(wanted)
    inputs: dict[str, Path] = {}
    for name, order in orders.items():
        inputs[name] = folder / f"input.{name}.run"
        write_run(inputs[name], order_run(order), tag=f"input-{name}")
    models = {"set-encoder": "set-encoder", "mono": "mono", "matrank": "matrank"}
    outputs: dict[str, dict[str, Path]] = {m: {} for m in [*models, "control"]}
    for label, model in models.items():
        for name in ORDERS:
            outputs[label][name] = folder / f"{label}.{name}.run"
            rerank(steps, f"permutation {label} {name}", model, checkpoints[label], inputs[name], topics, corpus,
                   args.perm_depth, outputs[label][name])
    control = args.control_model
    for name, order in orders.items():
        target = folder / f"control.{name}.mapped.run"
        outputs["control"][name] = target
        if not args.force and target.exists():
            steps.commands.append(f"# control {name}: {steps.rel(target)} reused")
            continue
        c_corpus, c_run = control_inputs(order, passages, folder, name)
        raw = folder / f"control.{name}.reranked.run"
        rerank(steps, f"permutation control ({control}) {name}", control, checkpoints[control], c_run, topics,
               c_corpus, args.perm_depth, raw)
        # Back to the real docids (the part before the last '@') so the qrels apply.
        mapped = {qid: {d.rsplit("@", 1)[0]: v for d, v in docs.items()} for qid, docs in read_run(raw).items()}
        write_run(target, mapped, tag=f"control-{name}")
        steps.commands.append(f"# mapped {steps.rel(raw)} back to DL19 docids -> {steps.rel(target)}")
    all_runs = [*inputs.values(), *[p for per in outputs.values() for p in per.values()]]
    _, scores = evaluate(steps, "permutation", qrels_path, all_runs, ["nDCG@10"], None)
    table: dict[str, dict[str, Any]] = {"input order": {n: scores[steps.rel(p)]["nDCG@10"] for n, p in inputs.items()}}
    for label, per in outputs.items():
        table[label] = {n: scores[steps.rel(p)]["nDCG@10"] for n, p in per.items()}
        table[label]["max_abs_diff"] = max_difference([read_run(per[n]) for n in ORDERS])
    failed = table["set-encoder"]["max_abs_diff"] > TOLERANCE
    if failed:
        steps.notes.append(f"PERMUTATION CHECK FAILED: set-encoder scores change by "
                           f"{table['set-encoder']['max_abs_diff']:.3g} > {TOLERANCE:g} across input orders.")
    return {"ndcg10": table, "control_model": control, "failed": failed}


# -- 4. memory and time per query --------------------------------------------------------------

def probe(checkpoint: Path, group: Path, size: int) -> None:
    """Child process: re-rank one query's first ``size`` candidates in one forward pass; print JSON.

    The peak resident memory is read by the parent (:func:`harness.run_measured`); the probe resets
    its high-water mark just before the pass (:func:`harness.reset_peak_rss`), so that reading is
    the pass's peak and the small settings are not hidden under the loading peak (which briefly
    holds the weights twice). It prints the seconds of the pass, its resident set just before it
    (``before_mb``) and the high-water mark the reset discarded (``loading_peak_mb``).
    """
    from rankkit.models.checkpoint import load_model

    data = json.loads(group.read_text(encoding="utf-8"))
    texts = data["texts"][:size]
    if len(texts) < size:
        raise SystemExit(f"set_encoder.py: error: {group} has only {len(texts)} candidates, not {size}")
    model = load_model(checkpoint)
    model.rerank_scores([data["query"]], [texts[:1]], batch_size=1)  # first-call set-up, smaller than any setting
    reset = harness.reset_peak_rss()
    started = time.perf_counter()
    model.rerank_scores([data["query"]], [texts], batch_size=size)
    seconds = time.perf_counter() - started
    print(json.dumps({"seconds": seconds, "before_mb": reset.rss_mb, "loading_peak_mb": reset.previous_peak_mb}))


def memory_part(steps: Steps, args: argparse.Namespace, checkpoints: dict[str, Path]) -> dict[str, Any]:
    """Peak RSS and seconds per query at each ``--memory-sizes``, set-encoder vs mono, fresh processes."""
    from rankkit.docstore import open_docstore

    folder = steps.out / "memory"
    group = folder / "group.json"
    size = max(args.memory_sizes)
    ranked = read_run(args.dl19 / "runs" / "BM25.dl19.txt")
    texts_of = read_topics(args.dl19 / "topics.dl19-passage.txt")
    qid = next((q for q, docs in ranked.items() if len(docs) >= size), None)
    if qid is None:
        raise SystemExit(f"set_encoder.py: error: no DL19 query has {size} BM25 candidates")
    docids = [d for d, _ in sort_ranking(ranked[qid])[:size]]
    passages = open_docstore(corpus=args.dl19 / "passages.dl19-pool.tsv.gz").get_many(docids)
    with atomic_write(group) as handle:
        json.dump({"qid": qid, "query": texts_of[qid], "docids": docids,
                   "texts": [passages[d] for d in docids]}, handle)
    samples: dict[str, list[dict[str, float]]] = {}
    for _ in range(args.repeats):  # interleaved, so a load change on shared cores hits every setting alike
        for n in args.memory_sizes:
            for label in ("set-encoder", "mono"):
                cmd = [sys.executable, str(Path(__file__).resolve()), "_probe", "--checkpoint",
                       str(checkpoints[label]), "--group", str(group), "--size", str(n)]
                steps.commands.append(shlex.join(cmd))
                done = harness.run_measured(cmd, nice=args.nice)
                if not done.ok or done.peak_rss_mb is None:
                    raise SystemExit(f"set_encoder.py: memory probe failed:\n{done.stderr.strip()[-800:]}")
                probed = json.loads(done.stdout.strip().splitlines()[-1])
                samples.setdefault(f"{label}@{n}", []).append({
                    "seconds": probed["seconds"], "pass_peak_mb": done.peak_rss_mb, "before_mb": probed["before_mb"],
                    "process_peak_mb": max(probed["loading_peak_mb"], done.peak_rss_mb)})
    median = {key: {k: statistics.median(s[k] for s in runs) for k in runs[0]} for key, runs in samples.items()}
    return {"qid": qid, "median": median, "samples": samples}


# -- report ------------------------------------------------------------------------------------

def report(args: argparse.Namespace, steps: Steps, argv: Sequence[str], results: dict[str, Any], total: float,
           where: dict[str, Any]) -> str:
    """The markdown report: every part's tables, the step seconds and every command."""
    command = shlex.join(["python", "bench/set_encoder.py", *argv])
    lines = [
        f"# Set-Encoder benchmark ({where['date']}, {harness.machine_line(where)})",
        "",
        f"`{command}` — {total / 60:.1f} min in all.",
        "",
        (f"Training: DL20 groups (BM25 top-100 of the DL20 pool, `mine --min-rel 2 --negatives 30 --strategy random`), "
        f"{args.max_steps} steps x 2 groups x 8 passages, lr 3e-5, backbone "
        f"{args.backbone or 'packaged all-MiniLM-L6-v2'}, seed {args.seed}; first stage `--loss listwise-ce` "
        f"(matrank: `--loss {args.matrank_loss}`); `set-encoder` = stage 2 on the exported stage-1 encoder with "
        "`--loss ranknet --teacher` SPLADE++ (DL20 run)."),
        "",
    ]
    if "dl19" in results:
        lines += [f"## DL19: re-ranking the BM25 top {args.depth}"
                  + (f" (first {args.queries} queries)" if args.queries else ""), "",
                  "### Against BM25", "", results["dl19"]["vs_bm25"].strip(), "",
                  "### Against mono", "", results["dl19"]["vs_mono"].strip(), ""]
    if "permutation" in results:
        perm = results["permutation"]["ndcg10"]
        lines += [f"## Permutation invariance (§5.3): BM25 top {args.perm_depth} in four input orders", "",
                  ("nDCG@10 of the re-ranked run (`input order`: the order as given, not re-ranked); "
                  "`max |Δ score|`: the largest change of one (query, passage) score between input orders. "
                  f"`control`: `{results['permutation']['control_model']}` on `rank R: <passage>`."), "",
                  "| model | " + " | ".join(ORDERS) + " | max \\|Δ score\\| |",
                  "| --- |" + " ---: |" * (len(ORDERS) + 1)]
        for label, row in perm.items():
            diff = row.get("max_abs_diff")
            lines.append(f"| {label} | " + " | ".join(f"{row[o]:.4f}" for o in ORDERS)
                         + f" | {'-' if diff is None else f'{diff:.2g}'} |")
        lines.append("")
    if "memory" in results:
        med = results["memory"]["median"]
        lines += [(f"## Memory and time per query (DL19 query {results['memory']['qid']}, one forward pass, "
                  f"median of {args.repeats} fresh processes)"), "",
                  ("| candidates | set-encoder s | mono s | set-encoder pass peak MB (+growth) "
                  "| mono pass peak MB (+growth) | set-encoder / mono process peak MB |"),
                  "| ---: | ---: | ---: | ---: | ---: | ---: |"]
        for n in args.memory_sizes:
            s, m = med[f"set-encoder@{n}"], med[f"mono@{n}"]
            lines.append(f"| {n} | {s['seconds']:.2f} | {m['seconds']:.2f} "
                         f"| {s['pass_peak_mb']:.0f} (+{s['pass_peak_mb'] - s['before_mb']:.0f}) "
                         f"| {m['pass_peak_mb']:.0f} (+{m['pass_peak_mb'] - m['before_mb']:.0f}) "
                         f"| {s['process_peak_mb']:.0f} / {m['process_peak_mb']:.0f} |")
        lines += ["", ("Pass peak: the resident high-water mark during the re-ranking call (VmHWM reset just before "
                  "it); +growth: over the resident set just before it (activations, tokenisation); process peak: "
                  "the whole process's, model loading included. `batch_size` = the candidate count, "
                  "so each model encodes the whole group at once."), ""]
    lines += [f"Note: {n}" for n in steps.notes]
    lines += ["", "## Step seconds", "", *[f"* {k}: {v:.0f}" + (f" ({steps.precision[k]})" if k in steps.precision else "")
                                             for k, v in steps.seconds.items()], ""]
    lines += ["## Commands", "", "```bash", *steps.commands, "```", ""]
    return "\n".join(lines)


def sizes(text: str) -> list[int]:
    """argparse type: comma-separated positive candidate counts."""
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive sizes, got {text!r}")
    return values


def main(argv: list[str] | None = None) -> None:
    """Command line: see the module docstring (``_probe`` is the memory part's child process)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_probe"]:
        inner = argparse.ArgumentParser(prog="set_encoder.py _probe")
        inner.add_argument("--checkpoint", type=Path, required=True)
        inner.add_argument("--group", type=Path, required=True)
        inner.add_argument("--size", type=int, required=True)
        a = inner.parse_args(argv[1:])
        probe(a.checkpoint, a.group, a.size)
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=ROOT / "runs" / "bench-set-encoder")
    parser.add_argument("--parts", type=harness.step_list(PARTS), default=",".join(PARTS),
                        help=f"comma-separated: {', '.join(PARTS)}")
    parser.add_argument("--dl19", type=Path, default=DL19, help="test data folder (topics, qrels, pool, runs/BM25)")
    parser.add_argument("--dl20", type=Path, default=DL20, help="training data folder (pool, topics, qrels)")
    parser.add_argument("--teacher", type=Path, default=TEACHER, help="stage-2 teacher run on the DL20 queries")
    parser.add_argument("--backbone", type=Path, default=None, help="HF folder (default: packaged MiniLM-L6)")
    parser.add_argument("--max-steps", type=int, default=50, help="optimiser steps of every training")
    parser.add_argument("--matrank-loss", default="listwise-ce", help="matrank's loss (matrank: its own Eq. 8)")
    parser.add_argument("--depth", type=int, default=100, help="DL19: candidates re-ranked per query")
    parser.add_argument("--perm-depth", type=int, default=30, help="permutation: candidates per query")
    parser.add_argument("--control-model", default="matrank", choices=("matrank", "mono"),
                        help="permutation: model of the position-aware control")
    parser.add_argument("--queries", type=int, default=0, help="DL19 and permutation: first N queries (0: all 43)")
    parser.add_argument("--memory-sizes", type=sizes, default=[10, 30, 100], help="memory: candidates per query")
    parser.add_argument("--repeats", type=int, default=3, help="memory: fresh processes per setting (median)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--nice", type=int, default=10, help="niceness of every subprocess (0: none)")
    parser.add_argument("--force", action="store_true", help="redo finished steps")
    args = parser.parse_args(argv)
    parts = args.parts
    for path in (args.dl19, args.dl20, args.teacher):
        if not path.exists():
            parser.error(f"no such file or folder: {path}")
    args.dl19, args.dl20, args.teacher = args.dl19.resolve(), args.dl20.resolve(), args.teacher.resolve()

    steps = Steps(args.output, force=args.force, nice=args.nice, prog="set_encoder.py")
    out = steps.out
    where = harness.machine(torch_threads=True)
    started = time.perf_counter()
    checkpoints = train_part(steps, args)  # every other part uses these (skipped when done)
    results: dict[str, Any] = {}

    def save() -> None:  # after each part: an interrupted bench keeps what it measured
        harness.save_json(out / "set_encoder.json", {
            "args": {k: str(v) for k, v in vars(args).items()}, "machine": where, "seconds": steps.seconds,
            "peak_rss_mb": steps.peak_rss_mb, "total_seconds": time.perf_counter() - started, "results": results,
            "notes": steps.notes}, indent=1)

    harness.run_steps([p for p in parts if p != "train"], {
        "dl19": lambda _: dl19_part(steps, args, checkpoints),
        "permutation": lambda _: permutation_part(steps, args, checkpoints),
        "memory": lambda _: memory_part(steps, args, checkpoints),
    }, results, save)
    total = time.perf_counter() - started
    text = report(args, steps, argv, results, total, where)
    with atomic_write(out / "set_encoder.md") as handle:
        handle.write(text)
    steps.write_commands(out / "commands.sh")
    save()
    print(text[: text.index("## Step seconds")])
    print(f"==> {out}/set_encoder.md", file=sys.stderr)
    if results.get("permutation", {}).get("failed"):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
