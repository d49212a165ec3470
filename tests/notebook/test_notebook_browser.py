"""JupyterLab in headless Debian Chromium (playwright): Run All starts an agent that needs approval;
clicking the card's Approve (or Refuse, with a reason) in the page resumes it; the streamed answer and
the completed status appear. Each test runs in the light and the dark theme (the ``lab`` fixture).
Screenshots go to the test's tmp dir."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loom_nb.palette import THEMES, parse_color
from tests.notebook.support import AGENT_CELL, BROWSER_MARKS, Lab, open_and_run_all, write_notebook

pytestmark = BROWSER_MARKS


def tidy_notebook(folder: Path, name: str, journal: Path) -> None:
    cells = [
        f"import os\nos.environ['LOOM_JOURNAL'] = {str(journal)!r}\n%load_ext loom_nb",
        AGENT_CELL.replace("loom.ScriptedModel(respond)", "loom.ScriptedModel(respond, delta_delay=0.02)"),
        "run = agent.start('Remove the stale files in /tmp/x')",
        "loom.timeline(run.id)",
    ]
    write_notebook(folder, name, cells)


def run_all_and_wait_for_the_card(page: Any, url: str, theme: str) -> Any:
    from playwright.sync_api import expect

    open_and_run_all(page, url, theme)
    card = page.locator(".loom-card")
    expect(card).to_be_visible(timeout=60_000)
    expect(card).to_contain_text("delete_file")
    expect(card.locator(".loom-args")).to_contain_text("/tmp/x/stale.log")
    expect(card.locator(".loom-card-status")).to_contain_text("Waiting for your approval")
    expect(page.locator(".loom-run-status")).to_contain_text("suspended")
    return card


@pytest.mark.parametrize("action", ["approve", "refuse"])
def test_clicking_the_card_in_jupyterlab_resumes_the_run(lab: Lab, browser: Any, tmp_path: Path, action: str) -> None:
    from playwright.sync_api import expect

    url, root, theme = lab
    name = f"{action}.ipynb"
    tidy_notebook(root, name, tmp_path / f"{action}.duckdb")
    page = browser.new_page(viewport={"width": 1300, "height": 1000})
    try:
        card = run_all_and_wait_for_the_card(page, f"{url}/lab/tree/{name}?reset", theme)
        expect(page.locator(".loom-turn").nth(1)).to_contain_text("Deleting it.")
        if action == "approve":
            page.locator(".loom-approve").click()
            answer = "Done. I removed the stale file."
        else:
            page.locator(".loom-reason input").fill("keep it")
            page.locator(".loom-refuse").click()
            answer = "Understood: The user refused to run delete_file. Reason: keep it"
        expect(page.locator(".loom-run-status")).to_contain_text("completed", timeout=30_000)
        expect(page.locator(".loom-answer")).to_contain_text(answer)
        # the decided card folds into its tool row, which says the decision and when; the card is
        # closed (no model of it stays in the page, nor in the saved notebook)
        expect(card).to_have_count(0)
        expect(page.locator(".loom-tool-row .loom-decision")).to_contain_text(
            "approved at" if action == "approve" else "refused at"
        )
        expect(page.locator(f".loom-{action}")).to_have_count(0)
        # the anywidget timeline (widgets/timeline.js) followed the run live
        timeline = page.locator(".loom-timeline")
        expect(timeline.locator(".loom-tl-header")).to_contain_text("completed")
        kinds = (
            ["model", "tool", "model", "gate", "tool", "model"]
            if action == "approve"
            else ["model", "tool", "model", "gate", "model"]
        )
        expect(timeline.locator(".loom-tl-bar")).to_have_count(len(kinds))
        for i, kind in enumerate(kinds):
            expect(timeline.locator(".loom-tl-bar").nth(i)).to_have_class(f"loom-tl-bar loom-tl-{kind} loom-tl-done")
        # a legend of the kinds present only, a time axis, and each row's full label as its tooltip
        assert timeline.locator(".loom-tl-key").all_inner_texts() == ["model call", "tool call", "gate wait"]
        assert timeline.locator(".loom-tl-tick").count() >= 2
        assert "#turn:1:tool:0:approval" in (timeline.locator(".loom-tl-row").nth(3).get_attribute("title") or "")
        shot = tmp_path / f"{action}.png"
        page.screenshot(path=str(shot), full_page=True)
        print(f"screenshot: {shot}")
        assert shot.stat().st_size > 10_000
    finally:
        page.close()


def test_the_batch_view_in_jupyterlab_one_card_then_approve_all(lab: Lab, browser: Any, tmp_path: Path) -> None:
    """``agent.map`` in JupyterLab: the batch view counts the items and shows a card per open gate;
    a card's Approve finishes its item, then Approve all finishes the rest."""
    from playwright.sync_api import expect

    url, root, theme = lab
    cells = [
        f"import os\nos.environ['LOOM_JOURNAL'] = {str(tmp_path / 'batch.duckdb')!r}\n%load_ext loom_nb",
        AGENT_CELL,
        "batch = agent.map(['one', 'two', 'three'], concurrency=2)",
    ]
    write_notebook(root, "batch.ipynb", cells)
    page = browser.new_page(viewport={"width": 1300, "height": 1400})
    try:
        open_and_run_all(page, f"{url}/lab/tree/batch.ipynb?reset", theme)
        counts = page.locator(".loom-batch-counts")
        expect(counts).to_contain_text("0/3 done, 0 failed, 3 waiting at a gate", timeout=60_000)
        cards = page.locator(".loom-batch .loom-card")
        expect(cards).to_have_count(3)
        expect(page.locator(".loom-batch-item").first).to_contain_text("item 1")
        page.screenshot(path=str(tmp_path / "batch-gates.png"), full_page=True)
        cards.first.locator(".loom-approve").click()
        expect(counts).to_contain_text("1/3 done, 0 failed, 2 waiting at a gate", timeout=30_000)
        expect(cards).to_have_count(2)
        page.locator(".loom-approve-all").click()  # two gates wait: it asks first
        page.locator(".loom-batch-confirm .loom-confirm-yes").click()
        expect(counts).to_contain_text("3/3 done, 0 failed, 0 waiting at a gate", timeout=30_000)
        expect(cards).to_have_count(0)
        expect(page.locator(".loom-approve-all")).to_be_hidden()  # no gate waits: no Approve all
        expect(page.locator(".loom-batch-outcomes li")).to_have_count(3)  # each decided gate left a line
        # the bar: one segment, all done, in the theme's colour of the shared palette
        segment = page.locator(".loom-batch-bar > span")
        expect(segment).to_have_count(1)
        expect(segment).to_have_attribute("title", "3 done")
        colour = segment.evaluate("e => getComputedStyle(e).backgroundColor")
        assert parse_color(colour) == parse_color(THEMES[theme]["done"]), colour
        shot = tmp_path / "batch.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000
    finally:
        page.close()
