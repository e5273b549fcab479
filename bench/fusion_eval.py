#!/usr/bin/env python
"""Benchmark `rankkit fuse --method rrf` against ranx and `rankkit eval` against the ir_measures CLI.

Inputs: the five DL19 top-100 runs and the DL19 qrels (defaults point at ``examples/data/dl19``, the
same files as ``../shared/data/msmarco-passage-trec-dl``). Prints a markdown report (and writes it to
``--report``) with: whether rankkit's RRF ranking is identical to ``ranx.fuse(method="rrf")``, the
time of each (in-process, warm, median of ``--repeats``; ranx's numba compilation excluded by a
warm-up call), and the command-line wall time of ``rankkit eval`` vs ``python -m ir_measures`` on
the same qrels, run and measures (median of ``--repeats`` cold processes).

    python bench/fusion_eval.py --repeats 5 --report runs/bench/fusion_eval.md
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness import ROOT, machine, machine_line, median_seconds

SYSTEMS = ["BM25", "BM25_RM3", "D_BERT_KD_TASB", "OPEN_AI_ADA2", "SPLADE_P_P_ENSEMBLE_DISTIL"]


def run_cli(cmd: list[str]) -> None:
    """Run a command, output discarded, failing loudly."""
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def ranking_of(run: dict[str, dict[str, float]]) -> dict[str, list[str]]:
    """Each query's docids in rankkit's order (score descending, ties by docid descending)."""
    from rankkit.formats import sort_ranking

    return {qid: [d for d, _ in sort_ranking(docs)] for qid, docs in run.items()}


def main() -> None:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT / "examples" / "data" / "dl19")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--report", type=Path, default=None)
    args = parser.parse_args()

    import ranx

    from rankkit.formats import read_run
    from rankkit.fusion import fuse

    run_paths = [args.data / "runs" / f"{name}.dl19.txt" for name in SYSTEMS]
    qrels = args.data / "qrels.dl19-passage.txt"

    # --- RRF: rankkit vs ranx, in process, reading included ---------------------------------------
    def rankkit_rrf() -> dict[str, dict[str, float]]:
        return fuse([read_run(p) for p in run_paths], "rrf", rrf_k=60)

    def ranx_rrf() -> Any:
        runs = [ranx.Run.from_file(str(p), kind="trec") for p in run_paths]
        return ranx.fuse(runs=runs, method="rrf", params={"k": 60})

    ranx_rrf()  # numba compiles on the first call: keep that out of the timing

    def agreement(paths: list[Path]) -> tuple[int, int, float, int, int | None]:
        """(queries with identical rankings, queries, largest score difference, queries whose top 10 differ,
        the highest rank at which any query differs) of rankkit vs ranx RRF."""
        ours = fuse([read_run(p) for p in paths], "rrf", rrf_k=60)
        theirs = ranx.fuse(runs=[ranx.Run.from_file(str(p), kind="trec") for p in paths], method="rrf",
                           params={"k": 60}).to_dict()
        ours_rank, theirs_rank = ranking_of(ours), ranking_of({q: dict(d) for q, d in theirs.items()})
        identical = sum(ours_rank[q] == theirs_rank.get(q) for q in ours_rank)
        diff = max(abs(ours[q][d] - theirs[q].get(d, float("inf"))) for q in ours for d in ours[q])
        top10 = sum(ours_rank[q][:10] != theirs_rank.get(q, [])[:10] for q in ours_rank)
        first = [next(i for i, (a, b) in enumerate(zip(ours_rank[q], theirs_rank[q]), start=1) if a != b)
                 for q in ours_rank if ours_rank[q] != theirs_rank.get(q) and q in theirs_rank
                 and any(a != b for a, b in zip(ours_rank[q], theirs_rank[q]))]
        return identical, len(ours_rank), diff, top10, min(first) if first else None

    def tied_queries(path: Path) -> int:
        return sum(len(set(docs.values())) < len(docs) for docs in read_run(path).values())

    ties = {name: tied_queries(p) for name, p in zip(SYSTEMS, run_paths)}
    tie_free = [p for name, p in zip(SYSTEMS, run_paths) if ties[name] == 0]
    identical, n_queries, max_score_diff, top10_differ, first_rank = agreement(run_paths)
    identical_tf, n_queries_tf, max_score_diff_tf, _, _ = agreement(tie_free)
    t_ours = median_seconds(rankkit_rrf, args.repeats)
    t_ranx = median_seconds(ranx_rrf, args.repeats)

    # --- the CLI: rankkit fuse / rankkit eval vs ranx has no CLI; ir_measures CLI ------------------
    measures = ["nDCG@10", "RR(rel=2)@10", "AP(rel=2)@100", "R(rel=2)@100"]
    bin_dir = Path(sys.executable).parent
    rankkit_bin = str(bin_dir / "rankkit")
    with tempfile.TemporaryDirectory() as tmp:
        fused = Path(tmp) / "rrf.run"
        t_fuse_cli = median_seconds(
            lambda: run_cli([rankkit_bin, "fuse", "--method", "rrf", *map(str, run_paths), "--output", str(fused)]),
            args.repeats,
        )
    eval_cmds = {
        "rankkit eval": [rankkit_bin, "eval", "--qrels", str(qrels), str(run_paths[0])]
        + [a for m in measures for a in ("-m", m)],
        "ir_measures CLI": [sys.executable, "-m", "ir_measures", str(qrels), str(run_paths[0]), *measures],
    }
    eval_times = {name: median_seconds(lambda c=cmd: run_cli(c), args.repeats) for name, cmd in eval_cmds.items()}
    eval_all_cmd = [rankkit_bin, "eval", "--qrels", str(qrels), *map(str, run_paths)] + [
        a for m in measures for a in ("-m", m)
    ]
    irm_all = [[sys.executable, "-m", "ir_measures", str(qrels), str(p), *measures] for p in run_paths]
    t_eval_all = median_seconds(lambda: run_cli(eval_all_cmd), args.repeats)
    t_irm_all = median_seconds(lambda: [run_cli(c) for c in irm_all], args.repeats)

    where = machine()
    lines = [
        f"### Fusion and evaluation vs ranx / ir_measures ({where['date']}; {machine_line(where)})",
        "",
        (f"Command: `python bench/fusion_eval.py --repeats {args.repeats}`; data: the five DL19 top-100 runs "
        f"({', '.join(SYSTEMS)}) and the DL19 qrels; medians of {args.repeats} repeats."),
        "",
        "| comparison | rankkit | peer | ratio (peer / rankkit) |",
        "| --- | --- | --- | --- |",
        (f"| RRF (k=60) of 5 runs, in process, files read included | {t_ours * 1000:.1f} ms | "
        f"ranx.fuse {t_ranx * 1000:.1f} ms (warm, after numba compilation) | {t_ranx / t_ours:.2f}x |"),
        (f"| `rankkit eval` vs `python -m ir_measures`, 1 run, 4 measures, whole process | {eval_times['rankkit eval']:.2f} s | "
        f"{eval_times['ir_measures CLI']:.2f} s | {eval_times['ir_measures CLI'] / eval_times['rankkit eval']:.2f}x |"),
        (f"| 5 runs side by side (one `rankkit eval` vs five `ir_measures` calls) | {t_eval_all:.2f} s | {t_irm_all:.2f} s | "
        f"{t_irm_all / t_eval_all:.2f}x |"),
        "",
        (f"RRF of the {len(tie_free)} runs without tied scores ({', '.join(p.name for p in tie_free)}): "
        f"rankings identical to ranx on {identical_tf}/{n_queries_tf} queries, largest score difference "
        f"{max_score_diff_tf:.2e}. Of all five runs: {identical}/{n_queries} queries identical, largest score "
        f"difference {max_score_diff:.2e}; top 10 different on {top10_differ}/{n_queries} queries, first "
        f"difference at rank {first_rank}; queries with tied scores per run: "
        f"{', '.join(f'{k} {v}' for k, v in ties.items())}. A tie has no defined rank: rankkit ranks ties "
        "the trec_eval way (docid descending), ranx in whatever order its sort leaves them, so the two "
        "differ exactly where some input has ties. "
        f"`rankkit fuse --method rrf` as a command (process start included): {t_fuse_cli:.2f} s."),
        "",
    ]
    report = "\n".join(lines)
    print(report)
    if args.report:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(report)


if __name__ == "__main__":
    main()
