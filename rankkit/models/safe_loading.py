"""Checks made before a checkpoint or model folder written by someone else is trusted.

What ``--checkpoint ORG/NAME`` or ``--backbone FOLDER`` may bring is read with bounds, and the model
it describes is measured before a byte of it is allocated:

* **Files**: every file rankkit or transformers reads from the folder must be a regular file inside
  it (a link to ``/dev/zero``, a FIFO or a file outside the folder is refused), settings files of at
  most :data:`~rankkit.files.limits.CONFIG_BYTES` nested at most
  :data:`~rankkit.files.limits.MAX_DEPTH` levels (:mod:`rankkit.files.limits`).
* **Weights**: each safetensors header is read (at most :data:`SAFETENSORS_HEADER_BYTES`) and checked
  against the file: every tensor's byte range must lie inside the file and match its dtype and
  shape. The header gives the honest size of the model: its number of weights.
* **Size**: the parameters a ``config.json`` implies (:func:`config_parameters`, a lower bound from
  the vocabulary, width, depth and feed-forward sizes) may not exceed what the weights hold
  (:data:`SIZE_SLACK`); ``RANKKIT_MAX_MODEL_SIZE`` (e.g. ``2G``) caps the weights' own size. A rankkit
  checkpoint is then built once on PyTorch's meta device (:func:`dry_run`: shapes, no memory), so
  a setting in rankkit.json that would build a larger network than the weights (a 10^9-wide head)
  is refused by the strict weight check before anything is allocated.
* **Code**: a ``config.json`` or ``tokenizer_config.json`` with ``auto_map`` (code shipped with the
  checkpoint, run by ``trust_remote_code``), a ``model_type`` transformers does not know, and
  sentence-transformers modules outside :data:`ST_MODULES` are refused; rankkit never imports
  anything a checkpoint names, and passes ``trust_remote_code=False`` to transformers.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

import torch

from rankkit.errors import InputError, RankkitError, excerpt
from rankkit.files.limits import CONFIG_BYTES, TOKENIZER_BYTES, check_regular, loads_json, read_json, size_text

T = TypeVar("T")

#: Largest safetensors header read (the safetensors library's own limit).
SAFETENSORS_HEADER_BYTES = 100 << 20
#: A config may imply this many more parameters than its weights hold (the estimate is a lower
#: bound; the slack only absorbs layouts it reads imperfectly).
SIZE_SLACK = 1.5
#: Largest value accepted for a size in a config (vocabulary, width, depth): 2^31 - 1, a C int.
MAX_CONFIG_INT = 2**31 - 1
#: Environment variable capping the bytes of a model's weights (``500M``, ``4G``; unset: no cap).
MAX_MODEL_SIZE_ENV = "RANKKIT_MAX_MODEL_SIZE"
#: sentence-transformers modules rankkit reads (it computes them itself; it never imports a module class).
ST_MODULES = frozenset({"Transformer", "Pooling", "Normalize", "Dense", "LayerNorm", "Dropout", "WordEmbeddings",
                        "StaticEmbedding", "CNN", "LSTM", "WeightedLayerPooling", "WordWeights", "BoW", "Router",
                        "Asym", "CLIPModel"})

#: Files of a model folder read by rankkit or by transformers' loaders, with their size limits.
SETTINGS_FILES = ("config.json", "rankkit.json", "modules.json", "tokenizer_config.json", "special_tokens_map.json",
                  "generation_config.json", "config_sentence_transformers.json", "sentence_bert_config.json",
                  "added_tokens.json", "preprocessor_config.json", "trainer_state.json", "model.safetensors.index.json")
#: The index of a sharded checkpoint: its ``weight_map`` names the shard files transformers opens.
SHARD_INDEX = "model.safetensors.index.json"
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "merges.txt", "spiece.model",
                   "sentencepiece.bpe.model", "tokenizer.model", "bpe.codes")

_DTYPE_BITS = {"BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "I16": 16, "U16": 16, "F16": 16,
               "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "I64": 64, "U64": 64, "F64": 64, "C64": 64, "F4": 4,
               "F6_E2M3": 6, "F6_E3M2": 6}
_META_DTYPES = {"BOOL": torch.bool, "U8": torch.uint8, "I8": torch.int8, "I16": torch.int16, "F16": torch.float16,
                "BF16": torch.bfloat16, "I32": torch.int32, "F32": torch.float32, "I64": torch.int64,
                "F64": torch.float64}


# -- files ------------------------------------------------------------------------------------------

def check_files(folder: Path) -> None:
    """Refuse a folder any of whose files a loader may open is a link outside it, a device, a FIFO or too large.

    Every file at the top of the folder (not only the names rankkit knows: transformers opens what a
    config names), the shards a sharded checkpoint's index names, the files a tokenizer config names
    (``vocab_file``, ``tokenizer_file``, ...) and the sentence-transformers module configs.
    """
    try:
        names = sorted(entry.name for entry in os.scandir(folder))
    except OSError as err:
        raise InputError(folder, None, f"cannot list the model folder: {err.strerror or err}") from None
    for name in names:
        path = folder / name
        known = name in SETTINGS_FILES or name in TOKENIZER_FILES or name.endswith(".safetensors")
        if name.startswith(".") or os.path.isdir(path) or not (known or os.path.exists(path)):
            continue  # hidden files and folders are no loader's; a dangling link of no loader's name is harmless
        limit = CONFIG_BYTES if name in SETTINGS_FILES else TOKENIZER_BYTES if name in TOKENIZER_FILES else None
        check_regular(path, within=folder, limit=limit)
    for path in sorted(folder.glob("*/config.json")):  # sentence-transformers module folders
        check_regular(path, within=folder, limit=CONFIG_BYTES)
    _check_shards(folder)
    _check_named_files(folder)


def _check_shards(folder: Path) -> None:
    """Every shard a ``model.safetensors.index.json`` names: a regular file inside the folder (a FIFO
    named there would block the loader forever; a link outside would load another model)."""
    index = folder / SHARD_INDEX
    if not os.path.lexists(index):
        return
    data = read_settings(index, folder)
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise InputError(index, None, "not a sharded-checkpoint index: expected a 'weight_map' of tensor names to "
                                      "file names")
    for name in sorted(set(weight_map.values())):
        if not name or os.path.isabs(name) or not name.endswith(".safetensors"):
            raise InputError(index, None, f"names the shard {excerpt(name)}, not a .safetensors file of the folder")
        check_regular(folder / name, within=folder)


def _check_named_files(folder: Path) -> None:
    """Files a tokenizer config names (``vocab_file``, ``tokenizer_file``, ``merges_file``, ...): when they
    exist they must be regular files inside the folder (a name that exists nowhere is ignored by the
    loaders, as on the machine that wrote it)."""
    for settings_name in ("tokenizer_config.json", "special_tokens_map.json"):
        path = folder / settings_name
        if not os.path.isfile(path):
            continue
        settings = read_settings(path, folder)
        if not isinstance(settings, dict):
            continue
        for key, value in sorted(settings.items()):
            if not key.endswith("_file") or not isinstance(value, str) or not value:
                continue
            named = Path(value) if os.path.isabs(value) else folder / value
            if os.path.lexists(named):
                try:
                    check_regular(named, within=folder, limit=TOKENIZER_BYTES)
                except InputError as err:
                    raise InputError(path, None, f"{key} names {excerpt(value)}: {err.problem}") from None


def read_settings(path: Path, folder: Path | None = None) -> Any:
    """A settings JSON file of a model folder, read within the size and nesting limits."""
    return read_json(path, within=folder if folder is not None else path.parent)


# -- safetensors -----------------------------------------------------------------------------------

def safetensors_header(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The header of a safetensors file, checked against the file (see the module docstring)."""
    file = Path(path)
    size = check_regular(file)
    try:
        with open(file, "rb") as handle:
            head = handle.read(8)
            if len(head) < 8:
                raise InputError(file, None, f"not a safetensors file: {size} bytes, shorter than its header")
            length = int.from_bytes(head, "little")
            if length > min(SAFETENSORS_HEADER_BYTES, size - 8):
                raise InputError(file, None, f"not a readable safetensors file: its header claims {size_text(length)} "
                                             f"in a {size_text(size)} file")
            raw = handle.read(length)
    except OSError as err:
        raise InputError(file, None, f"cannot read: {err.strerror or err}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(file, None, "not a readable safetensors file: its header is not UTF-8 JSON") from None
    header = loads_json(file, text, depth=4)
    if not isinstance(header, dict):
        raise InputError(file, None, "not a readable safetensors file: its header is not a JSON object")
    data = size - 8 - length
    for name, info in header.items():
        if name == "__metadata__":
            continue
        _check_tensor(file, name, info, data)
    return header


def _check_tensor(file: Path, name: str, info: Any, data: int) -> None:
    shown = name if len(name) <= 60 else name[:57] + "..."

    def bad(problem: str) -> InputError:
        return InputError(file, None, f"not a readable safetensors file: tensor {shown!r} {problem}")

    if not isinstance(info, dict):
        raise bad("has no description")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(shape, list) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise bad("has no valid shape")
    if (not isinstance(offsets, list) or len(offsets) != 2
            or not all(isinstance(n, int) and not isinstance(n, bool) for n in offsets)):
        raise bad("has no valid byte range")
    begin, end = offsets
    if not 0 <= begin <= end <= data:
        raise bad(f"claims bytes {begin:,} to {end:,} ({size_text(max(end - begin, 0))}) of a file holding "
                  f"{size_text(data)} of data")
    bits = _DTYPE_BITS.get(str(dtype))
    if bits is not None and (math.prod(shape) * bits + 7) // 8 != end - begin:
        raise bad(f"of shape {shape} and dtype {dtype} does not fill its {end - begin:,} bytes")


def weight_count(header: Mapping[str, Any]) -> int:
    """The number of weights a (checked) safetensors header describes."""
    return sum(math.prod(info["shape"]) for name, info in header.items() if name != "__metadata__")


def meta_tensors(header: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """The tensors of a header as shapes on the meta device (a dry run's weights: no bytes read)."""
    return {name: torch.empty(info["shape"], dtype=_META_DTYPES.get(info["dtype"], torch.float32), device="meta")
            for name, info in header.items() if name != "__metadata__"}


def folder_weights(folder: Path) -> tuple[int, int]:
    """``(weights, bytes)`` of every safetensors file of a folder (headers checked)."""
    count = size = 0
    for path in sorted(folder.glob("*.safetensors")):
        count += weight_count(safetensors_header(path))
        size += path.stat().st_size
    return count, size


# -- the model's size ------------------------------------------------------------------------------

def _size(config: Mapping[str, Any], source: Path, *names: str) -> int | None:
    for name in names:
        if name not in config or config[name] is None:
            continue
        value = config[name]
        whole = isinstance(value, int) or isinstance(value, float) and math.isfinite(value) and value.is_integer()
        if isinstance(value, bool) or not whole or not 0 <= value <= MAX_CONFIG_INT:
            shown = repr(value)
            raise InputError(source, None, f"{name} = {shown[:40]} is not a size (a whole number from 0 to "
                                           f"{MAX_CONFIG_INT:,})")
        return int(value)
    return None


#: Model types whose position embeddings are a learned table of ``max_position_embeddings`` rows (and
#: segment embeddings of ``type_vocab_size``); rotary or relative ones (ModernBERT, DeBERTa) have none.
ABSOLUTE_POSITION_TYPES = frozenset({"bert", "roberta", "xlm-roberta", "electra", "distilbert", "albert", "camembert",
                                     "ernie", "mpnet", "big_bird", "data2vec-text", "longformer", "xlm-roberta-xl"})


def config_parameters(config: Mapping[str, Any], source: Path) -> int:
    """A lower bound on the parameters a transformer config (or DenseTrans' config) builds.

    Token embeddings (vocabulary x embedding width), learned position and segment tables of the model
    types that have them (:data:`ABSOLUTE_POSITION_TYPES`), plus, per distinct layer, the query and
    output projections (2 x width^2) and the feed-forward block (2 x width x inner width); biases
    and norms are left out, so real models always hold more.
    """
    merged = dict(config)
    model_type = merged.get("model_type")
    if isinstance(model_type, str):
        try:
            from transformers import AutoConfig

            defaults = AutoConfig.for_model(model_type).to_dict()
        except (ValueError, KeyError, TypeError):
            defaults = {}
        merged = {**defaults, **merged}
    hidden = _size(merged, source, "hidden_size", "d_model", "dim", "n_embd")
    if hidden is None:
        return 0
    vocab = _size(merged, source, "vocab_size") or 0
    embedding = _size(merged, source, "embedding_size") or hidden
    layers = _size(merged, source, "num_hidden_layers", "num_layers", "n_layers", "n_layer", "encoder_layers") or 0
    groups = _size(merged, source, "num_hidden_groups")  # ALBERT shares its layers among this many groups
    if groups is not None and merged.get("model_type") == "albert":
        layers = min(layers, groups)
    inner = _size(merged, source, "intermediate_size", "d_ff", "ffn_dim", "encoder_ffn_dim", "n_inner", "hidden_dim")
    if inner is None:
        multiplier = _size(merged, source, "ffn_multiplier")
        inner = hidden * multiplier if multiplier is not None else 0
    tables = 0
    if merged.get("model_type") in ABSOLUTE_POSITION_TYPES and merged.get("position_embedding_type", "absolute") == "absolute":
        # Learned position and segment tables (10^9 positions would be allocated before any weight is read).
        tables = ((_size(merged, source, "max_position_embeddings") or 0)
                  + (_size(merged, source, "type_vocab_size") or 0)) * embedding
    return vocab * embedding + tables + layers * (2 * hidden * hidden + 2 * hidden * inner)


def max_model_bytes() -> int | None:
    """``RANKKIT_MAX_MODEL_SIZE`` in bytes (``500M``, ``4G``, ``1.5G``, plain bytes), or None when unset."""
    text = os.environ.get(MAX_MODEL_SIZE_ENV, "").strip()
    if not text:
        return None
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)B?", text, re.IGNORECASE)
    if match is None:
        raise RankkitError(f"{MAX_MODEL_SIZE_ENV}={text!r} is not a size (e.g. 500M, 4G)")
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[match.group(2).upper()]
    return int(float(match.group(1)) * scale)


def check_size(folder: Path, config: Mapping[str, Any], source: Path) -> None:
    """Refuse a config implying more parameters than the folder's weights hold, or weights over the cap."""
    weights, size = folder_weights(folder)
    cap = max_model_bytes()
    if cap is not None and size > cap:
        raise RankkitError(f"{folder}: its weights take {size_text(size)}, over {MAX_MODEL_SIZE_ENV}={size_text(cap)}")
    implied = config_parameters(config, source)
    if weights and implied > SIZE_SLACK * weights + (1 << 20):
        raise InputError(source, None, f"describes a model of at least {implied:,} parameters, but its weights hold "
                                       f"{weights:,}; refusing to build it")
    if cap is not None and 4 * implied > cap:
        raise InputError(source, None, f"describes a model of at least {size_text(4 * implied)} (float32), over "
                                       f"{MAX_MODEL_SIZE_ENV}={size_text(cap)}")


# -- code ------------------------------------------------------------------------------------------

def _refuse_auto_map(source: Path) -> InputError:
    return InputError(source, None, "names its own Python code (auto_map); rankkit never runs code from a "
                                    "checkpoint (trust_remote_code)")


def check_no_code(folder: Path, config: Mapping[str, Any], *, known_type: bool = True) -> None:
    """Refuse configs that ask for code shipped with the checkpoint (``auto_map`` in config.json or
    tokenizer_config.json), or, with ``known_type``, a model type transformers lacks."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    source = folder / "config.json"
    if "auto_map" in config:
        raise _refuse_auto_map(source)
    model_type = config.get("model_type")
    if known_type and isinstance(model_type, str) and model_type not in CONFIG_MAPPING_NAMES:
        raise InputError(source, None, f"model_type {model_type[:40]!r} is not one transformers knows; rankkit "
                                       "never runs code from a checkpoint (trust_remote_code)")
    tokenizer_config = folder / "tokenizer_config.json"
    if tokenizer_config.is_file():
        settings = read_settings(tokenizer_config, folder)
        if isinstance(settings, dict) and "auto_map" in settings:
            raise _refuse_auto_map(tokenizer_config)


def check_sentence_transformers_modules(folder: Path, entries: list[Any]) -> None:
    """Refuse a modules.json naming a module class outside sentence-transformers' own (:data:`ST_MODULES`)."""
    for entry in entries:
        kind = str(entry.get("type", "")) if isinstance(entry, dict) else ""
        base = kind.rsplit(".", 1)[-1]
        if not kind.startswith("sentence_transformers.") or base not in ST_MODULES:
            raise InputError(folder / "modules.json", None, f"names the module class {kind[:80]!r}, not one of "
                                                            "sentence-transformers' own; rankkit never imports "
                                                            "code a checkpoint names")


# -- entry points ----------------------------------------------------------------------------------

#: The kinds of model folder :func:`check_model_folder` knows: how each nests the encoder's config.
FOLDER_KINDS = ("rankkit", "hf", "lightning-ir")


def check_model_folder(folder: Path, kind: str) -> None:
    """The one check every model folder passes before anything of it is built, whatever wrote it.

    ``kind``: ``rankkit`` (a rankkit.json checkpoint, a plug-in's included: the encoder's config may be
    nested as ``encoder_config``), ``hf`` (a Hugging Face or sentence-transformers folder: a backbone, a
    zero-shot checkpoint) or ``lightning-ir`` (the backbone's settings beside lightning-ir's own, the
    backbone's type in ``backbone_model_type``). Files (:func:`check_files`), remote code, the size the
    config implies against the weights (:func:`check_size`) and sentence-transformers modules are checked
    alike for all of them.
    """
    if kind not in FOLDER_KINDS:
        raise ValueError(f"unknown model folder kind {kind!r}")
    check_files(folder)
    config_path = folder / "config.json"
    if not config_path.is_file():
        if kind == "rankkit":  # a plug-in model may keep its settings in rankkit.json alone
            check_no_code(folder, {}, known_type=False)
            return
        raise InputError(folder, None, "not a Hugging Face model folder (no config.json)")
    config = read_settings(config_path, folder)
    if not isinstance(config, dict):
        raise InputError(config_path, None, "expected a JSON object")
    inner: Mapping[str, Any] = config
    if kind == "rankkit":
        encoder = config.get("encoder_config")  # rankkit's encoder + head models nest the encoder's config
        if isinstance(encoder, dict):
            if "auto_map" in encoder:
                raise _refuse_auto_map(config_path)
            inner = encoder
    elif kind == "lightning-ir":  # sizes read with the backbone's defaults, not those of lightning-ir's type
        inner = {**config, "model_type": config.get("backbone_model_type")}
    check_no_code(folder, config, known_type=kind == "hf")
    check_size(folder, inner, config_path)
    modules = folder / "modules.json"
    if modules.is_file():
        entries = read_settings(modules, folder)
        if isinstance(entries, list):
            check_sentence_transformers_modules(folder, entries)


def check_hf_folder(folder: Path) -> None:
    """:func:`check_model_folder` of a Hugging Face model folder (a backbone, a zero-shot checkpoint)."""
    check_model_folder(folder, "hf")


def check_checkpoint(folder: Path) -> None:
    """:func:`check_model_folder` of a rankkit checkpoint folder (before its model is built)."""
    check_model_folder(folder, "rankkit")


def check_lightning_ir(folder: Path) -> None:
    """:func:`check_model_folder` of a folder lightning-ir saved."""
    check_model_folder(folder, "lightning-ir")


class _NoDryRun(Exception):
    """Raised inside :func:`dry_run` by a builder that cannot run on the meta device."""


def no_dry_run() -> None:
    """Stop a :func:`dry_run` here (called by builders that need real memory, e.g. ``from_pretrained``)."""
    if torch.get_default_device().type == "meta":
        raise _NoDryRun


def dry_run(build: Callable[[], T]) -> None:
    """Build a model on PyTorch's meta device (shapes only, no memory) to let its strict weight check
    refuse a network larger than its weights before the real build allocates it.

    Builders that cannot run on the meta device (transformers' ``from_pretrained``) are skipped:
    their folders were measured by :func:`check_hf_folder`.
    """
    try:
        with torch.device("meta"):
            build()
    except _NoDryRun:
        return
    except (RankkitError, MemoryError):
        raise
    except Exception:  # noqa: BLE001 - the meta device is unsupported by this builder; the real build decides
        return


__all__ = ["FOLDER_KINDS", "MAX_MODEL_SIZE_ENV", "SAFETENSORS_HEADER_BYTES", "ST_MODULES", "check_checkpoint",
           "check_files", "check_hf_folder", "check_lightning_ir", "check_model_folder", "check_no_code",
           "check_sentence_transformers_modules", "check_size", "config_parameters", "dry_run", "folder_weights",
           "max_model_bytes", "meta_tensors", "no_dry_run", "read_settings", "safetensors_header", "weight_count"]
