"""ir_measures measure objects are measures everywhere a measure is taken (issue 39): rankkit.evaluate and
rankkit.experiment refused ``ir_measures.nDCG@10`` with "a measure name or a list of them ... got list"."""

from __future__ import annotations

import ir_measures
import pytest

import rankkit
from rankkit.errors import RankkitError
from rankkit.evaluation.evaluate import evaluate as evaluate_runs

RUN = {"1": {"a": 3.0, "b": 2.0, "c": 1.0}, "2": {"a": 1.0, "b": 2.0}}
QRELS = {"1": {"b": 1, "c": 2}, "2": {"a": 1}}


def test_evaluate_takes_measure_objects_as_their_names() -> None:
    objects = rankkit.evaluate(RUN, QRELS, [ir_measures.nDCG @ 10, ir_measures.RR(rel=2) @ 10, "AP"])
    names = rankkit.evaluate(RUN, QRELS, ["nDCG@10", "RR(rel=2)@10", "AP"])
    assert objects == names and set(objects) == {"nDCG@10", "RR(rel=2)@10", "AP"}
    assert rankkit.evaluate(RUN, QRELS, ir_measures.P @ 2) == rankkit.evaluate(RUN, QRELS, "P@2")


def test_experiment_and_the_library_take_measure_objects() -> None:
    table = rankkit.experiment({"a": RUN, "b": RUN}, QRELS, ir_measures.nDCG @ 10, baseline="a", as_frame=False)
    assert table["b"]["nDCG@10"] == table["a"]["nDCG@10"] and "significance" in table["b"]
    result = evaluate_runs({"run": RUN}, QRELS, [ir_measures.AP, "RR@10"])
    assert result.labels == ["AP", "RR@10"]


@pytest.mark.parametrize("measures, message", [
    ([ir_measures.nDCG @ 10, 5], "measures[1]: a measure is a name (nDCG@10, ndcg_cut.10, ...) or an ir_measures "
                                 "measure (ir_measures.nDCG@10), not a int (5)"),
    (5, "measures: a measure is a name"),
])
def test_a_wrong_measure_is_named_with_its_position(measures: object, message: str) -> None:
    with pytest.raises(RankkitError) as caught:
        rankkit.evaluate(RUN, QRELS, measures)  # type: ignore[arg-type]
    assert message in str(caught.value) and "got list" not in str(caught.value)
