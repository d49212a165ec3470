"""The Stop button and the saved notebook's truth in JupyterLab (headless Debian Chromium, playwright,
real mouse clicks), in the light and the dark theme (the ``lab`` fixture): a run that is streaming is
stopped by a click on Stop (the view says cancelled in the theme's colour, the journal ends with
``execution_cancelled``), and the text fallback a saved notebook keeps follows a run to completion
after a click on Approve."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from loom_nb.palette import THEMES, parse_color
from tests.notebook.support import (
    BROWSER_MARKS,
    Lab,
    open_and_run_all,
    run_cell_with_toolbar,
    write_notebook,
)
from tests.notebook.test_view_browser import mail_notebook, new_page

pytestmark = BROWSER_MARKS

STREAM_CELL = """
import loom_nb as loom

WORDS = " ".join(f"word{i}" for i in range(400))
agent = loom.Agent(model=loom.ScriptedModel([loom.ModelResponse.text(WORDS)], delta_delay=0.1), name="talker")
run = agent.start("Talk for a long time")
"""

# Run by a click after Stop (a no-op under Run All, while the run still streams).
JOURNAL_CELL = """
if run.status == "cancelled":
    print("kinds:", json.dumps([e.kind for e in run.runtime.journal.read(run.id)]))
"""


#: The words of an element's text that the browser broke across two lines.
BROKEN_WORDS = """
(el) => {
  const out = [];
  const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    for (const m of n.textContent.matchAll(/\\S+/g)) {
      const r = document.createRange();
      r.setStart(n, m.index);
      r.setEnd(n, m.index + m[0].length);
      const lines = new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.top)));
      if (lines.size > 1) out.push(m[0]);
    }
  }
  return out;
}
"""


def computed_colour(page: Any, selector: str) -> str:
    """The text colour the browser resolved for ``selector`` (read again while the output is being
    redrawn: a display update renders the view anew)."""
    page.wait_for_function(
        "s => { const e = document.querySelector(s); return e && e.isConnected && getComputedStyle(e).color; }",
        arg=selector,
        timeout=10_000,
    )
    return str(page.evaluate("s => getComputedStyle(document.querySelector(s)).color", selector))


def test_stop_cancels_a_streaming_run(lab: Lab, browser: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    url, root, theme = lab
    journal = tmp_path / "stop.duckdb"
    setup = f"import json, os\nos.environ['LOOM_JOURNAL'] = {str(journal)!r}\n%load_ext loom_nb"
    write_notebook(root, "stop.ipynb", [setup, STREAM_CELL, JOURNAL_CELL])
    page = browser.new_page(viewport={"width": 1000, "height": 900})  # narrow: the header must wrap
    try:
        open_and_run_all(page, f"{url}/lab/tree/stop.ipynb?reset", theme)
        view = page.locator(".loom-run")
        expect(view.locator(".loom-run-status")).to_contain_text("running", timeout=60_000)
        expect(view).to_contain_text("word5", timeout=30_000)  # it streams
        page.wait_for_selector("#jp-main-statusbar >> text=/Idle/", timeout=30_000)
        stop, box = view.locator(".loom-stop").bounding_box(), view.bounding_box()
        assert stop is not None and box is not None
        assert stop["x"] + stop["width"] <= box["x"] + box["width"] + 1, (stop, box)  # Stop shows whole
        header, bar = view.locator(".loom-header").bounding_box(), view.locator(".loom-turns").bounding_box()
        label = view.locator(".loom-turns .widget-label").bounding_box()
        assert header is not None and bar is not None and label is not None
        assert label["width"] < 60, label  # "turns" as wide as the word: the bar is not pushed right
        if bar["y"] > header["y"] + 1:  # wrapped under the title: it starts at the header's left edge
            assert bar["x"] - header["x"] < 8, (bar, header)
        view.locator(".loom-stop").click()  # asks first; the run goes on meanwhile
        confirm = view.locator(".loom-stop-confirm")
        expect(confirm).to_contain_text("Stop this run for good?", timeout=10_000)
        expect(view.locator(".loom-stop")).to_be_disabled()
        page.wait_for_timeout(1_000)
        assert view.locator(".loom-run-status").inner_text() == "running"
        confirm.locator(".loom-confirm-no").click()  # Keep running
        expect(confirm).to_be_hidden(timeout=10_000)
        expect(view.locator(".loom-stop")).to_be_enabled()
        view.locator(".loom-stop").click()
        confirm.locator(".loom-confirm-yes").click()  # Stop now
        expect(view.locator(".loom-run-status")).to_contain_text("cancelled", timeout=30_000)
        # a neutral line, not a red error: "Stopped (stopped from the live view): ..."
        stopped = view.locator(".loom-stopped")
        expect(stopped).to_contain_text("Stopped (stopped from the live view): the run is cancelled for good")
        assert view.locator(".loom-error").inner_text().strip() == ""
        assert "RunCancelledError" not in view.inner_text()
        assert stopped.evaluate(BROKEN_WORDS) == []  # no word wrapped mid-way
        colour = computed_colour(page, ".loom-run .loom-stopped")
        assert parse_color(colour) != parse_color(THEMES[theme]["failed"]), colour
        badge = computed_colour(page, ".loom-run .loom-badge")
        assert parse_color(badge) == parse_color(THEMES[theme]["cancelled"]), badge  # the theme's palette
        expect(view.locator(".loom-stop")).to_be_hidden()
        # the streamed text (Show all comes and goes with the capped box's overflow: not compared)
        streamed = view.locator(".loom-turn-text, .loom-live")
        shown = streamed.all_inner_texts()
        assert "word5" in " ".join(shown) and "word399" not in " ".join(shown)  # stopped mid-stream
        page.wait_for_timeout(1_000)
        assert streamed.all_inner_texts() == shown  # and the text no longer grows
        run_cell_with_toolbar(page, 2)
        out = page.locator(".jp-NotebookPanel .jp-Cell").nth(2).locator(".jp-OutputArea-output")
        expect(out).to_contain_text("kinds:", timeout=30_000)
        kinds = json.loads(out.inner_text().split("kinds:", 1)[1])
        assert kinds[-1] == "execution_cancelled"
        assert "execution_completed" not in kinds
    finally:
        page.close()


def saved_outputs(path: Path) -> list[dict[str, Any]]:
    """The code cells' outputs of the saved notebook ([] while JupyterLab is still writing it)."""
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:  # caught half-written: the caller reads again
        return []
    return [o for c in nb["cells"] if c["cell_type"] == "code" for o in c["outputs"]]


