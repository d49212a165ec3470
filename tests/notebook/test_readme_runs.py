"""The README runs as written: jupytext reads README.md as a notebook (each ```python block a code
cell, in order) and every Python/IPython block runs, one after another, in a real kernel (nbclient),
with the ScriptedModel the tour defines. The shell blocks (``make``, ``pip``, ``docker``) are not
Python; the few blocks that need something this machine cannot have are listed in ``NOT_RUN`` with
why, and the list must match the README exactly (a new block runs unless it is listed)."""

from __future__ import annotations

from pathlib import Path

import jupytext
import pytest

from tests.notebook.support import REPO, KernelSession

#: The first line of each README block the test does not run, and why.
NOT_RUN = {
    "from mcp import StdioServerParameters": "starts an MCP server from npm (npx) and one on port 8000",
    'rt = loom.Runtime.open("postgresql://me@db.example:5432/loom")   # or in a script': (
        "a PostgreSQL server elsewhere"
    ),
    "from mymodule import clerk                      # an Agent": "the reader's module and a PostgreSQL journal",
}


def python_blocks(path: Path) -> list[str]:
    """The Python/IPython blocks of a Markdown file, in order (jupytext's Markdown reader)."""
    notebook = jupytext.read(path, fmt="md")
    return [c.source for c in notebook.cells if c.cell_type == "code" and not c.source.startswith("%%")]


def test_every_readme_block_that_is_not_run_is_listed_with_why() -> None:
    firsts = [block.splitlines()[0] for block in python_blocks(REPO / "README.md")]
    assert set(NOT_RUN) <= set(firsts)
    assert len(firsts) - len(NOT_RUN) >= 6  # the tour, the gate, the session, the frames, models, traces


@pytest.mark.slow
def test_the_readme_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tidy-me").mkdir()
    (tmp_path / "tidy-me" / "old.log").write_text("stale\n")
    monkeypatch.delenv("LOOM_JOURNAL", raising=False)
    ran: list[str] = []
    with KernelSession(tmp_path, timeout=120) as kernel:
        for block in python_blocks(REPO / "README.md"):
            if block.splitlines()[0] in NOT_RUN:
                continue
            kernel.run(block)  # raises CellExecutionError, with the cell, on any error
            ran.append(block.splitlines()[0])
        result = kernel.stdout("print(repr(result.output), run.status)")
        edits = kernel.stdout("print(f.tool_calls(run.id)[['name', 'arguments', 'status']].to_dict('records'))")
    assert ran[0] == "%load_ext loom_nb"
    assert result.strip() == "'deleted tidy-me/old.log' completed"
    assert not (tmp_path / "tidy-me" / "old.log").exists()
    assert "'name': 'delete_file', 'arguments': {'path': 'tidy-me/old.log'}, 'status': 'completed'" in edits
    assert (tmp_path / "loom.duckdb").exists()
