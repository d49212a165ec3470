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
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from loom_nb.agent.carry import session_of
from loom_nb.agent.output import output_text
from loom_nb.agent.run import Run
from loom_nb.journal import step_ids
from loom_nb.journal.events import STATUS_OF_KIND, Event, EventKind
from loom_nb.journal.run_state import GateState, RunState, StepState
from loom_nb.kernel.errors_codec import error_summary
from loom_nb.notebook.cards import FoldedCards, GateCard
from loom_nb.notebook.child_panel import ChildPanel
from loom_nb.notebook.confirm import NO_FEEDBACK, ConfirmBar
from loom_nb.notebook.formatting import TextForm, html_widget, shared_box, shared_model
from loom_nb.notebook.rows import AnswerRow, ToolRow
from loom_nb.notebook.runs import attach, display
from loom_nb.notebook.safe_text import markdown_html, visible
from loom_nb.notebook.throttle import Throttle
from loom_nb.notebook.turn_block import TurnBlock, thinking_html, thinking_text
from loom_nb.notebook.view_cards import ViewCards
from loom_nb.notebook.view_page import FOLLOW_CLASS, ViewPage
from loom_nb.notebook.view_style import STYLE

log = logging.getLogger("loom_nb")

__all__ = [
    "STYLE",
    "RecoveryView",
    "RunView",
    "TurnBlock",
    "markdown_html",
    "show",
    "thinking_html",
    "thinking_text",
]


# -- the run view ---------------------------------------------------------------------------------
class RunView(ViewCards, TextForm, widgets.VBox):  # type: ignore[misc]
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
        self._chunk_seq = 0  # the highest seq of a stream chunk folded (``_catch_up`` skips those up to it)
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
        self._unsubscribe = self._observe(runtime, run.id, self._on_event, self.on_delta)
        if self._has_sub_agents():  # a child's events: every execution's, kept when under this run
            self._unsubscribe_children = runtime.observe(self._on_child_event)
        run.on_change(self._on_change)
        self._on_change(run)
        self._throttle.flush()

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
        the journal shows. A stream chunk it folded already is skipped (a followed run's chunks are
        journaled, and handed on, before the outcome of their step)."""
        for event in self.run.runtime.journal.read(self.run.id):
            if event.kind == EventKind.STREAM_CHUNK and event.seq <= self._chunk_seq:
                continue
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
            self._chunk_seq = max(self._chunk_seq, e.seq)
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
            "Stop this run for good? Now cuts a tool call mid-way (recorded in doubt); after this turn lets "
            "the turn finish first.",
            "Stop now",
            self._stop_now,
            no="Keep running",
            on_no=lambda: setattr(self.stop, "disabled", False),
            also=("Stop after this turn", self._stop_after_turn),
        )

    def _stop_after_turn(self) -> None:
        self.stop.disabled, self.stop.description = True, "Stops after this turn"
        try:
            self.run.cancel("stopped from the live view after its turn", when="after_turn")
        except Exception as exc:  # e.g. it completed meanwhile, or another process drives it
            self.stop.disabled, self.stop.description = False, "Stop"
            self.stop.tooltip = f"Not stopped: {exc}"[:200]
            log.warning("loom_nb: could not stop run %s after its turn: %s", self.run.id, exc)

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
                    cut = CUT_MARKS.get(result.stop_reason, "")
                    mark = f" <span class='loom-cut'>{cut}</span>" if cut else ""
                    self.answer.value = f"<b>Answer</b>{mark}{markdown_html(result.output)}"
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

    def _settled(self) -> None:
        self._calling = None
        self._throttle.flush()
        self._render_text()  # even with nothing pending: the last turn's text may now be the answer
        self._render_calling()
        self._render_progress()
        self._render_usage()
        for row in self.tool_rows.values():
            row.render()
        self._sweep_cards()
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self._stop_watching_children()

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
            cut = CUT_MARKS.get(result.stop_reason)
            lines.append(f"  answer{f' ({cut})' if cut else ''}: {output_text(result.output)}")
        if status in ("failed", "cancelled"):
            exc = run.exception()
            lines.append(f"  error: {type(exc).__name__}: {exc}" if exc is not None else "  error")
        usage = self.usage_text()
        if usage:
            lines.append("  " + usage)
        return "\n".join(lines)


#: The mark an answer the model did not finish carries (``AgentResult.stop_reason``).
CUT_MARKS = {
    "max_tokens": "cut off by the model's output token limit",
    "content_filter": "stopped by the provider's content filter",
}


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
