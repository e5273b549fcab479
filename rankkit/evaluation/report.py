"""Every rendering of evaluation results: rich table, TSV, JSON, Markdown and LaTeX.

This is the only module that formats tables. Summary tables have one row per run and one column
per measure (labels as the user wrote them); a ``†`` marks a significant difference from the
baseline and the lines under each table say how the averages were taken. TSV and JSON carry full
precision and every p-value; the human formats round to four decimals like trec_eval.
"""

from __future__ import annotations

import io
import json
import math
from typing import Any, Iterable

from rich.console import Console
from rich.table import Table
from rich.text import Text

from rankkit.errors import RankkitError
from rankkit.evaluation.evaluate import EvalResult
from rankkit.evaluation.significance import Significance

FORMATS: tuple[str, ...] = ("table", "tsv", "json", "markdown", "latex")
MARK = "†"


def format_value(value: float, how: str = "mean") -> str:
    """Four decimals (trec_eval's precision); counters as integers; NaN as ``-``."""
    if math.isnan(value):
        return "-"
    if how == "sum" and float(value).is_integer():
        return str(int(value))
    return f"{value:.4f}"


def _json_number(value: float, how: str = "mean") -> float | int | None:
    if math.isnan(value):
        return None
    if how == "sum" and float(value).is_integer():
        return int(value)
    return float(value)


def _tsv_number(value: float, how: str = "mean") -> str:
    if math.isnan(value):
        return "nan"
    if how == "sum" and float(value).is_integer():
        return str(int(value))
    return repr(float(value))


def _run_order(result: EvalResult, significance: Significance | None) -> list[str]:
    """Runs in the order given, the baseline first."""
    names = list(result.runs)
    if significance is not None:
        names.remove(significance.baseline)
        names.insert(0, significance.baseline)
    return names


def _summary_rows(result: EvalResult, significance: Significance | None) -> list[list[str]]:
    rows = []
    for name in _run_order(result, significance):
        run = result.runs[name]
        cells = [name]
        for spec in result.measures:
            cell = format_value(run.aggregates[spec.label], spec.aggregate)
            comparison = significance.get(name, spec.label) if significance else None
            if comparison is not None and comparison.significant:
                cell += MARK
            cells.append(cell)
        rows.append(cells)
    return rows


def _per_query_rows(result: EvalResult, name: str) -> list[list[str]]:
    run = result.runs[name]
    return [
        [qid] + [format_value(run.values[i, col], spec.aggregate) for i, spec in enumerate(result.measures)]
        for col, qid in enumerate(run.qids)
    ]


def _notes(result: EvalResult, significance: Significance | None) -> list[str]:
    lines = result.caption()
    if significance is not None and significance.comparisons:
        lines.append(significance.legend())
    return lines


# -- rich table ----------------------------------------------------------------------------------


def _rich_table(header: list[str], rows: Iterable[list[str]], title: str | None = None) -> Table:
    # Text objects, not str: run paths and labels are shown as they are, never read as rich markup.
    table = Table(title=Text(title) if title else None, title_justify="left", header_style="bold")
    table.add_column(Text(header[0]), justify="left", no_wrap=True)
    for label in header[1:]:
        table.add_column(Text(label), justify="right", no_wrap=True)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    return table


def print_tables(
    result: EvalResult,
    console: Console,
    *,
    per_query: bool = False,
    significance: Significance | None = None,
) -> None:
    """Print the summary table (and per-query tables) with the notes under it to ``console``."""
    console.print(_rich_table(["run", *result.labels], _summary_rows(result, significance)))
    for line in _notes(result, significance):
        console.print(line, highlight=False, markup=False)
    if per_query:
        for name in _run_order(result, significance):
            console.print()
            rows = _per_query_rows(result, name)
            console.print(_rich_table(["qid", *result.labels], rows, title=f"per query: {name}"))


def _render_table(result: EvalResult, per_query: bool, significance: Significance | None) -> str:
    buffer = io.StringIO()
    # A wide, colourless console: tables keep their natural width and the text is the same everywhere.
    console = Console(file=buffer, width=100_000, color_system=None, force_terminal=False, soft_wrap=True)
    print_tables(result, console, per_query=per_query, significance=significance)
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines()) + "\n"


# -- TSV -------------------------------------------------------------------------------------------


def _printable(text: str) -> str:
    """``text`` on one line: a tab, a newline or another non-printable character of a run's name (a file name
    may hold any) written as its escape, so it cannot split a TSV row, a Markdown table or a LaTeX line."""
    return text if text.isprintable() else "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def _render_tsv(result: EvalResult, per_query: bool, significance: Significance | None) -> str:
    header = ["run", "qid", "measure", "value"]
    if significance is not None:
        header += [
            "delta", "p_t", "p_t_adjusted", "p_randomization", "p_randomization_adjusted", "significant"]
    lines = ["\t".join(header)]
    for name in _run_order(result, significance):
        run = result.runs[name]
        for spec in result.measures:
            row = [name, "all", spec.label, _tsv_number(run.aggregates[spec.label], spec.aggregate)]
            if significance is not None:
                c = significance.get(name, spec.label)
                if c is None:
                    row += [""] * 6
                else:
                    row += [
                        _tsv_number(c.delta),
                        _tsv_number(c.p_t),
                        _tsv_number(c.p_t_adjusted),
                        _tsv_number(c.p_randomization),
                        _tsv_number(c.p_randomization_adjusted),
                        "1" if c.significant else "0",
                    ]
            lines.append("\t".join(_printable(cell) for cell in row))
        if per_query:
            for col, qid in enumerate(run.qids):
                for i, spec in enumerate(result.measures):
                    row = [name, qid, spec.label, _tsv_number(run.values[i, col], spec.aggregate)]
                    if significance is not None:
                        row += [""] * 6
                    lines.append("\t".join(_printable(cell) for cell in row))
    return "\n".join(lines) + "\n"


