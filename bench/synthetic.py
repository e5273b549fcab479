"""MS MARCO-shaped synthetic data from real text, at any size, for ``bench/scale.py``.

The sentences are the repository's own bundled real text (``tests/data``: 2,013 MS MARCO passages
of ``corpus_small``, the classic test collections' abstracts and WikiQA's Wikipedia sentences),
split at sentence ends. Everything else is generated with fresh ids, deterministically from a seed:

* a **collection** of N passages (``p<N>``), each 2-4 sentences drawn at random and cut to 40-90
  words (MS MARCO passages: 56 words on average), ``pid<TAB>text`` like ``collection.tsv``;
* **queries** (``q<N>``): 3-8 consecutive words of a random passage, lower-cased, like
  ``queries.train.tsv`` (MS MARCO queries: 6 words on average), each with that passage as its
  judged positive (``qrels``, rel 1);
* **runs** of Q queries x K candidates (scores descending), **text triples**, **qidpidtriples**,
  **training groups** with texts and **ids-only groups** (one positive + negatives each).

What it cannot show: the vocabulary is that of ~7k real sentences (MS MARCO has ~3M distinct terms
over 8.8M passages), so posting lists are longer than MS MARCO's at the same collection size and
BM25 costs per query are pessimistic; the text is real English, so tokenisation and lengths are.
"""

from __future__ import annotations

import gzip
import json
import random
import re
from functools import lru_cache
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
TEST_DATA = ROOT / "tests" / "data"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_FIELD_TAG = re.compile(r"^\.[A-Z]( \d+)?$")


def _classic_texts() -> Iterator[str]:
    """The body text of the bundled classic collections (SMART-style files; TIME in capitals)."""
    for path in sorted((TEST_DATA / "classic").glob("*/*")):
        if path.name in ("CISI.ALL", "MED.ALL", "TIME.ALL", "doc-text") or path.name.startswith("cran.all"):
            opener = gzip.open if path.suffix == ".gz" else open
            with opener(path, "rt", encoding="utf-8", errors="replace") as handle:  # type: ignore[operator]
                lines = [ln.strip() for ln in handle if not _FIELD_TAG.match(ln.strip()) and not ln.startswith("*")]
            text = " ".join(ln for ln in lines if ln and not ln.isdigit() and ln != "/")
            yield text.lower() if path.name == "TIME.ALL" else text


@lru_cache(maxsize=1)
def sentences() -> tuple[str, ...]:
    """Every bundled sentence of 5 to 60 words (deterministic order)."""
    texts: list[str] = []
    with gzip.open(TEST_DATA / "corpus_small" / "passages.tsv.gz", "rt", encoding="utf-8") as handle:
        texts += [line.rstrip("\n").split("\t", 1)[1] for line in handle]
    texts += list(_classic_texts())
    for split in ("train", "dev", "test"):
        with open(TEST_DATA / "wikiqa" / f"WikiQA-{split}.tsv", encoding="utf-8") as handle:
            next(handle)
            texts += [line.rstrip("\n").split("\t")[5] for line in handle]
    out = []
    for text in texts:
        for sentence in _SENTENCE_END.split(" ".join(text.split())):
            if 5 <= len(sentence.split()) <= 60:
                out.append(sentence)
    return tuple(dict.fromkeys(out))


def passage(rng: random.Random) -> str:
    """One passage: 2-4 random sentences, cut to 40-90 words."""
    pool = sentences()
    words = " ".join(rng.choice(pool) for _ in range(rng.randint(2, 4))).split()
    return " ".join(words[:rng.randint(40, 90)])


def write_collection(path: Path, count: int, seed: int = 0) -> Path:
    """``count`` passages ``p0 .. p<count-1>`` as ``pid<TAB>text``."""
    rng = random.Random(f"collection:{seed}")
    with open(path, "w", encoding="utf-8") as out:
        for n in range(count):
            out.write(f"p{n}\t{passage(rng)}\n")
    return path


def query_of(text: str, rng: random.Random) -> str:
    words = re.sub(r"[^\w\s]", " ", text.lower()).split()
    size = rng.randint(3, 8)
    start = rng.randrange(max(1, len(words) - size))
    return " ".join(words[start:start + size]) or "empty"


