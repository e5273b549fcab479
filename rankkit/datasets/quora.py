"""Derive the Quora duplicate-question retrieval task (DenseTrans' setting) from the BiMPM QQP split.

    python -m rankkit.datasets.quora [--source ../shared/data/quora-qqp-bimpm] [--output runs/quora]

(``python examples/quora/prepare.py`` takes the same arguments.)

Input: ``dev.tsv`` and ``test.tsv`` of the BiMPM split (``label<TAB>q1<TAB>q2<TAB>pair_id``,
10,000 pairs each; read its PROVENANCE.txt). Output, in ``--output``:

* ``corpus.jsonl``: every unique question of dev and test (36,737), ``{"id", "contents"}``; the
  id is the question's position in order of first appearance (dev, then test; q1 before q2);
* ``test.topics.tsv`` / ``test.qrels.txt``: the queries are the first question of each duplicate
  pair in test (4,732 distinct); a query's qid IS its corpus id, so ``rankkit retrieve
  --remove-query`` drops the query itself from its results; relevant (rel 1) are its duplicates:
  with ``--relevant pairs`` (default; what ../shared/BASELINES.md measured) the second question of
  every test duplicate pair whose first question it is (4,999 pairs), with ``--relevant all`` every
  question marked duplicate of it on either side of a test pair (5,260);
* ``train.topics.tsv`` / ``train.qrels.txt``: the same construction on the dev split, for
  training (``rankkit mine`` then draws BM25 negatives for it; see README.md);
* ``PROVENANCE.txt``: what was derived from what.

Pairs whose two questions are the same string give no relevant document (a question is never
relevant to itself here); such a query keeps its other duplicates, if any.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rankkit.datasets._common import SHARED_DATA, sha256
from rankkit.formats import atomic_write, write_qrels, write_topics

RELEVANT_HELP = {
    "pairs": "the second question of each duplicate pair whose first question is the query",
    "all": "every question marked duplicate of the query, on either side of a pair",
}
DEFAULT_SOURCE = SHARED_DATA / "quora-qqp-bimpm"


def read_pairs(path: Path) -> list[tuple[int, str, str]]:
    """``(label, question1, question2)`` of a BiMPM TSV file, with file:line errors."""
    pairs = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            fields = line.rstrip("\n").split("\t")
            if len(fields) != 4 or fields[0] not in ("0", "1"):
                sys.exit(f"{path}:{number}: expected 'label<TAB>q1<TAB>q2<TAB>pair_id'")
            pairs.append((int(fields[0]), fields[1].strip(), fields[2].strip()))
    return pairs


def duplicate_task(
    pairs: list[tuple[int, str, str]], ids: dict[str, str], relevant: str = "pairs"
) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """Topics (first question of each duplicate pair) and qrels of one split.

    ``relevant="pairs"``: the second question of every duplicate pair the query is the first
    question of; ``"all"``: every question marked duplicate of it, on either side of a pair.
    """
    neighbours: dict[str, set[str]] = {}
    for label, a, b in pairs:
        if label == 1 and a != b:
            neighbours.setdefault(a, set()).add(b)
            if relevant == "all":
                neighbours.setdefault(b, set()).add(a)
    topics: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    for label, a, _ in pairs:
        if label != 1 or ids[a] in topics:
            continue
        topics[ids[a]] = a
        duplicates = sorted(neighbours.get(a, ()), key=lambda text: int(ids[text]))
        if duplicates:
            qrels[ids[a]] = {ids[text]: 1 for text in duplicates}
    return topics, qrels


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Command line: write the task files (see the module docstring); ``prog`` names the command in messages."""
    parser = argparse.ArgumentParser(prog=prog, description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--source", type=Path, default=DEFAULT_SOURCE, help="folder with dev.tsv and test.tsv"
    )
    parser.add_argument("--output", type=Path, default=Path("runs/quora"), help="output folder")
    parser.add_argument(
        "--relevant",
        choices=("pairs", "all"),
        default="pairs",
        help="; ".join(f"{k}: {v}" for k, v in RELEVANT_HELP.items()),
    )
    args = parser.parse_args(argv)
    splits = {name: read_pairs(args.source / f"{name}.tsv") for name in ("dev", "test")}
    ids: dict[str, str] = {}
    for name in ("dev", "test"):
        for _, a, b in splits[name]:
            for text in (a, b):
                ids.setdefault(text, str(len(ids)))
    out = args.output
    out.mkdir(parents=True, exist_ok=True)
    with atomic_write(out / "corpus.jsonl") as handle:
        for text, docid in ids.items():
            handle.write(json.dumps({"id": docid, "contents": text}, ensure_ascii=False) + "\n")
    stats = {}
    for split, prefix in (("test", "test"), ("dev", "train")):
        topics, qrels = duplicate_task(splits[split], ids, args.relevant)
        write_topics(out / f"{prefix}.topics.tsv", topics)
        write_qrels(out / f"{prefix}.qrels.txt", qrels)
        stats[prefix] = (len(topics), len(qrels), sum(len(r) for r in qrels.values()))
    with atomic_write(out / "PROVENANCE.txt") as handle:
        handle.write(
            "Derived by rankkit.datasets.quora (examples/quora/prepare.py) from the Quora Question Pairs BiMPM split\n"
            "(galsang/BIMPM-pytorch @ 17f3735716437622904508797ea2724e9d0dcafc,\n"
            " .data/quora/{dev,test}.tsv).\n"
            f"  dev.tsv  sha256 {sha256(args.source / 'dev.tsv')}\n"
            f"  test.tsv sha256 {sha256(args.source / 'test.tsv')}\n"
            f"corpus.jsonl: {len(ids)} unique questions of dev + test (id = order of first appearance).\n"
            f"relevant = {args.relevant} ({RELEVANT_HELP[args.relevant]}).\n"
            f"test: {stats['test'][0]} queries (first question of each test duplicate pair;\n"
            "      qid = corpus id),\n"
            f"      {stats['test'][1]} with a relevant question, {stats['test'][2]} relevant pairs.\n"
            f"train (dev split): {stats['train'][0]} queries, {stats['train'][1]} with a relevant question,\n"
            f"      {stats['train'][2]} relevant pairs.\n"
            "License: Quora released QQP under Quora's Terms of Service (non-commercial use);\n"
            "research use only.\n"
        )
    print(
        f"{len(ids)} questions; test {stats['test'][0]} queries ({stats['test'][2]} relevant); "
        f"train {stats['train'][0]} queries ({stats['train'][2]} relevant) -> {out}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main(prog="python -m rankkit.datasets.quora")
