"""The live view of a run (ipywidgets): status, turns, streamed text, tool calls, gate cards, answer.

``RunView(run)`` watches one ``Run``: ``run.on_change`` for its status and open gates, and
``runtime.observe`` for committed events (tool calls, turns, gate answers, usage) and streamed
model deltas. Every delta is kept; the text widget is refreshed at most ~20 times a second.

Cards act through the public API only: Approve / Refuse call ``gate.approve(reason)`` /
``gate.refuse(reason)``; the in-doubt card calls ``gate.happened(output)``, ``gate.run_again()``
or ``gate.fail(reason)``. A card disables its buttons on the first click, so a double click cannot
resume twice, and shows the decision and when it was recorded — whoever made it (a click, a cell,
``%loom resume``).

Every widget has a stable CSS class (``loom-run``, ``loom-run-status``, ``loom-turns``,
``loom-stream``, ``loom-body`` (the finished turns, capped), ``loom-current`` (the current turn
and every waiting card, uncapped), ``loom-follow`` (a box that follows its tail), ``loom-tools``,
``loom-tool-row``, ``loom-card``, ``loom-approval``,
``loom-in-doubt``, ``loom-approve``, ``loom-refuse``, ``loom-reason``, ``loom-output``,
``loom-happened``, ``loom-run-again``, ``loom-fail``, ``loom-card-status``, ``loom-answer``,
``loom-error``, ``loom-usage``, ``loom-thinking`` (the model's reasoning, collapsed), ``loom-session`` (a
session run: its session, index and the run it continues), ``loom-stop`` (the Stop button:
``run.cancel()`` once confirmed in ``loom-stop-confirm``), ``loom-stopped`` (a cancelled run's
line), ``loom-child`` (a sub-agent's steps and cards under its tool row)), and every object a
useful ``text/plain`` form for front ends without widgets (plain IPython, nbval).
"""

from __future__ import annotations

import asyncio
import html
import logging
import time
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from loom_nb.agent.carry import session_of
from loom_nb.agent.config import APPROVAL_GATE
from loom_nb.agent.output import FINAL_RESULT_TOOL, answer_attempts, output_text
from loom_nb.agent.run import Run
from loom_nb.agent.tool_calls import tool_call, tool_calls
from loom_nb.journal import step_ids
from loom_nb.journal.events import STATUS_OF_KIND, Event, EventKind
from loom_nb.journal.run_state import GateState, RunState, StepState
from loom_nb.kernel.async_bridge import in_running_loop
from loom_nb.kernel.errors_codec import error_summary
from loom_nb.notebook.cards import (
    ApprovalCard,
    FoldedCards,
    GateCard,
    TurnApprovals,
    card_for,
    run_tool_schema,
)
from loom_nb.notebook.child_panel import ChildPanel, direct_child
from loom_nb.notebook.confirm import NO_FEEDBACK, ConfirmBar
from loom_nb.notebook.edit_form import ordered_arguments
from loom_nb.notebook.formatting import (
    TextForm,
    close_tree,
    html_widget,
    shared_box,
    shared_model,
)
from loom_nb.notebook.rows import AnswerRow, ToolRow
from loom_nb.notebook.runs import attach, display, ensure_registered
from loom_nb.notebook.safe_text import escape_bidi, markdown_html, visible
from loom_nb.notebook.throttle import Throttle
from loom_nb.notebook.view_page import FOLLOW_CLASS, ViewPage
from loom_nb.notebook.view_style import STYLE

log = logging.getLogger("loom_nb")


def thinking_text(block: dict[str, Any]) -> str:
    """What a reasoning block shows: its text, or why there is none (never its signature or data)."""
    if block.get("type") == "redacted_thinking":
        return "[redacted by the provider]"
    return str(block.get("text") or "") or "[reasoning not shown by the provider]"


def thinking_html(blocks: list[dict[str, Any]], tokens: int) -> str:
    """The model's reasoning as a collapsed ``<details>`` section (class ``loom-thinking``)."""
    counts = f"{len(blocks)} block(s)" + (f" · {tokens} reasoning tokens" if tokens else "")
    body = "\n\n".join(html.escape(escape_bidi(thinking_text(b))) for b in blocks)
    return f"<details class='loom-thinking'><summary>Thinking ({counts})</summary><pre>{body}</pre></details>"


