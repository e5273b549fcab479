#!/usr/bin/env python
"""Re-ranking benchmarks: `mono`, `matrank-row`, `matrank` on DL19, WikiQA and SemEval, and throughput.

    python bench/rerank.py dl19 --output runs/bench-rerank/dl19      # bundled data only

    python examples/wikiqa/prepare.py --output runs/wikiqa
    python bench/rerank.py wikiqa --data runs/wikiqa --output runs/bench-rerank/wikiqa --settings bi,cross
    python examples/semeval/prepare.py --output runs/semeval
    python bench/rerank.py semeval --data runs/semeval --output runs/bench-rerank/semeval --settings bi
    python bench/rerank.py throughput --output runs/bench-rerank/throughput

``wikiqa`` / ``semeval``: for every chosen training setting (``--settings``, see SETTINGS) and
model (``--models``), ``rankkit train`` on ``DATA/train.groups.jsonl``, ``rankkit rerank`` of
``DATA/test.candidates.run`` (all candidates of a question), then one ``rankkit eval -m AP -m RR``
(MAP / MRR) of every run against the zero-shot ``rerank --model repbert`` row as the significance
baseline (paired randomization, Holm). Everything goes through the ``rankkit`` command line, as a
user's script would; a finished checkpoint or run is reused unless ``--force``. A failed step is
reported in the table with its last error line instead of stopping the benchmark.

``throughput``: in one process, on the same (query, passage) pairs of the bundled DL19 BM25 runs,
query-passage pairs/s of ``mono`` and ``matrank`` (untrained cross-encoder heads on the packaged
MiniLM; the head's values do not change the cost) through ``rerank_scores``, against
sentence-transformers' ``CrossEncoder.predict`` on the same MiniLM weights with a one-logit head.
Then MatRank's overhead over ``mono`` at depths 100 and 1000: the head alone on ``h`` of M
candidates (time, and peak resident memory of a fresh process), next to the encoding time of M
pairs.

Each part writes ``results.md`` (table and reading) and ``commands.sh`` (the exact commands) into
``--output``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import harness
from harness import ROOT, Steps, median_seconds

MODELS = ("mono", "matrank-row", "matrank")
#: Every model ``--models`` accepts: the default three plus the other passage rows of MatRank's Table 3.
TABLE3_MODELS = (*MODELS, "listwise", "matrank-attn", "matrank-col")

#: Training settings: ``rankkit train`` options. ``bi``: frozen MiniLM features, head-sized lr,
#: cheap steps after the first epoch; ``cross``: the cross-encoder default under a CPU step budget.
#: Group size 5 = MatRank's 1:4 positive:negative ratio on WikiQA and SemEval (paper 000, §4.2).
SETTINGS: dict[str, list[str]] = {
    "bi": ["--encoder", "bi", "--group-size", "16", "--lr", "1e-3", "--epochs", "3", "--batch-size", "4"],
    "bi-e10": ["--encoder", "bi", "--group-size", "16", "--lr", "1e-3", "--epochs", "10", "--batch-size", "4"],
    "bi-gs5": ["--encoder", "bi", "--group-size", "5", "--lr", "1e-3", "--epochs", "5", "--batch-size", "4"],
    "bi-lr3e-4": ["--encoder", "bi", "--group-size", "16", "--lr", "3e-4", "--epochs", "5", "--batch-size", "4"],
    "bi-h1024": ["--encoder", "bi", "--group-size", "16", "--lr", "1e-3", "--epochs", "3", "--batch-size", "4",
                 "--hidden", "1024"],
    "bi-tune": ["--encoder", "bi", "--tune-encoder", "--group-size", "5", "--lr", "2e-5", "--max-steps", "200",
                "--batch-size", "4"],
    "cross": ["--group-size", "5", "--lr", "2e-5", "--max-steps", "200", "--batch-size", "4"],
    "cross-paper": ["--group-size", "5", "--optimizer", "adafactor", "--lr", "1e-5", "--max-steps", "200",
                    "--batch-size", "4"],
}
#: Token budgets per task: WikiQA sentences are short; SemEval queries are subject + body.
LENGTHS = {
    "wikiqa": ["--max-query-length", "32", "--max-doc-length", "128"],
    "semeval": ["--max-query-length", "96", "--max-doc-length", "160"],
}


@dataclass
class Row:
    """One system of a task table."""

    name: str
    setting: str
    run: Path
    train_s: float | None = None
    steps: int | None = None
    rerank_s: float | None = None
    error: str | None = None


def checkpoint_steps(folder: Path) -> int | None:
    """Optimiser steps recorded in a checkpoint's rankkit.json, if readable."""
    try:
        meta = json.loads((folder / "rankkit.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    for key in ("steps", "step", "global_step"):
        if isinstance(meta.get(key), int):
            return meta[key]
    return None


def task_bench(args: argparse.Namespace) -> None:
    """Train, re-rank and evaluate every (setting, model) on one prepared task."""
    data = args.data
    steps = Steps(args.output, force=args.force, nice=10, prog="rerank.py")
    out = steps.out
    topics, corpus, qrels = data / "test.topics.tsv", data / "corpus.jsonl", data / "test.qrels.txt"
    candidates = data / "test.candidates.run"
    rerank_common: list[Any] = ["--run", candidates, "--topics", topics, "--corpus", corpus,
                                "--depth", "1000", "--device", "cpu"]
    zero_shot = Row("`rerank --model repbert` (zero-shot MiniLM cosine)", "-", out / "repbert-zs.test.run")
    done = steps.rankkit("rerank repbert zero-shot", ["rerank", "--model", "repbert", *rerank_common, "--output",
                                                      zero_shot.run], [zero_shot.run], check=False,
                         reuse=args.table_only)
    zero_shot.rerank_s, zero_shot.error = done.seconds, done.error
    rows = [zero_shot]
    for setting in args.settings:
        for model in args.models:
            ck = out / "ck" / f"{model}.{setting}"
            row = Row(f"`{model}`", setting, out / f"{model}.{setting}.test.run")
            rows.append(row)
            options = list(SETTINGS[setting])
            if args.max_steps is not None and "--max-steps" in options:
                options[options.index("--max-steps") + 1] = str(args.max_steps)
            if args.table_only and not row.run.exists():
                row.error = "not run"
                continue
            done = steps.rankkit(f"train {model} {setting}", [
                "train", "--model", model, "--train", data / "train.groups.jsonl", "--output", ck, *options,
                *LENGTHS[args.part], "--seed", str(args.seed), "--device", "cpu"], [ck / "rankkit.json"],
                check=False, reuse=args.table_only)
            row.train_s, row.error = done.seconds, done.error
            row.steps = checkpoint_steps(ck)
            if row.error is None:
                done = steps.rankkit(f"rerank {model} {setting}", [
                    "rerank", "--model", model, "--checkpoint", ck, *rerank_common, "--output", row.run],
                    [row.run], check=False, reuse=args.table_only)
                row.rerank_s, row.error = done.seconds, done.error
    ok = [r for r in rows if r.error is None and r.run.exists()]
    eval_json = out / "eval.json"
    eval_args: list[Any] = ["eval", "-m", "AP", "-m", "RR", "--qrels", qrels, "-b", zero_shot.run, candidates,
                            *[r.run for r in ok if r is not zero_shot]]
    done = steps.rankkit("eval", [*eval_args, "-f", "json", "-o", eval_json], always=True, check=False, nice=0)
    steps.rankkit("eval (markdown)", [*eval_args, "-f", "markdown", "-o", out / "eval.md"], always=True,
                  check=False, nice=0)
    scores = json.loads(eval_json.read_text(encoding="utf-8")) if done.error is None else {}
    steps.write_commands(out / "commands.sh", f"bench/rerank.py {args.part}, {harness.machine()['date']}")
    by_path = {path: scores.get(steps.rel(path), {}) for path in [candidates, *(r.run for r in rows)]}
    report = task_table(args, rows, by_path, candidates)
    harness.write_text(out / "results.md", report)
    print(report)


def task_table(args: argparse.Namespace, rows: list[Row], scores: dict[Path, dict[str, Any]],
               candidates: Path) -> str:
    """The task's markdown table: MAP/MRR (significance marked) and seconds per system.

    ``scores``: ``rankkit eval``'s JSON entry of each run, keyed by the run's path.
    """

    def cell(run: Path, measure: str) -> str:
        entry = scores.get(run, {})
        if measure not in entry:
            return "-"
        mark = "†" if entry.get("significance", {}).get(measure, {}).get("significant") else ""
        return f"{entry[measure]:.4f}{mark}"

    def seconds(value: float | None) -> str:
        return "-" if value is None else f"{value:.0f}"

    where = harness.machine()
    lines = [
        f"### {args.part}: re-ranking the test candidates ({where['date']}; {harness.machine_line(where)})",
        "",
        "| system | setting | train s | steps | re-rank s | MAP | MRR |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
        f"| candidates in the given order | - | - | - | - | {cell(candidates, 'AP')} | {cell(candidates, 'RR')} |",
    ]
    for r in rows:
        if r.error == "not run":
            lines.append(f"| {r.name} | {r.setting} | - | - | - | not run | |")
        elif r.error is not None:
            lines.append(f"| {r.name} | {r.setting} | {seconds(r.train_s)} | - | - | failed: {r.error} | |")
        else:
            lines.append(f"| {r.name} | {r.setting} | {seconds(r.train_s)} | {r.steps if r.steps is not None else '-'} "
                         f"| {seconds(r.rerank_s)} | {cell(r.run, 'AP')} | {cell(r.run, 'RR')} |")
    lines += [
        "",
        "MAP = `AP`, MRR = `RR` of `rankkit eval` (trec_eval semantics, all candidates of a question). "
        "† significantly different from the zero-shot `repbert` row (paired randomization test, "
        "10,000 permutations, Holm over all runs x measures, alpha 0.05). Settings (`rankkit train` "
        "options, plus " + " ".join(LENGTHS[args.part]) + f" --seed {args.seed}):",
        "",
        *[f"* `{s}`: `{' '.join(SETTINGS[s])}`" for s in args.settings],
        "",
        ("Times are wall seconds on shared cores (other jobs running); `-` in `train s` / `re-rank s` = "
        "output reused from an earlier invocation (see commands.sh)."),
        "",
    ]
    return "\n".join(lines)


# -- throughput ---------------------------------------------------------------------------------

def dl19_pairs(data: Path, queries: int, depth: int) -> tuple[list[str], list[list[str]]]:
    """The first ``queries`` DL19 queries with the texts of their BM25 top ``depth``."""
    from rankkit.docstore import open_docstore
    from rankkit.formats import read_topics
    from rankkit.formats.runs import iter_run_queries

    topics = read_topics(data / "topics.dl19-passage.txt")
    store = open_docstore(corpus=data / "passages.dl19-pool.tsv.gz")
    qs: list[str] = []
    cands: list[list[str]] = []
    for qid, ranking in iter_run_queries(data / "runs" / "BM25.dl19.txt"):
        docids = [d for d, _ in ranking[:depth]]
        texts = store.get_many(docids)
        qs.append(topics[qid])
        cands.append([texts[d] for d in docids])
        if len(qs) == queries:
            break
    return qs, cands


def head_probe(model_name: str, depth: int, repeats: int) -> None:
    """Child process: time the head of ``model_name`` on random ``h`` [depth, 384]; print JSON.

    Peak memory: torch tensors bypass Python's allocator, so tracemalloc cannot see ``S``; the
    kernel's peak RSS is reset after loading the model (:func:`harness.reset_peak_rss`), so the
    peak the parent reads for this process (:func:`harness.run_measured`) is the head's.
    """
    import torch

    from rankkit.models import create_model

    torch.manual_seed(0)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    model = create_model(model_name, encoder="cross").eval()
    h = torch.randn(depth, model.pairs.dim)
    before = harness.reset_peak_rss()  # peak RSS := current RSS
    with torch.inference_mode():
        model.list_scores(h, None)  # warm-up (allocator, kernels)
        seconds = median_seconds(lambda: model.list_scores(h, None), repeats)
    print(json.dumps({"seconds": seconds, "rss_before_mb": before.rss_mb}))


def throughput_bench(args: argparse.Namespace) -> None:
    import torch
    from sentence_transformers import CrossEncoder

    from rankkit.models import backbone as bb
    from rankkit.models import create_model

    steps = Steps(args.output, prog="rerank.py")
    out = steps.out
    steps.commands.append(shlex.join([sys.executable, *sys.argv]))
    torch.manual_seed(0)
    queries, candidates = dl19_pairs(args.data, args.queries, args.depth)
    pairs = [(q, t) for q, texts in zip(queries, candidates) for t in texts]
    backbone = bb.resolve_backbone(None)
    models = {name: create_model(name, encoder="cross").eval()
              for name in ("mono", "matrank")}
    max_length = int(models["mono"].pairs.max_length)
    ce = CrossEncoder(str(backbone), num_labels=1, max_length=max_length, device="cpu")
    timers = {
        "rankkit mono (`rerank_scores`)":
            lambda: models["mono"].rerank_scores(queries, candidates, batch_size=args.batch_size),
        "rankkit matrank (`rerank_scores`)":
            lambda: models["matrank"].rerank_scores(queries, candidates, batch_size=args.batch_size),
        "sentence-transformers `CrossEncoder.predict`": lambda: ce.predict(pairs, batch_size=args.batch_size,
                                                                            show_progress_bar=False),
    }
    for fn in timers.values():  # warm-up: first-call allocations and thread pools
        fn()
    samples = harness.interleaved(timers, args.repeats)  # a load change on the shared cores hits all alike
    median = {name: statistics.median(v) for name, v in samples.items()}
    ce_name = "sentence-transformers `CrossEncoder.predict`"
    heads = {}
    for depth in args.head_depths:
        for name in ("mono", "matrank"):
            cmd = [sys.executable, str(Path(__file__).resolve()), "_head", "--model", name,
                   "--head-depth", str(depth), "--repeats", str(args.repeats)]
            steps.commands.append(shlex.join(cmd))
            done = harness.run_measured(cmd)
            if not done.ok or done.peak_rss_mb is None:
                raise SystemExit(f"rerank.py: head probe failed ({shlex.join(cmd)}):\n{done.tail()}")
            probe = json.loads(done.stdout.strip().splitlines()[-1])
            heads[(name, depth)] = {"seconds": probe["seconds"],
                                    "peak_rss_growth_mb": done.peak_rss_mb - probe["rss_before_mb"]}
    per_pair = median["rankkit mono (`rerank_scores`)"] / len(pairs)
    where = harness.machine(torch_threads=True)
    lines = [
        f"### Throughput ({where['date']}; {harness.machine_line(where)})",
        "",
        (f"{len(pairs)} (query, passage) pairs: the first {len(queries)} DL19 queries x BM25 top {args.depth} "
        f"(examples/data/dl19); max length {max_length} tokens, batch size {args.batch_size}; untrained heads on "
        f"the packaged all-MiniLM-L6-v2 (CrossEncoder: same weights, `num_labels=1`); median of {args.repeats} "
        "interleaved repeats after one warm-up, same process."),
        "",
        "| scorer | median s | pairs/s | rankkit / CrossEncoder |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, seconds in median.items():
        ratio = median[ce_name] / seconds
        lines.append(f"| {name} | {seconds:.2f} | {len(pairs) / seconds:.1f} | {ratio:.2f}x |")
    lines += [
        "",
        ("MatRank's head (Eqs. 2-8: row-blocked preference matrix, row/column means, Borda vote) against "
        "`mono`'s linear head, on `h` of M candidates (fresh process each; peak RSS growth during the head):"),
        "",
        "| M | `mono` head s | `matrank` head s | peak RSS +MB mono / matrank | encoding M pairs (est.) s | overhead |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for depth in args.head_depths:
        mono, mat = heads[("mono", depth)], heads[("matrank", depth)]
        encode = per_pair * depth
        lines.append(
            f"| {depth} | {mono['seconds']:.4f} | {mat['seconds']:.4f} | {mono['peak_rss_growth_mb']:.0f} / "
            f"{mat['peak_rss_growth_mb']:.0f} | {encode:.1f} | {100 * (mat['seconds'] - mono['seconds']) / encode:.1f}% |"
        )
    lines += ["", ("Encoding estimate = M x the `mono` seconds per pair above. Shared cores: other jobs "
              "were running, so absolute numbers drift; the interleaving keeps the ratio fair."), ""]
    steps.write_commands(out / "commands.sh", f"bench/rerank.py throughput, {where['date']}")
    harness.write_text(out / "results.md", "\n".join(lines))
    record = {"samples": samples, "heads": {f"{k[0]}@{k[1]}": v for k, v in heads.items()}}
    harness.save_json(out / "samples.json", record)
    print("\n".join(lines))


DL19_SETTING = ["--encoder", "bi", "--group-size", "16", "--lr", "1e-3", "--epochs", "5", "--batch-size", "4",
                "--max-doc-length", "256"]
ALPHAS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)


def dl19_bench(args: argparse.Namespace) -> None:
    """DL19 BM25 top-100 re-ranking with models trained on DL20 only, and BM25 interpolation tuned on DL20.

    Training side (bundled ``examples/data/dl20``): BM25 over the DL20 pool, ``rankkit mine`` (positives
    rel >= 2, 30 random BM25 negatives), ``rankkit train`` of each model (``DL19_SETTING``). The
    interpolation weight is the alpha whose ``fuse --method interpolate`` of the zero-shot bi-encoder and
    BM25 scores best on DL20 (nDCG@10); DL19 is only ever evaluated.
    """
    dl19, dl20 = args.data, args.dl20
    steps = Steps(args.output, force=args.force, nice=10, prog="rerank.py")
    out = steps.out

    def step(cmd: list[Any], target: Path) -> None:
        """``rankkit CMD`` unless ``target`` exists (or --force); a failure stops the bench."""
        name = target.parent.name if target.name.startswith("rankkit") else target.name  # checkpoint, index
        steps.rankkit(f"{cmd[0]} {name}", cmd, [target])

    index = out / "index.dl20-pool"
    step(["index", "--kind", "bm25", "--corpus", dl20 / "passages.dl20-pool.tsv.gz", "--index",
          index, "--force"], index / "rankkit-index.json")
    bm25_dl20 = out / "bm25.dl20-pool.run"
    step(["retrieve", "--model", "bm25", "--index", index, "--topics",
          dl20 / "topics.dl20-judged.tsv", "--k", "100", "--output", bm25_dl20], bm25_dl20)
    groups = out / "groups.dl20.jsonl"
    step(["mine", "--run", bm25_dl20, "--qrels", dl20 / "qrels.dl20-passage.txt", "--topics",
          dl20 / "topics.dl20-judged.tsv", "--index", index, "--min-rel", "2", "--negatives", "30",
          "--strategy", "random", "--seed", "0", "--output", groups], groups)
    # alpha on DL20: zero-shot bi-encoder re-ranking of DL20's BM25 top-100, interpolated with BM25
    zs_dl20 = out / "repbert-zs.dl20.run"
    step(["rerank", "--model", "repbert", "--run", bm25_dl20, "--topics",
          dl20 / "topics.dl20-judged.tsv", "--index", index, "--depth", "100", "--output", zs_dl20,
          "--device", "cpu"], zs_dl20)
    tuned: dict[float, float] = {}
    for alpha in ALPHAS:
        fused = out / f"interp{alpha}.repbert-zs.dl20.run"
        step(["fuse", "--method", "interpolate", "--alpha", alpha, "--norm", "minmax", zs_dl20,
              bm25_dl20, "--k", "100", "--output", fused], fused)
        score = out / f"interp{alpha}.dl20.json"
        step(["eval", "-m", "nDCG@10", "--qrels", dl20 / "qrels.dl20-passage.txt", fused,
              "-f", "json", "-o", score], score)
        tuned[alpha] = float(next(iter(json.loads(score.read_text(encoding="utf-8")).values()))["nDCG@10"])
    alpha = max(tuned, key=lambda a: tuned[a])

    bm25_dl19 = dl19 / "runs" / "BM25.dl19.txt"
    rerank_common: list[Any] = ["--run", bm25_dl19, "--topics", dl19 / "topics.dl19-passage.txt", "--corpus",
                                dl19 / "passages.dl19-pool.tsv.gz", "--depth", "100", "--device", "cpu"]
    systems: dict[str, Path] = {"BM25": bm25_dl19}
    zs = out / "repbert-zs.dl19.run"
    step(["rerank", "--model", "repbert", *rerank_common, "--output", zs], zs)
    systems["zero-shot bi-encoder"] = zs
    for model in MODELS:
        ck = out / "ck" / f"{model}.bi-e5"
        step(["train", "--model", model, "--train", groups, "--output", ck, *DL19_SETTING,
              "--seed", str(args.seed), "--device", "cpu"], ck / "rankkit.json")
        run = out / f"{model}.bi-e5.dl19.run"
        step(["rerank", "--model", model, "--checkpoint", ck, *rerank_common, "--output", run], run)
        systems[f"{model} --encoder bi"] = run
    for name, run in list(systems.items())[1:]:
        fused = out / f"interp{alpha}.{run.name}"
        step(["fuse", "--method", "interpolate", "--alpha", alpha, "--norm", "minmax", run,
              bm25_dl19, "--k", "100", "--output", fused], fused)
        systems[f"{name} + BM25 (alpha {alpha})"] = fused
    measures = ["-m", "nDCG@10", "-m", "RR(rel=2)@10", "-m", "AP(rel=2)@100"]
    qrels = dl19 / "qrels.dl19-passage.txt"
    runs = list(systems.values())
    steps.rankkit("eval vs BM25", ["eval", *measures, "--qrels", qrels, *runs, "-b", bm25_dl19, "-f", "markdown",
                                   "-o", out / "eval.vs-bm25.md"], always=True, nice=0)
    steps.rankkit("eval vs mono", ["eval", *measures, "--qrels", qrels, *runs[2:], "-b", systems["mono --encoder bi"],
                                   "-f", "markdown", "-o", out / "eval.vs-mono.md"], always=True, nice=0)
    where = harness.machine()
    steps.write_commands(out / "commands.sh", f"bench/rerank.py dl19, {where['date']}")
    lines = [f"# DL19 BM25 top-100 re-ranking ({where['date']}, {harness.machine_line(where)})", "",
             "Systems: " + ", ".join(f"{k} = `{v.name}`" for k, v in systems.items()), "",
             "Interpolation weight tuned on DL20 (nDCG@10): " + ", ".join(f"{a}: {v:.4f}" for a, v in tuned.items()),
             f"-> alpha {alpha}", "", "## Significance against BM25", "",
             (out / "eval.vs-bm25.md").read_text(encoding="utf-8"), "", "## Significance against mono", "",
             (out / "eval.vs-mono.md").read_text(encoding="utf-8")]
    harness.write_text(out / "results.md", "\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("part", choices=("dl19", "wikiqa", "semeval", "throughput", "_head"))
    parser.add_argument("--data", type=Path, default=None,
                        help="prepared task folder (wikiqa/semeval) or DL19 folder (throughput)")
    parser.add_argument("--output", type=Path, default=None, help="folder for results.md and commands.sh")
    parser.add_argument("--dl20", type=Path, default=ROOT / "examples" / "data" / "dl20",
                        help="dl19: the DL20 training side (pool, judged topics, qrels)")
    parser.add_argument("--settings", default="bi", help=f"comma-separated: {', '.join(SETTINGS)}")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated models to train")
    parser.add_argument("--max-steps", type=int, default=None,
                        help="override the step budget of step-limited settings")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--force", action="store_true", help="retrain and re-rank even if outputs exist")
    parser.add_argument("--table-only", action="store_true",
                        help="run nothing new: tabulate the runs already in --output (others: 'not run')")
    parser.add_argument("--queries", type=int, default=4, help="throughput: DL19 queries")
    parser.add_argument("--depth", type=int, default=100, help="throughput: candidates per query")
    parser.add_argument("--batch-size", type=int, default=32, help="throughput: pairs per forward pass")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--head-depths", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--model", default="matrank", help=argparse.SUPPRESS)
    parser.add_argument("--head-depth", type=int, default=100, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part == "_head":
        head_probe(args.model, args.head_depth, args.repeats)
        return
    args.output = args.output or ROOT / "runs" / "bench-rerank" / args.part
    if args.part == "dl19":
        args.data = args.data or ROOT / "examples" / "data" / "dl19"
        dl19_bench(args)
        return
    if args.part == "throughput":
        args.data = args.data or ROOT / "examples" / "data" / "dl19"
        throughput_bench(args)
        return
    args.data = args.data or ROOT / "runs" / args.part
    args.settings = [s for s in args.settings.split(",") if s]
    args.models = [m for m in args.models.split(",") if m]
    unknown = [s for s in args.settings if s not in SETTINGS] + [m for m in args.models if m not in TABLE3_MODELS]
    if unknown:
        parser.error(f"unknown setting or model: {', '.join(unknown)}")
    task_bench(args)


if __name__ == "__main__":
    main()
