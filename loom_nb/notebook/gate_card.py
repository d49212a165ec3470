"""The base gate card (``GateCard``): what every card of a gate does — act once through a public
``Gate`` method, wait for a moving run to pause, show the decision once recorded (by whoever made
it), collapse to one line, close when its gate is no longer open — and its generic form for gate
kinds without a card of their own (a JSON resume payload). The buttons and labelled inputs every
card is made of (``card_button``, ``card_field``) and the words of a recorded answer
(``describe_resolution``) live here too.
"""

from __future__ import annotations

import asyncio
import html
import logging
import time
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from loom_nb.agent.config import APPROVAL_GATE
from loom_nb.agent.gate import Gate
from loom_nb.effects.mcp_elicit import MCP_ELICITATION_GATE
from loom_nb.kernel.async_bridge import in_running_loop
from loom_nb.kernel.context import IN_DOUBT_GATE
from loom_nb.notebook.click_feedback import SCOPE_CLASS, ClickFeedback
from loom_nb.notebook.formatting import (
    TextForm,
    clock_text,
    html_widget,
    parse_json_or_text,
    short_text,
)
from loom_nb.notebook.runs import AFTER_CELL, ensure_registered, hook_post_run_cell
from loom_nb.notebook.safe_text import visible

log = logging.getLogger("loom_nb")


def card_button(description: str, cls: str, style: str, icon: str = "") -> Any:
    """A card's button: ``description`` as its label and tooltip, CSS class ``cls``, ipywidgets'
    ``button_style`` ``style`` and a Font Awesome ``icon``."""
    b = widgets.Button(description=description, button_style=style, icon=icon, tooltip=description)
    b.add_class(cls)
    return b


def card_field(kind: Any, label: str, placeholder: str, cls: str) -> Any:
    """An input with a real label (its ``description``, a ``<label>`` tied to it) and a hint."""
    field = kind(description=label, placeholder=placeholder, style={"description_width": "initial"})
    field.add_class(cls)
    return field


def describe_resolution(kind: str, payload: Any) -> str:
    """A short human description of a gate's resume payload (``approved``, ``refused: why``...),
    invisible characters of a reason or an output shown escaped (``visible``)."""
    return visible(_describe(kind, payload))


def _describe(kind: str, payload: Any) -> str:
    if not isinstance(payload, dict):
        return f"resolved with {short_text(payload, 80)}"
    reason = payload.get("reason")
    why = f" ({reason})" if reason else ""
    if kind == APPROVAL_GATE and "approved" in payload:
        if payload["approved"] and payload.get("arguments") is not None:
            return "approved with edited arguments" + why
        return ("approved" if payload["approved"] else "refused") + why
    if kind == IN_DOUBT_GATE and "action" in payload:
        action = str(payload["action"])
        if action == "happened":
            return f"marked as happened (output {short_text(payload.get('output'), 60)}){why}"
        return {"run_again": "run again", "fail": "marked as failed"}.get(action, action) + why
    if kind == MCP_ELICITATION_GATE and "action" in payload:
        if payload["action"] == "accept":
            return f"answered {short_text(payload.get('content'), 80)}"
        return {"decline": "declined", "cancel": "cancelled"}.get(str(payload["action"]), str(payload["action"]))
    return f"resolved with {short_text(payload, 80)}"


# -- gate cards -----------------------------------------------------------------------------------
def card_heading(title_html: str, body_class: str, body: str) -> tuple[Any, Any]:
    """A card's title (HTML) and its body (``body`` in a ``<pre>``, HTML and invisible characters
    escaped, with CSS class ``body_class``)."""
    shown = f"<pre>{html.escape(visible(body))}</pre>"
    return html_widget("loom-card-title", title_html), html_widget(body_class, shown)