def test_the_saved_text_follows_the_run_to_completion(lab: Lab, browser: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    url, root, theme = lab
    name = mail_notebook(root, "saved.ipynb", tmp_path / "saved.duckdb")
    page = new_page(browser)
    try:
        open_and_run_all(page, f"{url}/lab/tree/{name}?reset", theme)
        view = page.locator(".loom-run")
        card = view.locator(".loom-approval")
        expect(card).to_be_visible(timeout=60_000)
        page.wait_for_selector("#jp-main-statusbar >> text=/Idle/", timeout=30_000)
        card.locator(".loom-approve").click()
        expect(view.locator(".loom-run-status")).to_contain_text("completed", timeout=30_000)
        # the notebook model holds the latest text fallback: save it (File > Save Notebook) and read it
        page.click("#jp-MainMenu .lm-MenuBar-item:has-text('File')")
        page.click(".lm-Menu-item[data-command='docmanager:save']")
        deadline_ms = 30_000
        texts: list[str] = []
        while deadline_ms > 0:
            texts = [
                "".join(o["data"]["text/plain"])
                for o in saved_outputs(root / name)
                if "application/vnd.jupyter.widget-view+json" in o.get("data", {})
            ]
            if texts and "completed" in texts[0].splitlines()[0]:
                break
            page.wait_for_timeout(500)
            deadline_ms -= 500
        (text,) = texts
        head = text.splitlines()[0]
        assert head.startswith("loom run ") and ": completed" in head, text
        assert text.count("Sent.") == 1, text  # the answer once
        assert "answer: Sent." in text and "suspended" not in text and "running" not in head
    finally:
        page.close()
