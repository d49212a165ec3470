"""Clicks a user feels, in a real browser: JupyterLab in headless Chromium, real mouse clicks.

An agent asks approval for one tool call per turn (``--clicks`` turns). For each card the bench
clicks Approve with the mouse; in the page a capture-phase listener takes ``performance.now()`` at
the click, and a ``MutationObserver`` takes it when the view first shows the decision ("approved"
once more in the view's text) and when the approved call's row first shows it done (one more
``.loom-tool-done``): click -> decision shown, click -> the run's next step shown. Baseline, in
the same JupyterLab: a plain ipywidgets ``Button`` whose handler sets a ``Label`` (the round trip
of any widget click), timed the same way.

Run: ``.venv/bin/python bench/browser_clicks.py [--clicks 10]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.notebook.support import CHROMIUM, LAUNCH_ARGS, jupyter_lab, open_and_run_all, write_notebook

AGENT = '''
import loom_nb as loom

@loom.tool(needs_approval=True)
def touch(path: str) -> str:
    """Touch a file."""
    return f"touched {{path}}"

N = {clicks}

def respond(request):
    turn = sum(1 for m in request.messages if m.role == "assistant")
    if turn < N:
        return loom.ModelResponse.tool_calls([("touch", {{"path": f"/f{{turn}}"}})], text=f"Turn {{turn}}.")
    return loom.ModelResponse.text("All done.")

agent = loom.Agent(model=loom.ScriptedModel(respond), tools=[touch], name="clicks", max_turns=N + 1)
run = agent.start("Touch the files.")
'''
BASELINE = """
import ipywidgets as w
label = w.Label("0")
button = w.Button(description="Plain")
button.add_class("plain-button")
def bump(_):
    label.value = str(int(label.value) + 1)
button.on_click(bump)
w.VBox([button, label])
"""
#: In the page: time the next click and what it makes the page show.
WATCH = """
([scope, decided, next]) => {
  const root = document.querySelector(scope);
  const count = (sel, text) =>
    [...root.querySelectorAll(sel)].filter(e => !text || e.textContent.includes(text)).length;
  const t = {click: null, decided: null, next: null};
  const before = [count(decided[0], decided[1]), count(next[0], next[1])];
  window.__loomClick = t;
  const check = () => {
    const now = performance.now();
    if (t.click === null) return;
    if (t.decided === null && count(decided[0], decided[1]) > before[0]) t.decided = now;
    if (t.next === null && count(next[0], next[1]) > before[1]) t.next = now;
    if (t.decided !== null && t.next !== null) obs.disconnect();
  };
  const obs = new MutationObserver(check);
  obs.observe(root, {subtree: true, childList: true, characterData: true, attributes: true});
  const clicked = () => { if (t.click === null) t.click = performance.now(); };
  document.addEventListener("click", clicked, {capture: true, once: true});
}
"""


def timed_click(
    page: Any, button: Any, scope: str, decided: tuple[str, str], nxt: tuple[str, str]
) -> tuple[float, float]:
    """(ms to the decision shown, ms to the next step shown) of one mouse click on ``button``."""
    page.evaluate(WATCH, [scope, list(decided), list(nxt)])
    button.click()
    page.wait_for_function(
        "() => window.__loomClick.decided !== null && window.__loomClick.next !== null", timeout=30_000
    )
    t = page.evaluate("() => window.__loomClick")
    return t["decided"] - t["click"], t["next"] - t["click"]


def main() -> None:
    """Run both measurements and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clicks", type=int, default=10)
    args = parser.parse_args()
    from playwright.sync_api import expect, sync_playwright

    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        root, scratch = Path(tmp) / "root", Path(tmp) / "scratch"
        root.mkdir()
        scratch.mkdir()
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
        with jupyter_lab(root, scratch) as url:
            setup = f"import os\nos.environ['LOOM_JOURNAL'] = {str(root / 'clicks.duckdb')!r}\n%load_ext loom_nb"
            write_notebook(root, "clicks.ipynb", [setup, AGENT.format(clicks=args.clicks), BASELINE])
            page = browser.new_page(viewport={"width": 1200, "height": 1000})
            open_and_run_all(page, f"{url}/lab/tree/clicks.ipynb?reset")
            plain = page.locator(".plain-button")
            expect(plain).to_be_visible(timeout=60_000)
            baseline = []
            for i in range(args.clicks):
                d, _ = timed_click(
                    page, plain, ".jp-Notebook", (".widget-label", str(i + 1)), (".widget-label", str(i + 1))
                )
                baseline.append(d)
            decided, shown = [], []
            view = page.locator(".loom-run")
            for _ in range(args.clicks):
                approve = view.locator(".loom-approve:enabled").first
                expect(approve).to_be_visible(timeout=30_000)
                d, n = timed_click(page, approve, ".loom-run", ("*", "pproved"), (".loom-tool-done", ""))
                decided.append(d)
                shown.append(n)
            expect(view.locator(".loom-run-status")).to_contain_text("completed", timeout=30_000)
            page.close()
        browser.close()
    med = statistics.median
    print(
        f"baseline: a plain ipywidgets Button -> its Label updated: median {med(baseline):.0f} ms over {len(baseline)}"
    )
    print(
        f"Approve click -> the card shows the decision: median {med(decided):.0f} ms (min {min(decided):.0f}, "
        f"max {max(decided):.0f}); target <= 100 ms"
    )
    print(
        f"Approve click -> the run's next step shown (the call's row done): median {med(shown):.0f} ms "
        f"(min {min(shown):.0f}, max {max(shown):.0f}); target <= 200 ms"
    )


if __name__ == "__main__":
    main()
