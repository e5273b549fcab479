#!/usr/bin/env python
"""Long-document re-ranking on TIME with 5-fold cross-validation (PARADE §4.4), through the rankkit CLI.

Input: the output of ``examples/classic/prepare.py --collection time --folds 5`` (``--data``; the
converter is :mod:`rankkit.datasets.classic`).
Every step is a ``rankkit`` command run as a subprocess, as a user's script would:

1. ``rankkit index --kind bm25`` of the corpus; ``rankkit retrieve --model bm25`` top-100 for each
   fold's queries;
2. ``rankkit mine``: training groups (judged positives + random BM25 negatives) for each fold;
3. for each model and each test fold: ``rankkit train --model M`` on the groups of the other
   folds, ``rankkit rerank --model M`` of the test fold's BM25 run (top ``--depth``);
   the test folds' runs are concatenated into one run per model (PARADE reports the queries of
   all test folds together);
4. ``rankkit eval -m nDCG@20 -m P@20 -m AP`` with significance (paired randomization test,
   Holm-corrected) against BM25 and against MaxP;
5. milliseconds per document with ``--timing-passages`` (16) passages: each model re-ranks the
   top documents of a few fold-1 queries whose texts are repeated until they fill 16 windows,
   at two depths; the difference of the two wall times over the difference in documents
   cancels process start-up and model loading;
6. PARADE's distillation (§6.1, Eq. 12): a student with the first 2 of MiniLM's 6 layers trained
   alone vs distilled from the 6-layer ``--kd-model`` of the same fold
   (``--teacher-checkpoint CK --alpha 0.5 --distillation F`` for each F of ``--kd-forms``). With
   ``eq12`` among the forms the student is also trained alone on Eq. 12's student term (``--loss
   pointwise-ce``, i.e. Eq. 12 with alpha = 1), so the teacher's term is compared at the same loss.

    python bench/documents.py --data runs/time --output runs/bench-documents
        [--models firstp,maxp,...] [--folds 5] [--depth 20] [--max-steps 10] [--batch-size 1]
        [--window 128] [--stride 100] [--max-passages 2] [--backbone DIR] [--no-kd]
        [--kd-model parade-max] [--kd-forms eq12,loss-mse] [--force]

Writes OUTPUT/documents.md (tables and every command), OUTPUT/commands.sh, OUTPUT/documents.json.
A step whose outputs exist is skipped (rerun continues an interrupted benchmark) unless --force.
The defaults are a CPU budget, estimated (from MiniLM-L6's ~9 training pairs/s here) at 35-40
minutes for all models on 2 otherwise idle CPU cores: each of the 60 trainings sees 40 documents
and each model is barely moved from its initialisation, so the numbers test the pipeline rather
than the models. PARADE's own setting (``--window 225 --stride 200 --max-passages 16 --depth 100``,
thousands of steps) needs a GPU: pass those knobs there.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import harness
from harness import ROOT, Steps

from rankkit.formats import (
    atomic_write,
    iter_corpus,
    read_run,
    read_topics,
    write_run,
    write_topics,
)

ALL_MODELS = ["firstp", "maxp", "parade-max", "parade-avg", "parade-sum", "parade-attn", "parade-cnn",
              "parade-transformer", "matrank-split", "matrank"]
#: Rows that are a registered model trained another way (not in the default --models): name -> (model, train options).
VARIANT_ROWS: dict[str, tuple[str, list[Any]]] = {
    # PARADE Table 7's "ELECTRA-MaxP" row: MaxP trained on passages that inherit their document's label.
    "maxp-passage-ce": ("maxp", ["--loss", "passage-ce"]),
    # PARADE Figure 1a's other score poolings (k-max pooling needs more than --k passages to differ from AvgP).
    "avgp": ("avgp", []),
    "kmaxp": ("kmaxp", []),
}
MEASURES = ["nDCG@20", "P@20", "AP"]
#: Query tokens of every model here (the document models' default), so matrank's pair length is comparable.
QUERY_TOKENS = 32


def student_backbone(source: Path, target: Path, layers: int = 2) -> Path:
    """A copy of the HF encoder in ``source`` keeping its first ``layers`` Transformer layers (PARADE §5 students)."""
    from transformers import AutoModel, AutoTokenizer

    if (target / "config.json").exists():
        return target
    model = AutoModel.from_pretrained(str(source))
    model.encoder.layer = model.encoder.layer[:layers]
    model.config.num_hidden_layers = layers
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp), safe_serialization=True)
    AutoTokenizer.from_pretrained(str(source)).save_pretrained(str(tmp))
    tmp.rename(target)
    return target


def help_text(command: str) -> str:
    """``rankkit COMMAND --help`` on one wide page (to see which options this rankkit has)."""
    env = dict(os.environ, COLUMNS="400")
    done = subprocess.run([sys.executable, "-m", "rankkit", command, "--help"], capture_output=True, text=True,
                          env=env, check=False)
    return done.stdout


def fold_names(data: Path) -> list[str]:
    """Fold numbers of the prepared data (folds/fold-K.topics.tsv), in order."""
    names = sorted((p.name.split(".")[0].removeprefix("fold-") for p in (data / "folds").glob("fold-*.topics.tsv")),
                   key=int)
    if len(names) < 2:
        raise SystemExit(f"documents.py: error: {data}/folds has no fold-K.topics.tsv files; "
                         "run examples/classic/prepare.py with --folds 5")
    return names


def model_flags(model: str, args: argparse.Namespace) -> tuple[list[Any], list[Any]]:
    """(train options, rerank options) of ``model`` under the budget knobs."""
    if model == "firstp":
        return ["--window", args.window], []
    if model == "matrank-split":
        # --piece-length is the whole piece input ([CLS] q [SEP] piece [SEP]): --window document tokens per piece.
        return ["--piece-length", QUERY_TOKENS + args.window + 3, "--max-pieces", args.max_passages], []
    if model == "matrank":
        # The existing cross-encoder on the first piece: the document is cut after --window tokens.
        return (["--max-query-length", QUERY_TOKENS, "--max-doc-length", args.window],
                ["--max-length", QUERY_TOKENS + args.window + 3])
    return ["--window", args.window, "--stride", args.stride, "--max-passages", args.max_passages], []


def concatenate(parts: list[Path], target: Path) -> None:
    """One run from the test folds' runs (their queries are disjoint)."""
    run: dict[str, dict[str, float]] = {}
    for part in parts:
        for qid, ranking in read_run(part).items():
            if qid in run:
                raise SystemExit(f"documents.py: error: query {qid} is in two test folds ({part})")
            run[qid] = ranking
    write_run(target, run, tag=target.stem)


