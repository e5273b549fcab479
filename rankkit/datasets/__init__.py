"""Converters from public data sets to rankkit's task files (corpus, topics, qrels, runs, groups).

One module per data set, each runnable with the arguments its ``examples/*/prepare.py`` wrapper
takes (the wrappers only call the module's ``main``):

* :mod:`rankkit.datasets.quora`: Quora duplicate-question retrieval (``python -m rankkit.datasets.quora``);
* :mod:`rankkit.datasets.wikiqa`: WikiQA answer-sentence selection;
* :mod:`rankkit.datasets.semeval`: SemEval-2016 Task 3 subtask A (question -> comment ranking);
* :mod:`rankkit.datasets.classic`: the classic IR collections (TIME, Cranfield, CISI, MED, NPL).

They depend on :mod:`rankkit.formats`, :mod:`rankkit.errors` and the standard library only, so
importing one never loads torch, transformers or rankkit's models.
"""

from __future__ import annotations

__all__ = ["classic", "quora", "semeval", "wikiqa"]
