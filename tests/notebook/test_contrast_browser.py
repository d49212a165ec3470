"""The contrast of every text and button of the live view in JupyterLab (headless Debian Chromium,
playwright), in the light and the dark theme (the ``lab`` fixture): each element that shows text
(its own text nodes, a button's label, an input's placeholder) is measured from the colours the
browser computed, its text colour composed over the backgrounds behind it (alpha and opacity
included), and must reach 4.5:1 (WCAG AA). The page holds an approval turn with two cards (Approve
all), an in-doubt card (a non-idempotent tool cut in flight, recovered), a completed run and a
cancelled one. A disabled control is left out (WCAG exempts inactive controls)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loom_nb.palette import contrast_ratio
from tests.notebook.support import BROWSER_MARKS, Lab, open_and_run_all
from tests.notebook.test_view_browser import mail_notebook, new_page

pytestmark = BROWSER_MARKS

IN_DOUBT_CELL = '''
class Crash(BaseException):
    """Stands for the process dying in the middle of a tool call."""

charges = []

@loom.tool
def charge(amount: int) -> str:
    """Charge a card (not idempotent)."""
    charges.append(amount)
    if len(charges) == 1:
        raise Crash
    return f"charged {amount}"

def pay_respond(request):
    if not any(m.role == "tool" for m in request.messages):
        return loom.ModelResponse.tool_calls([("charge", {"amount": 5})], text="Charging.")
    return loom.ModelResponse.text("Charged.")

pay = loom.Agent(model=loom.ScriptedModel(pay_respond), tools=[charge], name="pay")
crashed = pay.start("charge 5")
await crashed.wait()
'''

OTHER_RUNS_CELL = """
ANSWER = "All **done**: see [the log](https://example.com/log)."
talker = loom.Agent(model=loom.ScriptedModel([loom.ModelResponse.text(ANSWER)] * 2), name="talker")
done = talker.start("say it")
await done
stopped = agent.start("Mail them again")
await stopped.wait(until="paused")
await stopped.cancel("changed my mind")
"""

#: Every element under the views that shows text: its text and background colours as the browser
#: computed them, the text colour composed over the backgrounds behind it (and faded by opacity).
PROBE = """
() => {
  function rgba(c) {
    const m = /rgba?\\(([^)]+)\\)/.exec(c || '');
    if (!m) return null;
    const p = m[1].split(/[ ,\\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  }
  function over(top, bottom) {
    const a = top[3];
    return [0, 1, 2].map(i => top[i] * a + bottom[i] * (1 - a)).concat([1]);
  }
  function background(el) {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = rgba(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; }
    }
    let bg = [255, 255, 255, 1];
    if (!layers.length || layers[layers.length - 1][3] < 1) {
      const page = rgba(getComputedStyle(document.querySelector('.jp-Notebook') || document.body).backgroundColor);
      if (page && page[3] >= 1) bg = page;
    }
    for (let i = layers.length - 1; i >= 0; i--) bg = over(layers[i], bg);
    return bg;
  }
  function opacity(el) {
    let o = 1;
    for (let e = el; e; e = e.parentElement) o *= Number(getComputedStyle(e).opacity);
    return o;
  }
  const css = c => `rgb(${c.slice(0, 3).map(Math.round).join(', ')})`;
  const out = [];
  const seen = new Set();
  for (const root of document.querySelectorAll('.loom-run, .loom-recovery')) {
    for (const el of root.querySelectorAll('*')) {
      if (seen.has(el) || ['STYLE', 'SCRIPT'].includes(el.tagName) || el.closest('svg')) continue;
      seen.add(el);
      if (!el.getClientRects().length || getComputedStyle(el).visibility === 'hidden') continue;
      if (el.closest('button:disabled, input:disabled, textarea:disabled')) continue;
      const own = [...el.childNodes].filter(n => n.nodeType === 3 && n.textContent.trim())
        .map(n => n.textContent.trim());
      let text = own.join(' ');
      let style = getComputedStyle(el);
      let what = 'text';
      if (!text && (el.tagName === 'INPUT' || el.tagName === 'TEXTAREA') && el.placeholder && !el.value) {
        text = el.placeholder;
        style = getComputedStyle(el, '::placeholder');
        what = 'placeholder';
      }
      if (!text) continue;
      const bg = background(el);
      const fg = rgba(style.color);
      fg[3] *= opacity(el);
      const cls = [...el.classList].filter(c => c.startsWith('loom-') || c.startsWith('mod-')).join('.');
      out.push({el: `${el.tagName.toLowerCase()}${cls ? '.' + cls : ''}`, what, text: text.slice(0, 40),
                fg: css(over(fg, bg)), bg: css(bg), size: style.fontSize});
    }
  }
  return out;
}
"""


def test_every_text_and_button_of_the_view_has_aa_contrast(themed_lab: Lab, browser: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    url, root, theme = themed_lab
    extra = ("await run.wait(until='paused')", IN_DOUBT_CELL, "%loom recover", OTHER_RUNS_CELL)
    name = mail_notebook(root, "contrast-all.ipynb", tmp_path / "contrast-all.duckdb", calls=2, extra=extra)
    page = new_page(browser)
    try:
        open_and_run_all(page, f"{url}/lab/tree/{name}?reset", theme)
        expect(page.locator(".loom-in-doubt .loom-run-again").first).to_be_visible(timeout=90_000)
        expect(page.locator(".loom-run-status >> text=cancelled").first).to_be_visible(timeout=60_000)
        expect(page.locator(".loom-approve-all").first).to_be_visible()
        page.wait_for_selector("#jp-main-statusbar >> text=/Idle/", timeout=30_000)
        page.wait_for_timeout(1_000)
        measured = page.evaluate(PROBE)
        page.screenshot(path=str(tmp_path / f"contrast-{theme}.png"), full_page=True)
        ratios = [(round(contrast_ratio(m["fg"], m["bg"]), 2), m) for m in measured]
        kinds = {m["el"] for m in measured}
        for needed in (
            "button.loom-approve",
            "button.loom-approve-all",
            "button.loom-happened",
            "button.loom-run-again",
            "button.loom-fail",
            "button.loom-refuse",
            "button.loom-edit",
            "button.loom-stop",
        ):
            assert any(set(needed.split(".")) <= set(k.split(".")) for k in kinds), (needed, sorted(kinds))
        assert any(m["what"] == "placeholder" for m in measured)  # the reason and output boxes
        low = [(r, m) for r, m in ratios if r < 4.5]
        print(f"contrast {theme}: {len(ratios)} elements, lowest {min(r for r, _ in ratios)}")
        assert not low, "\n".join(f"{r}: {m}" for r, m in low)
    finally:
        page.close()
