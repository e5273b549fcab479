"""``rankkit explain``: a preference-matrix model's matrix for one query as a heat map.

Every registered model whose output is a :class:`~rankkit.models.outputs.PreferenceOutput` (the
registry answers which: :func:`preference_models`) can be explained: MatRank and its row/column
ablations draw S (Luo et al., 2022, "MatRank: Text Re-ranking by Latent Preference Matrix", Eq. 3,
Figure 2) over the query's top ``depth`` candidates; MatRank-Split draws S^ over the pieces of the
top ``depth`` documents (Eq. 9, Figure 4: which piece of which document is preferred), zero between
pieces of one document. Rows and columns are labelled ``new rank: docid`` (``#piece`` for pieces) in
the model's final (vote) order, with the row means r (Eq. 4 / 10) and the negated column means -c
(Eq. 5 / 11) beside the matrix. The top candidates with their vote, beta and omega are returned for
printing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import torch

from rankkit.docstore import DocStore
from rankkit.errors import InputError, RankkitError, excerpt
from rankkit.formats import atomic_write, read_topics
from rankkit.formats.runs import iter_run_queries
from rankkit.models import MODELS, RankingModel
from rankkit.runtime.session import InferenceSession
from rankkit.models.outputs import PreferenceOutput


def preference_models() -> list[str]:
    """The registered models with a preference matrix (their output type), which explain can draw."""
    return sorted(name for name, cls in MODELS.items() if issubclass(cls.output_type, PreferenceOutput))


def check_explainable(name: str) -> None:
    """Refuse, listing the ones it can, a model explain cannot draw."""
    if name not in preference_models():
        raise RankkitError(f"explain draws a preference matrix: --model {', '.join(preference_models())}, "
                           f"not {name!r}")


@dataclass
class ExplainedCandidate:
    """One candidate of the explained query, in the model's order."""

    rank: int
    input_rank: int
    docid: str
    vote: float
    beta: float
    omega: float
    text: str


@dataclass
class Explanation:
    qid: str
    query: str
    model: str
    candidates: list[ExplainedCandidate]
    #: S over the matrix's items (candidates, or their pieces), in the candidates' new order.
    matrix: list[list[float]]
    #: (new rank, piece number from 1; 0 for a candidate that is not split) of each row and column.
    items: list[tuple[int, int]]


def explain_query(ranker: RankingModel | InferenceSession, run: str | os.PathLike[str],
                  topics: str | os.PathLike[str] | Mapping[str, str], store: DocStore, qid: str, *,
                  depth: int = 20) -> Explanation:
    """The preference matrix, beta, omega and the vote of ``qid``'s top ``depth`` candidates of
    ``run``, computed in ``ranker``'s inference session (a model is run as it is)."""
    session = ranker if isinstance(ranker, InferenceSession) else InferenceSession.for_model(ranker)
    model = session.model
    check_explainable(model.name)
    if depth < 2:
        raise RankkitError(f"--depth must be at least 2 to show a matrix, got {depth}")
    for path in (run, topics):
        if not isinstance(path, Mapping) and not Path(path).is_file():
            raise InputError(path, None, "no such file")
    texts_of = topics if isinstance(topics, Mapping) else read_topics(topics)
    if qid not in texts_of:
        raise RankkitError(f"query {excerpt(qid)} has no text in {'the topics' if isinstance(topics, Mapping) else topics}")
    ranking = next((r for q, r in iter_run_queries(run) if q == qid), None)
    if ranking is None:
        raise RankkitError(f"query {excerpt(qid)} is not in {'the run' if isinstance(run, Mapping) else run}")
    docids = [d for d, _ in ranking[:depth]]
    passages = store.get_many(docids)
    texts = [passages[d] for d in docids]
    query = texts_of[qid]
    found = session.preference_matrix(query, texts)
    vote = found.vote.float().cpu()
    order = torch.sort(vote, descending=True, stable=True).indices.tolist()
    beta, omega = found.log_beta.float().exp().cpu(), found.log_omega.float().exp().cpu()
    cands = [ExplainedCandidate(new + 1, i + 1, docids[i], float(vote[i]), float(beta[i]), float(omega[i]), texts[i])
             for new, i in enumerate(order)]
    new_rank = {i: new + 1 for new, i in enumerate(order)}
    split = any(piece > 0 for _, piece in found.items)
    rows = sorted(range(len(found.items)), key=lambda r: (new_rank[found.items[r][0]], found.items[r][1]))
    S = found.S.float().cpu()
    matrix = [[float(S[i, j]) for j in rows] for i in rows]
    items = [(new_rank[found.items[r][0]], found.items[r][1] + 1 if split else 0) for r in rows]
    return Explanation(qid, query, model.name, cands, matrix, items)


