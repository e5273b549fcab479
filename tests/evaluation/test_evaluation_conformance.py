"""rankkit's evaluation reproduces trec_eval 10.0-rc3's own expected outputs.

Two sources (copied into tests/data with their PROVENANCE): trec_eval's regression suite
(tests/data/trec_eval, commands in its quicktest_commands.txt) and trec_eval's output on real TREC DL
2019 runs (tests/data/dl19/expected-trec_eval, commands in the file headers). Every measure name in
every expected file is translated by rankkit; each value (per query and "all") must match within
1e-4 (trec_eval prints four decimals). The measures that do not match are exactly those documented,
with the reason, in docs/EVALUATION.md; that table is parsed here, so the documentation cannot drift.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from pathlib import Path

import pytest

from rankkit.errors import RankkitError
from rankkit.evaluation import evaluate, parse_measure
from rankkit.evaluation.measures import trec_base_name
from rankkit.formats import Run, read_qrels, read_run

DATA = Path(__file__).parents[1] / "data"
TE = DATA / "trec_eval"
DL19 = DATA / "dl19"
DOCS = Path(__file__).parents[2] / "docs" / "EVALUATION.md"
TOLERANCE = 1e-4

# expected file -> (qrels, run, options): the quicktest command of each (see quicktest_commands.txt).
SUITE = {
    "out.test": ("qrels.test", "results.test", {}),
    "out.test.aq": ("qrels.test", "results.test", {}),
    "out.test.aqc": ("qrels.test", "results.trunc", {"complete": True}),
    "out.test.aqcM": ("qrels.test", "results.trunc", {"complete": True, "max_docs": 100}),
    "out.test.aql": ("qrels.rel_level", "results.test", {"rel_level": 2}),
    "out.test.meas_params": ("qrels.test", "results.test", {}),
}


def read_trec_eval_run(path: Path) -> Run:
    """trec_eval's own reading of a run: the first six columns, anything after them ignored.

    results.trunc has free text after the tag on some lines ("reserved for future expansion"),
    which rankkit's strict reader rejects; every other run here goes through read_run.
    """
    run: Run = {}
    for line in path.read_text().splitlines():
        fields = line.split()
        if len(fields) >= 6:
            run.setdefault(fields[0], {})[fields[2]] = float(fields[4])
    return run


def parse_expected(path: Path) -> dict[str, dict[str, str]]:
    """``{measure name: {qid or "all": value text}}`` from trec_eval's three-column output."""
    out: dict[str, dict[str, str]] = {}
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, qid, value = (part.strip() for part in line.split("\t"))
        out.setdefault(name, {})[qid] = value
    return out


def compare_file(expected: dict[str, dict[str, str]], qrels, run: Run, options: dict) -> tuple[set[str], int]:
    """Evaluate every measure of one expected file; return (unmatched families, values matched)."""
    unmatched: set[str] = set()
    specs = {}
    for name in expected:
        family = trec_base_name(name)
        assert family is not None, f"{name} is not a trec_eval name rankkit knows"
        try:
            (spec,) = parse_measure(name, rel_level=options.get("rel_level"))
        except RankkitError:
            unmatched.add(family)
            continue
        specs[name] = spec
    result = evaluate({"run": run}, qrels, list(specs.values()), **options)
    scores = result.runs["run"]
    matched = 0
    for name, spec in specs.items():
        row = result.row(spec.label)
        for qid, text in expected[name].items():
            want = float(text)
            if qid == "all":
                got = scores.aggregates[spec.label]
            else:
                got = scores.values[row, scores.qids.index(qid)]
            if math.isclose(got, want, abs_tol=TOLERANCE):
                matched += 1
            else:
                unmatched.add(trec_base_name(name))  # type: ignore[arg-type]
    return unmatched, matched


def documented_unmatched() -> dict[str, set[str]]:
    """The table between the unmatched-measures markers in docs/EVALUATION.md: {family: files}."""
    text = DOCS.read_text()
    body = text.split("<!-- unmatched-measures:start -->")[1].split("<!-- unmatched-measures:end -->")[0]
    table: dict[str, set[str]] = {}
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`"):
            continue
        family = cells[0].strip("`")
        table[family] = {f.strip().strip("`") for f in cells[1].split(",")}
    return table


