"""Scoring and trec_eval's averaging rules (-c, -M, -l, ties) on tiny hand-checked data."""

from __future__ import annotations

import math

import ir_measures
import numpy as np
import pytest

from rankkit.errors import RankkitError
from rankkit.evaluation import DEFAULT_MEASURES, MeasureSpec, evaluate, recall_curves
from rankkit.evaluation.evaluate import aggregate, curve_cutoffs, evaluate_files, qid_sort_key

QRELS = {
    "1": {"a": 1, "b": 0, "c": 2, "d": 1},
    "2": {"x": 1},
    "3": {"y": 1},
}
RUN = {
    "1": {"a": 3.0, "b": 2.0, "c": 1.0, "e": 0.5},  # relevant at ranks 1 and 3 of 3 relevant
    "2": {"z": 1.0, "x": 0.5},  # relevant at rank 2 of 1
    "9": {"a": 1.0},  # not in the qrels
}
AP_1 = (1 / 1 + 2 / 3) / 3
AP_2 = 1 / 2


def test_default_averages_over_queries_in_both() -> None:
    result = evaluate({"run": RUN}, QRELS, ["map", "recip_rank", "P.2", "num_q"])
    scores = result.runs["run"]
    assert scores.qids == ["1", "2"]
    assert scores.left_out == ["9"]
    assert scores.no_results == ["3"]
    assert scores.run_queries == 3
    assert scores.aggregates["map"] == pytest.approx((AP_1 + AP_2) / 2)
    assert scores.aggregates["recip_rank"] == pytest.approx((1 + 0.5) / 2)
    assert scores.aggregates["P.2"] == pytest.approx((0.5 + 0.5) / 2)
    assert scores.aggregates["num_q"] == 2
    assert scores.per_query(result.labels)["1"]["map"] == pytest.approx(AP_1)
    assert "trec_eval default" in result.caption()[0]


def test_complete_counts_missing_qrels_queries() -> None:
    measures = ["map", "num_q", "num_rel", "num_ret", "iprec_at_recall.0"]
    result = evaluate({"run": RUN}, QRELS, measures, complete=True)
    scores = result.runs["run"]
    assert scores.qids == ["1", "2", "3"]
    assert scores.aggregates["map"] == pytest.approx((AP_1 + AP_2 + 0) / 3)
    assert scores.aggregates["num_q"] == 3
    assert scores.aggregates["num_rel"] == 3 + 1 + 1  # the query without results still has its relevant docs
    assert scores.aggregates["num_ret"] == 4 + 2
    # pytrec_eval's interpolated precision of an empty ranking is 0/0: counted as zero, like trec_eval -c.
    assert scores.values[result.row("iprec_at_recall.0"), 2] == 0.0
    assert "-c" in result.caption()[0]


def test_rel_level_applies_to_binary_measures_only() -> None:
    graded = evaluate({"run": RUN}, QRELS, ["map", "ndcg"], rel_level=2).runs["run"]
    binary = evaluate({"run": RUN}, QRELS, ["map", "ndcg"]).runs["run"]
    assert graded.aggregates["map"] == pytest.approx((1 / 3 + 0) / 2)  # only c (label 2) is relevant
    assert graded.aggregates["ndcg"] == pytest.approx(binary.aggregates["ndcg"])


def test_ties_follow_trec_eval_order_for_every_provider() -> None:
    """trec_eval orders ties by docid descending: b before a. pytrec_eval does so itself; the msmarco
    (RR@10) and judged providers would put a first unless rankkit resolves the tie."""
    qrels = {"1": {"a": 1}}
    run = {"1": {"a": 1.0, "b": 1.0}}
    scores = evaluate({"r": run}, qrels, ["RR", "RR@10", "P@1", "Judged@1", "ERR@1"]).runs["r"].aggregates
    assert scores == {"RR": 0.5, "RR@10": 0.5, "P@1": 0.0, "Judged@1": 0.0, "ERR@1": 0.0}
    cut = evaluate({"r": run}, qrels, ["RR", "RR@10", "num_ret"], max_docs=1).runs["r"].aggregates
    assert cut == {"RR": 0.0, "RR@10": 0.0, "num_ret": 1}


def test_max_docs_cuts_each_ranking_in_trec_eval_order() -> None:
    full = evaluate({"run": RUN}, QRELS, ["recall.1000", "num_ret"]).runs["run"]
    top2 = evaluate({"run": RUN}, QRELS, ["recall.1000", "num_ret"], max_docs=2).runs["run"]
    assert full.aggregates["num_ret"] == 6 and top2.aggregates["num_ret"] == 4
    assert full.aggregates["recall.1000"] == pytest.approx((2 / 3 + 1) / 2)
    assert top2.aggregates["recall.1000"] == pytest.approx((1 / 3 + 1) / 2)


def test_geometric_mean_floors_at_trec_eval_minimum() -> None:
    scores = evaluate({"run": RUN}, QRELS, ["gm_map"], complete=True).runs["run"]
    expected = math.exp((math.log(AP_1) + math.log(AP_2) + math.log(1e-5)) / 3)
    assert scores.aggregates["gm_map"] == pytest.approx(expected)
    assert aggregate(np.array([]), "mean") != aggregate(np.array([]), "mean")  # NaN for no queries


