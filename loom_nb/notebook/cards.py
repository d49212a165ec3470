"""Gate cards: an approval card (Approve / Refuse with a reason), an in-doubt card (happened /
run again / fail), and a generic card for other gate kinds. Each acts through the public ``Gate``
methods only, disables itself on the first click, and shows the decision once recorded.
"""

from __future__ import annotations

import asyncio
import html
import json
import logging
import shlex
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import ipywidgets as widgets

from loom_nb.agent.agent import Gate
from loom_nb.agent.config import APPROVAL_GATE
from loom_nb.kernel.async_bridge import in_running_loop
from loom_nb.kernel.context import IN_DOUBT_GATE
from loom_nb.notebook.formatting import TextForm, html_widget, parse_json_or_text, short_text
from loom_nb.notebook.runs import ensure_registered

log = logging.getLogger("loom_nb")


def _clock(at: float) -> str:
    return datetime.fromtimestamp(at).strftime("%H:%M:%S")


def _button(description: str, cls: str, style: str, icon: str = "") -> Any:
    b = widgets.Button(description=description, button_style=style, icon=icon, tooltip=description)
    b.add_class(cls)
    return b


def _field(kind: Any, placeholder: str, cls: str) -> Any:
    field = kind(placeholder=placeholder)
    field.add_class(cls)
    return field


def describe_resolution(kind: str, payload: Any) -> str:
    """A short human description of a gate's resume payload (``approved``, ``refused: why``...)."""
    if not isinstance(payload, dict):
        return f"resolved with {short_text(payload, 80)}"
    reason = payload.get("reason")
    why = f" ({reason})" if reason else ""
    if kind == APPROVAL_GATE and "approved" in payload:
        return ("approved" if payload["approved"] else "refused") + why
    if kind == IN_DOUBT_GATE and "action" in payload:
        action = str(payload["action"])
        if action == "happened":
            return f"marked as happened (output {short_text(payload.get('output'), 60)}){why}"
        return {"run_again": "run again", "fail": "marked as failed"}.get(action, action) + why
    return f"resolved with {short_text(payload, 80)}"


# -- gate cards -----------------------------------------------------------------------------------
def card_heading(title_html: str, body_class: str, body: str) -> tuple[Any, Any]:
    """A card's title (HTML) and its body (``body`` escaped in a ``<pre>``, with CSS class ``body_class``)."""
    return html_widget("loom-card-title", title_html), html_widget(body_class, f"<pre>{html.escape(body)}</pre>")


