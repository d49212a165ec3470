"""The batch view (no kernel: ``Button.click()`` runs the handlers a real click runs): counts and a
progress bar, one card per open gate of the batch, Approve all / Refuse all, a card clicked alone,
and a refresh cost that stays linear in the number of items."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import ipywidgets as widgets

import loom_nb as loom
from loom_nb.agent.batch import BATCH_HOOKS
from loom_nb.messages import ModelRequest, ModelResponse
from loom_nb.notebook.batch_view import BatchView, bar_html, show_batch
from loom_nb.notebook.cards import ApprovalCard
from tests.notebook.support import make_runtime


@loom.tool(needs_approval=True)
def send(to: str) -> str:
    """Send a message.

    Args:
        to: Who to send it to.
    """
    return f"sent to {to}"


def respond(request: ModelRequest) -> ModelResponse:
    user = next(m.text for m in request.messages if m.role == "user")
    if user.startswith("fail"):
        raise ValueError("broken input")
    tool = next((m for m in request.messages if m.role == "tool"), None)
    if user.startswith("send") and tool is None:
        return ModelResponse.tool_calls([("send", {"to": user.split()[-1]})])
    return ModelResponse.text(f"done: {user}" + (f" / {tool.text}" if tool else ""))


def agent() -> loom.Agent:
    return loom.Agent(model=loom.ScriptedModel(respond), tools=[send], name="mailer", model_retry=None)


def segments(view: BatchView) -> list[tuple[str, str, str]]:
    """The bar's segments as (palette role, width, tooltip)."""
    return re.findall(r"<span class='loom-seg-(\w+)' style='width: ([\d.]+%)' title='([^']+)'>", view.progress.value)


async def settle(view: BatchView) -> None:
    await view.batch
    view.flush()


async def test_counts_bar_and_one_card_per_open_gate() -> None:
    rt = make_runtime()
    batch = agent().map(["send to ann", "send to bob", "plain", "fail now"], runtime=rt, view=False)
    view = BatchView(batch)
    assert view.text() == "batch agent:mailer: 0/4 done, 0 failed, 0 waiting at a gate, 0 running, 4 queued"
    await settle(view)
    assert segments(view) == [
        ("done", "25%", "1 done"),
        ("failed", "25%", "1 failed"),
        ("waiting", "50%", "2 waiting at a gate"),
    ]
    assert batch.counts == {"queued": 0, "running": 0, "suspended": 2, "completed": 1, "failed": 1}
    assert "1/4 done, 1 failed, 2 waiting at a gate" in view.counts.value
    assert len(view.gate_box.children) == 2 and all(isinstance(c, ApprovalCard) for c in view.cards.values())
    label, card = view.gate_box.children[0].children
    assert "item 1" in label.value and "send to ann" in label.value and card is next(iter(view.cards.values()))
    ann = batch.items[0].execution_id
    assert view.text().splitlines()[1] == (
        f"  item {ann}: <Gate #turn:0:tool:0:approval: approve send(to='ann')?> -> "
        f"%loom resume {ann} '#turn:0:tool:0:approval' --approve | --refuse [--reason R]"
    )
    assert not view.approve_all.disabled and view.actions.layout.display == ""


async def test_approve_all_click_answers_every_gate_and_the_cards_go() -> None:
    rt = make_runtime()
    batch = agent().map([f"send to p{i}" for i in range(5)], concurrency=2, runtime=rt, view=False)
    view = BatchView(batch)
    await settle(view)
    assert len(view.cards) == 5
    view.reason.value = "all fine"
    view.approve_all.click()  # five gates wait: it asks first
    assert view.confirm.asking and "Approve all 5 waiting calls" in view.confirm.question.value
    assert all(item.status == "suspended" for item in batch.items) and view.approve_all.disabled
    view.confirm.no.click()  # Cancel: nothing answered, the buttons back
    assert not view.confirm.asking and not view.approve_all.disabled
    view.approve_all.click()
    view.confirm.yes.click()
    assert "5 gate(s) approved; the runs go on" in view.message.value
    await batch.wait(until="settled")
    view.flush()
    assert "5 gate(s) approved; every run has settled" in view.message.value
    assert view.outcomes.value.count("<li>") == 5 and "approved (all fine)" in view.outcomes.value
    assert batch.done == 5 and segments(view) == [("done", "100%", "5 done")]
    assert view.cards == {} and view.gate_box.children == () and view.approve_all.disabled
    assert view.actions.layout.display == "none"  # no gate waits: no Approve all / Refuse all
    assert batch.results[0] is not None and batch.results[0].output == "done: send to p0 / sent to p0"


def tree(widget: Any) -> list[Any]:
    """``widget`` and every widget it holds (children, layout, style...)."""
    found = [widget]
    for name in widget.keys:
        value = getattr(widget, name, None)
        for v in value if isinstance(value, list | tuple) else [value]:
            if isinstance(v, widgets.Widget):
                found += tree(v)
    return found


async def test_a_card_that_leaves_the_view_is_closed_with_its_layout_and_style_models() -> None:
    rt = make_runtime()
    batch = agent().map(["send to ann", "send to bob"], runtime=rt, view=False)
    view = BatchView(batch)
    await settle(view)
    ann, bob = view.gate_box.children
    gone, kept = tree(ann), tree(bob)
    kinds = {type(w).__name__ for w in gone}
    assert {"Layout", "HTMLStyle", "ButtonStyle", "Button", "Text"} <= kinds and len(gone) > 30
    next(iter(view.cards.values())).approve.click()
    await asyncio.sleep(0)
    await batch.items[0].run.wait(timeout=10)
    view.flush()
    assert view.gate_box.children == (bob,)
    assert all(w.comm is None for w in gone)  # closed: no model of the card stays in the kernel
    assert all(w.comm is not None for w in kept + tree(view.gate_box))