def timing_corpus(args: argparse.Namespace, out: Path, data: Path, run: Path, words: int) -> tuple[Path, Path, int]:
    """The top ``--timing-depth`` documents of the first ``--timing-queries`` queries of ``run``.

    Texts are repeated to at least ``words`` words (>= that many tokens, so every model sees its
    full passage count).
    """
    folder = out / "timing"
    ranked = read_run(run)
    qids = list(ranked)[: args.timing_queries]
    keep = {qid: dict(sorted(ranked[qid].items(), key=lambda kv: -kv[1])[: args.timing_depth]) for qid in qids}
    wanted = {d for docs in keep.values() for d in docs}
    with atomic_write(folder / "corpus.jsonl") as handle:
        for doc in iter_corpus(data / "corpus.jsonl"):
            if doc.docid in wanted:
                tokens = doc.contents.split()
                text = " ".join((tokens * (words // max(len(tokens), 1) + 1))[: max(words, len(tokens))])
                handle.write(json.dumps({"id": doc.docid, "contents": text}) + "\n")
    write_run(folder / "bm25.run", keep, tag="bm25")
    topics = read_topics(data / "folds" / f"{run.stem.split('.')[-1]}.topics.tsv")
    write_topics(folder / "topics.tsv", {q: topics[q] for q in qids})
    return folder / "corpus.jsonl", folder / "bm25.run", len(qids)


def main(argv: list[str] | None = None) -> None:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT / "runs" / "time", help="prepare.py output (with folds/)")
    parser.add_argument("--output", type=Path, default=ROOT / "runs" / "bench-documents")
    parser.add_argument("--models", default=",".join(ALL_MODELS),
                        help=f"comma-separated models (bm25 always runs); also the rows {', '.join(VARIANT_ROWS)}")
    parser.add_argument("--folds", type=int, default=0, help="test on the first N folds only (0: all)")
    parser.add_argument("--depth", type=int, default=20, help="documents re-ranked per query")
    parser.add_argument("--k", type=int, default=100, help="BM25 depth (and the negatives' pool)")
    parser.add_argument("--negatives", type=int, default=8, help="BM25 negatives mined per query")
    parser.add_argument("--max-steps", type=int, default=10, help="optimiser steps per training")
    parser.add_argument("--batch-size", type=int, default=1, help="groups per step")
    parser.add_argument("--group-size", type=int, default=4, help="documents per group (1 positive)")
    parser.add_argument("--window", type=int, default=128, help="passage window in tokens (PARADE: 225)")
    parser.add_argument("--stride", type=int, default=100, help="tokens between windows (PARADE: 200)")
    parser.add_argument("--max-passages", type=int, default=2, help="passages per document (PARADE: 16)")
    parser.add_argument("--backbone", type=Path, default=None, help="HF folder (default: packaged MiniLM-L6)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kd", action=argparse.BooleanOptionalAction, default=True,
                        help="PARADE's distillation experiment (2-layer student)")
    parser.add_argument("--kd-model", default="parade-transformer", help="teacher and student model")
    parser.add_argument("--kd-forms", default="eq12",
                        help="comma-separated --distillation forms, one distilled row each (eq12, loss-mse)")
    parser.add_argument("--timing", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--timing-passages", type=int, default=16)
    parser.add_argument("--timing-queries", type=int, default=2)
    parser.add_argument("--timing-depth", type=int, default=10, help="timed at depth 1 and this depth")
    parser.add_argument("--force", action="store_true", help="redo finished steps")
    args = parser.parse_args(argv)
    models = [m for m in args.models.split(",") if m and m != "bm25"]
    kd_forms = [f for f in args.kd_forms.split(",") if f]
    if not kd_forms or set(kd_forms) - {"eq12", "loss-mse"}:
        raise SystemExit(f"documents.py: error: --kd-forms takes eq12 and/or loss-mse, got {args.kd_forms!r}")
    unknown = sorted(set(models) - set(ALL_MODELS) - set(VARIANT_ROWS) - {"sump"})
    if unknown:
        raise SystemExit(f"documents.py: error: unknown model(s) {', '.join(unknown)}; "
                         f"known: {', '.join([*ALL_MODELS, *VARIANT_ROWS])}")

    bench = Steps(args.output, force=args.force, prog="documents.py")
    out, data = bench.out, args.data.resolve()
    rerank_help, train_help = help_text("rerank"), help_text("train")
    started = time.perf_counter()
    folds = fold_names(data)
    tests = folds[: args.folds] if args.folds else folds
    index = out / "bm25.index"
    bench.rankkit("index", ["index", "--kind", "bm25", "--corpus", data / "corpus.jsonl", "--index", index,
                            "--threads", 2, "--force"], [index / "rankkit-index.json"])
    for k in folds:
        topics, qrels = data / "folds" / f"fold-{k}.topics.tsv", data / "folds" / f"fold-{k}.qrels.txt"
        run = out / "runs" / f"bm25.fold-{k}.run"
        bench.rankkit("retrieve", ["retrieve", "--model", "bm25", "--index", index, "--topics", topics, "--k", args.k,
                                   "--threads", 2, "--runtag", "bm25", "--output", run], [run])
        groups = out / "groups" / f"fold-{k}.jsonl"
        bench.rankkit("mine", ["mine", "--run", run, "--qrels", qrels, "--topics", topics, "--index", index,
                               "--depth", args.k, "--negatives", args.negatives, "--strategy", "random",
                               "--seed", args.seed, "--output", groups], [groups])
    concatenate([out / "runs" / f"bm25.fold-{k}.run" for k in tests], out / "runs" / "bm25.run")

    backbone: list[Any] = ["--backbone", args.backbone.resolve()] if args.backbone else []
    common = ["--max-steps", args.max_steps, "--batch-size", args.batch_size, "--group-size", args.group_size,
              "--seed", args.seed, "--device", "cpu"]

    def cross_validate(name: str, model: str, extra_train: list[Any], teacher: str | None = None,
                       form: str = "eq12") -> Path:
        train_flags, rerank_flags = model_flags(model, args)
        for k in tests:
            checkpoint = out / "checkpoints" / f"{name}.fold-{k}"
            groups = [a for j in folds if j != k for a in ("--train", out / "groups" / f"fold-{j}.jsonl")]
            kd: list[Any] = []
            if teacher is not None:
                kd = ["--teacher-checkpoint", out / "checkpoints" / f"{teacher}.fold-{k}", "--alpha", 0.5,
                      "--distillation", form]
            bench.rankkit(f"train {name}", ["train", "--model", model, *groups, "--output", checkpoint, *common,
                                            *train_flags, *extra_train, *kd], [checkpoint / "rankkit.json"])
            test_run = out / "runs" / f"{name}.fold-{k}.run"
            bench.rankkit(f"rerank {name}", ["rerank", "--model", model, "--checkpoint", checkpoint,
                                             "--run", out / "runs" / f"bm25.fold-{k}.run",
                                             "--topics", data / "folds" / f"fold-{k}.topics.tsv", "--index", index,
                                             "--depth", args.depth, "--runtag", name, *rerank_flags, "--output", test_run],
                          [test_run])
        merged = out / "runs" / f"{name}.run"
        concatenate([out / "runs" / f"{name}.fold-{k}.run" for k in tests], merged)
        return merged

    runs = {"bm25": out / "runs" / "bm25.run"}
    for name in models:
        model, variant_flags = VARIANT_ROWS.get(name, (name, []))
        runs[name] = cross_validate(name, model, [*backbone, *variant_flags])

    kd_runs: dict[str, Path] = {}
    if args.kd:
        if "--teacher-checkpoint" not in train_help:
            bench.notes.append("KD skipped: this rankkit's train has no --teacher-checkpoint/--alpha yet.")
        else:
            from rankkit.models.backbone import resolve_backbone

            student = student_backbone(resolve_backbone(args.backbone), out / "backbones" / "student-2layer")
            teacher = args.kd_model
            kd_runs[teacher] = runs.get(teacher) or cross_validate(teacher, teacher, backbone)
            kd_runs[f"{teacher}-L2"] = cross_validate(f"{teacher}-L2", teacher, ["--backbone", student])
            if "eq12" in kd_forms:  # Eq. 12's student term alone (alpha = 1): the control of the eq12 row
                kd_runs[f"{teacher}-L2-pointwise-ce"] = cross_validate(
                    f"{teacher}-L2-pointwise-ce", teacher, ["--backbone", student, "--loss", "pointwise-ce"])
            for form in kd_forms:
                kd_runs[f"{teacher}-L2-kd-{form}"] = cross_validate(f"{teacher}-L2-kd-{form}", teacher,
                                                                    ["--backbone", student], teacher=teacher, form=form)

    qrels = data / "qrels.txt"
    reports: dict[str, str] = {}

    def evaluate(label: str, named: dict[str, Path], baseline: str) -> None:
        target = out / f"eval-{label}.md"
        bench.rankkit(f"eval {label}", ["eval", "--qrels", qrels, *named.values(), *[a for m in MEASURES for a in ("-m", m)],
                                        "--baseline", named[baseline], "--format", "markdown", "--output", target],
                      [target], always=True)
        reports[label] = target.read_text(encoding="utf-8")

    evaluate("vs-bm25", runs, "bm25")
    if "maxp" in runs and len(runs) > 2:
        evaluate("vs-maxp", {m: r for m, r in runs.items() if m != "bm25"}, "maxp")
    if kd_runs:
        evaluate("kd", kd_runs, f"{args.kd_model}-L2")

    timing: dict[str, dict[str, float]] = {}
    if args.timing:
        words = (args.timing_passages - 1) * args.stride + args.window
        corpus, timing_run, queries = timing_corpus(args, out, data, out / "runs" / f"bm25.fold-{tests[0]}.run",
                                                    words)
        override = "--max-passages" in rerank_help
        if not override:
            bench.notes.append("rerank has no --max-passages: timed at the trained passage count "
                               f"({args.max_passages}), not {args.timing_passages}.")
        for name in dict.fromkeys([*runs, *kd_runs]):  # the teacher may be in both
            if name == "bm25":
                continue
            model = args.kd_model if name.startswith(f"{args.kd_model}-L2") else VARIANT_ROWS.get(name, (name, []))[0]
            _, rerank_flags = model_flags(model, args)
            if model == "matrank-split" and "--max-pieces" in rerank_help:
                rerank_flags = [*rerank_flags, "--max-pieces", args.timing_passages]
            elif override and model not in ("firstp", "matrank", "matrank-split"):
                rerank_flags = [*rerank_flags, "--max-passages", args.timing_passages]
            walls = []
            for depth in (1, args.timing_depth):
                walls.append(bench.rankkit(f"time {name} depth {depth}", [
                    "rerank", "--model", model, "--checkpoint", out / "checkpoints" / f"{name}.fold-{tests[0]}",
                    "--run", timing_run, "--topics", out / "timing" / "topics.tsv", "--corpus", corpus,
                    "--depth", depth, *rerank_flags, "--output", out / "timing" / f"{name}.d{depth}.run"], [],
                    always=True).seconds or 0.0)
            documents = (args.timing_depth - 1) * queries
            timing[name] = {"ms_per_document": 1000 * (walls[1] - walls[0]) / documents, "documents": documents,
                            "wall_depth_1": walls[0], f"wall_depth_{args.timing_depth}": walls[1]}

    total = time.perf_counter() - started
    command = shlex.join(["python", "bench/documents.py", *(argv if argv is not None else sys.argv[1:])])
    where = harness.machine()
    lines = [
        (f"# Long-document re-ranking on TIME, {len(tests)}-fold cross-validation "
        f"({where['date']}, {harness.machine_line(where)})"),
        "",
        f"`{command}` — {total / 60:.1f} min in all.",
        "",
        (f"Budget: re-rank the BM25 top {args.depth} (of {args.k}); {args.max_steps} steps x {args.batch_size} groups "
        f"x {args.group_size} documents per training; windows of {args.window} tokens every {args.stride}, "
        f"at most {args.max_passages} passages; backbone {args.backbone or 'packaged all-MiniLM-L6-v2'}; seed {args.seed}. "
        "Significance: paired randomization test, Holm-corrected."),
        "",
        "## Against BM25", "", reports["vs-bm25"].strip(), "",
    ]
    if "vs-maxp" in reports:
        lines += ["## Against MaxP", "", reports["vs-maxp"].strip(), ""]
    if "kd" in reports:
        lines += [(f"## Distillation ({args.kd_model}: 6-layer teacher, 2-layer student alone and with "
                  f"`--teacher-checkpoint --alpha 0.5 --distillation {'|'.join(kd_forms)}`)"), "",
                  reports["kd"].strip(), ""]
    if timing:
        lines += [f"## Speed ({args.timing_passages} passages per document where the model splits documents)", "",
                  "| model | ms / document | documents timed |", "| --- | --- | --- |"]
        lines += [f"| {m} | {t['ms_per_document']:.1f} | {t['documents']} |" for m, t in timing.items()]
        lines.append("")
    lines += [f"Note: {n}" for n in bench.notes]
    lines += ["", "## Commands", "", "```bash", *bench.commands, "```", ""]
    with atomic_write(out / "documents.md") as handle:
        handle.write("\n".join(lines))
    bench.write_commands(out / "commands.sh")
    harness.save_json(out / "documents.json", {
        "command": command, "args": {k: str(v) for k, v in vars(args).items()}, "folds": tests, "machine": where,
        "seconds": bench.seconds, "peak_rss_mb": bench.peak_rss_mb, "total_seconds": total, "timing": timing,
        "notes": bench.notes}, indent=1)
    print("\n".join(lines[: lines.index("## Commands")]))
    print(f"==> {out}/documents.md", file=sys.stderr)


if __name__ == "__main__":
    main()
