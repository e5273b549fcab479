"""Cut the SQuAD slices of this folder from ../shared/data/squad-passage-ranking/derived (see PROVENANCE.txt).

Run from this folder: python make_squad_fixtures.py [SHARED_DATA]
"""

import gzip
import json
import os
import sys

S = (sys.argv[1] if len(sys.argv) > 1 else "../../../../shared/data") + "/squad-passage-ranking/derived/"


def tsv(name):
    with gzip.open(S + name, "rt", encoding="utf-8") as f:
        for line in f:
            yield line.rstrip("\n").split("\t")


# qidpidtriples from SQuAD v1.1 train, articles a000 and a001: positive = the question's paragraph,
# negative = the next paragraph of the same article (a natural hard negative).
passages = {pid: (title, text) for pid, title, text in tsv("train.passages.tsv.gz")
            if pid.startswith(("train-a000-", "train-a001-"))}
queries = dict(tsv("train.queries.tsv.gz"))
qrels = [line.split() for line in gzip.open(S + "train.qrels.txt.gz", "rt")]
pos = {q: p for q, _, p, _ in qrels if p in passages}
article: dict = {}
for pid in sorted(passages):
    article.setdefault(pid.rsplit("-", 1)[0], []).append(pid)
chosen = sorted(pos)[::6][:20]
used = set()
with open("qidpidtriples.squad-train.tsv", "w", encoding="utf-8") as out:
    for q in chosen:
        p = pos[q]
        same = article[p.rsplit("-", 1)[0]]
        n = same[(same.index(p) + 1) % len(same)]
        out.write(f"{q}\t{p}\t{n}\n")
        used |= {p, n}
with open("collection.squad-train.tsv", "w", encoding="utf-8") as out:
    for pid in sorted(used):
        out.write(f"{pid}\t{' '.join(passages[pid][1].split())}\n")
with open("queries.squad-train.tsv", "w", encoding="utf-8") as out:
    for q in chosen:
        out.write(f"{q}\t{queries[q]}\n")

# BEIR folder from SQuAD v1.1 dev article a000: all its paragraphs, the first question about each of
# its first 8 paragraphs.
os.makedirs("beir-squad-dev/qrels", exist_ok=True)
dpass = [(pid, t, x) for pid, t, x in tsv("dev.passages.tsv.gz") if pid.startswith("dev-a000-")]
dq = dict(tsv("dev.queries.tsv.gz"))
dqrels = [line.split() for line in gzip.open(S + "dev.qrels.txt.gz", "rt")]
dqrels = [(q, p) for q, _, p, _ in dqrels if p.startswith("dev-a000-")]
picked: list = []
for q, p in dqrels:
    if q not in [x for x, _ in picked] and len(picked) < 8 and p not in [y for _, y in picked[-1:]]:
        picked.append((q, p))
with open("beir-squad-dev/corpus.jsonl", "w", encoding="utf-8") as out:
    for pid, title, text in dpass:
        out.write(json.dumps({"_id": pid, "title": title.replace("_", " "), "text": text}, ensure_ascii=False) + "\n")
with open("beir-squad-dev/queries.jsonl", "w", encoding="utf-8") as out:
    for q, _ in picked:
        out.write(json.dumps({"_id": q, "text": dq[q]}, ensure_ascii=False) + "\n")
with open("beir-squad-dev/qrels/test.tsv", "w", encoding="utf-8") as out:
    out.write("query-id\tcorpus-id\tscore\n")
    for q, p in picked:
        out.write(f"{q}\t{p}\t1\n")
