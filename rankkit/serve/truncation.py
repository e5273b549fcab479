"""Which texts of a request the model will cut: truncation as the model was trained, reported.

The service never cuts a text itself (beyond refusing one over ``--max-text-chars``): the model tokenises and
truncates exactly as ``rankkit rerank`` and training do. This module only *predicts* the cut, from the same
tokenizer and the same lengths, so a response can say how many of its texts were truncated
(``X-Rankkit-Truncated``) and a request sent with ``"truncate": false`` can be refused instead. The rules, per
family (tests/serve/test_serve_truncation.py checks each at its boundary: a text one token over scores as the
text cut to the budget):

* cross-encoder pairs (``mono``, the MatRank family, the Set-Encoder, candidate attention; ``truncation="pair"``):
  ``[CLS] q [SEP] t [SEP]`` within ``max_length``, the query cut first to ``max_query_length`` tokens, so a text
  has ``max_length - |head| - 2 - |q|`` tokens (``lightning-ir`` truncation: ``max_length - max_query_length -
  |head| - 2`` whatever the query);
* ``--encoder bi`` pairs and RepBERT: each text alone, ``[CLS] ... [SEP]`` within its length (RepBERT: prefix
  included);
* DenseTrans: word pieces within ``max_doc_length`` (``[CLS]`` added after);
* document models (PARADE, MaxP/FirstP/..., MatRank-Split): the document is read up to ``max_doc_length``
  tokens and split into windows or pieces; it counts as truncated when a token of it lies in no passage the
  model keeps (more windows than ``max_passages``, more pieces than ``max_pieces``);
* the joint list-wise model: each candidate gets ``min(max_doc_length, (max_length - |head|) // M - 1)``
  tokens for a list of ``M``.

A model outside these families (a plug-in) is served all the same; its truncation is not reported.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from rankkit.models.base import BiEncoder, RankingModel
from rankkit.models.inputs import tokenize

#: A bound on tokens per UTF-8 byte: WordPiece, byte-level BPE and SentencePiece (byte fallback) give at most one
#: token a byte plus one (SentencePiece's leading word mark), so a text of ``b`` bytes has at most ``b + 1``
#: tokens and a short text needs no tokenising to know it fits.
EXTRA_TOKENS = 1


class Truncation:
    """Predicts the model's cuts (see the module doc); :meth:`texts` and :meth:`query` answer per request."""

    def __init__(self, model: RankingModel) -> None:
        self.model = model
        self.rule = "not reported for this model"
        self.tokens_per_text: int | None = None
        self.query_tokens: int | None = None
        self._text_budget: Callable[[str, int], int | None] | None = None
        self._document = False
        self._specials = 0  # special tokens the text budget includes (RepBERT's [CLS] and [SEP])
        self._prefix = ""
        self._query_prefix = ""
        self.tokenizer: Any = None
        self._plan()

    # -- the rules ------------------------------------------------------------------------------------------
    def _plan(self) -> None:
        from rankkit.models.cross_encoders.pair_encoders import BiPairEncoder, CrossPairEncoder
        from rankkit.models.documents.base import DocumentModel

        model: Any = self.model
        pairs = getattr(model, "pairs", None)
        if isinstance(model, DocumentModel):
            self.tokenizer = model.tokenizer
            self._document = True
            self.query_tokens = int(model.config.max_query_length)
            doc = model.config.max_doc_length
            self.tokens_per_text = int(doc) if doc else None
            self.rule = ("document: read up to max_doc_length tokens, split into passages; truncated when a token "
                         "lies in no passage kept")
        elif isinstance(pairs, CrossPairEncoder):
            self.tokenizer = pairs.tokenizer
            self.query_tokens = int(pairs.max_query_length)
            head = len(pairs.head_ids)
            if pairs.truncation == "lightning-ir":
                fixed = int(pairs.max_length) - int(pairs.max_query_length) - head - 2
                self._text_budget = lambda _q, _m: fixed
                self.tokens_per_text = fixed
                self.rule = "pair (lightning-ir): max_length - max_query_length - 3 tokens a text"
            else:
                self._text_budget = lambda q, _m: int(pairs.max_length) - head - 2 - min(
                    self._count(q, int(pairs.max_query_length)), int(pairs.max_query_length))
                self.tokens_per_text = int(pairs.max_length) - head - 2
                self.rule = "pair: [CLS] q [SEP] t [SEP] within max_length, the query cut to max_query_length first"
        elif isinstance(pairs, BiPairEncoder):
            self.tokenizer = pairs.tokenizer
            self.query_tokens = int(pairs.max_query_length) - 2
            self._specials = 2
            fixed = int(pairs.max_length)
            self._text_budget = lambda _q, _m: fixed
            self.tokens_per_text = fixed - 2
            self.rule = "bi pairs: [CLS] t [SEP] within max_doc_length"
        elif isinstance(self.model, BiEncoder) and model.name == "repbert":
            self.tokenizer = model.tokenizer
            self._specials = 2
            self._prefix = model.config.doc_prefix or ""
            self._query_prefix = model.config.query_prefix or ""
            doc, query = int(model.max_doc_length), int(model.max_query_length)
            self._text_budget = lambda _q, _m: doc
            self.tokens_per_text, self.query_tokens = doc - 2, query - 2
            self.rule = "repbert: [CLS] prefix + text [SEP] within max_doc_length (queries: max_query_length)"
        elif isinstance(self.model, BiEncoder) and model.name == "densetrans":
            self.tokenizer = model.tokenizer
            doc, query = int(model.max_doc_length), int(model.max_query_length)
            self._text_budget = lambda _q, _m: doc
            self.tokens_per_text, self.query_tokens = doc, query
            self.rule = "densetrans: word pieces within max_doc_length (queries: max_query_length)"
        elif model.name == "listwise-joint":
            self.tokenizer = model.tokenizer
            self.query_tokens = int(model.config.max_query_length)
            cap = int(model.config.max_doc_length)
            self._text_budget = lambda q, m: min(cap, (int(model.max_length) - 2 - min(
                self._count(q, self.query_tokens or 0), self.query_tokens or 0)) // max(m, 1) - 1)
            self.tokens_per_text = cap
            self.rule = "joint list: min(max_doc_length, (max_length - |[CLS] q [SEP]|) // M - 1) tokens a candidate"

    def _count(self, text: str, limit: int) -> int:
        """Tokens of ``text`` without special tokens, counted up to ``limit + 1`` (enough to know it is over)."""
        return len(tokenize(self.tokenizer, [text], limit + 1, add_special_tokens=False)[0]) if text else 0

    def _over(self, text: str, budget: int) -> bool:
        """Whether ``text`` has more than ``budget`` tokens (no special tokens)."""
        return bool(self._overs([text], budget))

    def _overs(self, texts: Sequence[str], budget: int) -> list[int]:
        """Indices of ``texts`` with more than ``budget`` tokens: the short ones by their bytes alone, the others
        tokenised together (one call), each up to ``budget + 1`` tokens."""
        maybe = [i for i, text in enumerate(texts) if len(text.encode("utf-8")) + EXTRA_TOKENS > budget]
        if not maybe:
            return []  # none can exceed: at most one token a byte, plus one
        counts = tokenize(self.tokenizer, [texts[i] for i in maybe], max(budget, 0) + 1, add_special_tokens=False)
        return [i for i, ids in zip(maybe, counts) if len(ids) > budget]

    # -- per request ----------------------------------------------------------------------------------------
    @property
    def reported(self) -> bool:
        return self.tokenizer is not None

    def texts(self, query: str | None, texts: Sequence[str], *, is_query: bool = False) -> list[int] | None:
        """Indices of ``texts`` the model will cut for ``query`` (a list of ``len(texts)``; None: not reported)."""
        if not self.reported:
            return None
        if self._document:
            return [i for i, text in enumerate(texts) if self._document_cut(text)]
        if is_query:
            if self.query_tokens is None:
                return None
            return self._overs([self._query_prefix + t for t in texts], self.query_tokens)
        assert self._text_budget is not None
        budget = self._text_budget(query or "", len(texts))
        if budget is None:
            return None
        return self._overs([self._prefix + t for t in texts] if self._prefix else texts, budget - self._specials)

    def query(self, query: str) -> bool:
        """Whether the model cuts the query (to ``max_query_length`` tokens)."""
        if not self.reported or self.query_tokens is None or isinstance(self.model, BiEncoder):
            return False
        return self._over(query, self.query_tokens)

    def _document_cut(self, text: str) -> bool:
        from rankkit.models.documents.splitting import WHOLE_DOCUMENT

        model: Any = self.model
        cap = self.tokens_per_text
        length = len(tokenize(self.tokenizer, [text], (cap + 1) if cap else WHOLE_DOCUMENT, add_special_tokens=False)[0])
        if cap is not None and length > cap:
            return True
        covered: set[int] = set()
        for passage in model.split(list(range(length)), None):
            covered.update(passage)
        return len(covered) < length

    def describe(self) -> dict[str, Any]:
        """What ``/info`` reports."""
        return {"rule": self.rule, "tokens_per_text": self.tokens_per_text, "query_tokens": self.query_tokens,
                "reported": self.reported}


__all__ = ["Truncation"]