async def test_refuse_all_click_and_one_card_clicked_alone() -> None:
    rt = make_runtime()
    batch = agent().map(["send to a", "send to b", "send to c"], runtime=rt, view=False)
    view = BatchView(batch)
    await settle(view)
    first = next(iter(view.cards.values()))
    assert isinstance(first, ApprovalCard)
    first.approve.click()
    await asyncio.sleep(0)
    await settle(view)
    assert batch.items[0].status == "completed" and len(view.cards) == 2
    view.refuse_all.click()
    view.confirm.yes.click()
    await batch.wait(until="settled")
    view.flush()
    outputs = [r.output for r in batch.results if r is not None]
    assert outputs[0].endswith("sent to a")
    assert all("refused" in o for o in outputs[1:]) and view.cards == {}
    # the refused cards left a trace: one outcome line per decided gate, items numbered from 1
    lines = view.text().splitlines()[1:]
    assert len(lines) == 3 and lines[0].startswith("  item 1 ") and ": approved" in lines[0]
    assert lines[1].startswith("  item 2 ") and lines[1].endswith(": refused")


async def test_a_failed_item_is_listed_with_its_error_and_one_gate_needs_no_confirmation() -> None:
    rt = make_runtime()
    batch = agent().map(["fail now", "send to ann"], runtime=rt, view=False)
    view = BatchView(batch)
    await settle(view)
    assert "item 1" in view.outcomes.value and "failed: " in view.outcomes.value
    assert "broken input" in view.outcomes.value
    view.approve_all.click()  # one gate: no question
    assert not view.confirm.asking and "1 gate(s) approved" in view.message.value
    await batch.wait(until="settled")
    view.flush()
    assert view.outcomes.value.count("<li>") == 2


async def test_outcome_lines_stop_at_their_cap_and_count_the_rest(monkeypatch: Any) -> None:
    import loom_nb.notebook.batch_view as batch_view

    monkeypatch.setattr(batch_view, "OUTCOME_LINES", 2)
    rt = make_runtime()
    batch = agent().map([f"fail {i}" for i in range(5)], runtime=rt, view=False)
    view = BatchView(batch)
    await settle(view)
    assert view.outcomes.value.count("<li>") == 2 and "… and 3 more" in view.outcomes.value


async def test_refreshes_are_throttled_and_touch_only_changed_items() -> None:
    rt = make_runtime()
    n = 200
    batch = agent().map([f"plain {i}" for i in range(n)], concurrency=16, runtime=rt, view=False)
    view = BatchView(batch, interval=10.0)  # a long interval: every change inside it coalesces
    await batch
    assert view.refreshes == 1  # the first one, at construction; the rest wait for the interval
    view.flush()
    assert view.refreshes == 2 and batch.done == n
    assert view.items_synced == n  # each changed item once, however many times it changed
    view.close()


async def test_the_hook_displays_a_view_in_a_running_loop() -> None:
    shown: list[object] = []
    import loom_nb.notebook.runs as runs

    original = runs.display
    runs.display = shown.append  # type: ignore[assignment]
    BATCH_HOOKS.append(show_batch)
    try:
        batch = agent().map(["plain"], runtime=make_runtime())
        await batch
    finally:
        BATCH_HOOKS.remove(show_batch)
        runs.display = original  # type: ignore[assignment]
    assert len(shown) == 1 and isinstance(shown[0], BatchView) and batch.done == 1


def test_the_crash_report_says_to_run_a_batch_again() -> None:
    from loom_nb.journal import Event, EventKind, step_ids
    from loom_nb.notebook.extension import crash_report

    rt = make_runtime()
    eid = step_ids.batch_execution_id("mailer", "plain")
    started = {"flow": "agent:mailer", "input": "plain", "principal": {"name": "user", "scopes": []}}
    rt.journal.append([Event(eid, 1, EventKind.EXECUTION_STARTED, None, 0.0, started)])
    lines = crash_report(rt)
    assert lines[0].startswith("loom_nb: 1 execution(s) left running by a crash or restart (map:mailer:")
    assert lines[1] == (
        "loom_nb: some belong to batches of mailer (agent.map): running their map cell again finishes them too, "
        "at the batch's concurrency"
    )
    batch = agent().map(["plain"], runtime=rt, progress=False)
    assert batch.items[0].resumed and batch.done == 1 and crash_report(rt) == []


def test_the_bar_shows_the_proportions_with_theme_aware_colours() -> None:
    """7 done and 1 failed of 8: a 87.5% done segment and a 12.5% failed one (not one red bar), in
    the palette's colours, which switch with JupyterLab's theme."""
    html = bar_html({"queued": 0, "running": 0, "suspended": 0, "completed": 7, "failed": 1}, 8)
    assert "width: 87.5%' title='7 done'" in html and "width: 12.5%' title='1 failed'" in html
    assert "loom-seg-waiting" not in html and "loom-seg-running" not in html
    assert "aria-label='7 done, 1 failed, 0 waiting at a gate, 0 running'" in html
    html = bar_html({"queued": 2, "running": 1, "suspended": 1, "completed": 0, "failed": 0}, 4)
    assert "width: 25%' title='1 waiting at a gate'" in html and "width: 25%' title='1 running'" in html
    from loom_nb.notebook.batch_view import STYLE

    assert ".loom-seg-done { background: var(--loom-done); }" in STYLE
    assert "body[data-jp-theme-light='false']" in STYLE  # the dark values of the palette
