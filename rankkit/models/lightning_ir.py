"""lightning-ir checkpoints both ways: ``set-encoder`` and ``mono`` folders read as rankkit models, and written.

lightning-ir (Schlatt et al., the Set-Encoder's home) saves a cross-encoder as a Hugging Face folder
whose ``config.json`` has ``model_type`` ``set-encoder`` or ``mono``, the backbone's settings and
``backbone_model_type`` (``bert``, ``electra``), whose ``model.safetensors`` holds the backbone's
weights under their own names (no pooler) plus ``linear.weight`` (and ``linear.bias`` with
``linear_bias``), and whose tokenizer files name ``backbone_tokenizer_class``. Its scoring, as of
lightning-ir 0.0.6 (``models/cross_encoders/mono.py`` and ``set_encoder.py``):

* ``mono``: ``linear(h_[CLS])`` of ``[CLS] q [SEP] d [SEP]`` (``pooling_strategy`` ``first``,
  ``scoring_strategy`` ``rank``), i.e. rankkit's ``mono --rankkit-head`` with a linear head;
* ``set-encoder``: the same on an encoder whose every token also attends to the other passages'
  position-0 token ([CLS]), or, with ``add_extra_token``, to an extra ``[INT]`` token at position 1
  (``[CLS] [INT] q [SEP] d [SEP]``): rankkit's ``set-encoder`` with ``--interaction-token int``;
* both cut the query to ``query_length`` and the passage to ``doc_length`` tokens separately,
  decoding and re-encoding the cuts: rankkit's ``--truncation lightning-ir``.

``sample_missing_docs`` (lightning-ir's default) pads a list shorter than ``depth`` with vectors
drawn at random from the list's mean and standard deviation, so its scores of a short list change
from call to call; rankkit scores the list as it is (what lightning-ir gives with the option off)
and uses ``depth`` as the largest set scored together. Anything else (other poolings, two-class
``mono`` scoring, T5 backbones, adapters) is refused in one line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from rankkit.errors import InputError, RankkitError, excerpt
from rankkit.files.limits import read_json
from rankkit.models import backbone as bb
from rankkit.models import safe_loading
from rankkit.models.config import MAX_INT_SETTING
from rankkit.models.base import RankingModel

#: lightning-ir model types rankkit reads, and the rankkit model each becomes (``cross-encoder`` is the
#: older name of ``mono``, e.g. webis/monoelectra-base: a linear layer on the pooled [CLS]).
MODEL_TYPES = {"set-encoder": "set-encoder", "mono": "mono", "cross-encoder": "mono"}
#: Backbones whose lightning-ir cross-encoders rankkit rebuilds (the Set-Encoder supports these two in lightning-ir).
BACKBONES = ("bert", "electra")
#: Tokenizer classes a lightning-ir folder may name (``backbone_tokenizer_class``); never imported by name otherwise.
TOKENIZER_CLASSES = ("BertTokenizer", "BertTokenizerFast", "ElectraTokenizer", "ElectraTokenizerFast")
#: lightning-ir's own config keys (not the backbone's).
OWN_KEYS = ("query_length", "doc_length", "pooling_strategy", "linear_bias", "scoring_strategy", "tokenizer_pattern",
            "depth", "add_extra_token", "sample_missing_docs", "backbone_model_type", "use_adapter", "adapter_config",
            "pretrained_adapter_name_or_path", "_bert_pool", "architectures", "model_type", "transformers_version",
            "dtype", "torch_dtype", "_name_or_path")


def read_config(folder: str | Path) -> dict[str, Any] | None:
    """The config.json of a lightning-ir cross-encoder folder, or None for any other folder."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        return None
    config = read_json(path, within=folder)  # bounded: a hostile config.json is one line, not a RecursionError
    if isinstance(config, dict) and "backbone_model_type" in config and "query_length" in config:
        return config
    return None


def is_lightning_ir(folder: str | Path) -> bool:
    """True when ``folder`` holds a checkpoint saved by lightning-ir."""
    return read_config(folder) is not None


