#!/usr/bin/env python
"""Milliseconds per document at 16 passages for every long-document model (in process, CPU).

    OMP_NUM_THREADS=1 python bench/document_speed.py [--documents 4] [--repeats 3]

Each model is built on the packaged MiniLM with its default head (untrained heads cost the same as
trained ones), `--window 128 --stride 100 --max-passages 16`; the documents are the first TIME-like
texts of ``--corpus`` (default: the DL19 passages joined into ~1,700-token documents so every one
splits into 16 windows). The time is ``rerank_scores`` for one query over ``--documents``
documents, median of ``--repeats`` after a warm-up, divided by the document count.
"""

from __future__ import annotations

import argparse
import gzip

from harness import ROOT, machine, machine_line, median_seconds

MODELS = ("firstp", "maxp", "sump", "parade-max", "parade-avg", "parade-sum", "parade-attn", "parade-cnn",
          "parade-transformer", "matrank-split")


def documents(count: int) -> list[str]:
    """``count`` long documents made of consecutive DL19 pool passages (about 1,700 tokens each)."""
    with gzip.open(ROOT / "examples" / "data" / "dl19" / "passages.dl19-pool.tsv.gz", "rt", encoding="utf-8") as src:
        passages = [line.rstrip("\n").split("\t", 1)[1] for _, line in zip(range(count * 40), src)]
    return [" ".join(passages[i * 40:(i + 1) * 40]) for i in range(count)]


def main() -> None:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args()
    from rankkit.models import create_model, get_model_class

    docs = documents(args.documents)
    query = "what is the history of the united states civil war"
    print("| model | passages per document | ms per document |")
    print("|---|---|---|")
    for name in args.models.split(","):
        options = {"window": 128, "stride": 100, "max_passages": 16, "piece_length": 32 + 128 + 3, "max_pieces": 16}
        known = {spec.name for spec in get_model_class(name).config_class.specs()}
        model = create_model(name, **{k: v for k, v in options.items() if k in known}).eval()
        model.rerank_scores([query], [docs], batch_size=32)  # warm-up
        seconds = median_seconds(lambda m=model: m.rerank_scores([query], [docs], batch_size=32), args.repeats)
        passages = 1 if name == "firstp" else 16
        print(f"| `{name}` | {passages} | {seconds / len(docs) * 1000:.0f} |", flush=True)
        del model
    print(f"\n{machine_line(machine(torch_threads=True))}")


if __name__ == "__main__":
    main()
