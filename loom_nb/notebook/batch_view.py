"""``BatchView``: one view of a whole ``Agent.map`` batch: a progress bar of segments in proportion
to the items done / failed / waiting at a gate / running (the rest: queued), in the palette's
theme-aware colours, the counts, and one card for every open gate of the batch, with Approve all /
Refuse all (``Batch.approve_all`` / ``refuse_all``) above them, shown only while a gate waits and
asking to confirm when more than one gate waits. Under the cards, the outcomes that need reading
later: every gate decided (approved, refused, with its reason) and every item that failed, with its
error (the first ``OUTCOME_LINES``; ``frames()`` has them all). Items are numbered from 1.

It watches the batch through ``Batch.on_change``: a change marks its item dirty and asks a
``Throttle`` for a refresh, and a refresh touches only the dirty items' cards (the counts are kept
by the batch, item by item). So a batch of n items costs O(n) updates in all, and the browser hears
at most one refresh per interval, however fast the items move. The cards are the gate cards of the
live run view (``cards.card_for``): a click calls the same public ``Gate`` methods code calls, and
the resume waits for a slot of the batch's concurrency like any other.
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from loom_nb.agent.batch import Batch, BatchItem
from loom_nb.agent.config import APPROVAL_GATE
from loom_nb.errors import LoomError
from loom_nb.notebook.cards import GateCard, card_for, describe_resolution
from loom_nb.notebook.confirm import ConfirmBar
from loom_nb.notebook.formatting import TextForm, close_tree, html_widget, short_text
from loom_nb.notebook.safe_text import visible
from loom_nb.notebook.throttle import Throttle
from loom_nb.palette import css

log = logging.getLogger("loom_nb")

#: How many outcome lines (gates decided, items failed) the view lists before it only counts them.
OUTCOME_LINES = 50

#: The bar's segments, in order: (batch status, palette role, word for the tooltip).
SEGMENTS: tuple[tuple[str, str, str], ...] = (
    ("completed", "done", "done"),
    ("failed", "failed", "failed"),
    ("suspended", "waiting", "waiting at a gate"),
    ("running", "running", "running"),
)

STYLE = (
    "<style>\n"
    + css()
    + """