class GateCard(TextForm, widgets.VBox):  # type: ignore[misc]
    """A card for one open gate. Subclasses add the inputs and buttons of their gate kind.

    Attributes:
        gate: The gate.
        decided: True once a decision was made (by this card or elsewhere); buttons are disabled.
        decision: The recorded decision, described, with when it was recorded.
        outcome: The decision without the time (what the text form shows).
        status: The line under the buttons (decision, waiting, or an error).
        problem: Why the gate cannot be acted on yet (e.g. the agent's flow is not defined), if so.
    """

    css = "loom-gate"

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
        self._pending: asyncio.Future[None] | None = None
        super().__init__(children=[*self._build(), self.problem_box, self.status])
        self.add_class("loom-card")
        self.add_class(self.css)
        self.show_problem(problem)

    # -- for subclasses -------------------------------------------------------------------------
    def _build(self) -> list[Any]:
        payload = short_text(self.gate.payload, 2000)
        title, body = card_heading(
            f"<b>Gate</b> <code>{html.escape(self.gate.gate_id)}</code> ({html.escape(self.gate.kind)})",
            "loom-card-payload",
            payload,
        )
        self.payload_box = _field(widgets.Textarea, "resume payload (JSON)", "loom-payload")
        resume = _button("Resume", "loom-resume", "primary")
        resume.on_click(
            lambda _: self.act("resumed", lambda: self.gate.resolve(parse_json_or_text(self.payload_box.value)))
        )
        self.buttons = [resume]
        self.inputs = [self.payload_box]
        return [title, body, self.payload_box, widgets.HBox([resume])]

    def commands(self) -> str:
        """The ``%loom resume`` command(s) that resolve this gate from a cell."""
        return f"gate.resolve(payload) on run {self.gate.run.id}"

    # -- acting ---------------------------------------------------------------------------------
    def show_problem(self, problem: str | None) -> None:
        """Show (or clear) why the gate cannot be acted on yet."""
        self.problem = problem
        self.problem_box.value = f"<pre class='loom-error'>{html.escape(problem)}</pre>" if problem else ""

    def _lock(self, locked: bool) -> None:
        for w in (*self.buttons, *self.inputs):
            w.disabled = locked

    def act(self, label: str, action: Callable[[], Any]) -> None:
        """Run ``action`` (a public ``Gate`` method) once: later clicks are ignored.

        If the run is still moving toward its gates (another card's click just resumed it), the
        action waits for it to pause. Errors show on the card and re-enable it.
        """
        if self.decided:
            return
        self.decided = True
        self._lock(True)
        problem = ensure_registered(self.gate.run)
        if problem is not None:
            self._reopen(problem=problem)
            return
        self.show_problem(None)
        run = self.gate.run
        if run.status == "running" and in_running_loop():
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
            self._reopen(error=f"{type(exc).__name__}: {exc}")
            return
        if self.decision is None:  # the journal's gate_resolved may have marked it already
            self._mark(label, time.time())

    def _reopen(self, *, problem: str | None = None, error: str | None = None) -> None:
        self.decided = False
        self._lock(False)
        if problem is not None:
            self.show_problem(problem)
        self.status.value = "" if error is None else f"<span class='loom-error'>{html.escape(error)}</span>"

    def _mark(self, text: str, at: float) -> None:
        self.decided = True
        self._lock(True)
        self.add_class("loom-decided")
        self.outcome = text
        self.decision = f"{text} at {_clock(at)}"
        self.status.value = f"<b>{html.escape(self.decision[0].upper() + self.decision[1:])}</b>"

    def close(self, why: str) -> None:
        """Disable an unanswered card whose gate is no longer open (``why``: e.g. the run was cancelled)."""
        if self.outcome:
            return
        self.decided = True
        self._lock(True)
        self.add_class("loom-decided")
        self.outcome = why
        self.status.value = f"<i>{html.escape(why)}</i>"

    def resolved(self, payload: Any, at: float) -> None:
        """Show the journal's record of this gate's resolution (from whoever resolved it)."""
        self.show_problem(None)
        self._mark(describe_resolution(self.gate.kind, payload), at)

    # -- text -----------------------------------------------------------------------------------
    def text(self) -> str:
        """The card as one line of text."""
        if self.outcome:
            return f"gate {self.gate.gate_id}: {self.outcome}"
        line = f"{self.gate!r} -> {self.commands()}"
        return line + (f"  [{self.problem}]" if self.problem else "")

    def plain_text(self) -> str:
        """The card as text, named by its class (``ApprovalCard(<Gate ...> -> ...)``)."""
        return f"{type(self).__name__}({self.text()})"