def load(folder: str | Path, expect: str) -> RankingModel:
    """The rankkit ``expect`` model (``set-encoder`` or ``mono``) of a lightning-ir folder, ready to score."""
    from rankkit.models.registry import get_model_class

    path = Path(folder)
    config = read_config(path)
    if config is None:
        raise InputError(path, None, "not a lightning-ir checkpoint (config.json has no backbone_model_type)")
    kind = str(config.get("model_type"))
    if kind not in MODEL_TYPES:
        raise InputError(path, None, f"lightning-ir model type {excerpt(kind)} is not one rankkit reads "
                                     f"({', '.join(MODEL_TYPES)})")
    if MODEL_TYPES[kind] != expect:
        raise RankkitError(f"{path} is a lightning-ir {kind} checkpoint: re-rank it with --model {MODEL_TYPES[kind]}, "
                           f"not {expect}")
    _check_supported(path, config)
    # The same checks as every other model folder (files inside it and regular, the size its config implies
    # against its weights, no remote code), before anything is built.
    safe_loading.check_lightning_ir(path)
    cls = get_model_class(expect)
    source = path / "config.json"
    settings: dict[str, Any] = {"max_query_length": _whole(config, "query_length", source),
                                "max_doc_length": _whole(config, "doc_length", source), "truncation": "lightning-ir",
                                "encoder": "cross", "hidden": 0}
    if kind == "set-encoder":
        settings["interaction_token"] = "int" if _flag(config, "add_extra_token", source) else "cls"
        depth = config.get("depth")
        settings["max_set_size"] = _whole(config, "depth", source) if depth is not None else 100
    else:
        settings["hf_head"] = False
    _flag(config, "sample_missing_docs", source)
    try:
        rankkit_config = cls.config_class.build(settings, expect)
    except RankkitError as err:  # a value in range for lightning-ir but not for rankkit's model
        raise InputError(source, None, str(err)) from None
    rankkit_config.backbone = str(config.get("_name_or_path") or path.name)
    encoder = _backbone(path, config)
    model = cls(encoder, _tokenizer(path), rankkit_config)  # type: ignore[call-arg]
    weights = path / "model.safetensors"
    bb.load_weights(model, _rankkit_state(model, bb.read_safetensors(weights), weights, config), weights, expect)
    model.eval()
    return model


def _whole(config: dict[str, Any], key: str, source: Path) -> int:
    """``config[key]`` as a token count: a JSON integer (not a boolean, not a string) from 1 to 2^20."""
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_INT_SETTING:
        raise InputError(source, None, f"{key} = {excerpt(value)} is not a whole number from 1 to {MAX_INT_SETTING:,}")
    return value


def _flag(config: dict[str, Any], key: str, source: Path) -> bool:
    """``config[key]`` as a switch: true, false or absent (null)."""
    value = config.get(key)
    if value is not None and not isinstance(value, bool):
        raise InputError(source, None, f"{key} = {excerpt(value)} is not true or false")
    return bool(value)


def _check_supported(path: Path, config: dict[str, Any]) -> None:
    source = path / "config.json"
    for key in ("backbone_model_type", "pooling_strategy", "scoring_strategy"):
        if config.get(key) is not None and not isinstance(config.get(key), str):
            raise InputError(source, None, f"{key} = {excerpt(config.get(key))} is not a name")
    for key in ("use_adapter", "linear_bias", "_bert_pool"):
        _flag(config, key, source)
    problems = []
    if config.get("backbone_model_type") not in BACKBONES:
        problems.append(f"backbone {excerpt(config.get('backbone_model_type'))} (rankkit reads {', '.join(BACKBONES)})")
    if config.get("pooling_strategy", "first") != "first" or config.get("_bert_pool"):
        problems.append(f"pooling {excerpt(config.get('pooling_strategy'))} (rankkit reads first: the [CLS] vector)")
    if config.get("scoring_strategy", "rank") != "rank":
        problems.append(f"scoring {excerpt(config.get('scoring_strategy'))} (rankkit reads rank: one linear score)")
    if config.get("use_adapter"):
        problems.append("adapters")
    if problems:
        raise InputError(path, None, "a lightning-ir checkpoint rankkit cannot rebuild exactly: " + "; ".join(problems))