def conformance() -> tuple[dict[str, set[str]], dict[str, set[str]], int]:
    """Run every expected file: ({family: files where unmatched}, {family: files where present}, matched)."""
    unmatched: dict[str, set[str]] = {}
    present: dict[str, set[str]] = {}
    matched = 0
    cases = [
        (f"trec_eval/{name}", parse_expected(TE / name), read_qrels(TE / q),
         read_run(TE / r) if r != "results.trunc" else read_trec_eval_run(TE / r), opts)
        for name, (q, r, opts) in SUITE.items()
    ]
    cases.append((
        "dl19/BM25.dl19.all_trec.q.txt",
        parse_expected(DL19 / "expected-trec_eval" / "BM25.dl19.all_trec.q.txt"),
        read_qrels(DL19 / "qrels.dl19-passage.txt"), read_run(DL19 / "BM25.trec_results_dl19.txt"), {},
    ))
    for label, expected, qrels, run, opts in cases:
        bad, ok = compare_file(expected, qrels, run, opts)
        matched += ok
        for name in expected:
            present.setdefault(trec_base_name(name), set()).add(label)  # type: ignore[arg-type]
        for family in bad:
            unmatched.setdefault(family, set()).add(label)
    return unmatched, present, matched


@pytest.fixture(scope="module")
def suite_results() -> tuple[dict[str, set[str]], dict[str, set[str]], int]:
    return conformance()


def test_unmatched_measures_are_exactly_the_documented_ones(suite_results) -> None:
    unmatched, present, matched = suite_results
    documented = documented_unmatched()
    expanded = {
        family: present.get(family, set()) if files == {"all"} else files
        for family, files in documented.items()
    }
    assert unmatched == expanded
    assert matched > 2500  # thousands of (measure, query) values really compared


def test_core_trec_eval_measures_match_everywhere(suite_results) -> None:
    unmatched, present, _ = suite_results
    core = {"map", "gm_map", "Rprec", "bpref", "recip_rank", "P", "recall", "ndcg", "ndcg_cut", "map_cut",
            "success", "infAP", "gm_bpref", "set_P", "set_recall", "set_map", "set_F", "set_relative_P",
            "num_q", "num_ret", "num_rel_ret"}
    assert core <= set(present)
    assert not core & set(unmatched)


def _dl19_blocks(path: Path) -> list[tuple[list[str], dict[str, str]]]:
    """Split an expected file into (trec_eval arguments, {measure: "all" value}) per header."""
    blocks: list[tuple[list[str], dict[str, str]]] = []
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            args = shlex.split(line.split(": ", 1)[1] if "): " in line else line[1:])
            blocks.append((args[args.index("trec_eval") + 1:], {}))
        elif line.strip():
            name, qid, value = (part.strip() for part in line.split("\t"))
            assert qid == "all"
            blocks[-1][1][name] = value
    return blocks


def _cli_args(trec_args: list[str], run: Path) -> list[str]:
    """Translate a trec_eval command line to ``rankkit eval`` arguments (qrels and run made local)."""
    args = ["eval", "--qrels", str(DL19 / "qrels.dl19-passage.txt"), str(run), "--format", "json"]
    options = trec_args[:-2]
    i = 0
    while i < len(options):
        flag = options[i]
        if flag in ("-m", "-l", "-M"):
            args += [flag, options[i + 1]]
            i += 2
        elif flag == "-c":
            args.append("-c")
            i += 1
        else:
            raise AssertionError(f"unexpected trec_eval option {flag}")
    return args


def _label(trec_output_name: str) -> str:
    """trec_eval prints ``ndcg_cut_10`` for ``-m ndcg_cut.10``; rankkit labels it as given."""
    base, _, param = trec_output_name.rpartition("_")
    return f"{base}.{param}" if base and re.fullmatch(r"[0-9.]+", param) else trec_output_name


@pytest.mark.parametrize("system", ["BM25", "OPEN_AI_ADA2"])
def test_cli_reproduces_trec_eval_on_dl19(cli, system: str) -> None:
    run = DL19 / f"{system}.trec_results_dl19.txt"
    blocks = _dl19_blocks(DL19 / "expected-trec_eval" / f"{system}.dl19.txt")
    assert len(blocks) == 2 and any("-l" in args for args, _ in blocks)
    for trec_args, expected in blocks:
        result = cli(*_cli_args(trec_args, run))
        assert result.code == 0, result.stderr
        scores = json.loads(result.stdout)[str(run)]
        for name, value in expected.items():
            assert scores[_label(name)] == pytest.approx(float(value), abs=TOLERANCE), (trec_args, name)


def test_published_dl19_numbers() -> None:
    """BM25 nDCG@10 on DL19 is 0.5058 in Anserini's regressions (and in trec_eval's output here)."""
    qrels = read_qrels(DL19 / "qrels.dl19-passage.txt")
    run = read_run(DL19 / "BM25.trec_results_dl19.txt")
    result = evaluate({"bm25": run}, qrels, ["nDCG@10", "ndcg_cut.10"])
    assert result.runs["bm25"].aggregates["nDCG@10"] == pytest.approx(0.5058, abs=5e-5)
    assert result.runs["bm25"].aggregates["ndcg_cut.10"] == result.runs["bm25"].aggregates["nDCG@10"]
