"""Every output format: content, significance marks and p-values, determinism."""

from __future__ import annotations

import json

import pytest

from rankkit.errors import RankkitError
from rankkit.evaluation import compare, evaluate, render, to_json
from rankkit.evaluation.report import FORMATS, format_value, latex_escape

QIDS = [str(i) for i in range(1, 13)]
QRELS = {q: {"rel": 1, "other": 0} for q in QIDS}
BASE = {q: {"x": 3.0, "y": 2.0, "rel": 1.0} for q in QIDS}
BETTER = {q: {"rel": 3.0, "x": 2.0} for q in QIDS}


@pytest.fixture(scope="module")
def result():
    return evaluate({"base|run": BASE, "better_run": BETTER}, QRELS, ["RR", "P.1", "num_ret"])


@pytest.fixture(scope="module")
def sig(result):
    return compare(result, "base|run", permutations=1000)


def test_json_shape(result, sig) -> None:
    data = json.loads(render(result, "json", per_query=True, significance=sig))
    assert list(data) == ["base|run", "better_run"]
    assert data["better_run"]["RR"] == 1.0 and data["base|run"]["RR"] == pytest.approx(1 / 3)
    assert data["better_run"]["num_ret"] == 24 and isinstance(data["better_run"]["num_ret"], int)
    assert set(data["better_run"]["per_query"]) == set(QIDS)
    assert data["better_run"]["per_query"]["5"] == {"RR": 1.0, "P.1": 1.0, "num_ret": 2}
    tests = data["better_run"]["significance"]
    assert set(tests) == {"RR", "P.1"}  # the counter is not tested
    assert tests["RR"]["significant"] is True and tests["RR"]["baseline"] == "base|run"
    assert 0 < tests["RR"]["p_randomization"] <= tests["RR"]["p_randomization_adjusted"] < 0.05
    assert tests["RR"]["p_t"] == 0.0  # the same gain on every query
    assert "significance" not in data["base|run"]
    assert "per_query" not in to_json(result)["better_run"]


def test_tsv(result, sig) -> None:
    lines = render(result, "tsv", per_query=True, significance=sig).splitlines()
    assert lines[0].split("\t") == [
        "run", "qid", "measure", "value", "delta", "p_t", "p_t_adjusted", "p_randomization",
        "p_randomization_adjusted", "significant"]
    rows = [line.split("\t") for line in lines[1:]]
    assert len(rows) == 2 * 3 * (1 + len(QIDS))
    summary = {(r[0], r[2]): r for r in rows if r[1] == "all"}
    assert float(summary[("base|run", "RR")][3]) == pytest.approx(1 / 3, abs=1e-15)  # full precision
    assert summary[("better_run", "RR")][9] == "1"
    assert summary[("base|run", "RR")][4:] == [""] * 6
    assert summary[("better_run", "num_ret")][3] == "24"


def test_table_marks_and_notes(result, sig) -> None:
    text = render(result, "table", significance=sig)
    assert "1.0000†" in text and "0.3333" in text
    assert "trec_eval default" in text
    assert "paired randomization test (1000 permutations, seed 0), Holm-corrected over 2 comparisons" in text
    assert text.index("base|run") < text.index("better_run")
    per_query = render(result, "table", per_query=True)
    assert "per query: better_run" in per_query and "†" not in per_query


def test_table_shows_names_verbatim() -> None:
    odd = "runs/[bold]x[/bold]:smile:.txt"
    text = render(evaluate({odd: {"1": {"a": 1.0}}}, {"1": {"a": 1}}, ["RR"]), "table")
    assert odd in text


def test_markdown(result, sig) -> None:
    lines = render(result, "markdown", per_query=True, significance=sig).splitlines()
    assert lines[0] == "| run | RR | P.1 | num_ret |"
    assert lines[1] == "| --- | ---: | ---: | ---: |"
    assert lines[2] == "| base\\|run | 0.3333 | 0.0000 | 36 |"
    assert lines[3] == "| better_run | 1.0000† | 1.0000† | 24 |"
    assert "#### Per query: better\\_run" not in lines and "#### Per query: better_run" in lines


def test_latex(result, sig) -> None:
    text = render(result, "latex", significance=sig)
    assert r"\begin{tabular}{lrrr}" in text and r"\toprule" in text
    assert r"better\_run & 1.0000$^\dagger$ & 1.0000$^\dagger$ & 24 \\" in text
    assert r"P.1" in text and r"\caption{Averages over" in text
    escaped = r"a\_b\%c\&d\#e\$f\{g\}\textasciitilde{}\textasciicircum{}\textbackslash{}"
    assert latex_escape("a_b%c&d#e$f{g}~^\\") == escaped


def test_every_format_is_deterministic(result, sig) -> None:
    for fmt in FORMATS:
        assert render(result, fmt, per_query=True, significance=sig) == render(
            result, fmt, per_query=True, significance=sig)
    with pytest.raises(RankkitError, match="unknown format"):
        render(result, "html")


def test_format_value() -> None:
    assert format_value(0.123456) == "0.1235"
    assert format_value(12.0, "sum") == "12"
    assert format_value(float("nan")) == "-"
