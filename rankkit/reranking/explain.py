"""``rankkit explain``: MatRank's latent preference matrix for one query as a heat map (the paper's Figure 2).

The figure shows S (Eq. 3) over the query's top ``depth`` candidates, rows and columns labelled
``new rank: docid`` in MatRank's final (Borda) order, with the row means r (Eq. 4) and the
negated column means -c (Eq. 5) beside it. The top passages with their vote, beta and omega are
returned for printing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import torch

from rankkit.devices import autocast
from rankkit.docstore import DocStore
from rankkit.errors import InputError, RankkitError, excerpt
from rankkit.formats import atomic_write, read_topics
from rankkit.formats.runs import iter_run_queries
from rankkit.models.cross_encoders.matrank import MatRank


@dataclass
class ExplainedCandidate:
    """One candidate of the explained query, in MatRank's order."""

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
    candidates: list[ExplainedCandidate]
    matrix: list[list[float]]  # S in the candidates' (MatRank) order


@torch.inference_mode()
def explain_query(model: MatRank, run: str | os.PathLike[str], topics: str | os.PathLike[str] | Mapping[str, str],
                  store: DocStore, qid: str, *, depth: int = 20, batch_size: int = 32,
                  precision: str = "fp32") -> Explanation:
    """S, r, c, beta, omega and the vote of ``qid``'s top ``depth`` candidates of ``run``
    (``precision`` ``bf16``: under autocast)."""
    if not isinstance(model, MatRank):
        raise RankkitError(f"explain needs a matrank, matrank-row or matrank-col model, not {model.name!r}")
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
    model.eval()
    query = texts_of[qid]
    feats = model.pairs.features([query] * len(texts), texts)
    with autocast(precision, model.device):
        h, skip = model.pairs({k: v.to(model.device) for k, v in feats.items()})
        out = model.explain(h, skip)
    log_beta, log_omega = out.log_beta[0].float(), out.log_omega[0].float()
    vote = model.vote(out).float().cpu()
    order = torch.sort(vote, descending=True, stable=True).indices.tolist()
    beta, omega = log_beta.exp().cpu(), log_omega.exp().cpu()
    S = out.S[0].float().cpu()
    cands = [ExplainedCandidate(new + 1, i + 1, docids[i], float(vote[i]), float(beta[i]), float(omega[i]), texts[i])
             for new, i in enumerate(order)]
    matrix = [[float(S[i, j]) for j in order] for i in order]
    return Explanation(qid, query, cands, matrix)


def plot_explanation(expl: Explanation, output: str | os.PathLike[str]) -> None:
    """Heat map of S with labelled candidates plus row (r) and negated column (-c) means, as PNG/PDF/SVG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    S = np.array(expl.matrix)
    n = len(expl.candidates)
    r = S.sum(axis=1) / n
    neg_c = -S.sum(axis=0) / n
    labels = [f"{c.rank}: {c.docid} (was {c.input_rank})" for c in expl.candidates]
    size = max(5.0, 0.28 * n + 3)
    fig, axes = plt.subplots(1, 2, figsize=(size + 3.5, size), gridspec_kw={"width_ratios": [n, max(3, n // 4)]})
    heat, side = axes
    bound = float(np.abs(S).max()) or 1.0
    image = heat.imshow(S, cmap="RdBu_r", vmin=-bound, vmax=bound)
    heat.set_xticks(range(n), labels, rotation=90, fontsize=7)
    heat.set_yticks(range(n), labels, fontsize=7)
    heat.set_xlabel("j (compared against)")
    heat.set_ylabel("i (preferred over j when s_ij > 0)")
    fig.colorbar(image, ax=heat, fraction=0.046, pad=0.04, label="s_ij")
    y = np.arange(n)
    side.barh(y - 0.2, r, height=0.4, label="r (row mean)")
    side.barh(y + 0.2, neg_c, height=0.4, label="-c (negated column mean)")
    side.set_ylim(n - 0.5, -0.5)
    side.set_yticks([])
    side.axvline(0, color="black", linewidth=0.5)
    side.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.02))
    side.set_title("row / column scores", fontsize=9)
    query = expl.query if len(expl.query) <= 80 else expl.query[:77] + "..."
    fig.suptitle(f"MatRank preference matrix, query {expl.qid}: {query}", fontsize=10)
    fig.tight_layout()
    suffix = Path(output).suffix.lower().lstrip(".") or "png"
    if suffix not in ("png", "pdf", "svg"):
        plt.close(fig)
        raise RankkitError(f"figure format {suffix!r} not supported; use .png, .pdf or .svg")
    # atomic_write yields a text handle; write the bytes through its underlying buffer.
    with atomic_write(output) as handle:
        fig.savefig(handle.buffer, format=suffix, dpi=120)  # type: ignore[attr-defined]
    plt.close(fig)


__all__ = ["ExplainedCandidate", "Explanation", "explain_query", "plot_explanation"]
