"""``listwise-joint``: the "+BigBird" row of MatRank's Table 3 (Luo, Yang, Guo, Li, Niu and Xu, 2022,
"MatRank: Text Re-ranking by Latent Preference Matrix", §4.3, Figure 5).

"We concatenate the query with all its candidates, feed the newly formed long text into a BigBird
model, and directly use the output [SEP] embeddings of all passages to calculate their scores":

* one encoder input per query: ``[CLS] q [SEP] t_1 [SEP] t_2 [SEP] ... t_M [SEP]`` (segment id 0 for
  ``[CLS] q [SEP]``, 1 for the candidates, where the tokenizer takes segment ids);
* ``score_i = w . h_[SEP after t_i] + b``; trained with ``listwise-ce`` (the List-wise rows'
  multi-class classification).

The paper's backbone is BigBird (``--backbone`` a local BigBird folder, e.g. google/bigbird-roberta-base
with 4,096 positions); any backbone works within its positions. Each candidate gets at most
``--max-doc-length`` tokens and fewer when the list would not fit ``--max-length`` (default: the
backbone's positions): ``min(max_doc_length, (max_length - query - 2) // M - 1)`` tokens each, so
every candidate is represented. Because positions make the input order visible and training groups
hold the positive in slot 0, training groups are shuffled (a permutation seeded by the batch's qids
and docids) and the scores put back; at inference the candidates keep the first-stage order.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import nn

from rankkit.console import report_work
from rankkit.errors import RankkitError
from rankkit.models import backbone as bb
from rankkit.models.base import RankingModel
from rankkit.models.config import ModelConfig
from rankkit.models.cross_encoders.configs import JOINT_LIST, JointListConfig
from rankkit.models.inputs import Features, GroupBatch, batch_rng, pad, tokenize
from rankkit.models.outputs import RankingOutput
from rankkit.models.persistence import EncoderHeadFiles


@dataclass
class JointListFeatures(Features):
    """One row per query: the joint input, and the position of each slot's closing [SEP] (``-1``: none)."""

    inputs: dict[str, torch.Tensor]
    sep: torch.Tensor  # [G, S]


class JointEncoder(nn.Module):
    """Holds the backbone (the shared checkpoint layout reads ``pairs.encoder``)."""

    def __init__(self, encoder: Any) -> None:
        super().__init__()
        self.encoder = encoder


