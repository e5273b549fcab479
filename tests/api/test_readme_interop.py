"""README's "Use rankkit with sentence-transformers / Hugging Face / Pyserini" section, run as written.

Every fenced ``bash`` command of the section runs (``rankkit ...`` in-process through the CLI; the
shell lines, ``eval "$(rankkit env)"`` and ``python -m pyserini...``, in ``bash``) and every ``python``
snippet is executed (one that uses Pyserini in ``bash`` after the section's ``eval`` line, the others
in-process), in a folder holding tiny random stand-ins for the folders the section names:
``cross-encoder`` (a ``BertForSequenceClassification`` as transformers saves it), ``st-model`` (a
sentence-transformers folder written by sentence-transformers), ``faiss-index`` (a Pyserini faiss
folder), a corpus, topics, a first-stage run and training groups.

The shell runs as a user's does on a machine whose Java is older than Anserini's: the system's folders
(Debian 12's ``java`` is 17) first on ``PATH``, this environment's ``bin`` after them, no ``JAVA_HOME``,
and no rankkit JVM set up beforehand: only what the README says makes Pyserini work.
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
#: A user's shell: the system's folders (and its ``java``) first, this environment's ``bin`` last.
SYSTEM_PATH = ["/usr/local/bin", "/usr/bin", "/bin"]


def section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(TITLE)
    end = text.index("\n## ", start + len(TITLE))
    return text[start:end]


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section(), flags=re.S)


def lines() -> list[str]:
    """Every command line of the section's ``bash`` blocks, continuation lines joined, comments removed."""
    out = []
    for block in blocks("bash"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip()
            if line:
                out.append(line)
    return out


def commands() -> list[list[str]]:
    return [shlex.split(line) for line in lines()]


def user_shell() -> dict[str, str]:
    """The environment of a user's new shell (module doc)."""
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "JDK_HOME", "JRE_HOME", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join([*SYSTEM_PATH, str(Path(sys.executable).parent)])
    return env


def bash(script: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", script], input=stdin, capture_output=True, text=True, env=user_shell(),
                          timeout=600, check=False)


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
    assert len(blocks("python")) == 3
    names = [c[1] if c[0] == "rankkit" else c[2] if c[0] == "python" else c[0] for c in commands()]
    assert names.count("rerank") == 2 and names.count("retrieve") == 3
    assert {"eval", "pyserini.index.lucene", "pyserini.search.lucene"} <= set(names)
    assert names.index("eval") < names.index("pyserini.index.lucene")
    assert any("LuceneSearcher" in snippet for snippet in blocks("python"))


def test_readme_section_runs(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stand_ins(tmp_path)
    monkeypatch.chdir(tmp_path)
    setup = ""  # the section's `eval "$(rankkit env)"`, which each later shell line runs after
    for line, command in zip(lines(), commands()):
        if command[0] == "rankkit":
            result = cli(*command[1:])
            assert result.code == 0, f"{line}\n{result.stderr}"
            continue
        if command[0] == "eval":
            setup += line + "\n"
        assert command[0] == "eval" or command[:2] == ["python", "-m"], command
        done = bash(setup if command[0] == "eval" else setup + line)
        assert done.returncode == 0, f"{line}\n{done.stderr[-3000:]}"
    assert setup, "the section sets no shell up for Pyserini"
    for name in ("cross-encoder.txt", "e5.txt", "bm25.txt", "mono.txt", "faiss.txt", "pyserini.txt"):
        assert read_run(tmp_path / name), name
    assert (tmp_path / "mono-ft" / "rankkit.json").is_file() and (tmp_path / "repbert-ft" / "modules.json").is_file()
    for snippet in blocks("python"):
        if "pyserini" in snippet:  # in the shell the section sets up, as a user runs it
            done = bash(setup + "python -", stdin=snippet)
            assert done.returncode == 0, done.stderr[-3000:]
            assert done.stdout.strip(), snippet
            continue
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(snippet, str(README), "exec"), {"__name__": "readme"})
        assert printed.getvalue().strip()