class TurnBlock(widgets.VBox):  # type: ignore[misc]
    """One model turn of the live view, in the order things happened: the model's text (Markdown),
    its reasoning (collapsed), a spinner while the model is called, then the turn's tool rows and
    gate cards (approval cards grouped in a ``TurnApprovals``).

    Args:
        turn: The turn's index (``#turn:<turn>``).

    Attributes:
        turn: The turn's index.
        text: The model's text of the turn (every model step of the turn, newline-separated).
        body: The rendered text (class ``loom-turn-text``).
        tools: The tool rows (class ``loom-tools``).
        approvals: The turn's approval cards, once there is one.
        reasoning: The turn's reasoning blocks (shown collapsed in ``thinking``).
    """

    def __init__(self, turn: int) -> None:
        self.turn = turn
        self.text = ""
        # counted from 1, with the id its steps have (``#turn:0`` is turn 1), as traces and frames name it
        head = f"turn {turn + 1} · <code>{step_ids.turn_id(turn)}</code>"
        self.head = html_widget("loom-turn-head", head, shared=True)
        self.body = html_widget("loom-turn-text")
        self.body.add_class(FOLLOW_CLASS)  # capped while its turn is current: it follows its streamed tail
        self.thinking = html_widget("loom-thinking", shared=True)
        self.calling = html_widget("loom-calling", shared=True)
        self.tools = shared_box()
        self.tools.add_class("loom-tools")
        self.cards = shared_box()
        self.cards.add_class("loom-cards")
        self.approvals: TurnApprovals | None = None
        self.reasoning: list[dict[str, Any]] = []
        self.reasoning_tokens = 0
        super().__init__(children=[self.head, self.body, self.thinking, self.calling, self.tools, self.cards])
        self.add_class("loom-turn")

    def set_text(self, text: str, *, hidden: bool = False) -> None:
        """Show the model's text of the turn (rendered as Markdown), or hide it (it is the answer)."""
        if text == self.text and (self.body.layout.display == "none") == hidden:
            return
        self.text = text
        self.body.value = markdown_html(text) if text.strip() else ""
        self.body.layout.display = "none" if hidden else ""
        # a turn whose only text is the answer (shown below the turns) shows nothing of its own
        empty = hidden and not self.tools.children and not self.cards.children and not self.thinking.value
        self.layout.display = "none" if empty else ""

    def waiting(self) -> bool:
        """Whether a card of the turn waits for a person (its own cards, or a sub-agent's under
        one of its tool rows)."""
        cards: list[GateCard] = list(self.approvals.cards) if self.approvals is not None else []
        cards += [c for c in self.cards.children if isinstance(c, GateCard)]
        cards += [c for w in self.tools.children if isinstance(w, ChildPanel) for c in w.cards.values()]
        return any(c.decision is None and not c.closed for c in cards)

    def add_row(self, row: ToolRow | AnswerRow) -> None:
        """Add a tool row (or a typed answer's row)."""
        self.tools.children = (*self.tools.children, row.widget)

    def add_card(self, card: GateCard) -> None:
        """Add a gate card (approval cards join the turn's ``TurnApprovals``)."""
        if isinstance(card, ApprovalCard):
            if self.approvals is None:
                self.approvals = TurnApprovals([card])
                self.cards.children = (*self.cards.children, self.approvals)
            else:
                self.approvals.add(card)
            return
        self.cards.children = (*self.cards.children, card)

    def remove_card(self, card: GateCard) -> None:
        """Take a card out (a decided approval card folded into its tool row); the turn's
        ``TurnApprovals`` goes (closed) with its last card."""
        approvals = self.approvals
        if approvals is not None and card in approvals.cards:
            approvals.remove(card)
            if approvals.cards:
                return
            self.approvals = None
            self.cards.children = tuple(c for c in self.cards.children if c is not approvals)
            close_tree(approvals)
            return
        self.cards.children = tuple(c for c in self.cards.children if c is not card)


