"""The example notebook (issue 39), executed as CI executes notebooks (nbclient, the engine of ``jupyter nbconvert
--execute``): ``examples/python_api.ipynb`` runs top to bottom on the bundled DL19 data, and its outputs (the fresh
ones and the ones saved in the repository, which GitHub shows) hold an ``experiment`` table, ``mine`` in Python, a
``train`` from a DataFrame and a ``rank``, with every progress bar at its true total and no comm noise."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")
pytest.importorskip("ipykernel")
pytest.importorskip("pandas")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NOTEBOOK = EXAMPLES / "python_api.ipynb"
BAR = re.compile(r"^[━─]{30} (?P<what>[^:]+): (?P<done>[\d,]+)/(?P<total>[\d,]+) \S+ \((?P<percent>[\d.]+)%\)")


def texts(notebook: Any) -> list[str]:
    """Every output's text, cell by cell (streams, displays and results as plain text)."""
    out = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if output["output_type"] == "stream":
                out.append(output["text"])
            elif "data" in output:
                out.append(output["data"].get("text/plain", ""))
    return out


def check_outputs(notebook: Any) -> None:
    saved = nbformat.writes(notebook)
    assert "No such comm" not in saved and "application/vnd.jupyter.widget" not in saved and "Output()" not in saved
    assert "\x1b[" not in saved  # no ANSI colour codes in the saved text
    outputs = texts(notebook)
    bars = [match for text in outputs for line in text.splitlines() if (match := BAR.match(line))]
    assert {bar["what"].split(" loss ")[0] for bar in bars} >= {"mining", "training", "re-ranking"}, outputs
    for bar in bars:  # every bar ended at its true total
        assert bar["done"] == bar["total"] and bar["percent"] == "100.0", bar.group(0)
    joined = "\n".join(outputs)
    assert "nDCG@10 p_randomization_adjusted" in joined and "TAS-B" in joined  # the experiment table
    assert "groups written: 24" in joined  # mine in Python
    assert re.search(r"training loss [\d.]+ \(mean of 10 steps\)", joined)  # train from the DataFrame
    assert "BM25 >> mono" in joined and "anthropological definition of environment" in joined  # rank and rerank


def test_the_saved_notebook_shows_finished_bars_and_every_stage() -> None:
    check_outputs(nbformat.read(NOTEBOOK, as_version=4))


def test_the_notebook_runs_as_ci_executes_it() -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    for cell in notebook.cells:  # from scratch: the saved outputs are not what is checked here
        if cell.cell_type == "code":
            cell["outputs"], cell["execution_count"] = [], None
    nbclient.NotebookClient(notebook, timeout=1200, kernel_name="python3",
                            resources={"metadata": {"path": str(EXAMPLES)}}).execute()
    check_outputs(notebook)
