"""The truncation ``rankkit serve`` reports is the model's own: at each family's boundary, a text is reported cut
exactly when some token of it has no effect on the model's output (checked by changing each token in turn)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from serve_helpers import tiny_checkpoint

from rankkit.runtime import InferenceSession, Runtime, load_for_inference
from rankkit.serve.truncation import Truncation
from rankkit.testing import WORDS, tiny_backbone

#: Models on the tiny 64-position backbone, with lengths that fit it.
FAMILIES: dict[str, dict[str, Any]] = {
    "mono": {"max_doc_length": 24},
    "set-encoder": {"max_doc_length": 24},
    "mono-bi": {"max_doc_length": 24, "encoder": "bi"},  # MatRank's --encoder bi pairs, under mono's scores
    "repbert": {"max_doc_length": 40},
    "parade-max": {"window": 6, "stride": 4, "max_passages": 3},
}


def text_of(n: int, shift: int = 0, at: int | None = None) -> str:
    """``n`` one-token words; the word at position ``at`` replaced by another."""
    return " ".join(WORDS[(i + (1 if i == at else 0) + shift) % len(WORDS)] for i in range(n))


def outputs(session: InferenceSession, texts: list[str]) -> list[torch.Tensor]:
    """What the model makes of each text: its vector (bi-encoders), or its score in a list of two (beside a fixed
    text: a list-wise model's vote over a list of one is constant)."""
    if session.model.name == "repbert":
        return [session.encode([t], is_query=False)[0] for t in texts]
    # One call a text: the same shapes every time, so equal inputs give bit-equal outputs.
    return [session.scores(["apple"], [[t, "tea leaf cup"]])[0][0] for t in texts]


def every_token_counts(session: InferenceSession, n: int) -> bool:
    """Whether changing any one token of an ``n``-token text changes the model's output at all."""
    variants = [text_of(n)] + [text_of(n, at=p) for p in range(n)]
    out = outputs(session, variants)
    return all(not torch.equal(out[0], changed) for changed in out[1:])


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_reported_truncation_is_the_models(family: str, tmp_path: Path) -> None:
    name = family.split("-bi")[0]
    checkpoint = tiny_checkpoint(name, tiny_backbone(tmp_path / "tiny"), tmp_path, **FAMILIES[family])
    session = InferenceSession.of(load_for_inference(name, checkpoint, Runtime("torch", "none", None, "fp32"), "cpu"))
    truncation = Truncation(session.model)
    assert truncation.reported, truncation.rule
    cut = [bool(truncation.texts("apple", [text_of(n)])) for n in range(1, 80)]
    assert True in cut, f"{name}: no length up to 79 tokens reported as truncated"
    boundary = cut.index(True)  # the longest text that fits has `boundary` tokens
    assert not any(cut[:boundary]) and all(cut[boundary:])
    assert every_token_counts(session, boundary), f"{name}: a {boundary}-token text fits, yet a token is ignored"
    assert not every_token_counts(session, boundary + 1), f"{name}: a {boundary + 1}-token text is reported cut"


def test_matrank_split_reports_text_past_its_pieces(tmp_path: Path) -> None:
    """MatRank-Split reads the first ``max_pieces`` pieces (its score is a vote, too coarse for the check above):
    4 pieces of 16 - 4 - 3 = 9 text tokens cover 36 tokens."""
    checkpoint = tiny_checkpoint("matrank-split", tiny_backbone(tmp_path / "tiny"), tmp_path, piece_length=16,
                                 max_query_length=4)
    loaded = load_for_inference("matrank-split", checkpoint, Runtime("torch", "none", None, "fp32"), "cpu")
    truncation = Truncation(loaded.model)
    assert truncation.texts("apple", [text_of(36), text_of(37), text_of(5)]) == [1]


def test_the_query_cut_is_reported(tmp_path: Path) -> None:
    checkpoint = tiny_checkpoint("mono", tiny_backbone(tmp_path / "tiny"), tmp_path, max_doc_length=24,
                                 max_query_length=6)
    session = InferenceSession.of(load_for_inference("mono", checkpoint, Runtime("torch", "none", None, "fp32"), "cpu"))
    truncation = Truncation(session.model)
    assert not truncation.query(text_of(6)) and truncation.query(text_of(7))
    # A longer query leaves less room for the text: the budget follows the query's (cut) length.
    # Pairs of 6 + 24 + 3 = 33 tokens: a 2-token query leaves 28 for the text, a 9-token one (cut to 6) 24.
    assert truncation.texts(text_of(2), [text_of(28)]) == [] and truncation.texts(text_of(2), [text_of(29)]) == [0]
    assert truncation.texts(text_of(9), [text_of(24)]) == [] and truncation.texts(text_of(9), [text_of(25)]) == [0]
