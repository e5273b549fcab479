"""The export cache: where a checked export lives, its key, its record, and how a damaged one is found.

* Built once per encoder weights: the key is a SHA-256 of the encoder's tensors, its structure
  (transformers config or the model's settings) and :data:`EXPORT_VERSION`, so a changed
  checkpoint gets a new export and an unchanged one reuses the old;
* stored in the cache folder only (``$RANKKIT_CACHE_DIR`` or ``~/.cache/rankkit``, ``onnx/<key>/``),
  keyed by that content, never in the checkpoint's folder: a checkpoint is an input, possibly read-only,
  shared, or a folder whose ``onnx/`` is a link to someone else's files (earlier versions wrote
  ``CHECKPOINT/onnx/`` and removed stale exports there, through such a link too);
* written atomically (a temporary file renamed into place after the check) with a JSON record
  holding the file's SHA-256: a cached file that no longer matches it (truncated, edited) is
  reported and rebuilt, never loaded. Only regular files are ever removed from the cache, never
  through a link.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from rankkit.console import log
from rankkit.errors import RankkitError
from rankkit.files import atomic_write, file_sha256, scratch_path, user_cache_root, writing_to
from rankkit.files.limits import read_json

if TYPE_CHECKING:  # the cache's folders and records are read without torch (the ONNX scorer path, issue 39)
    from rankkit.models.encoder_slots import EncoderSlot

#: Bumped when the export procedure changes, so older cached exports are rebuilt.
EXPORT_VERSION = 2  # 2: transformers encoders exported with eager attention


def cache_root() -> Path:
    """rankkit's cache folder (:func:`rankkit.files.user_cache_root`)."""
    return user_cache_root()


def weights_key(slot: EncoderSlot) -> str:
    """SHA-256 (hex) of the encoder's tensors (names, dtypes, shapes, bytes), structure and export version."""
    import torch

    digest = hashlib.sha256(f"rankkit-onnx-{EXPORT_VERSION}\0{slot.call}\0{','.join(slot.inputs)}\0".encode())
    digest.update(slot.structure.encode("utf-8"))
    for name, tensor in sorted(slot.module.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        digest.update(f"\0{name}\0{t.dtype}\0{tuple(t.shape)}\0".encode())
        digest.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


def export_folder(checkpoint: str | os.PathLike[str] | None, key: str) -> Path:
    """``<cache>/onnx/<key[:16]>``: the export of these weights, wherever the checkpoint lives (``checkpoint``
    is not written to, whatever it is: the key already names its content)."""
    del checkpoint  # kept in the signature for the backends' callers; the content key decides
    return cache_root() / "onnx" / key[:16]


def _remove_file(path: Path) -> None:
    """Remove ``path`` when it is a regular file or a link (the link itself); never a folder, never through a link."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
        path.unlink(missing_ok=True)


def temporary_file(folder: Path, suffix: str) -> contextlib.AbstractContextManager[Path]:
    """A marked, locked temporary file in ``folder`` (same file system as the final name), removed on any
    exit and, after a SIGKILL, by the next export into ``folder``; a full disk while it is written is one
    line naming ``folder`` (:func:`rankkit.files.scratch_path`)."""
    return scratch_path(folder / "export", suffix, shown=folder)


@dataclass
class ExportRecord:
    """What was checked when an export was built (stored beside it as JSON)."""

    file: str
    sha256: str
    key: str
    quantize: str
    max_abs_diff: float  # fp32: against torch; int8: against the fp32 export
    cosine_min: float
    cosine_mean: float
    seconds: float
    bin_sha256: str | None = None  # OpenVINO IR: its weights file
    calibration: str | None = None  # static int8: the calibration set's checksum

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def export_names(slot: EncoderSlot, key: str, suffix: str) -> tuple[str, str]:
    """File names of an export of ``slot`` whose file ends in ``suffix`` (``.fp32.onnx``, ONNX Runtime's
    ``.int8.onnx``, OpenVINO's static int8 IR ``.ov-int8.xml`` + ``.bin``), and of its record ``.json``."""
    stem = f"{slot.name}-{key[:16]}{suffix.rsplit('.', 1)[0]}"
    return stem + "." + suffix.rsplit(".", 1)[1], stem + ".json"


def cached_export(folder: Path, slot: EncoderSlot, key: str, suffix: str,
                  problem_of: Callable[[dict[str, Any]], str | None] | None = None) -> Path | None:
    """The cached export when present and intact; a damaged one is reported and removed (rebuilt).
    ``problem_of(record)`` adds a backend's own test (a static int8 IR's calibration inputs)."""
    model_name, record_name = export_names(slot, key, suffix)
    path, record_path = folder / model_name, folder / record_name
    if not path.exists() and not record_path.exists():
        return None
    problem = None
    try:
        record = read_json(record_path, within=folder)  # bounded: a regular file of at most 8 MB, in the folder
        if record.get("key") != key:
            problem = "its record names other weights"
        elif not path.is_file():
            problem = "the .onnx file is missing"
        elif file_sha256(path) != record.get("sha256"):
            problem = "its checksum does not match (truncated or changed)"
        elif path.suffix == ".xml" and (not path.with_suffix(".bin").is_file()
                                        or file_sha256(path.with_suffix(".bin")) != record.get("bin_sha256")):
            problem = "its weights (.bin) are missing or do not match"
        elif problem_of is not None:
            problem = problem_of(record)
    except (OSError, ValueError, AttributeError, RankkitError):
        problem = "its record is missing or unreadable"
    if problem is None:
        return path
    log(f"cached export {path} is damaged ({problem}); rebuilding it")
    _remove_file(path)
    if path.suffix == ".xml":
        _remove_file(path.with_suffix(".bin"))
    _remove_file(record_path)
    return None


def remove_stale(folder: Path, slot: EncoderSlot, key: str) -> None:
    """Exports of this slot made from other weights (a re-trained checkpoint) are deleted."""
    for old in folder.glob(f"{slot.name}-*.*"):
        if old.name.startswith(f"{slot.name}-{key[:16]}."):
            continue
        if old.suffix in (".onnx", ".json", ".xml", ".bin"):
            _remove_file(old)


def commit_export(tmp: Path, folder: Path, name: str, record: ExportRecord, record_name: str) -> Path:
    """Move a checked export into place, then its record (the record's presence marks it complete)."""
    final = folder / name
    with writing_to(folder, folder, owned=[tmp, final]):
        os.replace(tmp, final)
    with atomic_write(folder / record_name) as handle:
        handle.write(json.dumps(record.to_dict(), indent=2, sort_keys=True) + "\n")
    return final


__all__ = ["EXPORT_VERSION", "ExportRecord", "cache_root", "cached_export", "commit_export", "export_folder",
           "export_names", "file_sha256", "remove_stale", "temporary_file", "weights_key"]
