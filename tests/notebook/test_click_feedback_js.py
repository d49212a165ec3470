"""The click feedback's front end (``widgets/click_feedback.js``) run in Node on a small fake page: a
click on a live card says "sent", then "the kernel is busy" while no acknowledgement comes; a card
whose widget model has no live comm (its kernel restarted) says it can no longer act and names
``%loom pending``, with its buttons disabled: on a click (which never reaches the button), when the
widget manager reports the restart, and when it is drawn from a dead model. A decided card keeps its
line. (In JupyterLab: ``test_handles_browser.test_a_card_of_a_restarted_kernel_says_so_and_records_nothing``.)"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from loom_nb.notebook.timeline import asset_dir

NODE = shutil.which("node")

# A fake page: nodes with classes, a parent, children and `disabled`; a card (the scope) holding the
# feedback widget's element and three buttons; a model proxy as anywidget hands it over, whose
# widget manager knows the widget's own model (`widget`, with `comm_live`).
PAGE = """
class Element {
  constructor(tag, ...classes) { this.tag = tag; this.classes = new Set(classes); this.kids = [];
    this.parent = null; this.dataset = {}; this.disabled = false; this.ownerDocument = doc; }
  get classList() { const s = this.classes; return { add: (c) => s.add(c), contains: (c) => s.has(c) }; }
  set textContent(t) { this.kids = [String(t)]; }
  get textContent() { return this.kids.map((k) => typeof k === "string" ? k : k.textContent).join(""); }
  append(...xs) { for (const x of xs) { this.kids.push(x); if (typeof x !== "string") x.parent = this; } }
  matches(sel) { return sel.split(",").map((s) => s.trim()).some((s) =>
    s.startsWith(".") ? this.classes.has(s.slice(1)) : this.tag === s); }
  closest(sel) { for (let n = this; n; n = n.parent) if (n.matches(sel)) return n; return null; }
  querySelectorAll(sel) { const out = [];
    const walk = (n) => {
      for (const k of n.kids) if (typeof k !== "string") { if (k.matches(sel)) out.push(k); walk(k); }
    };
    walk(this); return out; }
}
globalThis.Element = Element;
const listeners = [];
const doc = { addEventListener: (t, f) => listeners.push(f), removeEventListener: () => {},
              createElement: (tag) => new Element(tag) };
const tick = (ms) => new Promise((r) => setTimeout(r, ms));
const restart = (c) => { c.widget.comm_live = false; (c.handlers.comm_live_update || (() => {}))(); };

async function card({ live = true, decided = false, bar = false } = {}) {
  const classes = [bar ? "loom-approvals-bar" : "loom-card", ...(decided ? ["loom-decided"] : [])];
  const scope = new Element("div", "loom-feedback-scope", ...classes);
  const buttons = ["loom-approve", "loom-refuse", "loom-edit"].map((c) => new Element("button", c));
  const input = new Element("input");
  scope.append(input, ...buttons);
  const el = new Element("div");
  const widget = { comm_live: live };
  const handlers = {};
  const state = { own_id: "fb-1", busy_after: 0.05, acked: 0 };
  const model = { get: (k) => state[k], on: (name, cb) => { handlers[name] = cb; } };
  const manager = { get_model: async (id) => { if (id !== "fb-1") throw new Error("no model"); return widget; } };
  model.widget_manager = manager;
  const index = listeners.length;
  m.default.render({ model, el });
  scope.append(el);  // attached after render(), as ipywidgets does
  await tick(0);
  const click = async (i = 0) => {
    const event = { target: buttons[i], stopped: false, preventDefault() {} };
    event.stopPropagation = () => { event.stopped = true; };
    listeners[index](event);
    await tick(120);
    return event.stopped;
  };
  const seen = () => ({ text: el.textContent, state: el.dataset.state || "", disabled: buttons.map((b) => b.disabled),
                        input: input.disabled, dead: scope.classes.has("loom-dead-card") });
  return { widget, handlers, click, seen };
}
"""


def run_page(body: str) -> object:
    module = (asset_dir() / "click_feedback.js").as_uri()
    script = f"import({json.dumps(module)}).then(async (m) => {{ {PAGE}\n{body} }});"
    out = subprocess.run([NODE or "node", "-e", script], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


DEAD = "this card belongs to a kernel that has restarted: it can no longer act. Run %loom pending in a cell"


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_a_click_on_a_card_whose_model_is_no_longer_live_says_so_and_goes_nowhere() -> None:
    live, dead, told, drawn, decided, bar = run_page(
        "const out = [];"
        "let c = await card(); const stoppedLive = await c.click(); out.push([stoppedLive, c.seen()]);"
        "c = await card(); c.widget.comm_live = false; const stopped = await c.click(); out.push([stopped, c.seen()]);"
        "c = await card(); restart(c); await tick(0); out.push(c.seen());"
        "c = await card({ live: false }); out.push(c.seen());"
        "c = await card({ decided: true }); restart(c); out.push(c.seen());"
        "c = await card({ bar: true }); restart(c); await tick(0); out.push(c.seen());"
        "console.log(JSON.stringify(out));"
    )  # type: ignore[misc]
    stopped, seen = live
    assert not stopped and seen["state"] == "busy" and "the kernel is busy" in seen["text"]  # as before
    assert seen["disabled"] == [True, True, True] and not seen["input"] and not seen["dead"]
    stopped, seen = dead
    assert stopped  # the click never reaches the button (whose comm is gone)
    assert seen["text"].startswith(DEAD) and seen["state"] == "dead" and "busy" not in seen["text"]
    assert seen["disabled"] == [True, True, True] and seen["input"] and seen["dead"]
    for seen in (told, drawn):  # without a click: on the restart, or drawn from a dead model
        assert seen["text"].startswith(DEAD) and seen["disabled"] == [True, True, True] and seen["dead"]
    assert decided["text"] == "" and decided["disabled"] == [False, False, False]  # a decided card keeps its line
    assert bar["text"].endswith("for live cards of these gates.") and bar["dead"]  # the Approve all bar
