#!/usr/bin/env python
"""Build rankkit/runtime/calibration/long-passages.tsv: the out-of-domain, long-passage half of auto's quality check
(issue 41), from three public collections under ../shared/data (never the classic collections the OOD evaluation
uses, never DL19):

    python bench/probes/build_check_set.py --data ../shared/data

* SQuAD 1.1 train paragraphs (Wikipedia; CC BY-SA 4.0), with one of each paragraph's questions;
* PubMedQA PQA-L abstracts (biomedical; MIT), with each abstract's question;
* MedQuAD answers (NIH consumer health; CC BY 4.0), with each answer's question.

From each collection 8 items are taken, spread over its length range (the longest items up to ~500 words, so
inputs reach the models' 512-token limit): the items sorted by word count and picked at the 5th, 18th, ..., 96th
percentiles. Each item gives a ``pair`` line (question, passage) and a ``passage`` line (the passage alone), the
format of msmarco-dl20.tsv. The word counts are written into PROVENANCE.txt's table by hand from this script's
output.
"""

from __future__ import annotations

import argparse
import ast
import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "rankkit" / "runtime" / "calibration" / "long-passages.tsv"
PER_COLLECTION = 8
MAX_WORDS = 520


def clean(text: str) -> str:
    return " ".join(text.replace("\t", " ").split())


def spread(items: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``PER_COLLECTION`` items at evenly spaced length percentiles (5 % to 96 %), passages of at most MAX_WORDS."""
    items = sorted({(q, p) for q, p in items if q and p and len(p.split()) <= MAX_WORDS}, key=lambda x: (len(x[1].split()), x))
    picks = [round((0.05 + 0.13 * i) * (len(items) - 1)) for i in range(PER_COLLECTION)]
    return [items[i] for i in picks]


def squad(data: Path) -> list[tuple[str, str]]:
    out = []
    with gzip.open(data / "squad-passage-ranking" / "squad11.train.paragraphs.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            if row["qas"]:
                out.append((clean(row["qas"][0]["question"]), clean(row["context"])))
    return out


def pubmedqa(data: Path) -> list[tuple[str, str]]:
    rows = json.load(gzip.open(data / "pubmedqa-labeled" / "ori_pqal.json.gz", "rt", encoding="utf-8"))
    out = []
    for row in rows.values():
        contexts = row["CONTEXTS"]
        contexts = ast.literal_eval(contexts) if isinstance(contexts, str) else contexts
        out.append((clean(row["QUESTION"]), clean(" ".join(contexts))))
    return out


def medquad(data: Path) -> list[tuple[str, str]]:
    out = []
    with gzip.open(data / "medquad" / "medquad.qa-with-answers.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            out.append((clean(row["question"]), clean(row.get("answer") or "")))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True)
    args = parser.parse_args()
    lines = ["# kind<TAB>text[<TAB>text]: the long-passage, out-of-domain half of auto's quality check (PROVENANCE.txt)"]
    for name, load in (("squad", squad), ("pubmedqa", pubmedqa), ("medquad", medquad)):
        chosen = spread(load(args.data))
        print(name, "words:", [len(p.split()) for _, p in chosen], file=sys.stderr)
        for question, passage in chosen:
            lines.append(f"pair\t{question}\t{passage}")
            lines.append(f"passage\t{passage}")
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {len(lines) - 1} lines to {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