# -- JSON ------------------------------------------------------------------------------------------


def to_json(
    result: EvalResult, *, per_query: bool = False, significance: Significance | None = None
) -> dict[str, Any]:
    """``{run: {measure: value, ..., "per_query": {qid: {measure: value}}, "significance": {...}}}``."""
    out: dict[str, Any] = {}
    for name in _run_order(result, significance):
        run = result.runs[name]
        entry: dict[str, Any] = {
            spec.label: _json_number(run.aggregates[spec.label], spec.aggregate) for spec in result.measures
        }
        if per_query:
            entry["per_query"] = {
                qid: {
                    spec.label: _json_number(run.values[i, col], spec.aggregate)
                    for i, spec in enumerate(result.measures)
                }
                for col, qid in enumerate(run.qids)
            }
        if significance is not None and name != significance.baseline:
            tests: dict[str, Any] = {}
            for spec in result.measures:
                c = significance.get(name, spec.label)
                if c is None:
                    continue  # a counter (num_ret, ...): not tested
                tests[spec.label] = {
                    "baseline": significance.baseline,
                    "queries": c.n,
                    "delta": _json_number(c.delta),
                    "p_t": _json_number(c.p_t),
                    "p_t_adjusted": _json_number(c.p_t_adjusted),
                    "p_randomization": _json_number(c.p_randomization),
                    "p_randomization_adjusted": _json_number(c.p_randomization_adjusted),
                    "significant": c.significant,
                    "test": significance.test,
                    "correction": significance.correction,
                    "alpha": significance.alpha,
                }
            entry["significance"] = tests
        out[name] = entry
    return out


# -- Markdown ----------------------------------------------------------------------------------


def _md_cell(text: str) -> str:
    return _printable(text).replace("|", "\\|")


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(_md_cell(h) for h in header) + " |"]
    lines.append("| " + " | ".join(["---"] + ["---:"] * (len(header) - 1)) + " |")
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return lines


def _render_markdown(result: EvalResult, per_query: bool, significance: Significance | None) -> str:
    lines = _md_table(["run", *result.labels], _summary_rows(result, significance))
    lines.append("")
    lines += [f"{note}  " for note in _notes(result, significance)]
    if per_query:
        for name in _run_order(result, significance):
            lines += ["", f"#### Per query: {_md_cell(name)}", ""]
            lines += _md_table(["qid", *result.labels], _per_query_rows(result, name))
    return "\n".join(lines) + "\n"


# -- LaTeX -------------------------------------------------------------------------------------

_LATEX_ESCAPES = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", MARK: r"$^\dagger$",
}


def latex_escape(text: str) -> str:
    """Escape LaTeX's special characters (the significance mark becomes ``$^\\dagger$``)."""
    return "".join(_LATEX_ESCAPES.get(ch, ch) for ch in _printable(text))


def _latex_table(header: list[str], rows: list[list[str]], caption: str) -> list[str]:
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        r"\begin{tabular}{l" + "r" * (len(header) - 1) + "}",
        r"\toprule",
        " & ".join(latex_escape(h) for h in header) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(latex_escape(c) for c in row) + r" \\" for row in rows]
    lines += [r"\bottomrule", r"\end{tabular}", r"\caption{" + latex_escape(caption) + "}", r"\end{table}"]
    return lines


def _render_latex(result: EvalResult, per_query: bool, significance: Significance | None) -> str:
    caption = " ".join(_notes(result, significance))
    lines = ["% needs \\usepackage{booktabs}"]
    lines += _latex_table(["Run", *result.labels], _summary_rows(result, significance), caption)
    if per_query:
        for name in _run_order(result, significance):
            lines.append("")
            rows = _per_query_rows(result, name)
            lines += _latex_table(["Query", *result.labels], rows, f"Per query: {name}.")
    return "\n".join(lines) + "\n"


def render(
    result: EvalResult,
    fmt: str = "table",
    *,
    per_query: bool = False,
    significance: Significance | None = None,
) -> str:
    """The report as text in ``fmt`` (table, tsv, json, markdown or latex); same input, same bytes."""
    if fmt == "table":
        return _render_table(result, per_query, significance)
    if fmt == "tsv":
        return _render_tsv(result, per_query, significance)
    if fmt == "json":
        data = to_json(result, per_query=per_query, significance=significance)
        return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    if fmt == "markdown":
        return _render_markdown(result, per_query, significance)
    if fmt == "latex":
        return _render_latex(result, per_query, significance)
    raise RankkitError(f"unknown format {fmt!r} (choose {', '.join(FORMATS)})")
