"""Opening the ONNX scorer of a checkpoint (:mod:`rankkit.runtime.scorer`): its record found in the cache, or built
once, with torch (imported only then).

The model is loaded on ``--backend onnx`` (its checked fp32 export built or found in the cache,
:mod:`rankkit.runtime.export`), its tokenizer written as ``tokenizers`` JSON beside the record, and the
scorer's own tokenisation compared with the model's on the bundled DL20 queries and passages
(rankkit/runtime/calibration): a tokenizer the ``tokenizers`` library alone does not reproduce (a slow-only
tokenizer, extra Python-side processing) gets no record, and the command goes on through torch.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from rankkit.console import log
from rankkit.errors import EnvironmentFailure, RankkitError
from rankkit.files import atomic_write, file_sha256
from rankkit import devices
from rankkit.runtime.scorer import (
    PairTokenizer,
    ScorerRecord,
    ScorerSession,
    auto_reason,
    find_record,
    record_path,
    scorer_applies,
    scorer_key,
    write_record,
)
from rankkit.runtime.settings import Runtime

#: Calibration rows compared token by token (queries and passages of the bundled DL20 file).
CHECKED_ROWS = 64


def scorer_for(model: str, checkpoint: str | os.PathLike[str] | None, runtime: Any, device: str, *,
               settings: Mapping[str, Any], max_length: int | None = None, batch_size: int | None = None,
               max_tokens: int | None = None) -> ScorerSession | None:
    """``rankkit rerank``'s ONNX scorer for these options (:func:`rankkit.runtime.scorer.scorer_applies`; a hub id is
    its snapshot folder, downloaded if needed), or None: the torch path."""
    if checkpoint is None:
        return None
    from rankkit.hub import resolve_model

    folder = resolve_model(checkpoint).path
    if scorer_applies(model, folder, runtime, device) is not None:
        return None
    return open_scorer(model, folder, runtime, settings=settings, max_length=max_length, batch_size=batch_size,
                       max_tokens=max_tokens)


def declined_path(key: str) -> Path:
    """Where the reason the scorer cannot run a checkpoint is kept (so later runs go to torch at once)."""
    return record_path(key).with_suffix(".declined")


def open_scorer(model: str, checkpoint: str | os.PathLike[str], runtime: Any, *, settings: Mapping[str, Any],
                max_length: int | None = None, batch_size: int | None = None,
                max_tokens: int | None = None) -> ScorerSession | None:
    """The scorer session of ``checkpoint`` (its record found, or built once through torch), or None when the
    scorer cannot run it (the reason logged and remembered: the caller goes the torch way)."""
    key = scorer_key(checkpoint, model, settings, max_length)
    record = find_record(key)
    if record is None:
        declined = declined_path(key)
        if declined.is_file():
            return None
        try:
            record, why = build_record(model, checkpoint, key, settings=settings, max_length=max_length,
                                       threads=runtime.threads)
        except EnvironmentFailure:
            raise
        except RankkitError as err:
            if runtime.backend != "auto":
                raise  # the user's --backend onnx: its export's refusal is the answer (as through torch)
            # auto's first choice failed (an export that does not hold on another shape: BigBird's attention
            # switch): the next of auto's rows, through torch, as auto.choose does.
            record, why = None, f"--backend auto: not onnx fp32 ({err})"
        if record is None:
            log(f"the ONNX scorer does not run {checkpoint} ({why}); scoring through torch")
            with atomic_write(declined) as handle:
                handle.write(why + "\n")
            return None
    if runtime.backend == "auto":
        log(f"--backend auto: onnx fp32 ({auto_reason(devices.AUTO_MIN_PARAMETERS)})")
    return ScorerSession.of(record, threads=runtime.threads, batch_size=batch_size, max_tokens=max_tokens)


def build_record(name: str, checkpoint: str | os.PathLike[str], key: str, *, settings: Mapping[str, Any],
                 max_length: int | None, threads: int | None) -> tuple[ScorerRecord | None, str]:
    """The scorer record of ``checkpoint`` (written to the cache), or None and why the scorer cannot run it."""
    from rankkit.models.cross_encoders.pair_encoders import ClassifierPairEncoder
    from rankkit.runtime.compose import load_for_inference

    loaded = load_for_inference(name, checkpoint, Runtime("onnx", "none", threads, "fp32"), "cpu",
                                settings=settings)
    model = loaded.model
    if max_length is not None:
        model.set_max_length(max_length)
    pairs = getattr(model, "pairs", None)
    why = None
    if not isinstance(pairs, ClassifierPairEncoder) or pairs.labels != 1:
        why = "its head is not a one-label sequence classifier"
    elif pairs.truncation != "pair":
        why = "it cuts pairs its own way (lightning-ir truncation)"
    elif len(loaded.exports) != 1:
        why = "it runs more than one export"
    elif getattr(pairs.tokenizer, "backend_tokenizer", None) is None:
        why = "its tokenizer is not a fast (Rust) tokenizer"
    if why is not None:
        return None, why
    assert isinstance(pairs, ClassifierPairEncoder)
    tokenizer_file = record_path(key).with_suffix(".tokenizer.json")
    tokenizer_file.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(tokenizer_file) as handle:
        handle.write(pairs.tokenizer.backend_tokenizer.to_str())
    export = Path(loaded.exports[0])
    from rankkit.models.backbone import position_limit
    from rankkit.models.encoder_slots import hf_slot

    record = ScorerRecord(
        key=key, model=model.name, export=str(export), export_sha256=file_sha256(export),
        tokenizer=str(tokenizer_file), tokenizer_sha256=file_sha256(tokenizer_file),
        inputs=hf_slot(pairs).inputs, segments=bool(pairs._uses_segments),
        truncation_side=str(getattr(pairs.tokenizer, "truncation_side", "right")),
        head_ids=tuple(int(i) for i in pairs.head_ids), sep_id=int(pairs.tokenizer.sep_token_id),
        pad_id=int(pairs.tokenizer.pad_token_id or 0), max_query_length=int(pairs.max_query_length),
        max_length=int(pairs.max_length), position_limit=position_limit(getattr(pairs.encoder, "config", None)),
        path=str(record_path(key)))
    mismatch = _first_difference(record, pairs)
    if mismatch is not None:
        tokenizer_file.unlink(missing_ok=True)
        return None, f"the tokenizers library alone tokenises differently: {mismatch}"
    path = write_record(record)
    log(f"wrote the ONNX scorer record {path}: later runs of this checkpoint score without importing torch")
    return ScorerRecord.read(path), ""


def _first_difference(record: ScorerRecord, pairs: Any) -> str | None:
    """Where the scorer's pairs differ from the model's on the bundled DL20 texts (long passages too), or None."""
    from rankkit.runtime.openvino_backend import calibration_texts, check_texts

    rows = [r for r in calibration_texts() + check_texts() if len(r) == 2][:CHECKED_ROWS]
    queries, passages = [r[0] for r in rows], [r[1] for r in rows]
    ours = PairTokenizer(record).pair_rows(queries, passages)
    theirs = pairs.pair_tokens(queries, passages).data
    for row, (a, b) in enumerate(zip(ours, theirs)):
        if (list(a[0]), int(a[1])) != (list(b[0]), int(b[1])):
            return f"pair {row + 1} of the bundled check texts"
    return None if len(ours) == len(theirs) else "a different number of pairs"


__all__ = ["CHECKED_ROWS", "build_record", "declined_path", "open_scorer", "scorer_for"]
