"""``rankkit eval`` end to end: formats, options, warnings, and one-line errors on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rankkit.cli import eval_cmd
from rankkit.evaluation import report, significance

DL19 = Path(__file__).parents[1] / "data" / "dl19"
QRELS = DL19 / "qrels.dl19-passage.txt"
BM25 = DL19 / "BM25.trec_results_dl19.txt"
ADA2 = DL19 / "OPEN_AI_ADA2.trec_results_dl19.txt"

TINY_QRELS = "1 0 a 1\n1 0 b 0\n2 0 c 2\n3 0 d 1\n"
TINY_RUN = "1 Q0 a 1 2.0 t\n1 Q0 b 2 1.0 t\n2 Q0 x 1 3.0 t\n2 Q0 c 2 2.0 t\n9 Q0 a 1 1.0 t\n"


@pytest.fixture
def tiny(tmp_path: Path) -> tuple[Path, Path]:
    qrels = tmp_path / "qrels.txt"
    qrels.write_text(TINY_QRELS)
    run = tmp_path / "run.txt"
    run.write_text(TINY_RUN)
    return qrels, run


def test_default_measures_side_by_side(cli) -> None:
    result = cli("eval", "--qrels", QRELS, BM25, ADA2, "--format", "table")
    assert result.code == 0, result.stderr
    header = result.stdout.splitlines()[1]
    for label in ("nDCG@10", "RR@10", "AP", "R@1000"):
        assert label in header
    bm25_row = next(line for line in result.stdout.splitlines() if "BM25" in line)
    assert "0.5058" in bm25_row and "0.2993" in bm25_row  # trec_eval's ndcg_cut_10 and map
    assert "Averages over the 43 queries" in result.stdout


def test_json_labels_as_given_and_comma_forms(cli) -> None:
    result = cli("eval", "--qrels", QRELS, BM25, "-m", "ndcg_cut.10,100", "-m", "nDCG@10", "-m", "P_10",
                 "--format", "json")
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    assert list(data[str(BM25)]) == ["ndcg_cut.10", "ndcg_cut.100", "nDCG@10", "P_10"]
    assert data[str(BM25)]["ndcg_cut.10"] == data[str(BM25)]["nDCG@10"]
    assert data[str(BM25)]["ndcg_cut.100"] == pytest.approx(0.5018, abs=1e-4)
    assert data[str(BM25)]["P_10"] == pytest.approx(0.6186, abs=1e-4)


def test_baseline_significance_is_deterministic(cli, tmp_path: Path) -> None:
    args = ("eval", "--qrels", QRELS, ADA2, "--baseline", BM25, "-m", "nDCG@10", "-m", "map",
            "--format", "json", "--per-query")
    first = cli(*args)
    assert first.code == 0, first.stderr
    data = json.loads(first.stdout)
    assert list(data) == [str(BM25), str(ADA2)]  # the baseline is added, and listed first
    tested = data[str(ADA2)]["significance"]["nDCG@10"]
    assert tested["significant"] is True and tested["queries"] == 43 and tested["test"] == "randomization"
    assert 0 < tested["p_randomization"] < 0.01 and 0 < tested["p_t"] < 0.01
    assert len(data[str(ADA2)]["per_query"]) == 43
    assert cli(*args).stdout == first.stdout
    changed = json.loads(cli(*args, "--seed", "2").stdout)[str(ADA2)]["significance"]["map"]
    assert changed["p_randomization"] != data[str(ADA2)]["significance"]["map"]["p_randomization"]
    table = cli("eval", "--qrels", QRELS, BM25, ADA2, "--format", "table", "--baseline", BM25, "-m", "nDCG@10",
                "--test", "t", "--correction", "bonferroni")
    assert "0.7035†" in table.stdout and "paired t-test, Bonferroni-corrected" in table.stdout


def test_output_file_tsv_and_per_query(cli, tmp_path: Path) -> None:
    out = tmp_path / "scores" / "dl19.tsv"
    result = cli("eval", "--qrels", QRELS, BM25, "-m", "map", "-q", "--format", "tsv", "--output", out)
    assert result.code == 0, result.stderr
    assert result.stdout == ""
    rows = [line.split("\t") for line in out.read_text().splitlines()]
    assert rows[0] == ["run", "qid", "measure", "value"]
    assert len(rows) == 1 + 1 + 43
    assert rows[1][:3] == [str(BM25), "all", "map"]


@pytest.mark.parametrize("fmt", ["markdown", "latex"])
def test_other_formats(cli, fmt: str) -> None:
    result = cli("eval", "--qrels", QRELS, BM25, "-m", "ndcg_cut.10", "--format", fmt)
    assert result.code == 0, result.stderr
    assert "0.5058" in result.stdout


def test_queries_missing_from_qrels_are_left_out_with_a_warning(cli, tiny) -> None:
    qrels, run = tiny
    result = cli("eval", "--qrels", qrels, run, "-m", "P.1", "-m", "num_q", "--format", "json")
    assert result.code == 0, result.stderr
    assert "1 of 3 queries are not in the qrels" in result.stderr
    assert "1 qrels queries have no results" in result.stderr
    assert json.loads(result.stdout)[str(run)] == {"P.1": 0.5, "num_q": 2}
    complete = cli("eval", "--qrels", qrels, run, "-m", "P.1", "-m", "num_q", "-c", "--format", "json")
    assert json.loads(complete.stdout)[str(run)] == {"P.1": pytest.approx(1 / 3), "num_q": 3}
    assert "-c, as trec_eval -c" in cli("eval", "--qrels", qrels, run, "-c", "--format", "table").stdout


def test_max_docs_and_rel_level(cli, tiny) -> None:
    qrels, run = tiny
    cut = cli("eval", "--qrels", qrels, run, "-m", "recall.10", "-M", "1", "--format", "json")
    assert json.loads(cut.stdout)[str(run)] == {"recall.10": 0.5}  # query 2 loses c at rank 2
    strict = cli("eval", "--qrels", qrels, run, "-m", "recall.10", "-l", "2", "--format", "json")
    assert json.loads(strict.stdout)[str(run)] == {"recall.10": 0.5}  # query 1 has no label >= 2
    assert "-l 2" in cli("eval", "--qrels", qrels, run, "-l", "2", "--format", "table").stdout


def test_ties_and_unsorted_ranks_are_fine(cli, tmp_path: Path, tiny) -> None:
    qrels, _ = tiny
    tied = tmp_path / "tied.txt"
    tied.write_text("1 Q0 a 1 1.0 t\n1 Q0 b 2 1.0 t\n")  # trec_eval order: b (docid desc) before a
    result = cli("eval", "--qrels", qrels, tied, "-m", "RR", "-m", "RR@10", "--format", "json")
    assert json.loads(result.stdout)[str(tied)] == {"RR": 0.5, "RR@10": 0.5}


def test_plot(cli, tmp_path: Path) -> None:
    png = tmp_path / "dl19.png"
    result = cli("eval", "--qrels", QRELS, BM25, ADA2, "--baseline", BM25, "-m", "nDCG@10", "-m", "R@100",
                 "--plot", png)
    assert result.code == 0, result.stderr
    assert png.read_bytes()[:4] == b"\x89PNG"
    lonely = cli("eval", "--qrels", QRELS, BM25, "-m", "nDCG@10", "--plot", tmp_path / "no.png")
    assert lonely.code == 2 and "--plot needs" in lonely.stderr
    assert not (tmp_path / "no.png").exists()


def one_line_error(result) -> str:
    assert result.code == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("rankkit: error: ")
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("content", "line", "problem"),
    [
        ("1 Q0 a 1 2.0 t\n1 Q0 b 2 1.0\n", 2, "expected 6 columns"),
        ("1 Q0 a 1 2.0 t\n1 Q0 b 2 high t\n", 2, "score 'high' is not a number"),
        ("1 Q0 a 1 2.0 t\n2 Q0 c 1 1.0 t\n1 Q0 a 3 0.5 t\n", 3, "duplicate document 'a'"),
    ],
)
def test_malformed_run_is_one_line_with_file_and_line(
    cli, tmp_path: Path, tiny, content: str, line: int, problem: str
) -> None:
    qrels, good = tiny
    bad = tmp_path / "bad.txt"
    bad.write_text(content)
    out = tmp_path / "out.json"
    message = one_line_error(cli("eval", "--qrels", qrels, good, bad, "--format", "json", "--output", out))
    assert f"{bad}:{line}: {problem}" in message
    assert set(tmp_path.iterdir()) == {qrels, good, bad}  # no output, no temporary file


def test_empty_and_missing_files(cli, tmp_path: Path, tiny) -> None:
    qrels, good = tiny
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    out = tmp_path / "out.tsv"
    assert f"{empty}: file is empty" in one_line_error(cli("eval", "--qrels", qrels, empty, "-o", out))
    missing = tmp_path / "nope.txt"
    assert f"{missing}: no such file" in one_line_error(cli("eval", "--qrels", qrels, missing, "-o", out))
    assert f"{missing}: no such file" in one_line_error(cli("eval", "--qrels", missing, good, "-o", out))
    bad_qrels = tmp_path / "bad_qrels.txt"
    bad_qrels.write_text("1 0 a 1\n1 0 b\n")
    message = one_line_error(cli("eval", "--qrels", bad_qrels, good, "-o", out))
    assert f"{bad_qrels}:2: expected 4 columns" in message
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary files either


def test_bad_measures_and_options(cli, tmp_path: Path, tiny) -> None:
    qrels, run = tiny
    out = tmp_path / "out.json"
    message = one_line_error(cli("eval", "--qrels", qrels, run, "-m", "nDGC@10", "-o", out))
    assert "unknown measure 'nDGC@10'" in message
    assert "utility is not supported" in one_line_error(cli("eval", "--qrels", qrels, run, "-m", "utility"))
    assert "--format must be one of" in one_line_error(cli("eval", "--qrels", qrels, run, "--format", "xml"))
    assert "--test must be one of" in one_line_error(cli("eval", "--qrels", qrels, run, "--test", "z"))
    assert "--alpha" in one_line_error(cli("eval", "--qrels", qrels, run, "--alpha", "2"))
    assert "--max-docs" in one_line_error(cli("eval", "--qrels", qrels, run, "-M", "0"))
    assert "given twice" in one_line_error(cli("eval", "--qrels", qrels, run, run))
    wrong = tmp_path / "wrong_qrels.txt"
    wrong.write_text("77 0 a 1\n")
    assert "none of its 3 queries" in one_line_error(cli("eval", "--qrels", wrong, run, "-o", out))
    assert not out.exists()


def test_cli_choices_match_the_library() -> None:
    assert eval_cmd.FORMATS == report.FORMATS
    assert eval_cmd.TESTS == significance.TESTS
    assert eval_cmd.CORRECTIONS == significance.CORRECTIONS