class ApprovalCard(GateCard):
    """The card of an ``AgentToolApproval`` gate: tool, pretty-printed arguments, a reason box,
    Approve (``gate.approve(reason)``) and Refuse (``gate.refuse(reason)``).

    Attributes:
        approve: The Approve button (class ``loom-approve``).
        refuse: The Refuse button (class ``loom-refuse``).
        reason: The reason text box (class ``loom-reason``).
    """

    css = "loom-approval"

    def _build(self) -> list[Any]:
        g = self.gate
        pretty = json.dumps(g.arguments, indent=2, ensure_ascii=False, default=str)
        title, args = card_heading(
            f"<b>Approve</b> <code>{html.escape(str(g.tool))}</code>? <small>{html.escape(g.gate_id)}</small>",
            "loom-card-arguments",
            pretty,
        )
        self.reason = _field(widgets.Text, "reason (optional; the model is told on refusal)", "loom-reason")
        self.approve = _button("Approve", "loom-approve", "success", "check")
        self.refuse = _button("Refuse", "loom-refuse", "danger", "times")
        self.approve.on_click(lambda _: self.act("approved", lambda: g.approve(self._reason())))
        self.refuse.on_click(lambda _: self.act("refused", lambda: g.refuse(self._reason())))
        self.buttons = [self.approve, self.refuse]
        self.inputs = [self.reason]
        return [title, args, self.reason, widgets.HBox([self.approve, self.refuse])]

    def _reason(self) -> str | None:
        return self.reason.value.strip() or None

    def commands(self) -> str:
        """The ``%loom resume`` commands that approve or refuse this gate from a cell."""
        gid = shlex.quote(self.gate.gate_id)
        return f"%loom resume {self.gate.run.id} {gid} --approve | --refuse [--reason R]"


class InDoubtCard(GateCard):
    """The card of an ``InDoubt`` gate (a non-idempotent step cut in flight): it happened (with
    its output), run it again, or record it as failed.

    Attributes:
        output: The output text box (JSON or text) for "happened" (class ``loom-output``).
        reason: The reason text box (class ``loom-reason``).
        happened: Button calling ``gate.happened(output)`` (class ``loom-happened``).
        run_again: Button calling ``gate.run_again()`` (class ``loom-run-again``).
        fail: Button calling ``gate.fail(reason)`` (class ``loom-fail``).
    """

    css = "loom-in-doubt"

    def _build(self) -> list[Any]:
        g = self.gate
        p = g.payload if isinstance(g.payload, dict) else {}
        step, effect = p.get("step_id", g.gate_id), p.get("effect", "?")
        title = html_widget(
            "loom-card-title",
            f"<b>In doubt</b>: step <code>{html.escape(str(step))}</code> "
            f"(effect <code>{html.escape(str(effect))}</code>) was cut in flight. Did it happen?",
        )
        pretty = json.dumps(p.get("input"), indent=2, ensure_ascii=False, default=str)
        body = html_widget("loom-card-arguments", f"<pre>{html.escape(pretty)}</pre>")
        self.output = _field(widgets.Text, "its output, if it happened (JSON or text)", "loom-output")
        self.reason = _field(widgets.Text, "reason (optional)", "loom-reason")
        self.happened = _button("It happened", "loom-happened", "success", "check")
        self.run_again = _button("Run again", "loom-run-again", "warning", "redo")
        self.fail = _button("Fail it", "loom-fail", "danger", "times")
        self.happened.on_click(lambda _: self.act("marked as happened", self._happened))
        self.run_again.on_click(lambda _: self.act("run again", g.run_again))
        self.fail.on_click(lambda _: self.act("marked as failed", self._fail))
        self.buttons = [self.happened, self.run_again, self.fail]
        self.inputs = [self.output, self.reason]
        return [title, body, self.output, self.reason, widgets.HBox(self.buttons)]

    def _happened(self) -> Any:
        return self.gate.happened(parse_json_or_text(self.output.value))

    def _fail(self) -> Any:
        return self.gate.fail(self.reason.value.strip() or None)

    def commands(self) -> str:
        """The ``%loom resume`` commands that resolve this gate from a cell."""
        gid = shlex.quote(self.gate.gate_id)
        return f"%loom resume {self.gate.run.id} {gid} --happened OUTPUT | --run-again | --fail [--reason R]"


def card_for(gate: Gate, *, problem: str | None = None) -> GateCard:
    """The card for ``gate``'s kind (approval, in doubt, or a generic JSON resume card)."""
    if gate.kind == APPROVAL_GATE:
        return ApprovalCard(gate, problem=problem)
    if gate.kind == IN_DOUBT_GATE:
        return InDoubtCard(gate, problem=problem)
    return GateCard(gate, problem=problem)


# -- tool rows ------------------------------------------------------------------------------------
