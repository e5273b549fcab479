"""``rankkit-index.json``: how an index folder was built, and the check every reader of one makes.

Every index rankkit builds (``rankkit index --kind bm25|dense``, ``rankkit index --merge``)
carries this file, written last (its presence means the build finished). :func:`read_manifest`
is the only reader: ``retrieve`` (and every other consumer) names the kinds it can use, so a
folder that is not a rankkit index, or is one of another kind, fails with the same one-line
message whatever the model (``retrieve --model bm25`` on a dense index, ``--model repbert`` on a
BM25 index, a dense shard that still needs ``--merge``).

Kinds: ``bm25`` (Lucene, :mod:`rankkit.lexical.index`), ``dense`` (faiss, :mod:`rankkit.dense`;
extra fields ``model``, ``checkpoint``, ``dims``, ``normalized``, ``faiss``...) and
``dense-shard`` (one encoded shard of a dense index; not searchable until merged).

Foreign indexes (built by Pyserini or Anserini, no manifest) open too, with a one-line notice: a
Lucene index folder (a ``segments_N`` file) as ``bm25`` searched with Anserini's defaults, and a
Pyserini faiss folder (``index`` + ``docid``) as ``dense``. :func:`read_manifest` returns a
stand-in manifest with ``"foreign"`` set to ``"lucene"`` or ``"pyserini-faiss"``; what the index
holds (document vectors, raw text) is then asked of the index itself by its readers.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rankkit.version import __version__
from rankkit.console import log
from rankkit.errors import InputError, RankkitError
from rankkit.formats import atomic_write
from rankkit.files import PathLike
from rankkit.files.limits import read_json

MANIFEST_NAME = "rankkit-index.json"
MANIFEST_FORMAT = 1


def corpus_record(corpus: Path) -> dict[str, Any]:
    """Path, size and modification time of a corpus file, as recorded in a manifest."""
    st = corpus.stat()
    return {
        "path": str(corpus.resolve()),
        "bytes": st.st_size,
        "modified": datetime.fromtimestamp(st.st_mtime, timezone.utc).isoformat(timespec="seconds"),
    }


def new_manifest(kind: str, corpus: Path | dict[str, Any], options: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A manifest for an index of ``kind`` built from ``corpus`` (a path, or an existing record) with ``options``."""
    return {
        "rankkit_index": MANIFEST_FORMAT,
        "kind": kind,
        "rankkit_version": __version__,
        "built": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "corpus": corpus if isinstance(corpus, dict) else corpus_record(Path(corpus)),
        "options": options,
        **fields,
    }


def write_manifest(index_dir: Path, manifest: dict[str, Any]) -> None:
    """Write ``rankkit-index.json`` into ``index_dir`` atomically (never half-written)."""
    with atomic_write(Path(index_dir) / MANIFEST_NAME) as out:
        out.write(json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def _use_hint(manifest: dict[str, Any]) -> str:
    """What the index in ``manifest`` is for, as advice in a refusal."""
    kind = manifest.get("kind")
    if kind == "bm25":
        return "retrieve from it with --model bm25"
    if kind == "dense":
        return f"retrieve from it with --model {manifest.get('model', '?')}"
    if kind == "dense-shard":
        shard = manifest.get("shard", ["?", "?"])
        return (f"it is shard {shard[0]}/{shard[1]} of a dense index: merge the shards first "
                "(`rankkit index --merge DIR... --index OUT`)")
    return "see its rankkit-index.json"


def read_manifest(index_dir: PathLike, kinds: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The manifest of a rankkit index, checked; ``kinds`` lists the kinds the caller can use.

    Raises a one-line :class:`RankkitError` for a missing folder, a folder that is not a rankkit
    index, or an index of another kind (saying what that index is for).
    """
    folder = Path(index_dir)
    if not folder.exists():
        raise RankkitError(f"index {folder}: no such directory")
    if not folder.is_dir():
        raise RankkitError(f"index {folder}: not a directory")
    path = folder / MANIFEST_NAME
    if not path.is_file():
        foreign = foreign_manifest(folder, kinds)
        if foreign is not None:
            return foreign
        raise RankkitError(
            f"{folder} is not a rankkit index (no {MANIFEST_NAME}), nor a Lucene index (no segments_N file) "
            "or a Pyserini faiss index (no index + docid files); build one with `rankkit index`"
        )
    manifest = read_json(path, within=folder)  # size and nesting bounded: an index may come from anyone
    if (
        not isinstance(manifest, dict)
        or manifest.get("rankkit_index") != MANIFEST_FORMAT
        or "kind" not in manifest
    ):
        raise InputError(path, None, "not a rankkit index manifest (format 1)")
    if kinds is not None and manifest["kind"] not in kinds:
        wanted = " or ".join(repr(k) for k in kinds)
        raise RankkitError(
            f"{folder} is a {manifest['kind']!r} index, not a {wanted} index; {_use_hint(manifest)}"
        )
    return manifest


#: Files of a Pyserini faiss index folder (``pyserini.search.faiss.FaissSearcher.load_index``).
PYSERINI_FAISS_FILES = ("index", "docid")
#: Anserini's BM25 defaults (SimpleSearcher, Pyserini's LuceneSearcher): k1 and b.
ANSERINI_BM25 = (0.9, 0.4)


def is_lucene_index(folder: Path) -> bool:
    """True when ``folder`` holds a Lucene index (a ``segments_N`` commit file)."""
    return any(p.name.startswith("segments_") for p in folder.iterdir() if p.is_file())


def is_pyserini_faiss(folder: Path) -> bool:
    """True when ``folder`` holds Pyserini's faiss index files (``index`` and ``docid``)."""
    return all((folder / name).is_file() for name in PYSERINI_FAISS_FILES)


def foreign_manifest(folder: Path, kinds: tuple[str, ...] | None) -> dict[str, Any] | None:
    """A stand-in manifest for an index rankkit did not build (printing a one-line notice), or ``None``."""
    found: dict[str, Any] | None = None
    if is_lucene_index(folder):
        found = {"kind": "bm25", "foreign": "lucene", "options": {}}
        note = (f"{folder}: no {MANIFEST_NAME}; opened as a Lucene index (Pyserini/Anserini) with Anserini's "
                f"defaults (BM25 k1={ANSERINI_BM25[0]}, b={ANSERINI_BM25[1]}, its English analyzer)")
    elif is_pyserini_faiss(folder):
        found = {"kind": "dense", "foreign": "pyserini-faiss", "options": {}}
        note = (f"{folder}: no {MANIFEST_NAME}; opened as a Pyserini faiss index (inner product; queries "
                "encoded by the --checkpoint given)")
    if found is None:
        return None
    if kinds is not None and found["kind"] not in kinds:
        wanted = " or ".join(repr(k) for k in kinds)
        raise RankkitError(f"{folder} is a {found['foreign']} index (kind {found['kind']!r}), not a {wanted} index")
    log(note)
    return {"rankkit_index": MANIFEST_FORMAT, "corpus": None, **found}


def is_empty_dir(folder: Path) -> bool:
    """True for an existing folder with nothing in it."""
    with os.scandir(folder) as entries:
        return next(entries, None) is None
