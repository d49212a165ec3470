"""Tutorials 01, 02, 03, 09b and 11 work when the reader clicks the cards instead of letting the cells answer: their
cells run in a real kernel, in order, with clicks (the comm message a browser sends for a Button) where a
reader would click, and no cell fails."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.notebook.support import REPO, KernelSession, kernel_button_ids

pytestmark = pytest.mark.slow


def code_cells(name: str) -> list[str]:
    nb = json.loads((REPO / "notebooks" / name).read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def stdout_of(outputs: list[dict[str, object]]) -> str:
    return "".join(str(o.get("text", "")) for o in outputs if o.get("output_type") == "stream")


def run_until(k: KernelSession, cells: list[str], marker: str) -> list[str]:
    """Run the cells up to and including the first one containing ``marker``; returns the rest."""
    while cells:
        source = cells.pop(0)
        k.run(source)
        if marker in source:
            return cells
    raise AssertionError(f"no cell contains {marker!r}")


QUICKSTART_RESULT = "completed\nDone: deleted report-2023.csv. notes.md stays.\nend_turn after 3 turns\n"


def test_quickstart_with_a_click_on_approve(tmp_path: Path) -> None:
    with KernelSession(tmp_path) as k:
        cells = run_until(k, code_cells("01-quickstart.ipynb"), 'await run.wait(until="paused")')
        (approve,) = kernel_button_ids(k, "loom-approve")
        k.click(approve)  # the reader clicks Approve on the card, then runs the next cell
        answer_cell = cells.pop(0)
        assert 'await run.wait(until="settled", timeout=seconds)' in answer_cell
        assert stdout_of(k.run(answer_cell)) == "answered on the card\n"
        assert stdout_of(k.run(cells.pop(0))).startswith(QUICKSTART_RESULT)
        for source in cells:
            k.run(source)  # every later cell runs without an error
        assert kernel_button_ids(k, "loom-approve") == []


def test_quickstart_with_a_click_while_the_answer_cell_waits(tmp_path: Path) -> None:
    """Run All: the answer cell is already waiting when the reader clicks; the click answers the gate
    (the cell does not approve from code) and the cell ends at once, not after its whole pause."""
    with KernelSession(tmp_path) as k:
        cells = run_until(k, code_cells("01-quickstart.ipynb"), 'await run.wait(until="paused")')
        (approve,) = kernel_button_ids(k, "loom-approve")
        began = time.monotonic()
        out = stdout_of(k.run_with_click(cells.pop(0), approve, after=1.0))
        took = time.monotonic() - began
        assert out == "answered on the card\n" and took < 2.8, (out, took)  # the cell waits 3 s at most
        assert stdout_of(k.run(cells.pop(0))).startswith(QUICKSTART_RESULT)


def test_quickstart_without_a_click_approves_from_code(tmp_path: Path) -> None:
    with KernelSession(tmp_path) as k:
        cells = run_until(k, code_cells("01-quickstart.ipynb"), 'await run.wait(until="paused")')
        began = time.monotonic()
        out = stdout_of(k.run(cells.pop(0)))
        assert out == "no click within 3 s: approving from code\n" and time.monotonic() - began >= 3, out
        assert stdout_of(k.run(cells.pop(0))).startswith(QUICKSTART_RESULT)


def test_crash_and_recovery_with_a_click_on_the_in_doubt_card(tmp_path: Path) -> None:
    """Tutorial 03: the in-doubt card ``%loom pending`` shows after the crash inside ``book``; the reader types
    the booking's result and clicks It happened while the next cell waits: the card's answer is the one
    recorded, and the room is booked once."""
    import shutil

    shutil.copy(REPO / "notebooks" / "crash_demo.py", tmp_path)  # the notebook imports it and runs it
    with KernelSession(tmp_path) as k:
        cells = run_until(k, code_cells("03-crash-and-recovery.ipynb"), "%loom pending")
        (happened,) = kernel_button_ids(k, "loom-happened")
        (output,) = kernel_button_ids(k, "loom-output", widget="Text")
        k.set_value(output, "booked a room in Rome (ref BK-ROME), by hand")
        out = stdout_of(k.run_with_click(cells.pop(0), happened, after=1.0))
        assert out == "answered on the card\n"
        result = stdout_of(k.run(cells.pop(0)))
        assert result.startswith(
            "completed\nTrip: Paris: rain, 14C | Rome: sunny, 24C | 100 EUR = 108.00 USD | "
            "booked a room in Rome (ref BK-ROME), by hand\n"
        ), result
        assert result.count("book('Rome')") == 1, result
        for source in cells:
            k.run(source)  # every later cell runs without an error
        assert kernel_button_ids(k, "loom-happened") == []


def test_sub_agents_with_a_click_on_the_researchers_card(tmp_path: Path) -> None:
    """Tutorial 09b: the reader approves the researcher's gate on the card nested in the lead's view while
    the answer cell waits; the lead goes on with the researcher's answer."""
    with KernelSession(tmp_path) as k:
        cells = run_until(k, code_cells("09b-sub-agents.ipynb"), 'await team.wait(until="paused")')
        k.run(cells.pop(0))  # prints the child's gate
        (approve,) = kernel_button_ids(k, "loom-approve")
        assert stdout_of(k.run_with_click(cells.pop(0), approve, after=1.0)) == "answered on the card\n"
        out = stdout_of(k.run(cells.pop(0)))
        assert out == "completed | The researcher says: Found: https://oslo.test: 12C, light rain\n"
        for source in cells:
            k.run(source)  # every later cell runs without an error


