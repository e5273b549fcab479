"""The small interface every rankkit model implements, so training and inference never assume a model family.

A model turns a :class:`~rankkit.models.inputs.GroupBatch` (queries, each with S candidate texts,
labels, a mask and optional teacher scores) into tensors (:meth:`RankingModel.prepare`) and
returns a typed output holding each group's candidate scores (:meth:`RankingModel.forward`, a
:class:`~rankkit.models.outputs.RankingOutput` or richer). The objective is apart: a
:class:`~rankkit.models.losses.Loss` consumes the output and the trainer composes the two.
Re-ranking calls :meth:`RankingModel.rerank_scores`; bi-encoders additionally implement
:class:`BiEncoder`, which adds query/document encoding for dense indexes.

Settings are one typed dataclass per model (:attr:`RankingModel.config_class`,
:mod:`rankkit.models.config`); saving writes the model's own files (``config.json``,
``model.safetensors``, tokenizer files) and :mod:`rankkit.models.checkpoint` adds ``rankkit.json``
and loads a folder back by model name.
"""

from __future__ import annotations

import abc
import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Sequence

import torch
import torch.nn.functional as F
import torch.utils.checkpoint

from rankkit.console import report_work
from rankkit.errors import RankkitError
from rankkit.hub import ModelSource
from rankkit.models.batching import current_batching, plan_batches, record_mask, widen
from rankkit.models.canonical import back_indices, canonical_orders, to_canonical
from rankkit.models.config import ModelConfig
from rankkit.models.declaration import ModelSpec, TrainingDefaults
from rankkit.models.inputs import GroupBatch, TextFeatures, candidate_batch
from rankkit.models.outputs import InBatchOutput, PreferenceMatrix, RankingOutput

if TYPE_CHECKING:
    from rankkit.models.encoder_slots import EncoderSlot


class ActivationCheckpointing:
    """Mixin of a module that runs its *own* blocks (layers rankkit drives itself, not a transformers
    model's): with :attr:`checkpoint_blocks` on, :meth:`run_block` recomputes a block's activations in
    the backward pass instead of keeping them (``torch.utils.checkpoint``, non-reentrant, which
    restores the RNG state so dropout masks are the same in the recomputation).

    :attr:`drives_encoder_layers`: the module calls the layers of a transformers encoder itself
    (the Set-Encoder), so that encoder's own checkpointing would never run and is not switched on.
    """

    checkpoint_blocks: bool = False
    drives_encoder_layers: ClassVar[bool] = False

    def run_block(self, block: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``block(*args, **kwargs)``, checkpointed when switched on, training and building a graph."""
        if self.checkpoint_blocks and getattr(self, "training", False) and torch.is_grad_enabled():
            return torch.utils.checkpoint.checkpoint(block, *args, use_reentrant=False, **kwargs)
        return block(*args, **kwargs)


def enable_transformers_checkpointing(module: torch.nn.Module) -> None:
    """A transformers model's own activation checkpointing, non-reentrant (works with frozen inputs and DDP)."""
    kwargs = {"use_reentrant": False}
    enable = getattr(module, "activation_checkpointing_enable", None)  # transformers >= 5 name
    if callable(enable):
        enable(activation_checkpointing_kwargs=kwargs)
    else:
        module.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)  # type: ignore[operator]


def from_canonical(scores: Sequence[torch.Tensor], orders: Sequence[Sequence[int]],
                   candidates: Sequence[Sequence[str]]) -> list[torch.Tensor]:
    """Scores computed in canonical order, back in each list's input order (:func:`rankkit.models.canonical.back_indices`:
    identical texts of a list get the score of the first of them in canonical order)."""
    return [values[torch.tensor(back_indices(order, texts), dtype=torch.long)] if len(order) else values.clone()
            for values, order, texts in zip(scores, orders, candidates)]


