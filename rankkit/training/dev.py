"""Dev evaluation during training: re-rank each dev group's candidates and score the ranking.

Scores come from the model's ``forward`` (each group's positives and negatives, the first
``max_candidates``) and are evaluated by :mod:`rankkit.evaluation` (ir_measures, trec_eval's
tie-breaking: equal scores are ordered by docid, descending). The metric used for model selection
is RR (reciprocal rank of the first positive, no cutoff; reported as ``dev_mrr``); nDCG@10 is
reported beside it.
"""

from __future__ import annotations

from typing import Sequence

import torch

from rankkit.formats import TrainingGroup
from rankkit.models import RankingModel
from rankkit.training.sampling import all_candidates, collate

SELECTION = "RR"
MEASURES = (SELECTION, "nDCG@10")


@torch.inference_mode()
def evaluate_groups(model: RankingModel, groups: Sequence[TrainingGroup], *, batch_size: int,
                    max_candidates: int, device: torch.device) -> dict[str, float]:
    """``{"dev_mrr": RR, "dev_ndcg@10": nDCG@10}`` over the dev groups (positives keep their labels)."""
    was_training = model.training
    model.eval()
    run: dict[str, dict[str, float]] = {}
    qrels: dict[str, dict[str, int]] = {}
    for start in range(0, len(groups), batch_size):
        chunk = [all_candidates(g, max_candidates) for g in groups[start:start + batch_size]]
        batch = model.prepare(collate(chunk)).to(device)
        scores = model(batch).scores.double().cpu()
        for row, sampled in enumerate(chunk):
            key = str(start + row)  # groups may share a qid: each is its own query here
            run[key] = {d: float(scores[row, i]) for i, d in enumerate(sampled.docids)}
            qrels[key] = {d: int(label) for d, label in zip(sampled.docids, sampled.labels)}
    model.train(was_training)
    # Imported here: training without --dev never needs ir_measures (the GPU image lacks it, bench/gpu_suite.py).
    from rankkit.evaluation import evaluate

    result = evaluate({"dev": run}, qrels, list(MEASURES)).runs["dev"].aggregates
    return {"dev_mrr": float(result[SELECTION]), "dev_ndcg@10": float(result["nDCG@10"])}
