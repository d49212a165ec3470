"""Run handles across cells, interrupts and restarts in JupyterLab (headless Debian Chromium, playwright,
real mouse clicks), in the light and the dark theme (the ``lab`` fixture): two handles on one execution
stay in sync when a ``%loom pending`` card is approved; Interrupt during ``await run`` stops the wait with
one line while the run goes on; after Kernel > Restart Kernel, ``%load_ext loom_nb`` reopens the journal
this notebook used and a ``%loom pending`` card still completes the parked run; a run the restart cut
short mid-stream is finished by ``%loom recover``, whose progress line follows it; a card shown before
a restart says it can no longer act, names ``%loom pending`` and records nothing."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.notebook.support import (
    BROWSER_MARKS,
    Lab,
    run_cell_with_toolbar,
    write_notebook,
)
from tests.notebook.test_view_browser import MAIL_CELL, new_page

pytestmark = BROWSER_MARKS


def setup_cell(journal: Path) -> str:
    return f"import os\nos.environ['LOOM_JOURNAL'] = {str(journal)!r}\n%load_ext loom_nb"


def open_notebook(page: Any, url: str, theme: str) -> None:
    """Open a notebook in ``theme`` and wait for an idle kernel (no cell is run)."""
    page.goto(url)
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=60_000)
    light = "true" if theme == "light" else "false"
    page.wait_for_selector(f"body[data-jp-theme-light='{light}']", state="attached", timeout=30_000)
    page.wait_for_selector("#jp-main-statusbar >> text=/Idle/", timeout=60_000)


def cell(page: Any, index: int) -> Any:
    return page.locator(".jp-NotebookPanel .jp-Cell").nth(index)


def restart_kernel(page: Any) -> None:
    """Kernel > Restart Kernel, then a click on the dialog's Restart."""
    from playwright.sync_api import expect

    page.click("#jp-MainMenu .lm-MenuBar-item:has-text('Kernel')")
    page.click("#jp-mainmenu-kernel li[data-command='kernelmenu:restart']")
    page.locator(".jp-Dialog .jp-mod-accept").click()
    expect(page.locator(".jp-Dialog")).to_have_count(0)