def test_several_runs_and_shared_measures() -> None:
    other = {"1": {"d": 2.0, "a": 1.0}, "2": {"x": 1.0}}
    result = evaluate({"run": RUN, "other": other}, QRELS, ["AP", "map", "ndcg_cut.10,100"])
    assert result.labels == ["AP", "map", "ndcg_cut.10", "ndcg_cut.100"]
    assert result.runs["run"].aggregates["AP"] == result.runs["run"].aggregates["map"]
    assert result.runs["other"].aggregates["AP"] == pytest.approx(((1 + 1) / 3 + 1) / 2)
    assert result.runs["other"].left_out == []


def test_default_measures_and_specs() -> None:
    result = evaluate({"run": RUN}, QRELS)
    assert result.labels == list(DEFAULT_MEASURES)
    spec = MeasureSpec("my-ndcg", ir_measures.nDCG @ 5)
    assert evaluate({"run": RUN}, QRELS, [spec]).labels == ["my-ndcg"]


def test_a_run_without_judged_queries_is_an_error() -> None:
    with pytest.raises(RankkitError, match="none of its 1 queries"):
        evaluate({"wrong": {"77": {"a": 1.0}}}, QRELS, ["map"])
    with pytest.raises(RankkitError, match="qrels are empty"):
        evaluate({"run": RUN}, {}, ["map"])
    with pytest.raises(RankkitError, match="max-docs"):
        evaluate({"run": RUN}, QRELS, ["map"], max_docs=0)


def test_the_order_is_runs_then_qrels() -> None:
    """One argument order in all of rankkit's Python API: the swapped (old) order is refused, not misread."""
    with pytest.raises(RankkitError, match="the runs come first, then the qrels"):
        evaluate(QRELS, {"run": RUN}, ["map"])
    with pytest.raises(RankkitError, match="wrap a single run"):
        evaluate(RUN, QRELS, ["map"])
    with pytest.raises(RankkitError, match="got str and dict"):
        evaluate("run.txt", QRELS, ["map"])  # type: ignore[arg-type]
    empty_first = {"run": {"7": {}, **RUN}}
    assert evaluate(empty_first, QRELS, ["map"]).runs["run"].qids  # an empty ranking first is still a run


def test_query_order_is_numeric_then_alphabetic() -> None:
    assert sorted(["10", "9", "b", "2", "a"], key=qid_sort_key) == ["2", "9", "10", "a", "b"]


def test_recall_curves_agree_with_evaluate() -> None:
    curves = recall_curves({"run": RUN}, QRELS, [1, 2, 3, 4])
    values = [v for _, v in curves["run"]]
    assert values == sorted(values)  # recall never drops with depth
    direct = evaluate({"run": RUN}, QRELS, ["R@3"]).runs["run"].aggregates["R@3"]
    assert dict(curves["run"])[3] == pytest.approx(direct)
    assert curve_cutoffs({"run": RUN}) == [1, 2, 3, 4]
    assert curve_cutoffs({"run": RUN}, max_docs=2) == [1, 2]


def test_evaluate_files_warns_about_left_out_queries(tmp_path, capsys) -> None:
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"{q} 0 {d} {r}\n" for q, docs in QRELS.items() for d, r in docs.items()))
    run = tmp_path / "run.txt"
    run.write_text("".join(
        f"{q} Q0 {d} {i} {s} t\n" for q, docs in RUN.items() for i, (d, s) in enumerate(docs.items(), 1)))
    result = evaluate_files([run], qrels, ["map"])
    err = capsys.readouterr().err
    assert "1 of 3 queries are not in the qrels" in err
    assert "1 qrels queries have no results" in err
    assert result.runs[str(run)].aggregates["map"] == pytest.approx((AP_1 + AP_2) / 2)


@pytest.mark.parametrize("complete", [False, True])
def test_runs_are_evaluated_a_chunk_at_a_time_with_the_same_values(data_dir, tmp_path, monkeypatch,
                                                                   complete: bool) -> None:
    """A run file is read query by query and scored CHUNK_DOCS documents at a time: the per-query
    values equal the whole run's, for pytrec_eval's measures and the other providers' alike."""
    import importlib

    from rankkit.formats import read_qrels, read_run

    module = importlib.import_module("rankkit.evaluation.evaluate")  # the module (the package exports the function)

    qrels = read_qrels(data_dir / "dl19" / "qrels.dl19-passage.txt")
    path = data_dir / "dl19" / "BM25.trec_results_dl19.txt"
    measures = ["map", "ndcg_cut.10", "recip_rank", "iprec_at_recall.0", "num_q", "RR@10", "Judged@10", "ERR@20"]
    run = read_run(path)
    del run[next(iter(run))]  # a judged query without results (-c counts it)
    whole = evaluate({"r": run}, qrels, measures, complete=complete).runs["r"]
    monkeypatch.setattr(module, "CHUNK_DOCS", 150)  # two queries a chunk
    chunked = evaluate({"r": iter(run.items())}, qrels, measures, complete=complete).runs["r"]
    assert chunked.qids == whole.qids and np.array_equal(chunked.values, whole.values)
    assert chunked.no_results == whole.no_results and chunked.depth == 100
    streamed = evaluate({"f": path}, qrels, measures, complete=complete).runs["f"]  # a file, query by query
    assert np.array_equal(streamed.values, evaluate({"r": read_run(path)}, qrels, measures,
                                                    complete=complete).runs["r"].values)
    split = tmp_path / "split.run"
    lines = path.read_text().splitlines()
    split.write_text("\n".join(lines[:50] + lines[100:] + lines[50:100]) + "\n")  # query 1 in two blocks
    scattered = evaluate({"s": split}, qrels, measures, complete=complete).runs["s"]  # read whole instead
    assert np.array_equal(scattered.values, streamed.values)