def write_queries(path: Path, count: int, collection: Path, seed: int = 0, qrels: Path | None = None) -> Path:
    """``count`` queries ``q0 ..``, each a few words of a random passage of ``collection`` (a
    :func:`write_collection` file), which is its judged positive in ``qrels``."""
    rng = random.Random(f"queries:{seed}:{count}")
    with open(collection, encoding="utf-8") as handle:
        size = sum(1 for _ in handle)
    targets = [rng.randrange(size) for _ in range(count)]
    wanted = set(targets)
    texts: dict[int, str] = {}
    with open(collection, encoding="utf-8") as handle:
        for i, line in enumerate(handle):
            if i in wanted:
                texts[i] = line.rstrip("\n").split("\t", 1)[1]
    judged = open(qrels, "w", encoding="utf-8") if qrels is not None else None
    with open(path, "w", encoding="utf-8") as out:
        for n, target in enumerate(targets):
            out.write(f"q{n}\t{query_of(texts[target], rng)}\n")
            if judged is not None:
                judged.write(f"q{n} 0 p{target} 1\n")
    if judged is not None:
        judged.close()
    return path


def write_run(path: Path, queries: int, depth: int, collection_size: int, seed: int = 0, tag: str = "synthetic") -> Path:
    """A TREC run of ``queries`` x ``depth`` random passages, scores descending, sorted by qid as written."""
    rng = random.Random(f"run:{seed}:{tag}")
    with open(path, "w", encoding="utf-8") as out:
        for q in range(queries):
            pids = rng.sample(range(collection_size), depth) if depth < collection_size else list(range(collection_size))
            score = 30.0
            lines = []
            for rank, pid in enumerate(pids, 1):
                score -= 0.0002 + rng.random() * 0.05  # strictly decreasing at 4 decimals: no ties
                lines.append(f"q{q} Q0 p{pid} {rank} {score:.4f} {tag}\n")
            out.write("".join(lines))
    return path


def write_text_triples(path: Path, count: int, seed: int = 0) -> Path:
    """``count`` MS MARCO text triples: query, positive, negative."""
    rng = random.Random(f"triples:{seed}")
    with open(path, "w", encoding="utf-8") as out:
        for _ in range(count):
            positive = passage(rng)
            out.write(f"{query_of(positive, rng)}\t{positive}\t{passage(rng)}\n")
    return path


def write_id_triples(path: Path, count: int, queries: int, collection_size: int, seed: int = 0) -> Path:
    """``count`` qidpidtriples over ``queries`` queries and a collection of ``collection_size``."""
    rng = random.Random(f"idtriples:{seed}")
    with open(path, "w", encoding="utf-8") as out:
        for _ in range(count):
            out.write(f"q{rng.randrange(queries)}\tp{rng.randrange(collection_size)}\tp{rng.randrange(collection_size)}\n")
    return path


def write_groups(path: Path, count: int, negatives: int = 7, *, ids_only: bool = False, collection_size: int = 0,
                 seed: int = 0) -> Path:
    """``count`` training groups of 1 positive + ``negatives`` (rankkit JSONL); ``ids_only`` groups
    name passages ``p<N>`` of a collection of ``collection_size`` and queries ``q<N>`` instead of texts."""
    rng = random.Random(f"groups:{seed}")
    with open(path, "w", encoding="utf-8") as out:
        for n in range(count):
            if ids_only:
                pids = [f"p{rng.randrange(collection_size)}" for _ in range(negatives + 1)]
                record = {"qid": f"q{n}", "pos": [{"docid": pids[0], "label": 1}],
                          "neg": [{"docid": d, "score": round(20 - i * 0.5, 2)} for i, d in enumerate(pids[1:])]}
            else:
                texts = [passage(rng) for _ in range(negatives + 1)]
                record = {"qid": f"q{n}", "query": query_of(texts[0], rng),
                          "pos": [{"docid": f"g{n}p", "text": texts[0], "label": 1}],
                          "neg": [{"docid": f"g{n}n{i}", "text": t, "score": round(20 - i * 0.5, 2)}
                                  for i, t in enumerate(texts[1:])]}
            out.write(json.dumps(record) + "\n")
    return path
