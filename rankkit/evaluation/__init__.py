"""Evaluation: trec_eval-compatible scoring of runs (via ir_measures), significance tests, reports, plots.

Cheap to import (ir_measures and numpy); scipy and matplotlib are imported only by the functions
that need them.
"""

from rankkit.evaluation.evaluate import (
    EvalResult, RunEval, evaluate, evaluate_files, read_inputs, recall_curves,
)
from rankkit.evaluation.measures import DEFAULT_MEASURES, MeasureSpec, parse_measure, parse_measures
from rankkit.evaluation.plot import plot_evaluation
from rankkit.evaluation.report import render, to_json
from rankkit.evaluation.significance import (
    Comparison, Significance, compare, paired_t_test, randomization_test,
)

__all__ = [
    "DEFAULT_MEASURES", "Comparison", "EvalResult", "MeasureSpec", "RunEval", "Significance",
    "compare", "evaluate", "evaluate_files", "paired_t_test", "parse_measure", "parse_measures",
    "plot_evaluation", "randomization_test", "read_inputs", "recall_curves", "render", "to_json",
]
