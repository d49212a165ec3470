"""What needs a person is never hidden in JupyterLab (headless Debian Chromium, playwright, real
mouse clicks), in the light and the dark theme (the ``lab`` fixture): three waiting cards and
their buttons are all visible with no scrolling inside the view, and a streaming turn's text keeps
its tail in view unless the reader scrolls it up (and follows again once scrolled back down)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.notebook.support import BROWSER_MARKS, Lab, open_and_run_all, write_notebook
from tests.notebook.test_view_browser import mail_notebook, new_page

pytestmark = BROWSER_MARKS

#: The boxes inside the view that cut ``el`` off (an ancestor up to ``.loom-run`` that clips its
#: overflow and whose visible rectangle does not hold ``el``'s).
CLIPPED_BY = """
(el) => {
  const r = el.getBoundingClientRect();
  const out = [];
  for (let a = el.parentElement; a; a = a.parentElement) {
    const s = getComputedStyle(a);
    if (/(auto|scroll|hidden|clip)/.test(s.overflowY)) {
      const b = a.getBoundingClientRect();
      if (r.top < b.top - 1 || r.bottom > b.bottom + 1) out.push(a.className);
    }
    if (a.classList.contains('loom-run')) break;
  }
  return out;
}
"""


def test_three_waiting_cards_are_all_visible_without_scrolling_in_the_view(
    lab: Lab, browser: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    url, root, theme = lab
    name = mail_notebook(root, "three.ipynb", tmp_path / "three.duckdb", calls=3)
    page = new_page(browser)
    try:
        open_and_run_all(page, f"{url}/lab/tree/{name}?reset", theme)
        cards = page.locator(".loom-run .loom-approval")
        expect(cards).to_have_count(3, timeout=60_000)
        page.wait_for_selector("#jp-main-statusbar >> text=/Idle/", timeout=30_000)
        page.screenshot(path=str(tmp_path / f"three-{theme}.png"), full_page=True)
        for i in range(3):
            card = cards.nth(i)
            parts = (card, card.locator(".loom-approve"), card.locator(".loom-refuse"), card.locator(".loom-reason"))
            for part in parts:
                assert part.evaluate(CLIPPED_BY) == [], (i, part)
        bar = page.locator(".loom-turn-approvals .loom-approve-all")
        assert bar.evaluate(CLIPPED_BY) == []
        expect(page.locator(".loom-run .loom-expand")).to_be_hidden()  # nothing capped overflows: no Show all
        cards.nth(2).locator(".loom-approve").click()  # the last card, clicked where it is
        expect(page.locator(".loom-tool-row .loom-decision")).to_have_count(1, timeout=30_000)
        expect(page.locator(".loom-run .loom-approval")).to_have_count(2, timeout=30_000)
    finally:
        page.close()


STREAM_CELL = """
import loom_nb as loom

WORDS = " ".join(f"word{i}" + ("\\n\\n" if i % 6 == 5 else "") for i in range(400))
agent = loom.Agent(model=loom.ScriptedModel([loom.ModelResponse.text(WORDS)], delta_delay=0.05), name="talker")
run = agent.start("Talk for a long time")
"""

#: Where the streamed text's last character is, and what clips it inside the view: the scroll
#: box around it (its top, bottom, scrollTop) and the tail's rectangle.
TAIL = """
() => {
  const texts = document.querySelectorAll('.loom-run .loom-turn-text');
  const text = texts[texts.length - 1];
  const walker = document.createTreeWalker(text, NodeFilter.SHOW_TEXT);
  let last = null;
  for (let n = walker.nextNode(); n; n = walker.nextNode()) if (n.textContent.trim()) last = n;
  if (!last) return null;
  const range = document.createRange();
  range.setStart(last, Math.max(last.textContent.length - 1, 0));
  range.setEnd(last, last.textContent.length);
  const r = range.getBoundingClientRect();
  let box = null;
  for (let a = last.parentElement; a; a = a.parentElement) {
    if (a.scrollHeight > a.clientHeight + 1 && /(auto|scroll)/.test(getComputedStyle(a).overflowY)) { box = a; break; }
    if (a.classList.contains('loom-run')) break;
  }
  const b = box ? box.getBoundingClientRect() : null;
  return {word: last.textContent.trim().split(/\\s+/).pop(), top: r.top, bottom: r.bottom,
          box: b ? {top: b.top, bottom: b.bottom, x: b.x + b.width / 2, y: b.y + b.height / 2,
                    scrollTop: box.scrollTop, cls: box.className} : null,
          inView: !b || (r.bottom <= b.bottom + 1 && r.top >= b.top - 1)};
}
"""


def test_a_streaming_turn_keeps_its_tail_in_view_unless_the_reader_scrolls_up(
    lab: Lab, browser: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    url, root, theme = lab
    journal = tmp_path / "tail.duckdb"
    setup = f"import os\nos.environ['LOOM_JOURNAL'] = {str(journal)!r}\n%load_ext loom_nb"
    write_notebook(root, "tail.ipynb", [setup, STREAM_CELL])
    page = new_page(browser)
    try:
        open_and_run_all(page, f"{url}/lab/tree/tail.ipynb?reset", theme)
        view = page.locator(".loom-run")
        expect(view.locator(".loom-run-status")).to_contain_text("running", timeout=60_000)
        # long enough to overflow its box
        page.wait_for_function(f"() => {{ const t = ({TAIL})(); return t && t.box; }}", timeout=60_000)
        expect(view.locator(".loom-expand")).to_be_visible()  # the text overflows its cap: Show all lifts it
        for _ in range(3):  # while it streams, the tail stays in view
            page.wait_for_timeout(700)
            # sampled when the page has caught up: a delta can land between the text's update and
            # the frame in which the box follows it (the reader never sees that state: no paint)
            page.wait_for_function(f"() => ({TAIL})().inView", timeout=3_000)
            tail = page.evaluate(TAIL)
        assert view.locator(".loom-run-status").inner_text() == "running"
        # the reader scrolls the text up: it stays where the reader put it while the text grows
        box = tail["box"]
        page.mouse.move(box["x"], box["y"])
        page.mouse.wheel(0, -300)
        page.wait_for_timeout(400)
        held = page.evaluate(TAIL)
        page.wait_for_timeout(1_000)
        later = page.evaluate(TAIL)
        assert later["word"] != held["word"], (held, later)  # it streamed on meanwhile
        assert abs(later["box"]["scrollTop"] - held["box"]["scrollTop"]) < 2, (held, later)
        assert not later["inView"], later
        # back to the end: it follows again
        page.mouse.wheel(0, 100_000)
        page.wait_for_timeout(1_000)
        tail = page.evaluate(TAIL)
        assert view.locator(".loom-run-status").inner_text() == "running"
        assert tail["inView"], tail
        page.screenshot(path=str(tmp_path / f"tail-{theme}.png"), full_page=True)
    finally:
        page.close()