# -- the run view ---------------------------------------------------------------------------------
class RunView(TextForm, widgets.VBox):  # type: ignore[misc]
    """The live view of one run, in order: per model turn its text (Markdown), then its tool rows
    and gate cards (``TurnBlock``); the answer once; errors; usage. The finished turns sit in a box
    of capped height, the current turn and every waiting card below it, uncapped (``_place``); the
    capped boxes follow their tail in the page (``ViewPage``; ``Show all`` lifts the caps); a
    spinner and the elapsed time mark the running step; a live line counts the streamed chunks and
    the tokens so far.

    Args:
        run: The run to watch.
        interval: Least seconds between two refreshes of the streamed text (0.05: ~20 a second).

    Attributes:
        run: The run.
        state: The run's events folded so far (``RunState``).
        cards: Gate cards by gate id (kept after their gates resolve).
        tool_rows: Tool rows by step id.
        answer_rows: A typed run's final-answer rows (``AnswerRow``), by model step id.
        child_panels: The sub-agents' child executions (``Agent.as_tool``) by id, each a
            ``ChildPanel`` under its tool row: the child's tool rows and gate cards.
        blocks: The ``TurnBlock`` of each turn, by turn index.
        turn: Model turns started so far.
        deltas: Streamed deltas received.
        status: The status badge (class ``loom-run-status``).
        progress: The turn progress bar (class ``loom-turns``).
        body: The finished turns (class ``loom-body``; ``loom-capped`` while its height is capped).
        current: The turns from the first one holding a waiting card (or the last turn) on, uncapped
            (class ``loom-current``; ``loom-capped`` while each turn's text is capped).
        expand: The Show all / Cap height button (class ``loom-expand``).
        capped: Whether the turns' height is capped.
        answer: The final answer, rendered as Markdown (class ``loom-answer``).
        error: The failure, when failed (class ``loom-error``).
        stopped: Why the run stopped, when cancelled, in neutral words (class ``loom-stopped``).
        stop: The Stop button (class ``loom-stop``): asks in ``confirm_stop`` first.
        confirm_stop: The question Stop asks (a ``ConfirmBar``, class ``loom-stop-confirm``).
        usage: Token usage (class ``loom-usage``).
        live: Streamed chunks and tokens so far, while the run runs (class ``loom-live``).
    """

    def __init__(self, run: Run, *, interval: float = 0.05) -> None:
        self.run = run
        self.state = RunState(execution_id=run.id)
        self.cards: dict[str, GateCard] = {}
        #: The decided approval cards folded into their tool rows (closed; the row shows the decision).
        self.folded = FoldedCards()
        self.tool_rows: dict[str, ToolRow] = {}
        self.answer_rows: dict[str, AnswerRow] = {}
        self._typed: bool | None = None  # a typed run's first model step says so (None: not seen yet)
        self._answer_schema: dict[str, Any] = {}  # the final_result tool's parameters (their order)
        self.child_panels: dict[str, ChildPanel] = {}
        self._unsubscribe_children: Callable[[], None] | None = None
        self.blocks: dict[int, TurnBlock] = {}
        #: The model's reasoning blocks so far (``{"text", "signature"}`` or redacted ``{"type", "data"}``).
        self.reasoning: list[dict[str, Any]] = []
        self.reasoning_tokens = 0
        self.turn = 0
        self.deltas = 0
        self._texts: dict[str, list[str]] = {}  # model step id -> its text so far
        self._dirty: set[int] = set()
        self._seen_delta = False
        self._resolutions: dict[str, tuple[Any, float]] = {}
        self._usage: dict[str, Any] = {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cost": None}
        self._loading = False
        self._seq = 0  # the last event of the run folded in
        self._unsubscribe: Callable[[], None] | None = None
        self._ticker: asyncio.TimerHandle | None = None
        self._calling: str | None = None  # the model step being called, if any
        self._last_model_step = ""
        self._flow = run.agent.flow_name if run.agent is not None else ""
        self._throttle = Throttle(self._render_text, interval=interval)

        self.title = html_widget("loom-title", shared=True)
        self.status = html_widget("loom-run-status", shared=True)
        self.progress = widgets.IntProgress(
            value=0,
            min=0,
            max=self._max_turns() or 1,
            description="turns",
            style={"description_width": "initial"},  # its label as wide as the word: no indent once wrapped
        )
        self.progress.add_class("loom-turns")
        self.turn_label = html_widget("loom-turn-label", shared=True)
        self.session = html_widget("loom-session", shared=True)
        self.body = shared_box()
        self.body.add_class("loom-body")
        self.body.add_class("loom-capped")
        self.body.add_class(FOLLOW_CLASS)
        self.current = shared_box()
        self.current.add_class("loom-current")
        self.current.add_class("loom-capped")
        self.capped = True
        self.expand = widgets.Button(
            description="Show all",
            icon="expand",
            tooltip="Lift the height cap",
            layout=widgets.Layout(width="auto", align_self="flex-start"),
        )
        self.expand.add_class("loom-expand")
        self.expand.on_click(lambda _: self.toggle_cap())
        self.cards_box = shared_box()
        self.cards_box.add_class("loom-cards")
        self.answer = html_widget("loom-answer", shared=True)
        self.error = html_widget("loom-error", shared=True)
        self.usage = html_widget("loom-usage", shared=True)
        self.live = html_widget("loom-live", shared=True)
        self.stop = widgets.Button(description="Stop", icon="stop", tooltip="Cancel this run for good (asks first)")
        self.stop.add_class("loom-stop")
        self.stop.add_class(NO_FEEDBACK)  # it only asks
        self.stop.on_click(self._on_stop)
        self._confirm_stop: ConfirmBar | None = None  # made on the first Stop click
        self.stopped = html_widget("loom-stopped", shared=True)
        style = shared_model("run_view_style", lambda: html_widget("loom-style", STYLE, shared=True))
        follow = shared_model("view_page", ViewPage)
        header = widgets.HBox([style, follow, self.title, self.status, self.progress, self.turn_label, self.stop])
        header.layout.flex_flow = "row wrap"  # a long execution id pushes Stop to a second line, never out of view
        header.layout.align_items = "center"
        header.add_class("loom-header")
        super().__init__(
            children=[
                header,
                self.session,
                self.body,
                self.current,
                self.expand,
                self.cards_box,
                self.answer,
                self.error,
                self.stopped,
                self.live,
                self.usage,
            ]
        )
        self.add_class("loom-run")

        runtime = run.runtime
        record = runtime.journal.get_execution(run.id)
        if record is not None:
            self._flow = self._flow or record.flow
            self._loading = True
            try:
                for event in runtime.journal.read(run.id):
                    self._apply(event)
            finally:
                self._loading = False
            self._load_children()
            self._take_calls(every=True)
            for row in self.tool_rows.values():
                row.render()
            self._render_progress()
            self._render_usage()
        self._unsubscribe = runtime.observe(self._on_event, on_delta=self.on_delta, execution_id=run.id)
        if self._has_sub_agents():  # a child's events: every execution's, kept when under this run
            self._unsubscribe_children = runtime.observe(self._on_child_event)
        run.on_change(self._on_change)
        self._on_change(run)
        self._throttle.flush()

    # -- turns ----------------------------------------------------------------------------------
    def block(self, turn: int) -> TurnBlock:
        """The block of ``turn`` (made, in order, on first use)."""
        found = self.blocks.get(turn)
        if found is None:
            found = self.blocks[turn] = TurnBlock(turn)
            self._place()
        return found

    def _place(self) -> None:
        """Put the finished turns in the capped box (``body``) and the rest below it, uncapped
        (``current``): the last turn and every turn from the first one that holds a waiting card
        on, so no card that waits for a person is ever inside a box that scrolls."""
        turns = sorted(self.blocks)
        live = [t for t in turns if self.blocks[t].waiting()] + turns[-1:]
        first = min(live) if live else 0
        done = tuple(self.blocks[t] for t in turns if t < first)
        rest = tuple(self.blocks[t] for t in turns if t >= first)
        if self.body.children != done:
            self.body.children = done
        if self.current.children != rest:
            self.current.children = rest

    @staticmethod
    def _turn_of(step_id: str | None) -> int:
        return (step_ids.parse_step_id(step_id).turn or 0) if step_id else 0

    def toggle_cap(self) -> None:
        """Lift (or put back) the cap on the turns' height."""
        capped = self.capped
        self.capped = not capped
        for box in (self.body, self.current):
            if capped:
                box.remove_class("loom-capped")
            else:
                box.add_class("loom-capped")
        self.expand.description = "Cap height" if capped else "Show all"

    # -- inputs from the runtime ----------------------------------------------------------------
    def on_delta(self, execution_id: str, step_id: str, text: str) -> None:
        """Take one streamed model delta (kept whole; the display refresh is throttled)."""
        self._seen_delta = True
        self.deltas += 1
        self._texts.setdefault(step_id, []).append(text)
        self._dirty.add(self._turn_of(step_id))
        self._throttle.request()

    def _on_event(self, event: Event) -> None:
        self._apply(event)

    def _catch_up(self) -> None:
        """Fold the run's committed events this view has not seen yet. A run another process drives
        (``Run.follow``) may say it settled before its last events reach the observers; the view
        reads them from the journal before it stops watching, so it shows what a view rebuilt from
        the journal shows."""
        for event in self.run.runtime.journal.read(self.run.id):
            if event.seq > self._seq:
                self._apply(event)

    def _apply(self, e: Event) -> None:
        kind, data = e.kind, e.data
        if kind != EventKind.STREAM_CHUNK:  # a streamed chunk is handed on, not journaled: it has no seq of its own
            if e.seq <= self._seq:
                return  # seen already (read from the journal, then handed on by a follower)
            self._seq = e.seq
        touched = self.state.apply(e)
        if kind == EventKind.STREAM_CHUNK:
            if not self._seen_delta:  # a chunk belongs to the model step started last
                sid = e.step_id or self._last_model_step
                self._texts.setdefault(sid, []).append(str(data.get("text", "")))
                self._dirty.add(self._turn_of(sid))
                self._throttle.request()
        elif isinstance(touched, StepState):
            if touched.kind == step_ids.MODEL_KIND and kind == EventKind.STEP_COMPLETED and "effect" not in data:
                self._text_of_output(touched)
            self._step_changed(kind, touched)
            if touched.kind == step_ids.MODEL_KIND:
                self._sync_answers()
        elif isinstance(touched, GateState):
            self._gate_changed(kind, touched)
        elif kind in (EventKind.EXECUTION_COMPLETED, EventKind.EXECUTION_FAILED):
            self._sync_answers()
        elif kind == EventKind.EXECUTION_STARTED:
            label = self.session_text()
            if label:
                self.session.value = f"<span class='loom-session'>{html.escape(label)}</span>"

    def _sync_answers(self) -> None:
        """A typed run's answer attempts (``answer_attempts``) as rows in their turns."""
        if self._typed is False:
            return
        model_steps = [s for s in self.state.steps.values() if s.kind == step_ids.MODEL_KIND]
        if self._typed is None and model_steps:
            first = model_steps[0].input
            self._typed = isinstance(first, dict) and isinstance(first.get("output"), dict)
            out = self.run.agent.config.output if self.run.agent is not None else None
            spec = out.tool_spec if out is not None else None  # live: the journal's copy has its keys sorted
            self._answer_schema = dict(spec.parameters) if spec is not None else {}
        if not self._typed:
            return
        for attempt in answer_attempts(self.state):
            row = self.answer_rows.get(attempt.step_id)
            if row is None:
                row = self.answer_rows[attempt.step_id] = AnswerRow(attempt, self._answer_schema)
                self.block(attempt.turn).add_row(row)
            elif row.attempt == attempt:
                continue
            row.attempt = attempt
            row.render()

    # -- sub-agents (child executions) ---------------------------------------------------------
    def _has_sub_agents(self) -> bool:
        """Whether the run may start child executions (an ``as_tool`` tool, or no agent to tell)."""
        agent = self.run.agent
        return agent is None or any(getattr(t, "child_flow", None) for t in agent.config.tools)

    def _load_children(self) -> None:
        """Fold in the journaled events of the run's direct children (a view rebuilt later)."""
        if not self._has_sub_agents():
            return
        journal = self.run.runtime.journal
        for record in journal.list_executions():
            if direct_child(self.run.id, record.execution_id) == record.execution_id:
                for event in journal.read(record.execution_id):
                    self._on_child_event(event)
        for panel in self.child_panels.values():
            panel.render_rows()

    def _on_child_event(self, e: Event) -> None:
        cid = direct_child(self.run.id, e.execution_id)
        if cid is None or cid != e.execution_id:
            return  # not a child of this run (a grandchild shows only its cards, in its child's panel)
        panel = self.panel(cid)
        panel.apply(e, render=not self._loading)
        row = self.tool_rows[panel.parent_step]
        row.status, row.preview = panel.row_status, panel.preview
        if not self._loading:
            row.render()
        if e.kind == EventKind.GATE_RESOLVED:
            self._place()

    def panel(self, child_id: str) -> ChildPanel:
        """The panel of the direct child ``child_id`` (made, under its tool row, on first use)."""
        found = self.child_panels.get(child_id)
        if found is not None:
            return found

        def child_row(sid: str, name: str, arguments: Any) -> ToolRow:
            if isinstance(arguments, dict):  # in the child's tool's parameter order
                arguments = dict(ordered_arguments(arguments, run_tool_schema(self.run, name, child_id)[1]))
            return ToolRow(sid, name, arguments)

        found = self.child_panels[child_id] = ChildPanel(child_id, row=child_row)
        name, arguments = self._call_of(found.parent_step)
        row = self._row(found.parent_step, name, arguments)
        tools = self.block(self._turn_of(found.parent_step)).tools
        at = tools.children.index(row.widget) + 1 if row.widget in tools.children else len(tools.children)
        tools.children = (*tools.children[:at], found, *tools.children[at:])
        return found

    def _call_of(self, sid: str) -> tuple[str, Any]:
        """The tool name and arguments the model asked for at the tool step ``sid``."""
        where = step_ids.parse_step_id(sid)
        for step in reversed(self.state.steps.values()):
            if step.kind != step_ids.MODEL_KIND or step.turn != where.turn or not isinstance(step.output, dict):
                continue
            message = step.output.get("message")
            tool_calls = message.get("tool_calls") if isinstance(message, dict) else None
            j = where.tool_index
            if isinstance(tool_calls, list) and j is not None and j < len(tool_calls):
                call = tool_calls[j] if isinstance(tool_calls[j], dict) else {}
                return str(call.get("name", "sub-agent")), call.get("arguments")
        return "sub-agent", None

    def _text_of_output(self, step: StepState) -> None:
        """Event format 2 journals no copy of the text a model step streamed: a view that did not
        see the deltas or chunks (one rebuilt from the journal) shows the text of its output."""
        if self._seen_delta or self._texts.get(step.step_id) or not isinstance(step.output, dict):
            return
        message = step.output.get("message")
        text = message.get("text") if isinstance(message, dict) else None
        if isinstance(text, str) and text:
            self._texts[step.step_id] = [text]
            self._dirty.add(self._turn_of(step.step_id))
            self._throttle.request()

    def _gate_changed(self, kind: str, gate: GateState) -> None:
        if kind == EventKind.GATE_RESOLVED:
            self._resolutions[gate.gate_id] = (gate.resolution, gate.resolved_at or 0.0)
            card = self.cards.get(gate.gate_id)
            if card is not None:
                card.resolved(gate.resolution, gate.resolved_at or 0.0)
                self._fold(gate.gate_id)
                block = self.blocks.get(self._turn_of(gate.gate_id))
                if block is not None and block.approvals is not None:
                    block.approvals.refresh()
                self._place()
        is_approval = gate.kind == APPROVAL_GATE and step_ids.parse_step_id(gate.gate_id).kind == step_ids.APPROVAL
        if not is_approval or gate.subject is None:
            return
        if kind == EventKind.GATE_OPENED and isinstance(gate.payload, dict):
            self._row(gate.subject, str(gate.payload.get("tool")), gate.payload.get("arguments"))
        self._refresh_row(gate.subject)

    def _fold(self, gate_id: str) -> bool:
        """Fold a decided approval card into its tool row (``FoldedCards``): the card is taken out
        and closed, the row says the decision. Returns whether it is folded."""
        card = self.cards.get(gate_id)
        if card is None:
            return False
        subject = step_ids.parse_step_id(gate_id).subject
        return self.folded.fold(gate_id, card, has_row=subject in self.tool_rows, detach=self._detach)

    def _detach(self, card: GateCard) -> None:
        """Take a card out of its turn's block (or of the cards below the turns)."""
        for block in self.blocks.values():
            block.remove_card(card)
        self.cards_box.children = tuple(c for c in self.cards_box.children if c is not card)

    def _row(self, sid: str, name: str, arguments: Any) -> ToolRow:
        row = self.tool_rows.get(sid)
        if row is None:
            if isinstance(arguments, dict):  # in the tool's parameter order, as the card shows them
                arguments = dict(ordered_arguments(arguments, run_tool_schema(self.run, name)[1]))
            row = self.tool_rows[sid] = ToolRow(sid, name, arguments)
            self.block(self._turn_of(sid)).add_row(row)
        return row

    def _take_calls(self, *, every: bool = False) -> None:
        """Make a row for each call rejected before it could run (``invalid``, with the error the
        model read), and give it (``every``: every row, after a load) its call's record
        (``agent.tool_calls``: the arguments that ran). The caller renders ``every`` row."""
        for call in tool_calls(self.state):
            row = self.tool_rows.get(call.step_id)
            # a typed run's rejected answer has its own row (``AnswerRow``)
            new = row is None and call.invalid is not None and call.name != FINAL_RESULT_TOOL
            if new:
                row = self._row(call.step_id, call.name, call.requested)
            if row is not None and (new or every):
                gate = self.state.gates.get(step_ids.approval_gate_for(call.step_id))
                row.update(self.state.steps.get(call.step_id), gate, call)
                if not every:
                    row.render(self._clock())

    def _refresh_row(self, sid: str) -> None:
        row = self.tool_rows.get(sid)
        if row is None:
            return
        call = None if self._loading else tool_call(self.state, sid)
        row.update(self.state.steps.get(sid), self.state.gates.get(step_ids.approval_gate_for(sid)), call)
        if not self._loading:
            row.render(self._clock())
            self._tick_soon()

    def _step_changed(self, kind: str, step: StepState) -> None:
        if kind == EventKind.STEP_STARTED and step.kind == step_ids.TOOL_KIND:
            self._row(step.step_id, step.tool or step.effect, step.input)
        elif kind == EventKind.STEP_STARTED and step.kind == step_ids.MODEL_KIND:
            if not self._loading:
                self._take_calls()  # the calls the previous turn rejected: its input holds their errors
            self._calling = self._last_model_step = step.step_id
            self.block(self._turn_of(step.step_id))
            if self.state.turns > self.turn:
                self.turn = self.state.turns
                if not self._loading:
                    self._render_progress()
            if step.attempts > 1 and step.step_id in self._texts:  # a retried model call streams its text again
                del self._texts[step.step_id]
                self._dirty.add(self._turn_of(step.step_id))
                self._throttle.request()
            self._render_calling()
        elif kind == EventKind.STEP_COMPLETED and step.usage is not None and "input_tokens" in step.usage:
            totals = self.state.usage
            self._usage.update(
                calls=totals.calls,
                input_tokens=totals.input_tokens,
                output_tokens=totals.output_tokens,
                cost=totals.cost,
            )
            if not self._loading:
                self._render_usage()
        if kind == EventKind.STEP_COMPLETED and step.kind == step_ids.MODEL_KIND:
            self._take_reasoning(step)
        if kind != EventKind.STEP_STARTED and step.step_id == self._calling:
            self._calling = None
            self._render_calling()
        self._refresh_row(step.step_id)

    def _take_reasoning(self, step: StepState) -> None:
        """Keep the model step's reasoning blocks (extended thinking) and show them collapsed."""
        output = step.output if isinstance(step.output, dict) else {}
        message = output.get("message") if isinstance(output.get("message"), dict) else {}
        blocks = [b for b in (message or {}).get("reasoning") or () if isinstance(b, dict)]
        if not blocks:
            return
        self.reasoning.extend(blocks)
        usage = output.get("usage") if isinstance(output.get("usage"), dict) else {}
        tokens = int((usage or {}).get("reasoning_tokens") or 0)
        self.reasoning_tokens += tokens
        block = self.block(self._turn_of(step.step_id))
        block.reasoning.extend(blocks)
        block.reasoning_tokens += tokens
        block.thinking.value = thinking_html(block.reasoning, block.reasoning_tokens)

    @property
    def thinking(self) -> Any:
        """The reasoning of the latest turn that has some (class ``loom-thinking``), or an empty widget."""
        for t in sorted(self.blocks, reverse=True):
            if self.blocks[t].thinking.value:
                return self.blocks[t].thinking
        return html_widget("loom-thinking")

    def _on_change(self, run: Run) -> None:
        try:
            self._update(run)
        except Exception:  # a view must never break the run's listeners
            log.exception("loom_nb: the live view of run %s failed to update", run.id)

    @property
    def confirm_stop(self) -> ConfirmBar:
        """The question Stop asks (class ``loom-stop-confirm``), made under the header on first use."""
        if self._confirm_stop is None:
            self._confirm_stop = ConfirmBar()
            self._confirm_stop.add_class("loom-stop-confirm")
            first, *rest = widgets.VBox.children.get(self)  # the header, then the rest
            self.children = (first, self._confirm_stop, *rest)
        return self._confirm_stop

    def _on_stop(self, _: Any) -> None:
        """The Stop click: ask to confirm (``confirm_stop``), then ``_stop_now``."""
        if self.run.status in ("completed", "failed", "cancelled"):
            return
        self.stop.disabled = True
        self.confirm_stop.ask(
            "Stop this run for good? It cannot go on afterwards (a tool call cut mid-way is recorded in doubt).",
            "Stop now",
            self._stop_now,
            no="Keep running",
            on_no=lambda: setattr(self.stop, "disabled", False),
        )

    def _stop_now(self) -> None:
        self.stop.disabled, self.stop.description = True, "Stopping…"
        try:
            self.run.cancel("stopped from the live view")
        except Exception as exc:  # e.g. it completed meanwhile: say so on the button
            self.stop.description = f"Not stopped: {exc}"[:80]
            log.warning("loom_nb: could not stop run %s: %s", self.run.id, exc)

    def _show_answers_given_elsewhere(self, run: Run) -> None:
        """Each open card whose gate the run no longer lists as open may have been answered where
        this view did not hear of it (another process of a shared journal): the view folds the
        run's events it has not seen (``_catch_up``), and a sub-agent's card reads its answer from
        the journal (``GateCard.show_answer_given_elsewhere``); either shows the answer with the
        card's controls disabled."""
        still_open = {(g.execution_id, g.gate_id) for g in run.gates}

        def unheard(card: GateCard) -> bool:
            return (
                not card.decided and not card.closed and (card.gate.execution_id, card.gate.gate_id) not in still_open
            )

        if any(unheard(card) for card in self.cards.values()):
            self._catch_up()  # the answers, as events: the cards, their tool rows and folding follow
        for panel in self.child_panels.values():
            for card in panel.cards.values():
                if unheard(card):
                    card.show_answer_given_elsewhere()

    def _update(self, run: Run) -> None:
        status = run.status
        self._show_answers_given_elsewhere(run)
        if status in ("completed", "failed", "cancelled"):
            if self._unsubscribe is not None:  # still watching: fold what has not reached the view yet
                self._catch_up()
            self.stop.layout.display = "none"
            if self._confirm_stop is not None and self._confirm_stop.asking:
                self._confirm_stop.cancel()
            for card in self.cards.values():
                card.close(f"closed: the run {status}")
            for panel in self.child_panels.values():
                panel.close_cards(f"closed: the run {status}")
            for block in self.blocks.values():  # no Approve all above closed cards
                if block.approvals is not None:
                    block.approvals.refresh()
            if status == "cancelled":  # calls the cancel cut before they ran (or finished)
                for row in self.tool_rows.values():
                    if row.status in ("awaiting approval", "approved", "running", "retrying"):
                        row.status = "cancelled"
                        row.render()
        self.status.value = f"<span class='loom-badge loom-badge-{status}'>{status}</span>"
        self.progress.bar_style = {"completed": "success", "failed": "danger", "suspended": "warning"}.get(
            status, "info"
        )
        self.title.value = f"<span class='loom-title'>loom run <code>{html.escape(run.id)}</code></span>"
        if status == "suspended":
            self._show_gates(run)
            self._place()
        elif status == "completed":
            result = run.result
            if result is not None:
                if isinstance(result.output, str):  # the model's text: Markdown
                    self.answer.value = f"<b>Answer</b>{markdown_html(result.output)}"
                else:  # a typed answer: its JSON
                    shown = visible(output_text(result.output, indent=2))
                    self.answer.value = f"<b>Answer</b><pre>{html.escape(shown)}</pre>"
                self._usage.update(result.usage.model_dump())
                self._usage["turns"] = result.turns
                self.turn = max(self.turn, result.turns)
            self._settled()
        elif status == "cancelled":  # a person's choice, not an error: said in neutral words
            reason = self.state.cancel_reason
            why = f" ({html.escape(visible(reason))})" if reason else ""
            self.stopped.value = (
                f"<b>Stopped</b>{why}: the run is cancelled for good and does not go on; start a new run to try again."
            )
            self._settled()
        elif status == "failed":
            exc = run.exception()
            text = f"{type(exc).__name__}: {exc}" if exc is not None else status
            self.error.value = f"<b>Failed</b><pre>{html.escape(visible(text))}</pre>"
            self._settled()

    def _has_card(self, gate: Any) -> bool:
        cid = direct_child(self.run.id, gate.execution_id)
        if cid is None:
            return bool(gate.gate_id in self.cards)
        panel = self.child_panels.get(cid)
        return panel is not None and (gate.execution_id, gate.gate_id) in panel.cards

    def _show_gates(self, run: Run) -> None:
        gates = [g for g in run.gates if not self._has_card(g)]
        if not gates:
            return
        problem = ensure_registered(run)
        if self.progress.max <= 1 and self._max_turns():
            self._render_progress()
        for gate in gates:
            cid = direct_child(run.id, gate.execution_id)
            if cid is not None:  # a sub-agent's gate: under its tool row, answered in the child
                self.panel(cid).add_card((gate.execution_id, gate.gate_id), card_for(gate, problem=problem))
                continue
            card = self.cards[gate.gate_id] = card_for(gate, problem=problem)
            if gate.gate_id in self._resolutions:
                card.resolved(*self._resolutions[gate.gate_id])
                if self._fold(gate.gate_id):
                    continue
            if step_ids.parse_step_id(gate.gate_id).turn is not None:
                self.block(self._turn_of(gate.gate_id)).add_card(card)
            else:
                self.cards_box.children = (*self.cards_box.children, card)

    def _settled(self) -> None:
        self._calling = None
        self._throttle.flush()
        self._render_text()  # even with nothing pending: the last turn's text may now be the answer
        self._render_calling()
        self._render_progress()
        self._render_usage()
        for row in self.tool_rows.values():
            row.render()
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self._stop_watching_children()

    def _stop_watching_children(self) -> None:
        if self._unsubscribe_children is not None:
            self._unsubscribe_children()
            self._unsubscribe_children = None

    # -- rendering ------------------------------------------------------------------------------
    @staticmethod
    def _clock() -> float:
        return time.time()  # the notebook layer's wall clock: only for the elapsed time shown

    def _tick_soon(self) -> None:
        """While a step runs, refresh its elapsed time about once a second."""
        running = self._calling is not None or any(r.status == "running" for r in self.tool_rows.values())
        if not running or self._ticker is not None or not in_running_loop():
            return
        self._ticker = asyncio.get_running_loop().call_later(1.0, self._tick)

    def _tick(self) -> None:
        self._ticker = None
        if self._unsubscribe is None:
            return
        now = self._clock()
        for row in self.tool_rows.values():
            if row.status == "running":
                row.render(now)
        self._render_calling()
        self._tick_soon()

    def _render_calling(self) -> None:
        for block in self.blocks.values():
            block.calling.value = ""
        step = self.state.steps.get(self._calling) if self._calling else None
        if step is None or self._loading:
            return
        since = f" {max(self._clock() - step.started_at, 0.0):.0f} s" if step.started_at else ""
        self.block(
            self._turn_of(step.step_id)
        ).calling.value = (
            f"<span class='loom-tool-running'><span class='loom-spinner'></span>calling the model…{since}</span>"
        )
        self._render_live()
        self._tick_soon()

    def _max_turns(self) -> int | None:
        agent = self.run.agent
        return agent.config.max_turns if agent is not None else None

    def _render_progress(self) -> None:
        if self.run.status in ("completed", "failed", "cancelled"):  # the turns it took, not a share of the limit
            self.progress.max = self.progress.value = max(self.turn, 1)
            self.turn_label.value = f"{self.turn} turn" + ("" if self.turn == 1 else "s")
            return
        top = self._max_turns() or max(self.turn, 1)
        self.progress.max = max(top, self.turn, 1)
        self.progress.value = self.turn
        self.turn_label.value = f"turn {self.turn}/{top}" if self._max_turns() else f"turn {self.turn}"

    def _render_usage(self) -> None:
        text = self.usage_text()
        self.usage.value = html.escape(text) if text else ""
        self._render_live()

    def _render_live(self) -> None:
        if self.run.status != "running":
            self.live.value = ""
            return
        out = self._usage.get("output_tokens") or 0
        parts = [f"{self.deltas} chunk(s) streamed"] if self.deltas else []  # a model that does not stream: no count
        parts += [f"{out} output tokens in completed calls"] if out else []
        self.live.value = html.escape(" · ".join(parts))

    def _render_text(self) -> None:
        result = self.run.result if self.run.status == "completed" else None
        answer = result.output.strip() if result is not None and isinstance(result.output, str) else None
        last = max(self.blocks) if self.blocks else None
        texts: dict[int, list[str]] = {}
        for sid, parts in self._texts.items():
            if parts:
                texts.setdefault(self._turn_of(sid), []).append("".join(parts))
        for turn in sorted(set(texts) | self._dirty):
            text = "\n".join(texts.get(turn, ()))
            hidden = answer is not None and turn == last and text.strip() == answer
            self.block(turn).set_text(text, hidden=hidden)
        self._dirty.clear()
        if self._seen_delta:
            self._render_live()

    def flush(self) -> None:
        """Show every delta received so far now (instead of at the next throttled refresh)."""
        self._throttle.flush()

    @property
    def refreshes(self) -> int:
        """How many times the streamed text was refreshed."""
        return self._throttle.calls

    @property
    def text_so_far(self) -> str:
        """All the model text streamed so far (every delta, model steps separated by a newline)."""
        return "\n".join("".join(parts) for parts in self._texts.values() if parts)

    def usage_text(self) -> str:
        """Usage as one line (model calls, tokens, cost), or "" before any model call."""
        u = self._usage
        if not u.get("calls") and not u.get("input_tokens") and not u.get("output_tokens"):
            return ""
        text = f"usage: {u['input_tokens']} input + {u['output_tokens']} output tokens"
        if u.get("calls"):
            text += f" over {u['calls']} model call(s)"
        if u.get("cost") is not None:
            text += f", cost {u['cost']:.4f}"
        return text

    def close(self) -> None:
        """Stop watching the run, then close the widgets."""
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self._stop_watching_children()
        super().close()

    # -- text -----------------------------------------------------------------------------------
    def session_text(self) -> str:
        """Where a session run sits in its session (empty for a run outside a session)."""
        session = session_of(self.state.input)
        if session is None:
            return ""
        previous = session.get("previous")
        where = f"continues {previous}" if previous else "its first run"
        return f"session {session.get('id')}, run {session.get('index')}: {where}"

    def text(self) -> str:
        """The whole view as text (what front ends without widgets show). It leaves out timings
        and clock times, so a deterministic run reads the same every time (nbval compares it)."""
        run = self.run
        status = run.status
        head = f"loom run {run.id}" + (f" ({self._flow})" if self._flow else "") + f": {status}"
        if self.turn:
            top = self._max_turns()
            head += f", turn {self.turn}" + (f"/{top}" if top else "")
        lines = [head]
        if self.session_text():
            lines.append("  " + self.session_text())
        result = run.result if status == "completed" else None
        parts = ["".join(p) for p in self._texts.values() if p]
        if result is not None and parts and parts[-1].strip() == output_text(result.output).strip():
            parts.pop()  # the last turn's text is the answer: shown once, on the answer line
        streamed = "\n".join(parts).strip()
        if streamed:
            lines += ["  " + line for line in streamed.splitlines()]
        if self.reasoning:
            lines.append(f"  thinking: {len(self.reasoning)} block(s) (collapsed in the widget)")
        for sid, row in self.tool_rows.items():
            lines.append("  " + row.text())
            panel = self.child_panels.get(step_ids.child_execution_id(run.id, sid))
            if panel is not None:
                lines += ["    " + line for line in panel.lines()]
        lines += ["  " + row.text() for row in self.answer_rows.values()]
        lines += ["  " + line for line in self.folded.lines(self.cards)]
        if status == "suspended" and not self.cards and not any(p.cards for p in self.child_panels.values()):
            lines += [f"  {g!r}" for g in run.gates]
        if result is not None:
            lines.append(f"  answer: {output_text(result.output)}")
        if status in ("failed", "cancelled"):
            exc = run.exception()
            lines.append(f"  error: {type(exc).__name__}: {exc}" if exc is not None else "  error")
        usage = self.usage_text()
        if usage:
            lines.append("  " + usage)
        return "\n".join(lines)


class RecoveryView(TextForm, widgets.VBox):  # type: ignore[misc]
    """What ``%loom recover`` is doing: a progress bar and a line per execution (the step it is at,
    or how it ended) while it recovers, then the view of every recovered execution.

    Attributes:
        execution_ids: The executions being recovered.
        ended: How each execution that got going ended so far (``suspended``, ``completed``...), by id.
        at: The step each execution being recovered started last, by id.
        views: Their views, once recovered.
        not_recovered: Why each execution that could not go on yet was left running, by id.
        error: Why the recovery failed, if it did.
    """

    def __init__(self, runtime: Any, execution_ids: list[str]) -> None:
        self.runtime = runtime
        self.execution_ids = list(execution_ids)
        self.ended: dict[str, str] = {}
        self.at: dict[str, str] = {}
        self.views: list[RunView] = []
        self.not_recovered: dict[str, str] = {}
        self.error: str | None = None
        self.task: asyncio.Future[Any] | None = None
        self.progress = widgets.IntProgress(value=0, min=0, max=max(len(self.execution_ids), 1))
        self.progress.add_class("loom-recovery-progress")
        self.line = html_widget("loom-recovery-status", html.escape(self.progress_text()))
        super().__init__(children=[self.progress, self.line])
        self.add_class("loom-recovery")
        self._unsubscribe: Callable[[], None] | None = runtime.observe(self._on_event)

    def _on_event(self, e: Event) -> None:
        if e.execution_id not in self.execution_ids or self._unsubscribe is None:
            return
        status = STATUS_OF_KIND.get(e.kind)
        if status is not None and status != "running":
            self.ended[e.execution_id] = status
        elif e.kind == EventKind.STEP_STARTED:
            effect = str(e.data.get("effect", ""))
            self.at[e.execution_id] = f"step {e.step_id} ({effect})" if effect else f"step {e.step_id}"
        else:
            return
        self.progress.value = len(self.ended)
        self.line.value = "<br>".join(html.escape(line) for line in self.progress_text().splitlines())

    def progress_text(self) -> str:
        """Where the recovery stands: how many executions ended, and what each one is doing."""
        n = len(self.execution_ids)
        lines = [f"recovering {n} execution(s)… {len(self.ended)}/{n} done"]
        for eid in self.execution_ids:
            if eid in self.ended:
                lines.append(f"  {eid}: {self.ended[eid]}")
            elif eid in self.at:
                lines.append(f"  {eid}: at {self.at[eid]}")
        return "\n".join(lines)

    def _stop_watching(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def finished(self, task: asyncio.Future[Any]) -> None:
        """Done-callback of the recovery task: show its outcome."""
        if task.cancelled():
            self.fail("the recovery was cancelled")
        elif task.exception() is not None:
            exc = task.exception()
            self.fail(f"{type(exc).__name__}: {exc}")
        else:
            self.done(task.result())

    def fail(self, error: str) -> None:
        """Show why the recovery failed."""
        self._stop_watching()
        self.error = error
        self.line.value = f"<pre class='loom-error'>recovery failed: {html.escape(error)}</pre>"

    def done(self, results: list[Any]) -> None:
        """Show each recovered execution's view (cards for any gate it now waits on)."""
        self._stop_watching()
        stuck = [r for r in results if r.status == "running" and r.error is not None]
        self.not_recovered = {r.execution_id: error_summary(r.error) for r in stuck}
        self.views = [RunView(attach(self.runtime, r.execution_id)) for r in results if r not in stuck]
        summary = ", ".join(f"{r.execution_id} {r.status}" for r in results if r not in stuck) or "nothing"
        lines = [f"recovered: {html.escape(summary)}"] + [
            f"<span class='loom-error'>not recovered: {html.escape(eid)}: {html.escape(why)}</span>"
            for eid, why in self.not_recovered.items()
        ]
        self.progress.value = self.progress.max
        self.progress.layout.display = "none"
        self.line.value = "<br>".join(lines)
        self.children = (self.progress, self.line, *self.views)

    def text(self) -> str:
        """The recovery as text."""
        if self.error:
            return f"loom_nb: recovery failed: {self.error}"
        if not self.views and not self.not_recovered:
            return "loom_nb: " + self.progress_text()
        lines = [v.text() for v in self.views]
        lines += [f"loom_nb: not recovered: {eid}: {why}" for eid, why in self.not_recovered.items()]
        return "\n".join(lines)


def show(run: Run) -> RunView:
    """Display the live view of ``run`` in the current cell; returns the view."""
    view = RunView(run)
    display(view)
    return view
