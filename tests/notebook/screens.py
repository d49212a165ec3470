"""``make screens``: the key screens of the live view, taken in JupyterLab with headless Debian
Chromium and real mouse clicks, saved as PNGs under ``docs/screens/`` (the README shows them).

    .venv/bin/python -m tests.notebook.screens docs/screens

Each of the first screens is the output of one small notebook (the e-mail agent of the browser tests):
a card waiting for approval, the Edit form, Approve all for a turn's three calls, the completed run
with its timeline, and the same in the dark theme. Then each tutorial (``notebooks/NN-*.ipynb``, or
``NNa-*.ipynb``, on a copy of the folder) is opened in JupyterLab and run with Run > Run All Cells; its
main live view (the first batch or run view, with its cards; for a tutorial of frames, its last table)
is saved as ``tutorial-NN.png`` (``tutorial-NNa.png``). The PNGs are quantized to 256 colours to stay small.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.notebook.support import CHROMIUM, LAUNCH_ARGS, REPO, jupyter_lab, open_and_run_all
from tests.notebook.test_view_browser import mail_notebook


def shoot(locator: Any, path: Path) -> None:
    from PIL import Image

    locator.scroll_into_view_if_needed()
    locator.screenshot(path=str(path))
    with Image.open(path) as img:  # 256 colours: a third of the size, the same to the eye
        small = img.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)
    print(f"{path} ({path.stat().st_size:,} bytes)")


#: The JS test that every cell Run All queued has run (no ``[*]`` prompt left).
ALL_RAN = "() => [...document.querySelectorAll('.jp-InputPrompt')].every(e => !e.textContent.includes('*'))"
#: The main live view of a tutorial: its first batch view, else its first run view.
MAIN_VIEW = ".loom-batch, .loom-run:not(.loom-batch .loom-run)"
#: A frame a tutorial shows (a pandas table), for the tutorials without a live view.
FRAME = ".jp-OutputArea-output:has(table.dataframe)"


def tutorial_screens(browser: Any, url: str, root: Path, out: Path) -> None:
    """Open each tutorial in JupyterLab, Run All, and save its main live view as ``tutorial-NN.png`` (its
    number as the file name starts: ``09a``)."""
    folder = root / "tutorials"
    shutil.copytree(REPO / "notebooks", folder, ignore=shutil.ignore_patterns("*.duckdb*", ".ipynb_checkpoints"))
    for nb in sorted(folder.glob("[0-9][0-9]*-*.ipynb")):
        number = nb.name.split("-")[0]
        page = browser.new_page(viewport={"width": 1100, "height": 1000})
        try:
            open_and_run_all(page, f"{url}/lab/tree/tutorials/{nb.name}?reset")
            page.wait_for_timeout(1_000)
            page.wait_for_function(ALL_RAN, timeout=300_000, polling=500)
            page.wait_for_selector("#jp-main-statusbar >> text=/Idle/", timeout=60_000)
            views = page.locator(MAIN_VIEW)
            if views.count():
                shoot(views.first, out / f"tutorial-{number}.png")
            elif page.locator(FRAME).count():  # a tutorial of frames (04): its last table
                shoot(page.locator(FRAME).last, out / f"tutorial-{number}.png")
            else:
                raise RuntimeError(f"{nb.name}: no live view and no frame to take")
        finally:
            page.close()


def theme(page: Any, name: str = "Dark") -> None:
    """Settings > Theme > JupyterLab ``name`` (Dark or Light), with the mouse (JupyterLab keeps it)."""
    page.click("#jp-MainMenu .lm-MenuBar-item:has-text('Settings')")
    page.hover(".lm-Menu-item:has-text('Theme')")
    page.click(f".lm-Menu-item:has-text('JupyterLab {name}')")
    light = "true" if name == "Light" else "false"
    page.wait_for_selector(f"body[data-jp-theme-light='{light}']", state="attached", timeout=30_000)
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
            run.locator(".loom-edit").click()
            run.locator(".loom-arg-form .loom-arg-to input").fill("ann@example.com")
            shoot(run, out / "approval-edit.png")
            run.locator(".loom-approve").click()
            expect(run.locator(".loom-run-status")).to_contain_text("completed", timeout=30_000)
            page.close()

            # 3: three calls in one turn: Approve all
            name = mail_notebook(root, "all.ipynb", root / "all.duckdb", calls=3)
            page = browser.new_page(viewport={"width": 1100, "height": 1800})  # the three cards fit
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
            theme(page, "Dark")
            shoot(page.locator(".loom-run"), out / "completed-dark.png")
            shoot(page.locator(".loom-timeline"), out / "timeline-dark.png")
            theme(page, "Light")  # the tutorials' screens in the light theme
            page.close()

            tutorial_screens(browser, url, root, out)
        browser.close()


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screens"))