def plot_explanation(expl: Explanation, output: str | os.PathLike[str]) -> None:
    """Heat map of S with labelled candidates (or pieces) plus row (r) and negated column (-c) means, as
    PNG/PDF/SVG; lines separate the documents of a piece matrix."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    S = np.array(expl.matrix)
    n = len(expl.items)
    r = S.sum(axis=1) / n
    neg_c = -S.sum(axis=0) / n
    by_rank = {c.rank: c for c in expl.candidates}
    labels = [f"{rank}: {by_rank[rank].docid} (was {by_rank[rank].input_rank})" if piece == 0
              else f"{rank}: {by_rank[rank].docid} #{piece}" for rank, piece in expl.items]
    pieces = any(piece > 0 for _, piece in expl.items)
    size = max(5.0, 0.28 * n + 3)
    fig, axes = plt.subplots(1, 2, figsize=(size + 3.5, size), gridspec_kw={"width_ratios": [n, max(3, n // 4)]})
    heat, side = axes
    # Entries that compare two items (not an item with itself or a piece with its own document's).
    ranks = np.array([rank for rank, _ in expl.items])
    compared = ranks[:, None] != ranks[None, :]
    values = S[compared] if compared.any() else np.zeros(1)
    shown = np.ma.masked_array(S, mask=~compared)
    if values.min() < 0.0 < values.max():  # preferences both ways: diverging colours, white = none
        bound = float(np.abs(values).max()) or 1.0
        cmap, low, high = matplotlib.colormaps["RdBu_r"], -bound, bound
    else:  # all one sign (a shift beta and omega ignore, Eqs. 6-7): the spread is what ranks
        cmap, low, high = matplotlib.colormaps["viridis"], float(values.min()), float(values.max())
        high = high if high > low else low + 1e-9
    image = heat.imshow(shown, cmap=cmap.with_extremes(bad="lightgrey"), vmin=low, vmax=high)
    heat.set_xticks(range(n), labels, rotation=90, fontsize=7)
    heat.set_yticks(range(n), labels, fontsize=7)
    if pieces:  # the first piece of every document after the first: a boundary line
        for row, (_, piece) in enumerate(expl.items):
            if piece == 1 and row > 0:
                heat.axhline(row - 0.5, color="black", linewidth=0.6)
                heat.axvline(row - 0.5, color="black", linewidth=0.6)
    heat.set_xlabel("j (compared against)")
    heat.set_ylabel("i (preferred over j when s_ij > 0)")
    fig.colorbar(image, ax=heat, fraction=0.046, pad=0.04, label="s_ij")
    y = np.arange(n)
    side.barh(y - 0.2, r, height=0.4, label="r (row mean)")
    side.barh(y + 0.2, neg_c, height=0.4, label="-c (negated column mean)")
    side.set_ylim(n - 0.5, -0.5)
    side.set_yticks([])
    side.axvline(0, color="black", linewidth=0.5)
    side.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.07))
    side.set_title("row / column scores", fontsize=9)
    query = expl.query if len(expl.query) <= 80 else expl.query[:77] + "..."
    what = "preference matrix over document pieces (S^, Eq. 9)" if pieces else "preference matrix (S, Eq. 3)"
    fig.suptitle(f"{expl.model} {what}, query {expl.qid}: {query}", fontsize=10)
    fig.tight_layout()
    suffix = Path(output).suffix.lower().lstrip(".") or "png"
    if suffix not in ("png", "pdf", "svg"):
        plt.close(fig)
        raise RankkitError(f"figure format {suffix!r} not supported; use .png, .pdf or .svg")
    # atomic_write yields a text handle; write the bytes through its underlying buffer.
    with atomic_write(output) as handle:
        fig.savefig(handle.buffer, format=suffix, dpi=120)  # type: ignore[attr-defined]
    plt.close(fig)


__all__ = ["ExplainedCandidate", "Explanation", "check_explainable", "explain_query", "plot_explanation",
           "preference_models"]
