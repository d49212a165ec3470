"""The live view changes in place in JupyterLab (headless Debian Chromium, playwright, real mouse
clicks and keys), in the light and the dark theme (the ``lab`` fixture): a click on one card, and
the end of a stream, change what changed: while the run moves the view is never drawn anew, so the
view's element is the same node after a click, an open ``<details>`` stays open, a box the reader
scrolled keeps its place and text typed meanwhile in another card's reason box is all there (and
keeps the focus); once the run ended its display gets its one update (so a saved notebook holds
the final text: ``runs.follow_display``), drawn anew once, and the page does not jump for it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.notebook.support import BROWSER_MARKS, Lab, open_and_run_all, run_cell_with_toolbar, write_notebook
from tests.notebook.test_view_browser import new_page

pytestmark = BROWSER_MARKS

AGENTS_CELL = '''
import loom_nb as loom
from loom_nb.messages import ReasoningBlock

@loom.tool(needs_approval=True)
def send_mail(to: str, subject: str) -> str:
    """Send an e-mail."""
    return f"sent to {to}"

PLAN = "\\n\\n".join(f"Step {i} of the plan." for i in range(40))  # taller than the turn's cap

def respond(request):
    if not any(m.role == "tool" for m in request.messages):
        calls = [("send_mail", {"to": f"p{i}@example.com", "subject": "Build"}) for i in range(2)]
        r = loom.ModelResponse.tool_calls(calls, text=PLAN)
        thought = (ReasoningBlock(text="Two mails, one to each."),)
        return r.model_copy(update={"message": r.message.model_copy(update={"reasoning": thought})})
    return loom.ModelResponse.text("Sent.")

mailer = loom.Agent(model=loom.ScriptedModel(respond), tools=[send_mail], name="mail")
WORDS = " ".join(f"word{i}" + ("\\n\\n" if i % 6 == 5 else "") for i in range(160))
talker = loom.Agent(model=loom.ScriptedModel([loom.ModelResponse.text(WORDS)], delta_delay=0.04), name="talker")
ROUND = 0
'''

#: Starts the stream only when run again (Run All runs it once, doing nothing).
STREAM_CELL = """
if ROUND:
    talk = talker.start("Talk for a while")