def _backbone(path: Path, config: dict[str, Any]) -> Any:
    """The backbone built from the config's backbone settings (no weights yet, no pooler: lightning-ir has none)."""
    from transformers import AutoConfig, AutoModel

    backbone = {k: v for k, v in config.items() if k not in OWN_KEYS}
    try:
        encoder_config = AutoConfig.for_model(str(config["backbone_model_type"]), **backbone)
        encoder = AutoModel.from_config(encoder_config)
    except (RankkitError, MemoryError):
        raise
    except Exception as err:  # noqa: BLE001 - any setting transformers cannot build from (its sizes were checked)
        raise InputError(path / "config.json", None, f"cannot build the {config.get('backbone_model_type')} backbone: "
                                                     f"{' '.join(str(err).split())[:200]}") from None
    if getattr(encoder, "pooler", None) is not None:
        encoder.pooler = None  # BertModel(add_pooling_layer=False), as lightning-ir builds it
    return encoder


def _tokenizer(path: Path) -> Any:
    """The backbone's tokenizer class named in tokenizer_config.json (an allow-listed transformers class)."""
    config_path = path / "tokenizer_config.json"
    found = read_json(config_path, within=path) if config_path.is_file() else None
    name = found.get("backbone_tokenizer_class") if isinstance(found, dict) else None
    if name is None:
        return bb.load_tokenizer(path)
    if name not in TOKENIZER_CLASSES:
        raise InputError(config_path, None, f"tokenizer class {excerpt(name)} is not one rankkit loads "
                                            f"({', '.join(TOKENIZER_CLASSES)})")
    return bb.load_tokenizer(path, str(name))  # checked like every tokenizer: a real vocabulary the model fits


def _rankkit_state(model: RankingModel, state: dict[str, torch.Tensor], weights: Path,
                   config: dict[str, Any]) -> dict[str, torch.Tensor]:
    """lightning-ir's tensor names mapped onto rankkit's: backbone ``X`` -> ``pairs.encoder.X``, ``linear`` -> ``head``."""
    own = model.state_dict()
    out: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        if name.startswith("linear."):
            out["head." + name[len("linear."):]] = tensor
        else:
            out["pairs.encoder." + name] = tensor
    if "head.bias" in own and "head.bias" not in out:
        if config.get("linear_bias"):
            raise InputError(weights, None, "linear_bias is set but the weights have no linear.bias")
        out["head.bias"] = torch.zeros_like(own["head.bias"])
    out.setdefault("skip_weight", own["skip_weight"])  # 0 for a cross-encoder: no cosine skip
    return out


def exportable(model: RankingModel) -> bool:
    """True when :func:`save` can write ``model`` (a set-encoder, or mono with a linear head on [CLS], on BERT or ELECTRA)."""
    try:
        _check_exportable(model)
    except RankkitError:
        return False
    return True


def _check_exportable(model: RankingModel) -> Any:
    from rankkit.models.cross_encoders.mono import Mono
    from rankkit.models.cross_encoders.pair_encoders import ClassifierPairEncoder, CrossPairEncoder

    if isinstance(model, Mono) and isinstance(model.pairs, ClassifierPairEncoder):
        head = type(model.pairs.encoder).__name__
        raise RankkitError(f"this mono scores with its backbone's own classification head ({head}: --hf-head, the "
                           "default of rankkit train --model mono), which passes [CLS] through the backbone's pooler or "
                           "a hidden layer before its linear layer; lightning-ir's mono is one linear layer on the raw "
                           "[CLS], so it cannot hold this head exactly: train with --rankkit-head (--encoder cross "
                           "--hidden 0) for a mono that exports")
    if not isinstance(model, Mono) or not isinstance(model.pairs, CrossPairEncoder) \
            or isinstance(model.pairs, ClassifierPairEncoder) or not isinstance(model.head, torch.nn.Linear):
        raise RankkitError(f"lightning-ir export takes a set-encoder or a mono --rankkit-head model with a linear head "
                           f"(--encoder cross --hidden 0), not this {model.name}")
    encoder = model.pairs.encoder
    if str(encoder.config.model_type) not in BACKBONES:
        raise RankkitError(f"lightning-ir rebuilds set-encoder and mono models on {', '.join(BACKBONES)}, "
                           f"not {encoder.config.model_type}")
    return encoder