.loom-batch-bar { display: flex; width: 300px; max-width: 100%; height: 14px; margin: 4px 0;
  border: 1px solid var(--jp-border-color1, #9e9e9e); border-radius: 3px; overflow: hidden;
  background: var(--jp-layout-color2, #eeeeee); }
.loom-batch-bar > span { display: block; height: 100%; }
.loom-seg-done { background: var(--loom-done); } .loom-seg-failed { background: var(--loom-failed); }
.loom-seg-waiting { background: var(--loom-waiting); } .loom-seg-running { background: var(--loom-running); }
.loom-batch .loom-error { color: var(--loom-failed); }
.loom-batch-outcomes ul { margin: 4px 0; padding-left: 18px; }
</style>"""
)


def bar_html(counts: dict[str, int], total: int) -> str:
    """The batch's progress bar as HTML: one segment per status with items, its width in proportion
    to its count out of ``total`` (the track left empty is the queued items), each with a tooltip."""
    segments = []
    for status, role, word in SEGMENTS:
        n = counts.get(status, 0)
        if n:
            width = 100 * n / max(total, 1)
            segments.append(f"<span class='loom-seg-{role}' style='width: {width:.4g}%' title='{n} {word}'></span>")
    label = ", ".join(f"{counts.get(status, 0)} {word}" for status, _, word in SEGMENTS)
    return f"<div class='loom-batch-bar' role='img' aria-label='{html.escape(label)}'>{''.join(segments)}</div>"


class BatchView(TextForm, widgets.VBox):  # type: ignore[misc]
    """The live view of a batch.

    Args:
        batch: The batch.
        interval: The least time between two refreshes, in seconds.

    Attributes:
        batch: The batch.
        progress: The bar (class ``loom-batch-bar``): segments done / failed / waiting / running in
            proportion to all items (``bar_html``).
        actions: The row of Approve all / Refuse all and the reason box (hidden while no gate waits).
        counts: The counts line.
        cards: The card of every open gate, by ``(execution id, gate id)``, in input order.
        approve_all: The Approve all button; ``refuse_all`` the Refuse all one; ``reason`` their reason box.
        confirm: The question Approve all / Refuse all ask first when more than one gate waits
            (a ``ConfirmBar``, class ``loom-batch-confirm``).
        message: The line under the buttons (what the last click did, or why it was refused).
        outcomes: The gates decided and the items failed, one line each (class ``loom-batch-outcomes``).
        refreshes: How many refreshes ran (the throttle's count).
        items_synced: How many item updates the refreshes made (each changed item once per refresh).
    """

    def __init__(self, batch: Batch, *, interval: float = 0.1) -> None:
        self.batch = batch
        n = len(batch.items)
        self.title = html_widget(
            "loom-batch-title", f"<b>loom batch</b> <code>{html.escape(batch.agent.flow_name)}</code>: {n} item(s)"
        )
        self.style = html_widget("loom-style", STYLE)
        self.progress = html_widget("loom-batch-progress", bar_html(batch.counts, n))
        self.counts = html_widget("loom-batch-counts")
        self.reason = widgets.Text(description="Reason", placeholder="optional", style={"description_width": "initial"})
        self.reason.add_class("loom-batch-reason")
        self.approve_all = widgets.Button(description="Approve all", button_style="success", icon="check")
        self.approve_all.add_class("loom-approve-all")
        self.refuse_all = widgets.Button(description="Refuse all", button_style="danger", icon="times")
        self.refuse_all.add_class("loom-refuse-all")
        self.approve_all.on_click(lambda _: self._ask_all(approve=True))
        self.refuse_all.on_click(lambda _: self._ask_all(approve=False))
        self.confirm = ConfirmBar()
        self.confirm.add_class("loom-batch-confirm")
        self.message = html_widget("loom-batch-message")
        self.outcomes = html_widget("loom-batch-outcomes")
        self._outcome_lines: list[str] = []
        self._outcomes_more = 0
        self._failed_noted: set[str] = set()
        self._answered: tuple[int, str] | None = None
        self.gate_box = widgets.VBox()
        self.gate_box.add_class("loom-batch-gates")
        self.cards: dict[tuple[str, str], GateCard] = {}
        self._boxes: dict[tuple[str, str], Any] = {}  # each card under a line naming its item
        self._leaving: list[Any] = []  # boxes of gates no longer open, closed once out of the view
        self._item_gates: dict[str, set[str]] = {}
        self._index: dict[str, int] = {}
        self._dirty: dict[str, BatchItem] = {}
        self.items_synced = 0
        self._throttle = Throttle(self._refresh, interval=interval)
        self._refreshed: list[Callable[[BatchView], None]] = []
        self.actions = widgets.HBox([self.approve_all, self.refuse_all, self.reason])
        self.actions.layout.display = "none"
        super().__init__(
            children=[
                self.style,
                self.title,
                self.progress,
                self.counts,
                self.actions,
                self.confirm,
                self.message,
                self.gate_box,
                self.outcomes,
            ]
        )
        self.add_class("loom-batch")
        for item in batch.items:
            if item.status == "suspended":
                self._dirty[item.execution_id] = item
        self._unsubscribe = batch.on_change(self._on_item)
        self._throttle.request()
        self._throttle.flush()

    @property
    def refreshes(self) -> int:
        """How many refreshes ran."""
        return self._throttle.calls

    def _on_item(self, batch: Batch, item: BatchItem) -> None:
        self._dirty[item.execution_id] = item
        self._throttle.request()

    def on_refresh(self, listener: Callable[[BatchView], None]) -> Callable[[], None]:
        """Call ``listener(view)`` after each refresh (the display follows the view this way);
        returns a function that stops it."""
        self._refreshed.append(listener)
        return lambda: self._refreshed.remove(listener) if listener in self._refreshed else None

    def flush(self) -> None:
        """Refresh now if a change is waiting (tests; the throttle does it on its own)."""
        self._throttle.flush()

    def close(self) -> None:
        """Stop watching the batch and close the widget."""
        self._unsubscribe()
        super().close()

    # -- rendering --------------------------------------------------------------------------------
    def _refresh(self) -> None:
        try:
            self._render()
            for listener in list(self._refreshed):
                listener(self)
        except Exception:  # a view must never stop a batch
            log.exception("loom_nb: the batch view of %s failed to update", self.batch.agent.flow_name)

    def _render(self) -> None:
        batch = self.batch
        c = batch.counts
        self.progress.value = bar_html(c, len(batch.items))
        self.counts.value = html.escape(batch.progress_line())
        dirty, self._dirty = self._dirty, {}
        self.items_synced += len(dirty)
        changed = False
        noted = len(self._outcome_lines) + self._outcomes_more
        for item in dirty.values():
            changed |= self._sync_cards(item)
            if item.status == "failed" and item.execution_id not in self._failed_noted:
                self._failed_noted.add(item.execution_id)
                error = item.run.exception()
                why = f"{type(error).__name__}: {error}" if error is not None else "failed"
                self._note(item, f"failed: {short_text(why, 200)}")
        if len(self._outcome_lines) + self._outcomes_more != noted:
            self._show_outcomes()
        if changed:  # cards in input order, whatever order the items reached their gates in
            order = sorted(self.cards, key=lambda key: (self._index[key[0]], key[1]))
            self.cards = {key: self.cards[key] for key in order}
            self.gate_box.children = tuple(self._boxes[key] for key in order)
        for box in self._leaving:  # out of the view for good: closed, so no model of theirs stays behind
            close_tree(box)
        self._leaving.clear()
        waiting = any(card.gate.kind == APPROVAL_GATE and not card.decided for card in self.cards.values())
        self.approve_all.disabled = self.refuse_all.disabled = not waiting or self.confirm.asking
        self.actions.layout.display = "" if waiting else "none"
        if not waiting and self.confirm.asking:
            self.confirm.cancel()
        if self._answered is not None:
            n, verb = self._answered
            going = c.get("running", 0) + c.get("queued", 0) + c.get("suspended", 0)
            tail = "; the runs go on" if going else "; every run has settled"
            self.message.value = html.escape(f"{n} gate(s) {verb}{tail}")

    def _note(self, item: BatchItem, what: str) -> None:
        """Keep one outcome line about ``item`` (the first ``OUTCOME_LINES``; the rest are counted)."""
        if len(self._outcome_lines) >= OUTCOME_LINES:
            self._outcomes_more += 1
            return
        self._outcome_lines.append(
            f"<li><b>item {item.index + 1}</b> <code>{html.escape(visible(item.execution_id))}</code> "
            f"({html.escape(visible(short_text(item.input, 60)))}): {html.escape(visible(what))}</li>"
        )

    def _show_outcomes(self) -> None:
        more = (
            f"<div>… and {self._outcomes_more} more: <code>runtime.frames().gates()</code> and "
            "<code>.runs()</code> list them all</div>"
            if self._outcomes_more
            else ""
        )
        self.outcomes.value = f"<b>Outcomes</b><ul>{''.join(self._outcome_lines)}</ul>{more}"

    def _decided(self, item: BatchItem, gate_id: str, card: GateCard) -> None:
        """A gate of ``item`` left the view: note how it was decided (from the journal)."""
        try:
            record = item.run.runtime.history(item.execution_id).gates.get(gate_id)
        except Exception:  # the journal cannot be read now: the card leaves without its line
            log.debug("loom_nb: no outcome line for gate %s of %s", gate_id, item.execution_id, exc_info=True)
            return
        if record is None or not record.resolved:
            return
        self._note(item, f"{card.summary()}: {describe_resolution(record.kind, record.resolution)}")

    def _sync_cards(self, item: BatchItem) -> bool:
        open_gates = {g.gate_id: g for g in item.gates} if item.status == "suspended" else {}
        shown = self._item_gates.setdefault(item.execution_id, set())
        self._index[item.execution_id] = item.index
        changed = False
        for gate_id in [g for g in shown if g not in open_gates]:
            shown.discard(gate_id)
            self._decided(item, gate_id, self.cards.pop((item.execution_id, gate_id)))
            self._leaving.append(self._boxes.pop((item.execution_id, gate_id)))
            changed = True
        for gate_id, gate in open_gates.items():
            key = (item.execution_id, gate_id)
            if key not in self.cards:
                card = self.cards[key] = card_for(gate)
                label = html_widget(
                    "loom-batch-item",
                    f"<b>item {item.index + 1}</b> <code>{html.escape(visible(item.execution_id))}</code>: "
                    f"{html.escape(visible(short_text(item.input, 100)))}",
                )
                self._boxes[key] = widgets.VBox([label, card])
                shown.add(gate_id)
                changed = True
        return changed

    def _ask_all(self, *, approve: bool) -> None:
        """The Approve all / Refuse all click: with more than one gate waiting, ask first."""
        n = sum(1 for card in self.cards.values() if card.gate.kind == APPROVAL_GATE and not card.decided)
        if n <= 1:
            self._answer_all(approve=approve)
            return
        verb = "Approve" if approve else "Refuse"

        def back() -> None:
            self.approve_all.disabled = self.refuse_all.disabled = False

        self.approve_all.disabled = self.refuse_all.disabled = True
        self.confirm.ask(
            f"{verb} all {n} waiting calls of this batch?",
            f"{verb} {n} calls",
            lambda: self._answer_all(approve=approve),
            style="success" if approve else "danger",
            on_no=back,
        )

    def _answer_all(self, *, approve: bool) -> None:
        reason = self.reason.value.strip() or None
        try:
            answered = self.batch.approve_all(reason) if approve else self.batch.refuse_all(reason)
        except LoomError as exc:
            self.message.value = f"<span class='loom-error'>{html.escape(visible(str(exc)))}</span>"
            answered = None
        if isinstance(answered, list):
            self._answered = (len(answered), "approved" if approve else "refused")
            self.message.value = html.escape(f"{len(answered)} gate(s) {self._answered[1]}; the runs go on")
        self._throttle.request()

    # -- text -------------------------------------------------------------------------------------
    def text(self) -> str:
        """The view as text: the counts line, then one line per open gate."""
        lines = [self.batch.progress_line()]
        lines += [f"  item {eid}: {card.text()}" for (eid, _), card in self.cards.items()]
        lines += [f"  {re.sub('<[^>]+>', '', line)}" for line in self._outcome_lines]
        return "\n".join(lines)


def show_batch(batch: Batch) -> None:
    """The ``BATCH_HOOKS`` entry: display ``batch``'s view in the current cell."""
    try:
        from loom_nb.notebook.runs import display

        display(BatchView(batch))
    except Exception:  # a view must never stop a batch
        log.exception("loom_nb could not display the view of batch %s", batch.agent.flow_name)
