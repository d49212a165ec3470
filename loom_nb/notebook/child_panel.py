"""A sub-agent's steps nested in its parent's live view (``Agent.as_tool``: a child execution).

``RunView`` puts one ``ChildPanel`` under the tool row of each ``as_tool`` call of its run: the
child's status, its tool rows and its gate cards (a grandchild's cards join its child's panel).
The panel folds the child's events (``RunState``), as the run view folds its own; the cards are
made from the parent run's gates (``Run.gates`` lists a waiting child's gates under the child's
id), so a click answers in the child and then drives the parent (``Gate.approve`` on a child's
gate). CSS classes: ``loom-child``, ``loom-child-head``, plus the run view's ``loom-tools`` /
``loom-tool-row`` / ``loom-cards``.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from loom_nb.agent.config import APPROVAL_GATE
from loom_nb.agent.tool_calls import tool_call
from loom_nb.journal import step_ids
from loom_nb.journal.events import Event, EventKind
from loom_nb.journal.run_state import GateState, RunState, StepState
from loom_nb.notebook.cards import FoldedCards, GateCard
from loom_nb.notebook.formatting import TextForm, html_widget, shared_box, short_text, take_out
from loom_nb.notebook.safe_text import visible

#: A parent's tool-row status while its child execution is in each state.
_ROW_STATUS = {
    "new": "running",
    "running": "running",
    "suspended": "waiting",
    "completed": "done",
    "failed": "failed",
    "cancelled": "cancelled",
}


def direct_child(parent_id: str, execution_id: str) -> str | None:
    """The id of ``parent_id``'s direct child that ``execution_id`` is or descends from (child ids
    are ``<parent>/<step>``, and step ids hold no ``/``), else None."""
    prefix = parent_id + "/"
    if not execution_id.startswith(prefix):
        return None
    return prefix + execution_id[len(prefix) :].split("/", 1)[0]


class ChildPanel(TextForm, widgets.VBox):  # type: ignore[misc]
    """One child execution under its parent's tool row: a head line, tool rows and gate cards.

    Args:
        execution_id: The child execution.
        row: Makes a tool row from ``(step id, tool name, arguments)`` (the run view's ``ToolRow``).

    Attributes:
        execution_id: The child execution.
        parent_step: The parent's step that runs it (``#turn:<i>:tool:<j>``).
        state: Its events folded so far.
        tool_rows: Its tool rows by step id.
        cards: Gate cards by ``(execution id, gate id)`` (its own, and its own children's).
        folded: Its decided approval cards folded into its tool rows, as the run view folds its own.
        head: The head line (class ``loom-child-head``).
    """

    def __init__(self, execution_id: str, *, row: Callable[[str, str, Any], Any]) -> None:
        self._row_type = row
        self.execution_id = execution_id
        self.parent_step = execution_id.rsplit("/", 1)[-1]
        self.state = RunState(execution_id=execution_id)
        self.tool_rows: dict[str, Any] = {}
        self.cards: dict[tuple[str, str], GateCard] = {}
        #: The decided approval cards folded into the child's tool rows (closed; the row says the decision).
        self.folded = FoldedCards()
        self.head = html_widget("loom-child-head", shared=True)
        self.tools = shared_box()
        self.tools.add_class("loom-tools")
        self.cards_box = shared_box()
        self.cards_box.add_class("loom-cards")
        super().__init__(children=[self.head, self.tools, self.cards_box])
        self.add_class("loom-child")
        self._render_head()

    @property
    def status(self) -> str:
        """The child's status as its events say (``new`` before the first one)."""
        return self.state.status

    @property
    def row_status(self) -> str:
        """The status the parent's tool row shows for this child."""
        return _ROW_STATUS.get(self.state.status, self.state.status)

    @property
    def preview(self) -> str:
        """What the parent's tool row shows after the arrow: the child's answer or error."""
        if self.state.status == "completed":
            out = self.state.output
            return visible(short_text(out.get("output") if isinstance(out, dict) and "output" in out else out, 120))
        if self.state.error is not None:
            e = self.state.error
            return visible(short_text(f"{e.get('type', '')}: {e.get('message', '')}", 160))
        return ""

    def apply(self, e: Event, *, render: bool = True) -> None:
        """Fold one of the child's events in and update its rows (and head)."""
        touched = self.state.apply(e)
        if isinstance(touched, StepState) and touched.kind == step_ids.TOOL_KIND:
            if e.kind == EventKind.STEP_STARTED:
                self._row(touched.step_id, touched.tool or touched.effect, touched.input)
            self._refresh_row(touched.step_id, render)
        elif isinstance(touched, GateState):
            if e.kind == EventKind.GATE_RESOLVED:
                card = self.cards.get((self.execution_id, touched.gate_id))
                if card is not None:
                    card.resolved(touched.resolution, touched.resolved_at or 0.0)
                    self._fold((self.execution_id, touched.gate_id))
            subject = touched.subject
            if touched.kind == APPROVAL_GATE and subject is not None:
                if e.kind == EventKind.GATE_OPENED and isinstance(touched.payload, dict):
                    self._row(subject, str(touched.payload.get("tool")), touched.payload.get("arguments"))
                self._refresh_row(subject, render)
        elif e.kind == EventKind.EXECUTION_CANCELLED:  # calls the cancel cut before they ran (or finished)
            for row in self.tool_rows.values():
                if row.status in ("awaiting approval", "approved", "running", "retrying"):
                    row.status = "cancelled"
                    if render:
                        row.render()
        self._render_head()

    def add_card(self, key: tuple[str, str], card: GateCard) -> None:
        """Show a gate card of the child (or of one of its children)."""
        self.cards[key] = card
        gate = self.state.gates.get(key[1]) if key[0] == self.execution_id else None
        if gate is not None and gate.resolved:
            card.resolved(gate.resolution, gate.resolved_at or 0.0)
            if self._fold(key):
                return
        self.cards_box.children = (*self.cards_box.children, card)

    def _fold(self, key: tuple[str, str]) -> bool:
        """Fold a decided approval card of the child (not a grandchild's: the panel shows no rows
        of those) into its tool row (``FoldedCards``, as the run view does)."""
        subject = step_ids.parse_step_id(key[1]).subject if key[0] == self.execution_id else None
        return self.folded.fold(key, self.cards[key], has_row=subject in self.tool_rows, detach=self._detach)

    def _detach(self, card: GateCard) -> None:
        take_out(self.cards_box, card)

    def close_cards(self, why: str) -> None:
        """Close every card (the parent settled)."""
        for card in self.cards.values():
            card.close(why)

    def render_rows(self) -> None:
        """Render every tool row (after a load from the journal)."""
        for row in self.tool_rows.values():
            row.render()

    def _row(self, sid: str, name: str, arguments: Any) -> Any:
        row = self.tool_rows.get(sid)
        if row is None:
            row = self.tool_rows[sid] = self._row_type(sid, name, arguments)
            self.tools.children = (*self.tools.children, row.widget)
        return row

    def _refresh_row(self, sid: str, render: bool) -> None:
        row = self.tool_rows.get(sid)
        if row is None:
            return
        gate = self.state.gates.get(step_ids.approval_gate_for(sid))
        row.update(self.state.steps.get(sid), gate, tool_call(self.state, sid))
        if render:
            row.render()

    def _render_head(self) -> None:
        flow = self.state.flow or "?"
        self.head.value = (
            f"<span class='loom-child-head'>sub-agent <code>{html.escape(visible(flow))}</code> · child execution "
            f"<code>{html.escape(visible(self.execution_id))}</code>: {html.escape(self.status)}</span>"
        )

    def lines(self) -> list[str]:
        """The panel as text lines (without timings)."""
        out = [f"child {self.execution_id} ({self.state.flow or '?'}): {self.status}"]
        out += ["  " + row.text() for row in self.tool_rows.values()]
        out += ["  " + line for line in self.folded.lines(self.cards)]
        return out

    def text(self) -> str:
        """The panel as text."""
        return "\n".join(self.lines())