def save(model: RankingModel, folder: str | Path) -> Path:
    """Write ``model`` (``set-encoder``, or ``mono --rankkit-head`` with a linear head, on a BERT or ELECTRA
    encoder) as a lightning-ir folder that ``lightning_ir.CrossEncoderModule(model_name_or_path=folder)`` loads.

    ``sample_missing_docs`` is written off, so lightning-ir scores a short list as rankkit does; a
    model trained with ``--truncation pair`` keeps rankkit's limits as lightning-ir's
    ``query_length``/``doc_length`` (equal scores where no passage is cut: say so to the user).
    """
    from rankkit.models.cross_encoders.candidate_list import CandidateListConfig
    from rankkit.models.cross_encoders.set_encoder import SetEncoder

    from rankkit.models.cross_encoders.mono import Mono

    encoder = _check_exportable(model)
    assert isinstance(model, Mono) and isinstance(model.head, torch.nn.Linear)  # checked just above
    backbone_type = str(encoder.config.model_type)
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    config = model.config
    assert isinstance(config, CandidateListConfig)
    kind = "set-encoder" if isinstance(model, SetEncoder) else "mono"
    head = model.head
    settings: dict[str, Any] = {
        **{k: v for k, v in encoder.config.to_dict().items() if k not in OWN_KEYS},
        "model_type": kind, "architectures": [f"{'SetEncoder' if kind == 'set-encoder' else 'Mono'}"
                                              f"{type(encoder).__name__}"],
        "backbone_model_type": backbone_type, "query_length": int(config.max_query_length),
        "doc_length": int(config.max_doc_length), "pooling_strategy": "first",
        "linear_bias": bool(float(head.bias.detach().abs().max()) > 0.0) if head.bias is not None else False,
        "scoring_strategy": "rank", "tokenizer_pattern": None, "use_adapter": False, "adapter_config": None,
        "pretrained_adapter_name_or_path": None,
    }
    if isinstance(model, SetEncoder):
        settings.update(depth=model.max_set_size, add_extra_token=model.interaction_token() is not None,
                        sample_missing_docs=False)
    import safetensors.torch

    state = {name: tensor.detach().contiguous().cpu() for name, tensor in encoder.state_dict().items()
             if not name.startswith("pooler.")}
    state["linear.weight"] = head.weight.detach().contiguous().cpu()
    if settings["linear_bias"]:
        state["linear.bias"] = head.bias.detach().contiguous().cpu()
    (out / "config.json").write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    safetensors.torch.save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    tokenizer: Any = model.tokenizer
    tokenizer.save_pretrained(str(out))
    tokenizer_config_path = out / "tokenizer_config.json"
    tokenizer_config = json.loads(tokenizer_config_path.read_text(encoding="utf-8"))
    tokenizer_config.update(
        tokenizer_class="SetEncoderTokenizer" if kind == "set-encoder" else "CrossEncoderTokenizer",
        backbone_tokenizer_class=type(tokenizer).__name__, query_length=settings["query_length"],
        doc_length=settings["doc_length"], **({"add_extra_token": settings["add_extra_token"]} if kind == "set-encoder"
                                              else {"scoring_strategy": None}))
    tokenizer_config_path.write_text(json.dumps(tokenizer_config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return out


__all__ = ["MODEL_TYPES", "exportable", "is_lightning_ir", "load", "read_config", "save"]