def test_approval_gates_with_clicks_on_the_cards_and_the_pending_card(tmp_path: Path) -> None:
    with KernelSession(tmp_path) as k:
        cells = run_until(k, code_cells("02-approval-gates.ipynb"), 'await run.wait(until="paused")')
        first, second, _third = kernel_button_ids(k, "loom-approve")
        k.click(first)  # the reader approves a.log and b.log on their cards, and leaves the audit file
        k.click(second)
        out = stdout_of(k.run(cells.pop(0)))
        assert out.splitlines() == [
            "answered audit-2024.csv; deleted so far: ['a.log', 'b.log']",
            "deleted: ['a.log', 'b.log']",
        ]
        cells = run_until(k, cells, "%loom pending")
        buttons = kernel_button_ids(k, "loom-approve")
        assert len(buttons) == 2  # the card in the start cell's view and the one %loom pending showed
        k.click(buttons[-1])  # Approve on the pending card
        resume_cell = cells.pop(0)
        assert "%loom resume" in resume_cell
        assert stdout_of(k.run(resume_cell)) == ""  # already answered: the cell does not resume again
        out = stdout_of(k.run(cells.pop(0)))
        assert out.startswith("Deleted: old-cache.tmp.\n")
        assert "2 execution(s) (2 completed); 0 open gate(s)" in out
        assert kernel_button_ids(k, "loom-approve") == []  # both cards of that gate say it was decided


def test_shared_journal_with_a_click_on_the_pending_card(_postgres_server: str, tmp_path: Path) -> None:
    """Tutorial 11 (a worker subprocess on the shared PostgreSQL journal): the reader clicks Approve on
    the card ``%loom pending`` shows for the run the worker drives; the answer cell then only waits,
    the worker finishes the run, and the last cell stops the worker."""
    import shutil

    shutil.copy(REPO / "notebooks" / "shared_demo.py", tmp_path)  # the worker imports it from the cwd
    with KernelSession(tmp_path) as k:
        cells = run_until(k, code_cells("11-shared-journal.ipynb"), "%loom pending")
        (approve,) = kernel_button_ids(k, "loom-approve")
        k.click(approve)  # the reader clicks Approve on the card
        answer_cell = cells.pop(0)
        assert "if not gate.resolved" in answer_cell
        assert stdout_of(k.run(answer_cell)) == "completed | Done: refunded 30 EUR on order 1042\n"
        answers = k.stdout(
            "print([e.data for e in loom.default_runtime().journal.read(refund_run.id) if e.kind == 'gate_resolved'])"
        )
        assert answers.count("'approved': True") == 1 and "a small refund" not in answers, answers  # the click's
        outs = [stdout_of(k.run(source)) for source in cells]  # every later cell runs without an error
        assert "{'worker': 7}" in "".join(outs)
        assert outs[-1] == "worker exit code: 130\n"
        assert kernel_button_ids(k, "loom-approve") == []
