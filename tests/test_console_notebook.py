"""Progress in a notebook (issue 39): executed without a live front end (nbclient, as ``jupyter nbconvert --execute``),
a bar's saved output ends at its true total as plain text, with no widget (GitHub showed ``Output()``) and no comm
("No such comm"); rich's live display left bars frozen where their last redraw happened. Log lines are plain stderr
text (rich's notebook output saved ANSI colour codes)."""

from __future__ import annotations

import pytest

nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")
pytest.importorskip("ipykernel")

CELL = """
import time
from rankkit.console import progress_bar, warn
warn("careful [bold]now[/bold]")
with progress_bar("q") as bar:
    task = bar.add_task("counting", total=7)
    for _ in range(7):
        time.sleep(0.12)
        bar.advance(task)
with progress_bar("q", transient=True) as bar:
    task = bar.add_task("gone", total=2)
    bar.advance(task, 2)
print("done")
"""


def test_a_bar_in_an_executed_notebook_ends_at_its_total_as_text() -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(CELL)]
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    outputs = notebook.cells[0].outputs
    saved = nbformat.writes(notebook)
    assert "No such comm" not in saved and "widget" not in saved and "Output()" not in saved
    bars = [o for o in outputs if o.get("output_type") == "display_data"]
    assert len(bars) == 1, outputs  # one display, updated in place; the transient bar left nothing
    text = bars[0]["data"]["text/plain"]
    assert text.startswith("━" * 30 + " counting: 7/7 q (100.0%)"), text
    assert "<progress value=\"7\" max=\"7\"" in bars[0]["data"]["text/html"]
    streams = [(o["name"], o["text"]) for o in outputs if o.get("output_type") == "stream"]
    assert ("stdout", "done\n") in streams
    assert ("stderr", "warning: careful now\n") in streams  # a plain line: no ANSI colour codes in the saved text
