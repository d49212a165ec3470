"""The live view for a keyboard and a screen reader in JupyterLab (headless Debian Chromium,
playwright, real keys), in the light and the dark theme (the ``lab`` fixture): the run's status
and each card's status line are live regions, every input has a label (not only a placeholder),
and a card's keyboard path works: type a reason, Tab to Approve, Refuse and Edit, Enter opens the
form, Escape closes it; Enter on Stop asks, the question takes the focus, Escape closes it and
gives the focus back to Stop; Enter on Approve approves with the typed reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.notebook.support import BROWSER_MARKS, Lab, open_and_run_all
from tests.notebook.test_view_browser import mail_notebook, new_page

pytestmark = BROWSER_MARKS

#: The inputs of the views that have no label (neither a ``<label>`` nor ``aria-label``).
UNLABELLED = """
() => [...document.querySelectorAll('.loom-run input, .loom-run textarea')]
  .filter(e => !([...(e.labels || [])].some(l => l.textContent.trim()) || (e.getAttribute('aria-label') || '').trim()))
  .map(e => e.outerHTML.slice(0, 120))
"""

#: The classes of the element that has the focus.
FOCUSED = "() => (document.activeElement && document.activeElement.className) || ''"


def focused(page: Any) -> str:
    return str(page.evaluate(FOCUSED))


def test_a_card_by_keyboard_with_live_regions_and_labels(lab: Lab, browser: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    url, root, theme = lab
    name = mail_notebook(root, "keys.ipynb", tmp_path / "keys.duckdb")
    page = new_page(browser)
    try:
        open_and_run_all(page, f"{url}/lab/tree/{name}?reset", theme)
        view = page.locator(".loom-run")
        card = view.locator(".loom-approval")
        expect(card).to_be_visible(timeout=60_000)
        page.wait_for_selector("#jp-main-statusbar >> text=/Idle/", timeout=30_000)
        # live regions a screen reader announces
        status = view.locator(".loom-run-status")
        expect(status).to_have_attribute("role", "status", timeout=10_000)
        expect(status).to_have_attribute("aria-live", "polite")
        expect(card.locator(".loom-card-status")).to_have_attribute("role", "status")
        # every input labelled: the reason box says "Reason", not only a placeholder
        assert page.evaluate(UNLABELLED) == []
        expect(card.locator(".loom-reason label")).to_have_text("Reason")
        card.locator(".loom-edit").click()
        expect(card.locator(".loom-arg-form")).to_be_visible()
        assert page.evaluate(UNLABELLED) == []  # the edit form's fields too
        expect(card.locator(".loom-arg-to label")).to_have_text("to")
        card.locator(".loom-edit").click()
        expect(card.locator(".loom-arg-form")).to_be_hidden()

        # Stop by keyboard: Enter asks, the question takes the focus, Escape closes it
        view.locator(".loom-stop").focus()
        page.keyboard.press("Enter")
        question = view.locator(".loom-stop-confirm")
        expect(question).to_be_visible(timeout=10_000)
        page.wait_for_function(f"() => ({FOCUSED})().includes('loom-confirm-no')", timeout=10_000)
        page.keyboard.press("Escape")
        expect(question).to_be_hidden(timeout=10_000)
        page.wait_for_function(f"() => ({FOCUSED})().includes('loom-stop')", timeout=10_000)
        expect(view.locator(".loom-run-status")).to_contain_text("suspended")

        # the card: type a reason, Tab through its buttons, Enter on Edit, Escape, Enter on Approve
        card.locator(".loom-reason input").click()
        page.keyboard.type("fine by me")
        page.keyboard.press("Tab")
        assert "loom-approve" in focused(page)
        page.keyboard.press("Tab")
        assert "loom-refuse" in focused(page)
        page.keyboard.press("Tab")
        assert "loom-edit" in focused(page)
        page.keyboard.press("Enter")
        expect(card.locator(".loom-arg-form")).to_be_visible(timeout=10_000)
        expect(card.locator(".loom-edit")).to_contain_text("Cancel edit")
        page.keyboard.press("Escape")
        expect(card.locator(".loom-arg-form")).to_be_hidden(timeout=10_000)
        expect(card.locator(".loom-edit")).to_have_text("Edit")
        assert "loom-edit" in focused(page)
        page.keyboard.press("Shift+Tab")
        page.keyboard.press("Shift+Tab")
        assert "loom-approve" in focused(page)
        page.keyboard.press("Enter")
        expect(view.locator(".loom-run-status")).to_contain_text("completed", timeout=30_000)
        expect(view.locator(".loom-tool-row .loom-decision")).to_contain_text("approved at")
        expect(view.locator(".loom-tool-row .loom-decision")).to_contain_text("(fine by me)")
    finally:
        page.close()