class RankingModel(torch.nn.Module, abc.ABC):
    """A trainable ranker registered in :data:`rankkit.models.MODELS` under :attr:`name`."""

    name: ClassVar[str]
    #: The family a declaration built from the class names (:meth:`rankkit.models.declaration.ModelSpec.of_class`):
    #: ``passages`` here, ``bi-encoder`` for :class:`BiEncoder`, ``documents`` for document models.
    family: ClassVar[str] = "passages"
    #: The model's declaration, when the class was declared with ``spec=`` (a plug-in may set the attributes itself).
    spec: ClassVar[ModelSpec | None] = None
    #: The model's typed settings (one dataclass; CLI options and rankkit.json come from it).
    config_class: ClassVar[type[ModelConfig]] = ModelConfig
    #: What :meth:`forward` returns; decides which losses the model can train with.
    output_type: ClassVar[type[RankingOutput]] = RankingOutput
    training_defaults: ClassVar[TrainingDefaults] = TrainingDefaults()
    #: The paper the model implements (authors, year, title), for model cards and ``rankkit models``.
    paper: ClassVar[str] = ""
    #: Whether the scores are a function of each query's candidate *set*: permuting a query's candidates permutes
    #: its scores (the Set-Encoder's defining property, Schlatt et al. 2024, "Set-Encoder: Permutation-Invariant
    #: Inter-Passage Attention for Listwise Passage Re-Ranking with Cross-Encoders", §3.1; in exact arithmetic also
    #: point-wise scores, bi-encoder similarities and MatRank's row/column means). A declaring family scores each
    #: list in its canonical order (:func:`canonical_orders`: by text) and maps the scores back
    #: (:func:`from_canonical`), so the guarantee holds bit for bit in every backend and precision, not only in
    #: exact arithmetic; the model contract checks it (:func:`rankkit.testing.check_model_contract`).
    permutation_invariant: ClassVar[bool] = False
    #: The context :meth:`rank` scores in: an inference session sets its own (numerics, kernels, batching;
    #: :mod:`rankkit.runtime.session`), so a model loaded in bf16 on a GPU ranks as the session does.
    inference_context: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext

    def __init_subclass__(cls, spec: ModelSpec | None = None, **kwargs: Any) -> None:
        """``class Mono(CandidateListModel, spec=MONO)``: the class takes its name, settings, output, training
        defaults and paper from its declaration (:mod:`rankkit.models.declaration`), declared once; the
        declaration must name this class as its target."""
        super().__init_subclass__(**kwargs)
        if spec is None:
            return
        where = f"{cls.__module__}:{cls.__qualname__}"
        if spec.target != where:
            raise TypeError(f"{where} declares spec {spec.name!r}, whose target is {spec.target}")
        cls.spec = spec
        cls.name = spec.name
        cls.config_class = spec.config_class
        cls.output_type = spec.output_type
        cls.training_defaults = spec.training_defaults
        cls.paper = spec.paper

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        #: The model's settings, recorded in rankkit.json and restored on load.
        self.config = config
        #: Where a loaded model came from (a local folder or a hub repo id and commit); None when built fresh.
        self.source: ModelSource | None = None

    @property
    def hparams(self) -> dict[str, Any]:
        """The settings as a JSON-ready dict (rankkit.json's ``hparams``)."""
        return self.config.to_dict()

    # -- construction -------------------------------------------------------------------------
    @classmethod
    @abc.abstractmethod
    def for_training(cls, backbone: Path | None, config: ModelConfig) -> "RankingModel":
        """A fresh model to train, from ``backbone`` (``None``: the packaged default) and its settings."""

    @classmethod
    @abc.abstractmethod
    def load(cls, folder: Path, config: ModelConfig) -> "RankingModel":
        """Rebuild a model saved by :meth:`save` with the settings from its rankkit.json."""

    @classmethod
    def zero_shot(cls, backbone: Path | None, config: ModelConfig | None = None) -> "RankingModel":
        """The model usable without rankkit training (only some models have one)."""
        raise RankkitError(f"model {cls.name!r} has no zero-shot form: pass a checkpoint written by rankkit train")

    @abc.abstractmethod
    def save(self, folder: Path) -> None:
        """Write config.json, model.safetensors and the tokenizer files into ``folder``."""

    # -- training -----------------------------------------------------------------------------
    @abc.abstractmethod
    def prepare(self, batch: GroupBatch) -> GroupBatch:
        """Tokenise ``batch`` into ``batch.features`` (CPU tensors; the caller moves them)."""

    @abc.abstractmethod
    def forward(self, batch: GroupBatch) -> RankingOutput:  # type: ignore[override]
        """Scores of each group's own candidates (``[G, S]``; masked slots any value) of a prepared batch."""

    def enable_gradient_checkpointing(self) -> list[str]:
        """Activation checkpointing (``rankkit train --gradient-checkpointing``): activations of the
        transformer blocks are recomputed in the backward pass instead of stored, trading about one
        more forward pass for memory. Switches on every transformers encoder's own checkpointing and
        every :class:`ActivationCheckpointing` module's blocks (DenseTrans' layers, the Set-Encoder's
        inter-passage attention layers, PARADE-Transformer's aggregator); returns their names for the
        training log. A model with none of them refuses.
        """
        done: list[str] = []
        driven: list[str] = []  # encoders whose layers an ActivationCheckpointing module runs itself
        for name, module in self.named_modules():
            if isinstance(module, ActivationCheckpointing):
                module.checkpoint_blocks = True
                done.append(f"{name or 'model'} (own blocks)")
                if module.drives_encoder_layers:
                    driven.append(f"{name}." if name else "")
            elif getattr(module, "supports_gradient_checkpointing", False) and not any(
                    name.startswith(prefix) for prefix in driven):
                enable_transformers_checkpointing(module)
                done.append(f"{name} ({type(module).__name__})")
        if not done:
            raise RankkitError(f"model {self.name!r} has no transformer blocks to checkpoint")
        return done

    # -- inference ----------------------------------------------------------------------------
    def inference_scores(self, output: RankingOutput, batch: GroupBatch) -> torch.Tensor:
        """The re-ranking scores ``[G, S]`` of a forward pass over one group per query (masked slots any
        value): the output's scores; MatRank overrides it with its vote (§3.1)."""
        return output.scores

    @torch.inference_mode()
    def forward_scores(self, queries: Sequence[str], candidates: Sequence[Sequence[str]],
                       batch_size: int = 32) -> list[torch.Tensor]:
        """Re-ranking scores through the training ``forward`` (eval mode): each query is one group of all its
        candidates (:func:`~rankkit.models.inputs.candidate_batch`), whole queries packed into forward
        passes of about ``batch_size`` candidates, then :meth:`inference_scores`. The one scoring path:
        :meth:`rerank_scores` defaults to it, and a family's faster override must agree with it
        (tests/models/test_models_scoring_contract.py)."""
        self.eval()
        out: list[torch.Tensor] = []
        start = 0
        while start < len(queries):
            end, size = start, 0
            while end < len(queries) and (end == start or size + len(candidates[end]) <= batch_size):
                size += len(candidates[end])
                end += 1
            part = candidates[start:end]
            if not any(part):
                out.extend(torch.empty(0, dtype=torch.float64) for _ in part)
            else:
                batch = self.prepare(candidate_batch(queries[start:end], part)).to(self.device)
                scores = self.inference_scores(self(batch), batch).double().cpu()
                out.extend(scores[g, : len(texts)].clone() for g, texts in enumerate(part))
            start = end
        return out

    def rerank_scores(self, queries: Sequence[str], candidates: Sequence[Sequence[str]],
                      batch_size: int = 32) -> list[torch.Tensor]:
        """Re-ranking scores (float64, CPU; higher = better) of each query's candidate texts.

        ``rankkit rerank`` calls only this (through :meth:`rerank_inputs` and :meth:`rerank_prepared`):
        :meth:`forward_scores` unless a family scores faster its own way.
        """
        return self.forward_scores(queries, candidates, batch_size)

    def rerank_inputs(self, queries: Sequence[str], candidates: Sequence[Sequence[str]], batch_size: int = 32) -> Any:
        """What :meth:`rerank_prepared` needs, computed without the network (tokenised, batched, padded): an
        inference session prepares the next chunk's on a thread while the network scores this one. A family
        splits its work with the hooks :meth:`prepare_rerank` / :meth:`score_prepared`; otherwise (or when a
        subclass overrides :meth:`rerank_scores` below them) this is the arguments, scored by
        :meth:`rerank_scores`."""
        if self._prepares_inputs():
            return True, self.prepare_rerank(queries, candidates, batch_size)
        return False, RankingModel.prepare_rerank(self, queries, candidates, batch_size)

    def rerank_prepared(self, prepared: Any) -> list[torch.Tensor]:
        """:meth:`rerank_scores` of :meth:`rerank_inputs`' result."""
        split, value = prepared
        return self.score_prepared(value) if split else RankingModel.score_prepared(self, value)

    def prepare_rerank(self, queries: Sequence[str], candidates: Sequence[Sequence[str]], batch_size: int) -> Any:
        """Hook: the network-free part of :meth:`rerank_scores`. A family that splits its scoring overrides it (with
        :meth:`score_prepared`); by default nothing is computed ahead: the arguments, as lists."""
        return list(queries), [list(texts) for texts in candidates], batch_size

    def score_prepared(self, prepared: Any) -> list[torch.Tensor]:
        """Hook: the network part of :meth:`rerank_scores`, on :meth:`prepare_rerank`'s result; by default
        :meth:`rerank_scores` of the arguments the default :meth:`prepare_rerank` kept."""
        queries, candidates, batch_size = prepared
        return self.rerank_scores(queries, candidates, batch_size)

    def _prepares_inputs(self) -> bool:
        """Whether this class's scoring is split into the two hooks: they are defined, and no class below the
        one defining them overrides :meth:`rerank_scores` (a subclass scoring its own way keeps its way)."""
        mro = type(self).__mro__
        hooks = next(i for i, cls in enumerate(mro) if "prepare_rerank" in vars(cls))
        scores = next(i for i, cls in enumerate(mro) if "rerank_scores" in vars(cls))
        return mro[hooks] is not RankingModel and hooks <= scores

    def preference_matrix(self, query: str, texts: Sequence[str]) -> PreferenceMatrix:
        """The preference matrix of one query's candidate texts (``rankkit explain``); models whose
        :attr:`output_type` is a :class:`~rankkit.models.outputs.PreferenceOutput` provide it."""
        raise RankkitError(f"model {self.name!r} has no preference matrix to explain")

    def rank(self, query: str, passages: Sequence[str] | Mapping[str, str], top_k: int | None = None, *,
             return_documents: bool = False, batch_size: int = 32) -> list[dict[str, Any]]:
        """``passages`` ranked for ``query``, best first, as sentence-transformers' ``CrossEncoder.rank``:
        ``[{"corpus_id": ..., "score": ...}, ...]`` (plus ``"text"`` with ``return_documents``), the
        top ``top_k`` (all by default).

        ``corpus_id`` is the passage's index in a list, or its key in a ``{docid: text}`` dict. Scores
        are :meth:`rerank_scores` of the one query (the list is scored as a whole, so listwise models
        such as MatRank and the Set-Encoder see every passage); equal scores keep the input order.
        """
        if not isinstance(query, str):
            raise RankkitError(f"rank: the query must be a string, got {type(query).__name__}")
        if isinstance(passages, Mapping):
            ids: list[Any] = list(passages)
            texts = list(passages.values())
        elif isinstance(passages, Sequence) and not isinstance(passages, str):
            ids, texts = list(range(len(passages))), list(passages)
        else:
            raise RankkitError(f"rank: passages must be a list of texts or a {{docid: text}} dict, got "
                               f"{type(passages).__name__}")
        bad = next((i for i, text in zip(ids, texts) if not isinstance(text, str)), None)
        if bad is not None:
            raise RankkitError(f"rank: passage {bad!r} is not a string")
        if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
            raise RankkitError(f"rank: top_k must be a positive integer or None, got {top_k!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise RankkitError(f"rank: batch_size must be a positive integer, got {batch_size!r}")
        if not texts:
            return []
        was_training = self.training
        self.eval()
        try:
            with torch.inference_mode(), self.inference_context():
                scores = self.rerank_scores([query], [texts], batch_size)[0].tolist()
        finally:
            self.train(was_training)
        order = sorted(range(len(texts)), key=lambda i: -scores[i])  # stable: ties keep the input order
        out = []
        for i in order[:top_k]:
            entry: dict[str, Any] = {"corpus_id": ids[i], "score": float(scores[i])}
            if return_documents:
                entry["text"] = texts[i]
            out.append(entry)
        return out

    def encoder_slots(self) -> list[EncoderSlot]:
        """The transformer encoders an inference backend (``--backend onnx``, ``openvino``) runs (:mod:`rankkit.runtime`).

        Models whose encoder cannot be exported keep this refusal (one line naming the backends).
        """
        raise RankkitError(f"model {self.name!r} runs on --backend torch only")

    def set_max_length(self, max_length: int) -> None:
        """Inference-time input length in tokens (``rankkit rerank --max-length``); models with one override this."""
        raise RankkitError(f"model {self.name!r} has no adjustable input length")

    def set_max_passages(self, max_passages: int) -> None:
        """Inference-time passages per document (``rankkit rerank --max-passages``); document models override this."""
        raise RankkitError(f"--max-passages applies to document models only, not {self.name!r}")

    def override(self, name: str, value: Any) -> None:
        """Set an inference-time setting (a config field declared with ``rerank_flag``)."""
        if name in ("max_passages", "max_pieces"):
            self.set_max_passages(int(value))
        elif hasattr(self.config, name):
            setattr(self.config, name, value)
        else:
            raise RankkitError(f"model {self.name!r} has no setting {name!r}")

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device


class BiEncoder(RankingModel):
    """A model scoring by the inner product of separately encoded query and document vectors.

    Cosine models (:attr:`normalized`) return unit vectors from :meth:`embed`, so the inner product
    is the score everywhere (training, faiss, search).
    """

    output_type = InBatchOutput
    family: ClassVar[str] = "bi-encoder"
    #: Query and passage are encoded apart: a passage's score is its similarity to the query, whatever its list.
    permutation_invariant: ClassVar[bool] = True

    @property
    @abc.abstractmethod
    def dim(self) -> int:
        """Length of the vectors :meth:`embed` returns."""

    @property
    @abc.abstractmethod
    def normalized(self) -> bool:
        """True when vectors are L2-normalised (cosine similarity)."""

    @abc.abstractmethod
    def tokenize(self, texts: Sequence[str], *, is_query: bool) -> list[list[int]]:
        """Unpadded token ids of each text, truncated to the query or document length."""

    @abc.abstractmethod
    def features(self, ids: Sequence[Sequence[int]], *, is_query: bool) -> dict[str, torch.Tensor]:
        """Padded input tensors for :meth:`embed` from :meth:`tokenize` output."""

    @abc.abstractmethod
    def embed(self, features: Mapping[str, torch.Tensor], *, is_query: bool) -> torch.Tensor:
        """Vectors ``[B, dim]`` of a padded batch (unit length when :attr:`normalized`)."""

    @property
    def similarity_scale(self) -> float:
        """Factor applied to inner products to make logits (1 unless a model defines a temperature)."""
        return 1.0

    def prepare(self, batch: GroupBatch) -> GroupBatch:
        _, texts, _ = batch.flat_documents()
        q = self.features(self.tokenize(batch.queries, is_query=True), is_query=True)
        d = self.features(self.tokenize(texts, is_query=False), is_query=False)
        batch.features = TextFeatures(queries=q, documents=d)
        return batch

    def forward(self, batch: GroupBatch) -> InBatchOutput:  # type: ignore[override]
        """Each group's candidate scores and the in-batch matrix ``[G, N]`` over the batch's N real
        candidates, with the positive mask (matched by docid) and each query's own positive column."""
        features = batch.features
        assert isinstance(features, TextFeatures), "prepare() the batch first"
        q = self.embed(features.queries, is_query=True)
        d = self.embed(features.documents, is_query=False)
        in_batch = (q @ d.T) * self.similarity_scale
        docids, _, where = batch.flat_documents()
        positive = torch.tensor(
            [[docid in batch.positives[g] for docid in docids] for g in range(len(batch))],
            dtype=torch.bool, device=in_batch.device,
        )
        column = {pos: j for j, pos in enumerate(where)}
        target = torch.tensor([column[(g, 0)] for g in range(len(batch))], dtype=torch.long, device=in_batch.device)
        g_index = torch.tensor([g for g, _ in where], dtype=torch.long, device=q.device)
        s_index = torch.tensor([s for _, s in where], dtype=torch.long, device=q.device)
        per_doc = (q[g_index] * d).sum(dim=1) * self.similarity_scale
        scores = torch.zeros(batch.mask.shape, dtype=per_doc.dtype, device=q.device).index_put((g_index, s_index), per_doc)
        return InBatchOutput(scores=scores, in_batch=in_batch, positive=positive, target=target)

    def set_max_length(self, max_length: int) -> None:
        """Document length in tokens for re-ranking (bi-encoders with a ``max_doc_length``)."""
        if not hasattr(self, "max_doc_length"):
            super().set_max_length(max_length)
        if max_length < 2:
            raise RankkitError(f"--max-length must be at least 2, got {max_length}")
        self.max_doc_length = int(max_length)

    @torch.inference_mode()
    def rerank_scores(self, queries: Sequence[str], candidates: Sequence[Sequence[str]],
                      batch_size: int = 32) -> list[torch.Tensor]:
        """Embedding similarity (inner product x :attr:`similarity_scale`) of each query and its candidates."""
        return self.score_prepared(self.prepare_rerank(queries, candidates, batch_size))

    def prepare_rerank(self, queries: Sequence[str], candidates: Sequence[Sequence[str]],
                       batch_size: int) -> "PreparedTexts":
        orders = canonical_orders(candidates) if self.permutation_invariant else None
        lists = to_canonical(candidates, orders) if orders is not None else [list(t) for t in candidates]
        flat = [t for texts in lists for t in texts]
        return PreparedTexts([len(texts) for texts in lists], self.encode_inputs(list(queries), is_query=True,
                                                                                   batch_size=batch_size),
                             self.encode_inputs(flat, is_query=False, batch_size=batch_size),
                             orders, [list(t) for t in candidates])

    @torch.inference_mode()
    def score_prepared(self, prepared: "PreparedTexts") -> list[torch.Tensor]:
        scores = self._scores(prepared.sizes, prepared.queries, prepared.passages)
        return scores if prepared.orders is None else from_canonical(scores, prepared.orders, prepared.candidates)

    def _scores(self, sizes: list[int], query_inputs: "EncodeInputs", passage_inputs: "EncodeInputs"
                ) -> list[torch.Tensor]:
        if not sum(sizes):
            return [torch.empty(0, dtype=torch.float64) for _ in sizes]
        q = self.encode_prepared(query_inputs).double()
        encoded = [0]

        def batch_done(n: int) -> None:  # the passages are the work a re-ranking progress bar counts
            encoded[0] += n
            report_work(encoded[0], passage_inputs.count)

        d = self.encode_prepared(passage_inputs, on_batch=batch_done).double()
        out, start = [], 0
        for i, size in enumerate(sizes):
            part = d[start:start + size]
            out.append((part @ q[i]) * self.similarity_scale)
            start += size
        return out

    @torch.inference_mode()
    def encode(self, texts: Sequence[str], *, is_query: bool, batch_size: int = 64,
               on_batch: Callable[[int], None] | None = None) -> torch.Tensor:
        """Vectors of ``texts`` (CPU, float32, input order), batched longest-first to cut padding.

        Puts the model in eval mode (no dropout). ``on_batch(n)`` is called after each batch of
        ``n`` texts (progress bars). Batches follow the session's policy
        (:func:`~rankkit.models.batching.current_batching`; plain ``batch_size`` rows without one).
        """
        return self.encode_prepared(self.encode_inputs(texts, is_query=is_query, batch_size=batch_size),
                                    on_batch=on_batch)

    def encode_inputs(self, texts: Sequence[str], *, is_query: bool, batch_size: int = 64) -> "EncodeInputs":
        """:meth:`encode`'s work without the network: tokenised, planned into batches and padded (pinned for a
        GPU), so that a session can prepare the next chunk on a thread."""
        ids = self.tokenize(texts, is_query=is_query)
        device = self.device
        pad_id = int(getattr(getattr(self, "tokenizer", None), "pad_token_id", 0) or 0)
        batches = []
        for batch in plan_batches([len(x) for x in ids], current_batching(batch_size), self.position_limit()):
            feats = widen(self.features([ids[i] for i in batch.rows], is_query=is_query), batch.width, pad_id)
            if device.type == "cuda":
                feats = {k: v.pin_memory() for k, v in feats.items()}
            batches.append((batch.rows, feats))
        return EncodeInputs(len(ids), is_query, batches)

    @torch.inference_mode()
    def encode_prepared(self, prepared: "EncodeInputs", *, on_batch: Callable[[int], None] | None = None) -> torch.Tensor:
        """The vectors of :meth:`encode_inputs`' batches, in input order (float32, CPU)."""
        self.eval()
        out = torch.empty((prepared.count, self.dim), dtype=torch.float32)
        device = self.device
        parts, order = [], []
        for rows, feats in prepared.batches:
            if "attention_mask" in feats:
                record_mask(feats["attention_mask"])
            parts.append(self.embed({k: v.to(device, non_blocking=True) for k, v in feats.items()},
                                    is_query=prepared.is_query))
            order += rows
            if on_batch is not None:
                on_batch(len(rows))
        if parts:  # one copy back at the end: a copy per batch would wait for the GPU each time
            out[torch.tensor(order, dtype=torch.long)] = torch.cat([p.float() for p in parts]).cpu()
        return out

    def position_limit(self) -> int | None:
        """Longest input the backbone's positions allow (None: unknown); bucketed lengths never pass it."""
        from rankkit.models.backbone import position_limit

        encoder = getattr(self, "encoder", None)
        return position_limit(getattr(encoder, "config", None))


@dataclass
class PreparedTexts:
    """:meth:`BiEncoder.prepare_rerank`'s result: candidate counts, the encoded-to-be queries and passages (in
    canonical order for a permutation-invariant model, ``orders`` to map back; None otherwise)."""

    sizes: list[int]
    queries: "EncodeInputs"
    passages: "EncodeInputs"
    orders: list[list[int]] | None
    candidates: list[list[str]]


@dataclass
class EncodeInputs:
    """:meth:`BiEncoder.encode_inputs`' result: ``count`` texts in ``batches`` of (rows, padded features)."""

    count: int
    is_query: bool
    batches: list[tuple[list[int], dict[str, torch.Tensor]]]


def l2_normalize(vectors: torch.Tensor) -> torch.Tensor:
    """Unit-length rows (cosine similarity becomes the inner product)."""
    return F.normalize(vectors, p=2, dim=-1)
