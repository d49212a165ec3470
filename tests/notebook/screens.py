"""``make screens``: the key screens of the live view, taken in JupyterLab with headless Debian
Chromium and real mouse clicks, saved as PNGs under ``docs/screens/`` (the README shows them).

    .venv/bin/python -m tests.notebook.screens docs/screens

Each screen is the output of one small notebook (the e-mail agent of the browser tests): a card
waiting for approval, the Edit form, Approve all for a turn's three calls, the completed run with
its timeline, and the same in the dark theme.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.notebook.support import CHROMIUM, LAUNCH_ARGS, jupyter_lab, open_and_run_all
from tests.notebook.test_view_browser import mail_notebook


def shoot(locator: Any, path: Path) -> None:
    locator.scroll_into_view_if_needed()
    locator.screenshot(path=str(path))
    print(f"{path} ({path.stat().st_size:,} bytes)")


def dark(page: Any) -> None:
    page.click("#jp-MainMenu .lm-MenuBar-item:has-text('Settings')")
    page.hover(".lm-Menu-item:has-text('Theme')")
    page.click(".lm-Menu-item:has-text('JupyterLab Dark')")
    page.wait_for_selector("body[data-jp-theme-light='false']", state="attached", timeout=30_000)
    page.wait_for_timeout(800)


def main(out: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        root, scratch = Path(tmp) / "root", Path(tmp) / "scratch"
        root.mkdir()
        scratch.mkdir()
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
        with jupyter_lab(root, scratch) as url:
            # 1-2: a card waiting for approval, then its Edit form
            name = mail_notebook(root, "card.ipynb", root / "card.duckdb")
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            open_and_run_all(page, f"{url}/lab/tree/{name}?reset")
            run = page.locator(".loom-run")
            expect(run.locator(".loom-approval")).to_be_visible(timeout=60_000)
            shoot(run, out / "approval-card.png")
            run.locator(".loom-expand").click()  # lift the height cap: the whole form shows
            run.locator(".loom-edit").click()
            run.locator(".loom-arg-form .loom-arg-to input").fill("ann@example.com")
            shoot(run, out / "approval-edit.png")
            run.locator(".loom-approve").click()
            expect(run.locator(".loom-run-status")).to_contain_text("completed", timeout=30_000)
            page.close()

            # 3: three calls in one turn: Approve all
            name = mail_notebook(root, "all.ipynb", root / "all.duckdb", calls=3)
            page = browser.new_page(viewport={"width": 1100, "height": 1200})
            open_and_run_all(page, f"{url}/lab/tree/{name}?reset")
            run = page.locator(".loom-run")
            expect(run.locator(".loom-approval")).to_have_count(3, timeout=60_000)
            shoot(run, out / "approve-all.png")
            page.close()

            # 4-5: the completed run and its timeline, light and dark
            # a person takes 3 s to approve: the timeline cuts that wait (a broken axis)
            approve = "import asyncio\nawait run.wait(until='paused')\nawait asyncio.sleep(3)\nrun.gates[0].approve()"
            extra = (approve + "\nawait run", "loom.timeline(run.id)")
            name = mail_notebook(root, "done.ipynb", root / "done.duckdb", extra=extra)
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            open_and_run_all(page, f"{url}/lab/tree/{name}?reset")
            expect(page.locator(".loom-tl-tick").first).to_be_visible(timeout=60_000)
            shoot(page.locator(".loom-run"), out / "completed.png")
            shoot(page.locator(".loom-timeline"), out / "timeline.png")
            dark(page)
            shoot(page.locator(".loom-run"), out / "completed-dark.png")
            shoot(page.locator(".loom-timeline"), out / "timeline-dark.png")
            page.close()
        browser.close()


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screens"))
