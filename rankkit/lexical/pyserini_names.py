"""Names Pyserini users type: ``--topics dl19-passage``, ``--qrels dl20-passage``, ``--index msmarco-v1-passage``.

* Topics and qrels: Pyserini's own names (``pyserini/search/_base.py``'s ``topics_mapping`` and
  ``qrels_mapping``, read with :mod:`ast`: importing that module starts Java and pulls in
  ``pyserini.search``'s openai import) and Anserini's symbols (``Topics.getByName``,
  ``Qrels.extendSymbol``: ``msmarco-v1-passage.dev``, ...). pyserini 1.6 does not ship the files
  inside its package: Anserini 1.7 keeps them in ``~/.cache/pyserini/topics-and-qrels`` (Java's
  ``user.home``) and downloads a missing one from castorini/anserini-tools on GitHub. rankkit reads
  that cache (offline), and asks Anserini's own download for a file that is not there.
* Prebuilt indexes: Pyserini's Lucene inverted indexes (``pyserini.prebuilt_index_info.TF_INDEX_INFO``:
  ``msmarco-v1-passage``, ``beir-v1.0.0-scifact.flat``, ...), downloaded, md5-checked and unpacked by
  ``pyserini.util.download_prebuilt_index`` into its cache (``$PYSERINI_CACHE`` or
  ``~/.cache/pyserini/indexes``); a cached index is used without any network access.
* Offline, a name missing from its cache is one line, exit 2, and nothing reaches stdout: Java's
  ``System.out`` goes to stderr (null during Anserini's downloads) and Anserini logs at WARN in
  rankkit's JVM (:mod:`rankkit.lexical.java`); pyserini's ``print`` goes to stderr.

:func:`translate` rewrites such a name on a command line into the local file or folder, so every
command takes them; a name is looked up only when no file of that name exists.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib.util
import re
import sys
from pathlib import Path
from typing import Iterator

from rankkit.errors import RankkitError

TOOLS_URL = "https://raw.githubusercontent.com/castorini/anserini-tools/master/topics-and-qrels/"
#: What a name may look like (no folder part; file-like endings are taken for files and never looked up).
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
FILE_ENDINGS = (".tsv", ".txt", ".json", ".jsonl", ".gz", ".xml", ".trec", ".qrels", ".run", ".csv", ".parquet")
#: Options whose value may be a Pyserini name, and which kind of name.
OPTIONS = {"--topics": "topics", "--queries": "topics", "--qrels": "qrels", "--index": "index"}


def _candidate(text: str) -> bool:
    return bool(NAME.match(text)) and not text.lower().endswith(FILE_ENDINGS) and not Path(text).exists()


@functools.lru_cache(maxsize=1)
def pyserini_tables() -> tuple[dict[str, str], dict[str, str]]:
    """Pyserini's ``topics_mapping`` and ``qrels_mapping`` (name -> Anserini enum constant), aliases included."""
    spec = importlib.util.find_spec("pyserini")
    if spec is None or not spec.submodule_search_locations:
        return {}, {}
    source = Path(list(spec.submodule_search_locations)[0]) / "search" / "_base.py"
    try:
        tree = ast.parse(source.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return {}, {}
    tables: dict[str, dict[str, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id in ("topics_mapping", "qrels_mapping") and isinstance(node.value, ast.Dict):
            with contextlib.suppress(ValueError):
                tables[node.targets[0].id] = ast.literal_eval(node.value)
    topics = dict(tables.get("topics_mapping", {}))
    for name, enum in list(topics.items()):  # the aliases pyserini adds programmatically
        for prefix in ("dl19-passage-", "dl20-passage-"):
            if name.startswith(prefix):
                topics.setdefault(name.replace(prefix, prefix[:-1] + ".", 1), enum)
        if name.startswith("msmarco-passage-dev-subset-"):
            for alias in ("msmarco-passage-dev-subset.", "msmarco-passage-dev.", "msmarco-passage.dev.",
                          "msmarco-v1-passage-dev.", "msmarco-v1-passage.dev."):
                topics.setdefault(name.replace("msmarco-passage-dev-subset-", alias, 1), enum)
    return topics, dict(tables.get("qrels_mapping", {}))


def _anserini_file(kind: str, name: str) -> str | None:
    """The file name (e.g. ``topics.dl19-passage.txt``) Anserini knows under ``name``, or None."""
    from rankkit.lexical.java import autoclass

    topics, qrels = pyserini_tables()
    if kind == "topics":
        enums = autoclass("io.anserini.search.topicreader.Topics")
        if name in topics:
            return str(enums.valueOf(topics[name]).path)
        entry = enums.getByName(name)
        return None if entry is None else str(entry.path)
    enums = autoclass("io.anserini.eval.Qrels")
    if name in qrels:
        return str(enums.valueOf(qrels[name]).path)
    path = autoclass("java.io.File")(name).toPath()
    if not enums.containsSymbol(path):
        return None
    return str(enums.extendSymbol(path).getFileName().toString())


def topics_and_qrels_cache() -> Path:
    """Where Anserini keeps topics and qrels: ``<Java user.home>/.cache/pyserini/topics-and-qrels``."""
    from rankkit.lexical.java import autoclass

    return Path(str(autoclass("java.lang.System").getProperty("user.home"))) / ".cache" / "pyserini" / "topics-and-qrels"


def resolve_topics_or_qrels(kind: str, name: str, option: str) -> Path | None:
    """The local file of Pyserini/Anserini topics or qrels ``name`` (downloaded by Anserini when missing);
    None when ``name`` is not such a name."""
    if not _candidate(name):
        return None
    filename = _anserini_file(kind, name)
    if filename is None:
        return None
    cached = topics_and_qrels_cache() / filename
    if cached.is_file():
        return cached
    from rankkit.lexical.java import autoclass

    try:
        with _java_prints_dropped():
            if kind == "topics":
                found = autoclass("io.anserini.search.topicreader.TopicReader").getTopicPath(
                    autoclass("java.io.File")(filename).toPath())
            else:
                found = autoclass("io.anserini.eval.RelevanceJudgments").getQrelsPath(
                    autoclass("java.io.File")(filename).toPath())
    except Exception as err:  # a Java IOException through pyjnius
        detail = " ".join(str(err).split())[:160]
        raise RankkitError(f"{option} {name}: Pyserini's {kind} file {filename} is not in its cache ({cached.parent}) "
                           f"and Anserini could not download it ({detail}); put {TOOLS_URL}{filename} there, or give "
                           f"a local file") from None
    path = Path(str(found.toString()))
    if not path.is_file():
        raise RankkitError(f"{option} {name}: Anserini reported {path}, which is not a file")
    return path


def resolve_prebuilt_index(name: str, option: str = "--index") -> Path | None:
    """The local folder of Pyserini's prebuilt Lucene index ``name`` (downloaded into its cache when missing);
    None when ``name`` is no such index.

    rankkit's JVM starts first: ``pyserini.prebuilt_index_info`` reads its table from Anserini's classes on
    import, which would otherwise start a JVM on the ``java`` on ``PATH`` (too old on many machines, and the
    only JVM the process can have). Offline, a name that is not in the cache is one line: the download URLs
    are tried before pyserini's download, whose own messages and progress bar would tell the same failure in
    several lines. (``HF_HUB_OFFLINE`` is the Hugging Face hub's switch, not applied to Pyserini's hosts.)
    """
    if not _candidate(name) or importlib.util.find_spec("pyserini") is None:
        return None
    from rankkit.lexical.java import start_jvm

    start_jvm()
    from pyserini import prebuilt_index_info

    info = prebuilt_index_info.TF_INDEX_INFO.get(name)
    if info is None:
        return None
    with _stdout_to_stderr():
        import pyserini.util as util

        cached = _cached_index(util, name, info)
        if cached is not None:
            return cached
        where = f"{util.get_cache_home()}/indexes"
        _check_reachable(name, option, info, where)
        try:
            return Path(util.download_prebuilt_index(name, verbose=False))
        except Exception as err:  # pyserini raises ValueError/AssertionError/OSError on failed downloads
            detail = " ".join(str(err).split())[:200] or type(err).__name__
            raise RankkitError(f"{option} {name}: Pyserini's prebuilt index could not be downloaded into "
                               f"{where} ({detail})") from None


def _check_reachable(name: str, option: str, info: dict[str, object], where: str) -> None:
    """Refuse (one line) a download that cannot start: no URL of the index answers."""
    import urllib.error
    import urllib.request

    reasons = []
    for url in [str(u) for u in info.get("urls") or []]:  # type: ignore[attr-defined]
        request = urllib.request.Request(url, headers={"User-Agent": "Mozilla/5.0"})  # as pyserini's download
        try:
            with urllib.request.urlopen(request, timeout=30):  # headers only: the body is pyserini's to fetch
                return
        except urllib.error.HTTPError as err:
            reasons.append(f"HTTP {err.code} {err.reason}")
        except (urllib.error.URLError, OSError, ValueError) as err:
            reasons.append(" ".join(str(getattr(err, "reason", err)).split()) or type(err).__name__)
    if reasons:
        raise RankkitError(f"{option} {name}: Pyserini's prebuilt index is not in its cache ({where}) and cannot be "
                           f"downloaded ({reasons[0][:160]}); download it once online, or give a local index")


def _cached_index(util: object, name: str, info: dict[str, object]) -> Path | None:
    """Pyserini's unpacked copy of index ``name`` (``<cache>/indexes/<file>.<md5>``), if present."""
    urls = info.get("urls") or []
    if not isinstance(urls, list) or not urls:
        return None
    stem = re.sub(r"\.tar\.gz.*$", "", str(info.get("filename") or str(urls[0]).split("/")[-1]))
    folder = Path(util.get_cache_home()) / "indexes" / f"{stem}.{info.get('md5')}"  # type: ignore[attr-defined]
    return folder if folder.is_dir() else None


@contextlib.contextmanager
def _java_prints_dropped() -> Iterator[None]:
    """Anserini's downloads print "Downloading qrels from ..." with System.out.println: offline, a second line
    before rankkit's one-line error. Java's ``System.out`` is a null stream meanwhile (log4j keeps its own)."""
    from rankkit.lexical.java import autoclass

    system = autoclass("java.lang.System")
    before = system.out
    system.setOut(autoclass("java.io.PrintStream")(autoclass("java.io.OutputStream").nullOutputStream()))
    try:
        yield
    finally:
        system.setOut(before)


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """pyserini reports downloads with print(): keep rankkit's stdout for results."""
    with contextlib.redirect_stdout(sys.stderr):
        yield


def resolve(kind: str, name: str, option: str) -> Path | None:
    """A Pyserini name of ``kind`` (``topics``, ``qrels``, ``index``) as a local path, or None."""
    if kind == "index":
        return resolve_prebuilt_index(name, option)
    return resolve_topics_or_qrels(kind, name, option)


def translate(args: list[str]) -> list[str]:
    """``args`` with every Pyserini topics/qrels/index name replaced by its local path (module doc).
    ``rankkit index --index`` is an output and never translated."""
    command = next((a for a in args if not a.startswith("-")), None)
    out = list(args)
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        option = name if name in OPTIONS else None
        if option is None or (option == "--index" and command == "index"):
            continue
        if eq:
            found = resolve(OPTIONS[option], value, option)
            if found is not None:
                out[i] = f"{option}={found}"
        elif i + 1 < len(args) and not args[i + 1].startswith("-"):
            found = resolve(OPTIONS[option], args[i + 1], option)
            if found is not None:
                out[i + 1] = str(found)
    return out


__all__ = ["pyserini_tables", "resolve", "resolve_prebuilt_index", "resolve_topics_or_qrels", "translate"]
