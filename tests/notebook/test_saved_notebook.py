"""A notebook executed by nbclient (as ``nbconvert --execute`` and ``make notebooks`` do) stores the
final state of a live view whose run, or batch, ends while a later cell runs: nbclient drops the
display updates a previous cell's run sends, so the view's display is updated again after each cell
(``runs.republish_displays``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"

AGENT_CELL = """
import loom_nb as loom

WORDS = " ".join(f"word{i}" for i in range(20))
agent = loom.Agent(model=loom.ScriptedModel(lambda request: loom.ModelResponse.text(WORDS), delta_delay=0.05),
                   name="talker")
"""


def view_texts(cell: Any) -> list[str]:
    return [
        "".join(o["data"]["text/plain"])
        for o in cell.outputs
        if o.get("output_type") == "display_data" and WIDGET_MIME in o.get("data", {})
    ]


def test_nbclient_stores_the_final_state_of_a_run_that_ends_in_a_later_cell(tmp_path: Path) -> None:
    import nbformat
    from nbclient import NotebookClient

    journal = tmp_path / "saved.duckdb"
    cells = [
        f"import os\nos.environ['LOOM_JOURNAL'] = {str(journal)!r}\n%load_ext loom_nb",
        AGENT_CELL,
        "run = agent.start('Talk')",  # the view is displayed here, running
        "result = await run\nprint(run.status)",  # the run ends while this cell runs
        "batch = agent.map(['a', 'b', 'c'], concurrency=3)",
        "await batch\nprint(batch)",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(nb, kernel_name="python3", timeout=120, resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert "".join(o.get("text", "") for o in nb.cells[3].outputs) == "completed\n"
    (text,) = view_texts(nb.cells[2])
    lines = text.splitlines()
    assert lines[0].endswith("(agent:talker): completed, turn 1/20"), text
    assert lines[-2:] == ["  answer: " + " ".join(f"word{i}" for i in range(20)), lines[-1]]
    assert lines[-1].startswith("  usage: ")
    (batch_text,) = view_texts(nb.cells[4])
    assert batch_text == "batch agent:talker: 3/3 done, 0 failed, 0 waiting at a gate"