class GateCard(TextForm, widgets.VBox):  # type: ignore[misc]
    """A card for one open gate. Subclasses add the inputs and buttons of their gate kind.

    Attributes:
        gate: The gate.
        decided: True once a decision was made (by this card or elsewhere); buttons are disabled.
        decision: The recorded decision, described, with when it was recorded.
        outcome: The decision without the time (what the text form shows).
        status: The line under the buttons (decision, waiting, or an error).
        problem: Why the gate cannot be acted on yet (e.g. the agent's flow is not defined), if so.
        closed: Why the card no longer acts (its gate is no longer open: ``close(why)``), if so.

    A decided card collapses to one line (the call and the decision); a closed one says why and
    disables its inputs.
    """

    css = "loom-gate"
    status_text = "Waiting for a resume payload"

    def __init__(self, gate: Gate, *, problem: str | None = None) -> None:
        self.gate = gate
        self.decided = False
        self.decision: str | None = None
        self.outcome: str | None = None
        self.buttons: list[Any] = []
        self.inputs: list[Any] = []
        self.status = html_widget("loom-card-status")
        self.problem_box = html_widget("loom-card-problem")
        self.problem: str | None = None
        self.closed: str | None = None
        #: The answer given, once known (the resume payload, as recorded).
        self.answer: Any = None
        self._pending: asyncio.Future[None] | None = None
        self.feedback = ClickFeedback()
        super().__init__(children=[*self._build(), self.problem_box, self.status, self.feedback])
        self.add_class("loom-card")
        self.add_class(SCOPE_CLASS)
        self.add_class(self.css)
        self.status.value = html.escape(self.status_text)
        self.show_problem(problem)

    # -- for subclasses -------------------------------------------------------------------------
    def _build(self) -> list[Any]:
        payload = short_text(self.gate.payload, 2000)
        gate_id, kind = html.escape(visible(self.gate.gate_id)), html.escape(visible(self.gate.kind))
        title, body = card_heading(
            f"<b>Gate</b> <code>{gate_id}</code> ({kind})",
            "loom-card-payload",
            payload,
        )
        self.payload_box = card_field(widgets.Textarea, "Payload", "the resume payload (JSON or text)", "loom-payload")
        resume = card_button("Resume", "loom-resume", "primary")
        resume.on_click(
            lambda _: self.act("resumed", lambda: self.gate.resolve(parse_json_or_text(self.payload_box.value)))
        )
        self.buttons = [resume]
        self.inputs = [self.payload_box]
        return [title, body, self.payload_box, widgets.HBox([resume])]

    def commands(self) -> str:
        """The ``%loom resume`` command(s) that resolve this gate from a cell."""
        return f"gate.resolve(payload) on run {self.gate.run.id}"

    def summary(self) -> str:
        """What the gate is about, on one line (the collapsed card's text)."""
        return f"{self.gate.kind} {self.gate.gate_id}"

    # -- acting ---------------------------------------------------------------------------------
    def show_problem(self, problem: str | None) -> None:
        """Show (or clear) why the gate cannot be acted on yet. While a problem shows, the card's
        buttons and inputs are disabled and the card waits in ``WAITING_FOR_AGENT``: after each
        cell (``recheck_waiting_cards``) it looks for its agent again and enables itself."""
        self.problem = problem
        if problem:
            text = problem + "\nThis card enables itself once the cell that defines the agent has run."
            self.problem_box.value = f"<pre class='loom-error'>{html.escape(visible(text))}</pre>"
            if not self.decided and not self.closed:
                self._lock(True)
            if self not in WAITING_FOR_AGENT:
                WAITING_FOR_AGENT.append(self)
                hook_post_run_cell()
            return
        self.problem_box.value = ""
        if self in WAITING_FOR_AGENT:
            WAITING_FOR_AGENT.remove(self)
            if not self.decided and not self.closed:
                self._lock(False)

    def _lock(self, locked: bool) -> None:
        for w in (*self.buttons, *self.inputs):
            w.disabled = locked

    def act(self, label: str, action: Callable[[], Any]) -> None:
        """Run ``action`` (a public ``Gate`` method) once: later clicks are ignored.

        If the run is still moving toward its gates (another card's click just resumed it), the
        action waits for it to pause. Errors show on the card and re-enable it.
        """
        self.feedback.ack()
        if self.decided or self.closed:
            return
        self.decided = True
        self._lock(True)
        self.status.value = "<i>sending…</i>"
        problem = ensure_registered(self.gate.run)
        if problem is not None:
            self._reopen(problem=problem)
            return
        self.show_problem(None)
        run = self.gate.run
        # A question a call waits on (an MCP server's) is answered while the run moves: no waiting.
        asked = run.runtime.questions.get(self.gate.execution_id, self.gate.gate_id) is not None
        if run.status == "running" and in_running_loop() and not asked:
            self.status.value = "<i>waiting for the run to reach its gates…</i>"

            async def when_paused() -> None:
                await run.wait(until="paused")
                self._call(label, action)

            self._pending = asyncio.ensure_future(when_paused())
            return
        self._call(label, action)

    def _call(self, label: str, action: Callable[[], Any]) -> None:
        try:
            action()
        except Exception as exc:
            if not self.show_answer_given_elsewhere():  # answered elsewhere: the card shows that answer
                self._reopen(error=f"{type(exc).__name__}: {exc}")
            return
        if self.decision is None:  # the journal's gate_resolved may have marked it already
            self._mark(label, time.time())

    def show_answer_given_elsewhere(self) -> bool:
        """Show the journal's answer to this card's gate if the card has not shown one: an answer
        given in another process, or anywhere this view did not hear of. The card then shows it
        with its controls disabled (``resolved``), and the run reads where it stands again
        (``Run.refresh``), so its views update their rows. Returns whether it did; False for a card already
        decided or closed, a gate still open, or a journal that cannot be read now."""
        if self.decision is not None or self.closed:
            return False
        try:
            found = self.gate.run.runtime.history(self.gate.execution_id).gates.get(self.gate.gate_id)
        except Exception as exc:  # the journal cannot be read now: the card stays as it is
            log.debug("loom_nb: could not read the answer of gate %s: %s", self.gate.gate_id, exc)
            return False
        if found is None or not found.resolved:
            return False
        self.resolved(found.resolution, found.resolved_at or 0.0)
        run = self.gate.run
        if run.status != "running":  # the run reads where it stands: its views follow (rows, folding)
            try:
                run.refresh()
            except Exception as exc:
                log.debug("loom_nb: could not read run %s again: %s", run.id, exc)
        return True

    def _reopen(self, *, problem: str | None = None, error: str | None = None) -> None:
        self.decided = False
        self._lock(False)
        if problem is not None:
            self.show_problem(problem)
        self.status.value = (
            html.escape(self.status_text)
            if error is None
            else f"<span class='loom-error'>{html.escape(visible(error))}</span>"
        )

    def _mark(self, text: str, at: float) -> None:
        self.decided = True
        self._lock(True)
        self.add_class("loom-decided")
        self.outcome = text
        self.decision = f"{text} at {clock_text(at)}"
        self._collapse(self.decision[0].upper() + self.decision[1:])

    def _collapse(self, outcome: str) -> None:
        """Fold the card to one line: what it was about, then ``outcome``."""
        for child in self.children:
            if child is not self.status and child is not self.feedback:
                child.layout.display = "none"
        self.add_class("loom-collapsed")
        self.status.value = (
            f"<code>{html.escape(visible(short_text(self.summary(), 100)))}</code> · "
            f"<b>{html.escape(visible(outcome))}</b>"
        )

    def close(self, why: str | None = None) -> None:
        """Close the card: with ``why``, its gate is no longer open (the run ended or was cancelled
        with the card unanswered): say so (``why``, e.g. "closed: the run cancelled") and disable
        it, keeping a decision already shown; without, close the widget (``ipywidgets`` ``close``)."""
        if why is None:
            super().close()
            return
        if self.decision is not None or self.closed:
            return
        self.closed = why
        self.outcome = why
        self._lock(True)
        self.add_class("loom-closed")
        self._collapse(why[:1].upper() + why[1:])

    def resolved(self, payload: Any, at: float) -> None:
        """Show the journal's record of this gate's resolution (from whoever resolved it)."""
        self.show_problem(None)
        self.answer = payload
        self._mark(describe_resolution(self.gate.kind, payload), at)

    # -- text -----------------------------------------------------------------------------------
    def text(self) -> str:
        """The card as one line of text (invisible characters escaped)."""
        if self.outcome:
            return visible(f"gate {self.gate.gate_id}: {self.outcome}")
        line = f"{self.gate!r} -> {self.commands()}"
        return visible(line + (f"  [{self.problem}]" if self.problem else ""))

    def plain_text(self) -> str:
        """The card as text, named by its class (``ApprovalCard(<Gate ...> -> ...)``)."""
        return f"{type(self).__name__}({self.text()})"


#: The cards whose run's agent this kernel does not know yet (``GateCard.show_problem``).
WAITING_FOR_AGENT: list[GateCard] = []


def recheck_waiting_cards() -> None:
    """After each cell: every card waiting for its agent looks for it again (``ensure_registered``)
    and enables itself when it is found; a card closed meanwhile stops waiting."""
    for card in list(WAITING_FOR_AGENT):
        if card.closed or (card.decided and card.problem is None):
            WAITING_FOR_AGENT.remove(card)
            continue
        try:
            problem = ensure_registered(card.gate.run)
        except Exception as exc:  # a card must never stop a cell
            log.debug("loom_nb: the card of gate %s could not look for its agent: %s", card.gate.gate_id, exc)
            continue
        if problem is None:
            card.show_problem(None)
            card.status.value = html.escape(card.status_text)


AFTER_CELL.append(recheck_waiting_cards)