class JointList(EncoderHeadFiles, RankingModel, spec=JOINT_LIST):
    """MatRank's +BigBird: the query and all its candidates in one input, scored at their [SEP]s."""

    def __init__(self, encoder: Any, tokenizer: Any, config: ModelConfig) -> None:
        super().__init__(config)
        assert isinstance(config, JointListConfig)
        self.config: JointListConfig = config
        self.tokenizer = tokenizer
        self.pairs = JointEncoder(encoder)
        limit = bb.position_limit(getattr(encoder, "config", None))
        self.max_length = int(config.max_length or limit or 512)
        if limit is not None and self.max_length > limit:
            raise RankkitError(f"--max-length {self.max_length} exceeds the backbone's {limit} positions")
        if self.max_length < config.max_query_length + 4:
            raise RankkitError(f"--max-length {self.max_length} leaves no room for candidates")
        self._uses_segments = "token_type_ids" in getattr(tokenizer, "model_input_names", ())
        pooler = getattr(encoder, "pooler", None)
        if isinstance(pooler, nn.Module):
            pooler.requires_grad_(False)  # unused, as in the pair encoders
        self.score = nn.Linear(int(encoder.config.hidden_size), 1)

    @classmethod
    def for_training(cls, backbone: Path | None, config: ModelConfig) -> "JointList":
        folder = bb.resolve_backbone(backbone)
        return cls(bb.load_encoder(folder), bb.load_tokenizer(folder), config)

    def set_max_length(self, max_length: int) -> None:
        """Inference-time length of the whole joint input."""
        limit = bb.position_limit(getattr(self.pairs.encoder, "config", None))
        if limit is not None and max_length > limit:
            raise RankkitError(f"--max-length {max_length} exceeds the backbone's {limit} positions")
        if max_length < self.config.max_query_length + 4:
            raise RankkitError(f"--max-length {max_length} leaves no room for candidates")
        self.max_length = int(max_length)

    # -- inputs -------------------------------------------------------------------------------
    def joint_ids(self, query: str, texts: Sequence[str]) -> tuple[list[int], list[int], int]:
        """Token ids of one joint input, the index of each candidate's closing [SEP], and the query part's length."""
        cls_id, sep_id = int(self.tokenizer.cls_token_id), int(self.tokenizer.sep_token_id)
        q = tokenize(self.tokenizer, [query], self.config.max_query_length, add_special_tokens=False)[0]
        head = [cls_id, *q, sep_id]
        if not texts:
            return head, [], len(head)
        budget = min(int(self.config.max_doc_length), (self.max_length - len(head)) // len(texts) - 1)
        if budget < 1:
            raise RankkitError(f"{len(texts)} candidates do not fit a {self.max_length}-token joint input "
                               f"(raise --max-length or re-rank with a smaller --depth)")
        ids, seps = list(head), []
        for t in tokenize(self.tokenizer, list(texts), budget, add_special_tokens=False):
            ids += t[:budget] + [sep_id]
            seps.append(len(ids) - 1)
        return ids, seps, len(head)

    def features(self, queries: Sequence[str], lists: Sequence[Sequence[str]], slots: int) -> JointListFeatures:
        rows = [self.joint_ids(q, texts) for q, texts in zip(queries, lists)]
        input_ids, attention = pad([ids for ids, _, _ in rows], int(self.tokenizer.pad_token_id or 0))
        inputs = {"input_ids": input_ids, "attention_mask": attention}
        if self._uses_segments:
            segments = torch.zeros_like(input_ids)
            for r, (ids, _, head) in enumerate(rows):
                segments[r, head:len(ids)] = 1
            inputs["token_type_ids"] = segments
        sep = torch.full((len(rows), slots), -1, dtype=torch.long)
        for r, (_, seps, _) in enumerate(rows):
            sep[r, :len(seps)] = torch.tensor(seps, dtype=torch.long)
        return JointListFeatures(inputs=inputs, sep=sep)

    def order(self, batch: GroupBatch) -> list[list[int]]:
        """Each group's real slots in input order: shuffled in training (the positive is slot 0)."""
        real = [[s for s, m in enumerate(row) if m] for row in batch.mask.tolist()]
        if not self.training:
            return real
        rng = batch_rng(batch)
        return [[row[i] for i in rng.permutation(len(row))] if row else row for row in real]

    # -- training -----------------------------------------------------------------------------
    def prepare(self, batch: GroupBatch) -> GroupBatch:
        orders = self.order(batch)
        lists = [[batch.texts[g][s] for s in order] for g, order in enumerate(orders)]
        feats = self.features(batch.queries, lists, batch.group_size)
        # Map each slot to the [SEP] of its place in the (shuffled) input.
        sep = torch.full_like(feats.sep, -1)
        for g, order in enumerate(orders):
            for place, slot in enumerate(order):
                sep[g, slot] = feats.sep[g, place]
        batch.features = JointListFeatures(inputs=feats.inputs, sep=sep)
        return batch

    def scores_of(self, features: JointListFeatures) -> torch.Tensor:
        """Scores ``[G, S]`` at each slot's [SEP] (0 where a slot has none)."""
        bb.reset_attention_type(self.pairs.encoder)
        hidden = self.pairs.encoder(**features.inputs, return_dict=True).last_hidden_state
        sep = features.sep
        index = sep.clamp(min=0)[..., None].expand(-1, -1, hidden.shape[-1])
        scores = self.score(torch.gather(hidden, 1, index)).squeeze(-1)
        return scores.masked_fill(sep < 0, 0.0)

    def forward(self, batch: GroupBatch) -> RankingOutput:  # type: ignore[override]
        features = batch.features
        assert isinstance(features, JointListFeatures), "prepare() the batch first"
        return RankingOutput(self.scores_of(features))

    # -- inference ----------------------------------------------------------------------------
    @torch.inference_mode()
    def rerank_scores(self, queries: Sequence[str], candidates: Sequence[Sequence[str]],
                      batch_size: int = 32) -> list[torch.Tensor]:
        """One joint input per query, ``max(1, batch_size // longest list)`` queries per forward pass."""
        self.eval()
        out: list[torch.Tensor] = []
        longest = max((len(c) for c in candidates), default=1) or 1
        step = max(1, batch_size // longest)
        device = self.device
        for start in range(0, len(queries), step):
            qs, lists = list(queries[start:start + step]), [list(c) for c in candidates[start:start + step]]
            width = max((len(c) for c in lists), default=0)
            if width == 0:
                out.extend(torch.empty(0, dtype=torch.float64) for _ in qs)
                continue
            feats = self.features(qs, lists, width)
            feats = JointListFeatures(inputs={k: v.to(device) for k, v in feats.inputs.items()}, sep=feats.sep.to(device))
            scores = self.scores_of(feats).double().cpu()
            out.extend(scores[i, :len(c)] for i, c in enumerate(lists))
            report_work(len(out), len(queries))
        return out


__all__ = ["JointList", "JointListConfig", "JointListFeatures"]