ROUND += 1
"""

#: What the test reads of view ``index`` (the n-th ``.loom-run``): whether it is the node marked
#: ``mark``, its top in the viewport, the scroll of the notebook around it, each turn text's scroll,
#: whether its thinking is open, and the reason boxes (their values, which one has the focus).
PROBE = """
([index, mark]) => {
  const view = document.querySelectorAll('.loom-run')[index];
  if (!view) return null;
  const scrolls = (e) => e.scrollHeight > e.clientHeight && /(auto|scroll)/.test(getComputedStyle(e).overflowY);
  let scroller = view.parentElement;
  while (scroller && !scrolls(scroller)) scroller = scroller.parentElement;
  const reasons = [...view.querySelectorAll('.loom-reason input')].filter(r => r.getClientRects().length);
  const details = view.querySelector('details.loom-thinking');
  return {
    same: view.__loomMark === mark,
    top: view.getBoundingClientRect().top,
    height: view.getBoundingClientRect().height,
    page: scroller ? scroller.scrollTop : window.scrollY,
    texts: [...view.querySelectorAll('.loom-turn-text')].map(t => t.scrollTop),
    open: details ? details.open : null,
    reasons: reasons.map(r => r.value),
    focused: reasons.findIndex(r => r === document.activeElement),
    status: view.querySelector('.loom-run-status').innerText,
  };
}
"""

#: Whether the focus is in a card's reason box (keys typed elsewhere would reach JupyterLab's commands).
IN_REASON = "() => !!(document.activeElement && document.activeElement.closest('.loom-run .loom-reason'))"

MARK = "([index, mark]) => { document.querySelectorAll('.loom-run')[index].__loomMark = mark; }"


def type_in_reason(page: Any, text: str) -> str:
    """Type ``text`` key by key, as a person does, while the focus stays in a reason box; returns
    what was typed before the focus left it."""
    for i, key in enumerate(text):
        if not page.evaluate(IN_REASON):
            return text[:i]
        page.keyboard.type(key)
        page.wait_for_timeout(70)
    return text


def test_a_card_click_and_the_end_of_a_stream_change_the_view_in_place(lab: Lab, browser: Any, tmp_path: Path) -> None:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import expect

    url, root, theme = lab
    setup = f"import os\nos.environ['LOOM_JOURNAL'] = {str(tmp_path / 'place.duckdb')!r}\n%load_ext loom_nb"
    write_notebook(root, "place.ipynb", [setup, AGENTS_CELL, "run = mailer.start('Mail the team')", STREAM_CELL])
    page = new_page(browser)
    try:
        open_and_run_all(page, f"{url}/lab/tree/place.ipynb?reset", theme)
        view = page.locator(".loom-run").first
        cards = view.locator(".loom-approval")
        expect(cards).to_have_count(2, timeout=60_000)
        page.wait_for_selector("#jp-main-statusbar >> text=/Idle/", timeout=30_000)
        page.wait_for_timeout(1_000)  # whatever the first display brings has landed
        page.evaluate(MARK, [0, "gates"])
        # the reader opens the thinking, scrolls the turn's text up, clicks Approve on the first card
        # and at once types a reason into the second one
        view.locator("details.loom-thinking summary").click()
        text = view.locator(".loom-current .loom-turn-text").first
        text.hover()
        page.mouse.wheel(0, -250)
        page.wait_for_timeout(300)
        before = page.evaluate(PROBE, [0, "gates"])
        assert before["open"] and before["same"], before
        reason = cards.nth(1).locator(".loom-reason input").element_handle()  # this node, wherever it goes
        cards.nth(0).locator(".loom-approve").click()
        try:
            reason.click(timeout=10_000)
        except PlaywrightError as exc:  # drawn anew: the box the reader was about to type in is gone
            raise AssertionError("the second card's reason box left the page after the first card's click") from exc
        typed = type_in_reason(page, "keep this draft")  # while the first card's click lands
        expect(view.locator(".loom-tool-row .loom-decision")).to_have_count(1, timeout=30_000)
        expect(view.locator(".loom-approval:visible")).to_have_count(1)  # the first card folded into its row
        page.wait_for_timeout(800)  # a redraw would land well within this
        after = page.evaluate(PROBE, [0, "gates"])
        print(f"{theme}: before the click {before}\n{theme}: after it {after}")
        assert after["same"], "the view was drawn anew after the click on a card"
        assert after["open"], "the open <details> closed"
        assert abs(after["texts"][0] - before["texts"][0]) < 2, (before["texts"], after["texts"])
        assert typed == "keep this draft", f"the reason box lost the focus after {typed!r}"
        assert after["reasons"] == ["keep this draft"] and after["focused"] == 0, after

        # a stream ends: the page stays where the reader has it
        run_cell_with_toolbar(page, 3)
        talk = page.locator(".loom-run").nth(1)
        expect(talk.locator(".loom-run-status")).to_contain_text("running", timeout=60_000)
        page.evaluate(MARK, [1, "stream"])
        talk.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(300)
        streaming = page.evaluate(PROBE, [1, "stream"])
        assert streaming["status"] == "running", streaming
        expect(talk.locator(".loom-run-status")).to_contain_text("completed", timeout=60_000)
        expect(talk.locator(".loom-usage")).not_to_be_empty(timeout=10_000)
        page.wait_for_timeout(1_000)  # a redraw would land well within this
        ended = page.evaluate(PROBE, [1, "stream"])
        print(f"{theme}: streaming {streaming}\n{theme}: ended {ended}")
        assert abs(ended["page"] - streaming["page"]) < 4, (streaming, ended)
        assert abs(ended["top"] - streaming["top"]) < 4, (streaming, ended)
        page.evaluate(MARK, [1, "settled"])
        page.wait_for_timeout(1_000)
        assert page.evaluate(PROBE, [1, "settled"])["same"], "the settled view was drawn anew again"
        assert page.evaluate(PROBE, [0, "gates"])["same"]  # the other view too
    finally:
        page.close()
