"""Measure names: ir_measures syntax and trec_eval names both map to the right ir_measures object."""

from __future__ import annotations

import ir_measures
import pytest

from rankkit.errors import RankkitError
from rankkit.evaluation.measures import (
    DEFAULT_MEASURES,
    TREC_CUTOFFS,
    parse_measure,
    parse_measures,
    trec_base_name,
)


def one(spec: str, **kwargs):
    (parsed,) = parse_measure(spec, **kwargs)
    return parsed


@pytest.mark.parametrize(
    ("spec", "measure"),
    [
        ("nDCG@10", ir_measures.nDCG @ 10),
        ("RR(rel=2)@10", ir_measures.RR(rel=2) @ 10),
        ("AP", ir_measures.AP),
        ("R@1000", ir_measures.R @ 1000),
        ("P@20", ir_measures.P @ 20),
        ("ERR@20", ir_measures.ERR @ 20),
        ("Judged@10", ir_measures.Judged @ 10),
        ("ndcg_cut.10", ir_measures.nDCG @ 10),
        ("ndcg_cut_10", ir_measures.nDCG @ 10),
        ("recip_rank", ir_measures.RR),
        ("map", ir_measures.AP),
        ("map_cut.100", ir_measures.AP @ 100),
        ("P.20", ir_measures.P @ 20),
        ("P_20", ir_measures.P @ 20),
        ("recall.100", ir_measures.R @ 100),
        ("ndcg", ir_measures.nDCG),
        ("bpref", ir_measures.Bpref),
        ("Rprec", ir_measures.Rprec),
        ("success.10", ir_measures.Success @ 10),
        ("infAP", ir_measures.infAP),
        ("iprec_at_recall.0.1", ir_measures.IPrec @ 0.1),
        ("iprec_at_recall_0.10", ir_measures.IPrec @ 0.1),
        ("set_relative_P", ir_measures.SetP(relative=True)),
        ("set_F", ir_measures.SetF),
        ("num_rel_ret", ir_measures.NumRet(rel=1)),
        ("ndcg_cut.23.4", ir_measures.nDCG @ 23),  # trec_eval truncates numeric cutoffs
    ],
)
def test_translation(spec: str, measure) -> None:
    parsed = one(spec)
    assert parsed.measure == measure
    assert parsed.label == spec  # labelled as given


def test_comma_list_gives_one_measure_per_parameter() -> None:
    specs = parse_measure("ndcg_cut.10,100")
    assert [s.label for s in specs] == ["ndcg_cut.10", "ndcg_cut.100"]
    assert [s.measure for s in specs] == [ir_measures.nDCG @ 10, ir_measures.nDCG @ 100]
    assert [s.label for s in parse_measure("P.5,7,3")] == ["P.5", "P.7", "P.3"]


def test_bare_parameterised_names_take_trec_eval_defaults() -> None:
    specs = parse_measure("P")
    assert [s.measure for s in specs] == [ir_measures.P @ int(k) for k in TREC_CUTOFFS]
    assert specs[0].label == "P.5"
    assert len(parse_measure("iprec_at_recall")) == 11
    assert [s.measure for s in parse_measure("success")] == [ir_measures.Success @ k for k in (1, 5, 10)]


def test_ndcg_gain_map() -> None:
    parsed = one("ndcg.1=3,2=9")
    assert parsed.measure == ir_measures.nDCG(gains={1: 3, 2: 9})
    assert parsed.label == "ndcg.1=3,2=9"


def test_aggregation_kinds() -> None:
    assert one("map").aggregate == "mean"
    assert one("gm_map").aggregate == "gmean" and one("gm_map").measure == ir_measures.AP
    assert one("gm_bpref").aggregate == "gmean"
    assert one("num_q").aggregate == "sum"
    assert one("num_ret").aggregate == "sum"
    assert one("NumRet").aggregate == "sum"  # ir_measures' own sum aggregator is honoured


@pytest.mark.parametrize(
    ("spec", "measure"),
    [
        ("map", ir_measures.AP(rel=2)),
        ("P.10", ir_measures.P(rel=2) @ 10),
        ("recall.100", ir_measures.R(rel=2) @ 100),
        ("recip_rank", ir_measures.RR(rel=2)),
        ("num_rel_ret", ir_measures.NumRet(rel=2)),  # the table's rel=1 is trec_eval's default, -l wins
        ("num_ret", ir_measures.NumRet),  # every retrieved document, whatever -l says
        ("ndcg_cut.10", ir_measures.nDCG @ 10),  # graded: no rel
        ("RR(rel=3)", ir_measures.RR(rel=3)),  # written explicitly: the user's rel wins
        ("AP", ir_measures.AP(rel=2)),
    ],
)
def test_rel_level_is_trec_eval_l(spec: str, measure) -> None:
    assert one(spec, rel_level=2).measure == measure


def test_num_rel_with_rel_level_is_refused() -> None:
    with pytest.raises(RankkitError, match="num_rel.*-l 2"):
        parse_measure("num_rel", rel_level=2)
    assert one("num_rel").measure == ir_measures.NumRel


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nDGC@10", "unknown measure 'nDGC@10'"),
        ("nDCG@x", "unknown measure 'nDCG@x'"),
        ("nDCG@10.5", "invalid measure 'nDCG@10.5'"),
        ("utility", "trec_eval's utility is not supported"),
        ("relstring.20", "trec_eval's relstring is not supported"),
        ("map.5", "takes no parameter"),
        ("P.ten", "'ten' is not a number"),
        ("P.0", "cutoff must be at least 1"),
        ("iprec_at_recall.1.5", "between 0 and 1"),
        ("", "empty measure"),
    ],
)
def test_bad_measures_are_one_line_errors_naming_them(spec: str, message: str) -> None:
    with pytest.raises(RankkitError) as info:
        parse_measure(spec)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_defaults_and_duplicates() -> None:
    assert [s.label for s in parse_measures(None)] == list(DEFAULT_MEASURES)
    assert [s.label for s in parse_measures(["map", "map", "ndcg_cut.10,20", "ndcg_cut.10"])] == [
        "map", "ndcg_cut.10", "ndcg_cut.20"]


def test_recall_flag_and_caveat() -> None:
    assert one("R@100").is_recall and one("recall.100").is_recall
    assert not one("P@10").is_recall and not one("set_recall").is_recall
    assert one("iprec_at_recall.0.5").caveat is not None
    assert one("IPrec@0.5").caveat is not None
    assert one("map").caveat is None


def test_trec_base_name() -> None:
    assert trec_base_name("ndcg_cut_10") == "ndcg_cut"
    assert trec_base_name("ndcg_cut.10,100") == "ndcg_cut"
    assert trec_base_name("Rprec_mult_0.20") == "Rprec_mult"
    assert trec_base_name("num_rel_ret") == "num_rel_ret"
    assert trec_base_name("11pt_avg_.25,.5,.75") == "11pt_avg"
    assert trec_base_name("nDCG@10") is None
