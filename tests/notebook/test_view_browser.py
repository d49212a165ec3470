"""The look of the live view in JupyterLab (headless Debian Chromium, playwright, real mouse clicks):
the card's arguments in the tool's order with real newlines, Edit mode, Approve all, the click
feedback while the kernel is busy, and the contrast of every palette colour (computed from the
colours the browser resolved). Each test runs in the light and the dark theme (the ``lab`` fixture)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from loom_nb.palette import LIGHT, THEMES, contrast_ratio, parse_color
from tests.notebook.support import (
    BROWSER_MARKS,
    Lab,
    open_and_run_all,
    run_cell_with_toolbar,
    write_notebook,
)

pytestmark = BROWSER_MARKS

MAIL_CELL = '''
import loom_nb as loom

sent = []

@loom.tool(needs_approval=True)
def send_mail(to: str, subject: str, body: str, urgent: bool = False) -> str:
    """Send an e-mail.

    Args:
        to: The recipient.
        subject: The subject line.
        body: The text.
        urgent: Flag it as urgent.
    """
    sent.append(to)
    return f"sent to {to}"

CALLS = [{"urgent": True, "body": "Dear team,\\nthe build is green.", "to": f"p{i}@example.com", "subject": "Build"}
         for i in range(N)]

def respond(request):
    if not any(m.role == "tool" for m in request.messages):
        return loom.ModelResponse.tool_calls([("send_mail", c) for c in CALLS], text="I will **send** it.")
    return loom.ModelResponse.text("Sent.")

agent = loom.Agent(model=loom.ScriptedModel(respond), tools=[send_mail], name="mail")
'''


def mail_notebook(root: Path, name: str, journal: Path, *, calls: int = 1, extra: tuple[str, ...] = ()) -> str:
    write_notebook(
        root,
        name,
        [
            f"import os\nos.environ['LOOM_JOURNAL'] = {str(journal)!r}\n%load_ext loom_nb",
            MAIL_CELL.replace("range(N)", f"range({calls})"),
            "run = agent.start('Mail the team')",
            *extra,
        ],
    )
    return name


def new_page(browser: Any) -> Any:
    return browser.new_page(viewport={"width": 1300, "height": 1000})


def test_card_arguments_in_order_and_edit_mode(lab: Lab, browser: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    url, root, theme = lab
    name = mail_notebook(root, "edit.ipynb", tmp_path / "edit.duckdb", extra=())
    page = new_page(browser)
    try:
        open_and_run_all(page, f"{url}/lab/tree/{name}?reset", theme)
        card = page.locator(".loom-approval")
        expect(card).to_be_visible(timeout=60_000)
        expect(card.locator(".loom-card-title")).to_contain_text("Send an e-mail.")
        assert card.locator(".loom-args th").all_inner_texts() == ["to", "subject", "body", "urgent"]
        assert card.locator(".loom-arg-text").inner_text() == "Dear team,\nthe build is green."  # no literal \n
        expect(card.locator(".loom-arg-form")).to_be_hidden()
        page.screenshot(path=str(tmp_path / "card.png"))
        card.locator(".loom-edit").click()
        form = card.locator(".loom-arg-form")
        expect(form).to_be_visible()
        form.locator(".loom-arg-to input").fill("ann@example.com")
        card.locator(".loom-approve").click()
        expect(page.locator(".loom-run-status")).to_contain_text("completed", timeout=30_000)
        # the decided card folds into its tool row (closed), which says the decision
        expect(card).to_have_count(0)
        row = page.locator(".loom-tool-row")
        expect(row.locator(".loom-decision").first).to_contain_text("approved with edited arguments at")
        expect(row).to_contain_text("ann@example.com")
        expect(row).to_contain_text("edited: to:")  # the requested arguments beside the ones that ran
        expect(page.locator(".loom-answer")).to_contain_text("Sent.")
        assert page.locator(".loom-run").inner_text().count("Sent.") == 1  # the answer once
        expect(page.locator(".loom-turn").first).to_contain_text("I will send it.")
        assert page.locator(".loom-turn strong").first.inner_text() == "send"  # Markdown, rendered
        page.screenshot(path=str(tmp_path / "edit.png"), full_page=True)
    finally:
        page.close()


def test_approve_all(lab: Lab, browser: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    url, root, theme = lab
    name = mail_notebook(root, "all.ipynb", tmp_path / "all.duckdb", calls=3)
    page = new_page(browser)
    try:
        open_and_run_all(page, f"{url}/lab/tree/{name}?reset", theme)
        bar = page.locator(".loom-turn-approvals")
        expect(bar.locator(".loom-approval")).to_have_count(3, timeout=60_000)
        expect(bar).to_contain_text("3 calls wait for your approval")
        bar.locator(".loom-approve-all").click()  # asks first
        confirm = bar.locator(".loom-confirm")
        expect(confirm).to_contain_text("Approve all 3 calls?", timeout=10_000)
        page.wait_for_timeout(500)
        expect(page.locator(".loom-run-status")).to_contain_text("suspended")
        expect(bar.locator(".loom-approval")).to_have_count(3)
        confirm.locator(".loom-confirm-yes").click()
        expect(page.locator(".loom-run-status")).to_contain_text("completed", timeout=30_000)
        rows = page.locator(".loom-tool-row .loom-decision")
        expect(rows).to_have_count(3)
        for i in range(3):  # each card folded into its row (closed; the turn's bar went with the last)
            expect(rows.nth(i)).to_contain_text("approved at")
        expect(bar).to_have_count(0)
    finally:
        page.close()


def test_a_click_while_the_kernel_is_busy_says_sent_then_busy(lab: Lab, browser: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    url, root, theme = lab
    extra = ("await run.wait(until='paused')", "import time\ntime.sleep(8)")
    name = mail_notebook(root, "busy.ipynb", tmp_path / "busy.duckdb", extra=extra)
    page = new_page(browser)
    try:
        open_and_run_all(page, f"{url}/lab/tree/{name}?reset", theme)
        card = page.locator(".loom-approval")
        expect(card).to_be_visible(timeout=60_000)
        busy = page.locator("#jp-main-statusbar >> text=/Busy/")
        try:
            expect(busy).to_be_visible(timeout=5_000)
        except AssertionError:  # a loaded machine drew the card after the sleep ended: sleep again
            run_cell_with_toolbar(page, 4)
            expect(busy).to_be_visible(timeout=30_000)
        approve = card.locator(".loom-approve")
        began = time.monotonic()
        approve.click()
        expect(approve).to_be_disabled(timeout=2_000)  # at once, in the page
        disabled_after = time.monotonic() - began
        feedback = card.locator(".loom-click-feedback")
        expect(feedback).to_contain_text("sent", timeout=2_000)
        expect(feedback).to_contain_text("the kernel is busy", timeout=3_000)
        busy_shown = time.monotonic() - began
        expect(page.locator(".loom-run-status")).to_contain_text("completed", timeout=60_000)
        # the kernel took the click: the decided card folds into its tool row (closed, its
        # feedback line with it)
        expect(card).to_have_count(0)
        expect(page.locator(".loom-tool-row .loom-decision")).to_contain_text("approved at")
        print(f"button disabled {disabled_after:.2f} s and busy feedback shown {busy_shown:.2f} s after the click")
    finally:
        page.close()


PROBE = """
(roles) => {
  const host = document.querySelector('.loom-run');
  function background(el) {
    for (let e = el; e; e = e.parentElement) {
      const c = getComputedStyle(e).backgroundColor;
      if (c && c !== 'rgba(0, 0, 0, 0)' && c !== 'transparent') return c;
    }
    return getComputedStyle(document.body).backgroundColor;
  }
  const out = {};
  for (const role of roles) {
    const span = document.createElement('span');
    span.style.color = `var(--loom-${role})`;
    span.textContent = role;
    host.append(span);
    out[role] = [getComputedStyle(span).color, background(span)];
    span.remove();
  }
  for (const sel of ['.loom-badge', '.loom-tool-status', '.loom-usage', '.loom-card-desc', '.loom-tl-tick']) {
    const el = document.querySelector(sel);
    if (el) out[sel] = [getComputedStyle(el).color, background(el)];
  }
  return out;
}
"""


def measured(page: Any) -> dict[str, float]:
    colours = page.evaluate(PROBE, list(LIGHT))
    return {what: round(contrast_ratio(fg, bg), 2) for what, (fg, bg) in colours.items()}


def test_every_status_colour_has_aa_contrast_in_the_theme(themed_lab: Lab, browser: Any, tmp_path: Path) -> None:
    """Every palette colour, the badge, the tool status, usage, card description and timeline
    ticks, measured as the browser resolved them, in the lab's theme (this test runs once per theme)."""
    from playwright.sync_api import expect

    url, root, theme = themed_lab
    extra = ("await run.wait(until='paused')\nrun.gates[0].approve()\nawait run", "loom.timeline(run.id)")
    name = mail_notebook(root, "contrast.ipynb", tmp_path / "contrast.duckdb", extra=extra)
    page = new_page(browser)
    try:
        open_and_run_all(page, f"{url}/lab/tree/{name}?reset", theme)
        expect(page.locator(".loom-run-status")).to_contain_text("completed", timeout=60_000)
        expect(page.locator(".loom-tl-tick").first).to_be_visible(timeout=30_000)
        ratios = measured(page)
        page.screenshot(path=str(tmp_path / f"{theme}.png"), full_page=True)
        print(f"contrast {theme}: {ratios}")
        assert set(LIGHT) <= set(ratios) and ".loom-badge" in ratios and ".loom-tl-tick" in ratios
        expected = THEMES[theme]["done"]  # the theme's own values of the palette are in use
        assert (
            page.evaluate(
                "() => getComputedStyle(document.querySelector('.loom-run')).getPropertyValue('--loom-done').trim()"
            )
            == expected
        )
        bar = page.locator(".loom-turns .progress-bar").evaluate("e => getComputedStyle(e).backgroundColor")
        assert parse_color(bar) == parse_color(THEMES[theme]["completed"]), bar  # the turns bar too
        low = {k: v for k, v in ratios.items() if v < 4.5}
        assert not low, low
    finally:
        page.close()