def test_two_handles_on_one_execution_stay_in_sync(lab: Lab, browser: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    url, root, theme = lab
    start = "agent.start('Mail the team', execution_id='mail-1')"
    cells = [
        setup_cell(tmp_path / "sync.duckdb"),
        MAIL_CELL.replace("range(N)", "range(1)"),
        f"run = {start}",
        "%loom pending",
        f"m = {start}",
        "print('answer:', (await m).output, m is run)",
    ]
    write_notebook(root, "sync.ipynb", cells)
    page = new_page(browser)
    try:
        open_notebook(page, f"{url}/lab/tree/sync.ipynb?reset", theme)
        for i in range(3):
            run_cell_with_toolbar(page, i)
        expect(cell(page, 2).locator(".loom-approval")).to_be_visible(timeout=60_000)  # parked at the gate
        run_cell_with_toolbar(page, 3)
        pending = cell(page, 3).locator(".loom-run")
        expect(pending.locator(".loom-approval")).to_be_visible(timeout=30_000)
        run_cell_with_toolbar(page, 4)
        expect(cell(page, 4).locator(".loom-run .loom-approval")).to_be_visible(timeout=30_000)
        page.wait_for_selector("#jp-main-statusbar >> text=/Idle/", timeout=30_000)
        pending.locator(".loom-approve").click()
        for i in (2, 3, 4):  # every view of the execution follows the one click
            expect(cell(page, i).locator(".loom-run-status")).to_contain_text("completed", timeout=30_000)
        run_cell_with_toolbar(page, 5)
        out = cell(page, 5).locator(".jp-OutputArea-output")
        expect(out).to_contain_text("answer: Sent. True", timeout=30_000)
    finally:
        page.close()


SLOW_CELL = '''
import asyncio
import loom_nb as loom

@loom.tool
async def send_mail(to: str) -> str:
    """Send a mail (slowly)."""
    await asyncio.sleep(3)
    return "sent"

def respond(request):
    if not any(m.role == "tool" for m in request.messages):
        return loom.ModelResponse.tool_calls([("send_mail", {"to": "ann"})], text="Sending.")
    return loom.ModelResponse.text("Mailed ann.")

agent = loom.Agent(model=loom.ScriptedModel(respond), tools=[send_mail], name="slow")
run = agent.start("mail ann", execution_id="slow-1")
'''


def test_interrupt_during_await_run_stops_the_wait_not_the_run(lab: Lab, browser: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    url, root, theme = lab
    write_notebook(root, "interrupt.ipynb", [setup_cell(tmp_path / "interrupt.duckdb"), SLOW_CELL, "await run"])
    page = new_page(browser)
    try:
        open_notebook(page, f"{url}/lab/tree/interrupt.ipynb?reset", theme)
        for i in range(3):
            run_cell_with_toolbar(page, i)
        view = cell(page, 1).locator(".loom-run")
        expect(view.locator(".loom-run-status")).to_contain_text("running", timeout=60_000)
        expect(cell(page, 2).locator(".jp-InputPrompt")).to_contain_text("[*]", timeout=30_000)  # awaiting
        expect(cell(page, 1).locator(".jp-InputPrompt")).to_contain_text(re.compile(r"\[\d+\]"))  # cell 1 done
        page.locator(".jp-NotebookPanel-toolbar [data-command='notebook:interrupt-kernel']").click()
        out = cell(page, 2).locator(".jp-OutputArea-output")
        expect(out).to_contain_text(
            "WaitInterrupted: stopped waiting for run slow-1; the run goes on (running). "
            "To stop it: run.cancel() or %loom cancel slow-1",
            timeout=30_000,
        )
        assert "CancelledError" not in out.inner_text()
        assert out.count() == 1
        expect(view.locator(".loom-run-status")).to_contain_text("completed", timeout=30_000)  # it went on
        expect(view).to_contain_text("Mailed ann.")
    finally:
        page.close()


def test_after_a_restart_the_journal_reopens_and_a_card_completes_the_run(
    lab: Lab, browser: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    url, root, theme = lab
    journal = tmp_path / "restart.duckdb"
    cells = [
        setup_cell(journal),
        MAIL_CELL.replace("range(N)", "range(1)"),
        "run = agent.start('Mail the team', execution_id='kept-1')",
        "%load_ext loom_nb",  # run after the restart only
        "%loom pending",
    ]
    write_notebook(root, "restart.ipynb", cells)
    page = new_page(browser)
    try:
        open_notebook(page, f"{url}/lab/tree/restart.ipynb?reset", theme)
        for i in range(3):
            run_cell_with_toolbar(page, i)
        expect(cell(page, 2).locator(".loom-approval")).to_be_visible(timeout=60_000)  # parked at the gate
        page.wait_for_selector("#jp-main-statusbar >> text=/Idle/", timeout=30_000)
        restart_kernel(page)
        run_cell_with_toolbar(page, 3)
        said = cell(page, 3).locator(".jp-OutputArea-output")
        expect(said).to_contain_text("the one this notebook used before (.loom-journals.json)", timeout=60_000)
        text = said.inner_text()
        assert f"loom_nb: journal {journal} is open: 1 execution(s)," in text, text
        assert "a new journal" not in text, text
        assert "1 gate(s) open in 1 execution(s)" in text, text
        run_cell_with_toolbar(page, 1)  # the agent's cell, run again in the new kernel
        run_cell_with_toolbar(page, 4)
        pending = cell(page, 4).locator(".loom-run")
        expect(pending.locator(".loom-approval")).to_be_visible(timeout=30_000)
        page.wait_for_selector("#jp-main-statusbar >> text=/Idle/", timeout=30_000)
        pending.locator(".loom-approve").click()
        expect(pending.locator(".loom-run-status")).to_contain_text("completed", timeout=30_000)
        expect(pending).to_contain_text("Sent.")
    finally:
        page.close()


# 200 words at 0.05 s: a 10 s stream, so the restart below cuts it mid-stream even on a slow, busy
# machine (with 40 words, 2 s, a busy host's restart once came after the run had completed).
TALK_CELL = """
import loom_nb as loom

WORDS = " ".join(f"word{i}" for i in range(200))
agent = loom.Agent(model=loom.ScriptedModel([loom.ModelResponse.text(WORDS)], delta_delay=0.05), name="talker")
"""


def test_recover_after_a_restart_shows_its_progress(lab: Lab, browser: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    url, root, theme = lab
    cells = [
        setup_cell(tmp_path / "recover.duckdb"),
        TALK_CELL,
        "run = agent.start('Talk for a while', execution_id='talk-1')",
        "%load_ext loom_nb",  # run after the restart only
        "%loom recover",
    ]
    write_notebook(root, "recover.ipynb", cells)
    page = new_page(browser)
    try:
        open_notebook(page, f"{url}/lab/tree/recover.ipynb?reset", theme)
        for i in range(3):
            run_cell_with_toolbar(page, i)
        expect(cell(page, 2).locator(".loom-run")).to_contain_text("word5", timeout=60_000)  # it streams
        page.wait_for_selector("#jp-main-statusbar >> text=/Idle/", timeout=30_000)
        restart_kernel(page)  # mid-stream: the run is left running
        run_cell_with_toolbar(page, 3)
        said = cell(page, 3).locator(".jp-OutputArea-output")
        expect(said).to_contain_text("1 execution(s) left running by a crash or restart (talk-1)", timeout=60_000)
        run_cell_with_toolbar(page, 1)  # the agent's cell, run again in the new kernel
        run_cell_with_toolbar(page, 4)
        progress = cell(page, 4).locator(".loom-recovery")
        expect(progress.locator(".loom-recovery-progress")).to_be_visible(timeout=30_000)
        status = progress.locator(".loom-recovery-status")
        expect(status).to_contain_text(  # while the model streams again
            re.compile(r"recovering 1 execution\(s\)… 0/1 done\s+talk-1: at step #turn:0 \(model.talker\)"),
            timeout=30_000,
        )
        expect(status).to_have_text("recovered: talk-1 completed", timeout=60_000)
        expect(cell(page, 4).locator(".loom-run .loom-run-status")).to_contain_text("completed")
        expect(cell(page, 4).locator(".loom-run")).to_contain_text("word199")
    finally:
        page.close()


def test_a_card_of_a_restarted_kernel_says_so_and_records_nothing(lab: Lab, browser: Any, tmp_path: Path) -> None:
    """A card shown before Kernel > Restart Kernel says, as soon as the kernel restarted, that it can
    no longer act and names ``%loom pending``; its buttons are disabled, a click on its Approve says
    neither "sent" nor "busy", and the journal records no answer. (The same words on a click that
    finds the card's model dead: ``test_click_feedback_js``.)"""
    from playwright.sync_api import expect

    from loom_nb.journal import DuckDBJournal

    url, root, theme = lab
    journal = tmp_path / "dead.duckdb"
    cells = [
        setup_cell(journal),
        MAIL_CELL.replace("range(N)", "range(1)"),
        "run = agent.start('Mail', execution_id='dead-1')",
    ]
    write_notebook(root, "dead.ipynb", cells)
    page = new_page(browser)
    try:
        open_notebook(page, f"{url}/lab/tree/dead.ipynb?reset", theme)
        for i in range(3):
            run_cell_with_toolbar(page, i)
        card = cell(page, 2).locator(".loom-approval")
        expect(card).to_be_visible(timeout=60_000)  # parked at the gate
        page.wait_for_selector("#jp-main-statusbar >> text=/Idle/", timeout=30_000)
        restart_kernel(page)
        page.wait_for_selector("#jp-main-statusbar >> text=/Idle/", timeout=60_000)
        feedback = card.locator(".loom-click-feedback")  # says so as soon as the kernel restarted
        expect(feedback).to_contain_text("a kernel that has restarted", timeout=5_000)
        expect(feedback).to_contain_text("%loom pending")
        for button in card.locator("button").all():
            expect(button).to_be_disabled()
        approve = card.locator(".loom-approve")
        approve.click(force=True, timeout=5_000)  # a real mouse click where the button is, disabled or not
        page.wait_for_timeout(1_500)  # longer than the "busy" delay: the line stays as it is
        said = feedback.inner_text()
        assert "sent" not in said and "busy" not in said and "a kernel that has restarted" in said, said
        page.screenshot(path=str(tmp_path / f"dead-{theme}.png"))
    finally:
        page.close()
    read = DuckDBJournal(journal, read_only=True)  # the new kernel did not open it
    try:
        assert [e.kind for e in read.read("dead-1") if e.kind == "gate_resolved"] == []
        assert read.get_execution("dead-1") is not None
    finally:
        read.close()
