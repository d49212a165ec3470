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
from typing import Any

import ipywidgets as widgets

from loom_nb.agent.config import APPROVAL_GATE
from loom_nb.agent.run import Gate
from loom_nb.agent.tool_calls import ran_arguments
from loom_nb.journal import step_ids
from loom_nb.kernel.async_bridge import in_running_loop
from loom_nb.kernel.context import IN_DOUBT_GATE
from loom_nb.notebook.click_feedback import SCOPE_CLASS, ClickFeedback
from loom_nb.notebook.confirm import NO_FEEDBACK, ConfirmBar
from loom_nb.notebook.edit_form import ArgumentForm, ordered_arguments
from loom_nb.notebook.formatting import (
    TextForm,
    arguments_diff,
    call_text,
    clock_text,
    close_tree,
    html_widget,
    parse_json_or_text,
    short_text,
)
from loom_nb.notebook.runs import ensure_registered
from loom_nb.notebook.safe_text import visible, visible_json

log = logging.getLogger("loom_nb")


def _button(description: str, cls: str, style: str, icon: str = "") -> Any:
    b = widgets.Button(description=description, button_style=style, icon=icon, tooltip=description)
    b.add_class(cls)
    return b


def _field(kind: Any, label: str, placeholder: str, cls: str) -> Any:
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
        self.payload_box = _field(widgets.Textarea, "Payload", "the resume payload (JSON or text)", "loom-payload")
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

    def summary(self) -> str:
        """What the gate is about, on one line (the collapsed card's text)."""
        return f"{self.gate.kind} {self.gate.gate_id}"

    # -- acting ---------------------------------------------------------------------------------
    def show_problem(self, problem: str | None) -> None:
        """Show (or clear) why the gate cannot be acted on yet."""
        self.problem = problem
        self.problem_box.value = f"<pre class='loom-error'>{html.escape(visible(problem))}</pre>" if problem else ""

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


def tool_schema(gate: Gate) -> tuple[str, dict[str, Any]]:
    """The description and JSON schema of the tool an approval gate is about, from the agent of the
    gate's execution (a sub-agent's gate: the child's agent; ``Gate.agent``), ``("", {})`` when the
    run was attached without its agent or the tool is gone."""
    return run_tool_schema(gate.run, str(gate.tool), gate.execution_id)


def run_tool_schema(run: Any, name: str, execution_id: str | None = None) -> tuple[str, dict[str, Any]]:
    """The description and JSON schema of the tool ``name`` of ``run``'s agent, or of the agent of
    its child execution ``execution_id`` (a sub-agent's, ``Run.agent_of``); ``("", {})`` when the
    agent is unknown or has no such tool."""
    agent = run.agent if execution_id is None else run.agent_of(execution_id)
    found = agent.config.tool(name) if agent is not None else None
    if found is None:
        return "", {}
    spec = found.spec
    return spec.description or "", dict(spec.parameters)


def value_html(value: Any) -> str:
    """One argument rendered by its type: a multi-line string as text (its newlines kept), other
    strings and scalars as code, lists and objects as indented JSON; invisible characters (bidi
    controls, zero-width ones) shown escaped (``visible``, ``visible_json``)."""
    if isinstance(value, str):
        if "\n" in value or len(value) > 80:
            return f"<pre class='loom-arg-text'>{html.escape(visible(value))}</pre>"
        return f"<code>{html.escape(visible(value))}</code>"
    if value is None or isinstance(value, bool | int | float):
        return f"<code>{html.escape(json.dumps(value))}</code>"
    return f"<pre class='loom-arg-json'>{html.escape(visible_json(value))}</pre>"


def arguments_html(arguments: dict[str, Any], schema: dict[str, Any]) -> str:
    """The arguments as a two-column table (name, value), in the tool's parameter order; each
    name's tooltip is its description from the schema."""
    props = schema.get("properties") or {}
    rows = []
    for name, value in ordered_arguments(arguments, schema):
        doc = (props.get(name) or {}).get("description") or ""
        title = f" title='{html.escape(visible(doc), quote=True)}'" if doc else ""
        rows.append(f"<tr><th{title}>{html.escape(visible(name))}</th><td>{value_html(value)}</td></tr>")
    if not rows:
        return "<i>no arguments</i>"
    return "<table class='loom-args'>" + "".join(rows) + "</table>"


class ApprovalCard(GateCard):
    """The card of an ``AgentToolApproval`` gate: the tool and its description, the arguments in
    the tool's parameter order (rendered by type), a reason box, Approve (``gate.approve(reason)``),
    Refuse (``gate.refuse(reason)``) and Edit (a form built from the tool's schema; Approve then
    runs the edited arguments: ``gate.approve(reason, arguments=...)``).

    Attributes:
        approve: The Approve button (class ``loom-approve``).
        refuse: The Refuse button (class ``loom-refuse``).
        edit: The Edit button (class ``loom-edit``), which shows or hides ``form``.
        form: The ``ArgumentForm`` (hidden until Edit is clicked).
        reason: The reason text box (class ``loom-reason``).
        editing: True while the form is shown (Approve sends its arguments).
    """

    css = "loom-approval"
    status_text = "Waiting for your approval"

    def _build(self) -> list[Any]:
        g = self.gate
        description, schema = tool_schema(g)
        self.editing = False
        desc = f"<div class='loom-card-desc'>{html.escape(visible(description))}</div>" if description else ""
        tool = html.escape(visible(str(g.tool)))
        title = html_widget("loom-card-title", f"<b>Run <code>{tool}</code>?</b> {desc}".rstrip())
        args = html_widget("loom-card-arguments", arguments_html(g.arguments, schema))
        self.form = ArgumentForm(g.arguments, schema)
        self.form.layout.display = "none"
        self.reason = _field(widgets.Text, "Reason", "optional; the model is told on refusal", "loom-reason")
        self.approve = _button("Approve", "loom-approve", "success", "check")
        self.refuse = _button("Refuse", "loom-refuse", "danger", "times")
        self.edit = _button("Edit", "loom-edit", "", "pencil")
        self.approve.on_click(lambda _: self.act(self._approved_label(), self._approve))
        self.refuse.on_click(lambda _: self.act("refused", lambda: g.refuse(self._reason())))
        self.edit.on_click(lambda _: self.toggle_edit())
        self.buttons = [self.approve, self.refuse, self.edit]
        self.inputs = [self.reason, *self.form.fields.values()]
        return [title, args, self.form, self.reason, widgets.HBox(self.buttons)]

    def toggle_edit(self) -> None:
        """Show the argument form (Approve then runs the edited arguments), or hide it again. A gate
        answered elsewhere meanwhile shows that answer instead (``show_answer_given_elsewhere``)."""
        if self.decided or self.closed or (not self.editing and self.show_answer_given_elsewhere()):
            return
        self.editing = not self.editing
        self.form.layout.display = "" if self.editing else "none"
        self.edit.description = "Cancel edit" if self.editing else "Edit"
        self.approve.description = "Approve edited" if self.editing else "Approve"

    def _approved_label(self) -> str:
        return "approved with edited arguments" if self.editing else "approved"

    def _approve(self) -> Any:
        if not self.editing:
            return self.gate.approve(self._reason())
        arguments = self.form.values()
        done = self.gate.approve(self._reason(), arguments=arguments)
        self.answer = {"approved": True, "arguments": arguments}
        return done

    def _reason(self) -> str | None:
        return self.reason.value.strip() or None

    def summary(self) -> str:
        """The call on one line, with the arguments it runs with (``tool(k=v, ...)``; a person's
        edit, once approved, and what it changed)."""
        arguments, edited = ran_arguments(self.gate.arguments, self.answer)
        line = call_text(str(self.gate.tool), dict(ordered_arguments(arguments, tool_schema(self.gate)[1])))
        return line + (f" [edited: {arguments_diff(self.gate.arguments, arguments)}]" if edited else "")

    def commands(self) -> str:
        """The ``%loom resume`` commands that approve or refuse this gate from a cell."""
        gid = shlex.quote(self.gate.gate_id)
        return f"%loom resume {self.gate.execution_id} {gid} --approve | --refuse [--reason R]"


class TurnApprovals(TextForm, widgets.VBox):  # type: ignore[misc]
    """The approval cards of one turn, with Approve all / Refuse all when there are several. Each
    asks to confirm first (``confirm``: "Approve all 3 calls?"), then clicks every waiting card's
    own button in order.

    Args:
        cards: The turn's approval cards.

    Attributes:
        cards: The cards.
        approve_all: The Approve all button (class ``loom-approve-all``).
        refuse_all: The Refuse all button (class ``loom-refuse-all``).
    """

    def __init__(self, cards: list[ApprovalCard]) -> None:
        self.cards = list(cards)
        self.approve_all = _button("Approve all", "loom-approve-all", "success", "check")
        self.refuse_all = _button("Refuse all", "loom-refuse-all", "danger", "times")
        for b in (self.approve_all, self.refuse_all):
            b.add_class(NO_FEEDBACK)  # it only asks: the confirming click is the one sent
        self.approve_all.on_click(lambda _: self.ask(approve=True))
        self.refuse_all.on_click(lambda _: self.ask(approve=False))
        self.feedback = ClickFeedback()
        self.heading = html_widget("loom-turn-approvals-title", "")
        self._confirm: ConfirmBar | None = None  # made on the first Approve all / Refuse all click
        self.bar = widgets.HBox([self.heading, self.approve_all, self.refuse_all, self.feedback])
        self.bar.layout.flex_flow = "row wrap"
        self.bar.add_class(SCOPE_CLASS)
        super().__init__(children=[self.bar, *self.cards])
        self.add_class("loom-turn-approvals")
        self.refresh()

    def add(self, card: ApprovalCard) -> None:
        """Add a card of the same turn."""
        self.cards.append(card)
        self.children = (self.bar, *self.cards)
        self.refresh()

    def remove(self, card: ApprovalCard) -> None:
        """Take a card out (a decided card folded into its tool row)."""
        if card in self.cards:
            self.cards.remove(card)
            self.children = (self.bar, *self.cards)
            self.refresh()

    def open_cards(self) -> list[ApprovalCard]:
        """The cards still waiting for a decision."""
        return [c for c in self.cards if not c.decided and not c.closed]

    def refresh(self) -> None:
        """Show the bar while two or more cards wait; hide it (and its question) otherwise."""
        waiting = self.open_cards()
        self.bar.layout.display = "" if len(waiting) > 1 else "none"
        self.heading.value = f"<b>{len(waiting)} calls wait for your approval</b>"
        if len(waiting) < 2 and self._confirm is not None and self._confirm.asking:
            self._confirm.cancel()

    @property
    def confirm(self) -> ConfirmBar:
        """The question Approve all / Refuse all ask (a ``ConfirmBar`` on its own line in the bar),
        made on first use."""
        if self._confirm is None:
            self._confirm = ConfirmBar()
            self._confirm.layout.width = "100%"
            self.bar.children = (*self.bar.children, self._confirm)
        return self._confirm

    def ask(self, *, approve: bool) -> None:
        """The Approve all / Refuse all click: ask to confirm (for two or more waiting cards; one
        is decided at once), then ``decide``."""
        self.feedback.ack()
        n = len(self.open_cards())
        if n < 2:
            self.decide(approve=approve)
            return
        self.approve_all.disabled = self.refuse_all.disabled = True
        verb = "Approve" if approve else "Refuse"
        how = "runs" if approve else "is refused"
        question = f"{verb} all {n} calls? Each {how} as if its own {verb} were clicked."
        self.confirm.ask(
            question,
            f"{verb} {n} calls",
            lambda: self.decide(approve=approve),
            style="success" if approve else "danger",
            on_no=self._unlock,
        )

    def _unlock(self) -> None:
        self.approve_all.disabled = self.refuse_all.disabled = False

    def decide(self, *, approve: bool) -> None:
        """Approve (or refuse) every card still waiting, in order, through each card's button."""
        self.feedback.ack()
        for card in self.open_cards():
            (card.approve if approve else card.refuse).click()
        self._unlock()
        self.refresh()

    def text(self) -> str:
        """The cards as text, one line each."""
        return "\n".join(c.text() for c in self.cards)


#: What "It happened" records (the tool's result the model reads) when the person gave no output.
NO_RESULT_GIVEN = "(no result given: a person marked the call as done)"


def in_doubt_cause(cause: Any) -> str:
    """Why a step is in doubt, from its gate's ``cause`` (the error that left the outcome unknown;
    none when the process stopped mid-call), with the error's own words."""
    if not isinstance(cause, dict):
        return "The process stopped (a crash, a kill or a kernel restart) before the call's result was recorded"
    kind = str(cause.get("type", "")).rpartition(":")[2].rpartition(".")[2]
    message = short_text(str(cause.get("message", "")), 200)
    what = {
        "EffectTimeout": "The call ran past its timeout and was abandoned",
        "McpServerGone": "The MCP server went away mid-call",
    }.get(kind, "The call ended without telling whether it took effect")
    return f"{what} ({kind}: {message})" if message else f"{what} ({kind})"


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
    status_text = "Waiting for your answer: did it happen?"

    def _build(self) -> list[Any]:
        g = self.gate
        p = g.payload if isinstance(g.payload, dict) else {}
        step, effect = p.get("step_id", g.gate_id), p.get("effect", "?")
        where = f"step {step}, attempt {p.get('attempt', 1)}"
        title = html_widget(
            "loom-card-title",
            f"<b>Did <code>{html.escape(visible(step_ids.tool_name(str(effect))))}</code> happen?</b> "
            f"{html.escape(visible(in_doubt_cause(p.get('cause'))))}, and it is not safe to simply run it "
            f"again. <span class='loom-card-desc'>({html.escape(visible(where))})</span>",
        )
        body = html_widget("loom-card-arguments", f"<pre>{html.escape(visible_json(p.get('input')))}</pre>")
        self.output = _field(widgets.Text, "Its output", "if it happened (JSON or text)", "loom-output")
        self.reason = _field(widgets.Text, "Reason", "optional", "loom-reason")
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
        output = parse_json_or_text(self.output.value)
        return self.gate.happened(NO_RESULT_GIVEN if output is None else output)

    def _fail(self) -> Any:
        return self.gate.fail(self.reason.value.strip() or None)

    def commands(self) -> str:
        """The ``%loom resume`` commands that resolve this gate from a cell."""
        gid = shlex.quote(self.gate.gate_id)
        return f"%loom resume {self.gate.execution_id} {gid} --happened OUTPUT | --run-again | --fail [--reason R]"

    def summary(self) -> str:
        """The step in doubt, on one line."""
        p = self.gate.payload if isinstance(self.gate.payload, dict) else {}
        return f"{step_ids.tool_name(str(p.get('effect', '?')))} (in doubt)"


class FoldedCards:
    """The decided approval cards a view has folded into their tool rows: the one place that says
    when a card folds and what folding does, for the run view and the sub-agents' child panels.

    A card folds once its approval is decided and the view shows the call's tool row: the row
    then says the decision (``done, approved``; ``· approved at 14:25:03 (reason)``), which it
    reads from the gate's state, not from the card. The folded card is taken out of its box and
    closed with its layout and style models (``close_tree``), so neither the kernel nor the
    notebook's saved widget state keeps it; the view keeps the card object (its decision stays
    readable) and leaves it out of its text form.

    Attributes:
        keys: The folded cards' keys (the view's own key: a gate id, or ``(execution id, gate id)``).
    """

    def __init__(self) -> None:
        self.keys: set[Any] = set()

    def __contains__(self, key: object) -> bool:
        return key in self.keys

    def __len__(self) -> int:
        return len(self.keys)

    def fold(self, key: Any, card: GateCard, *, has_row: bool, detach: Callable[[GateCard], None]) -> bool:
        """Fold ``card`` (under ``key``) if it is a decided approval card whose call has a tool row
        (``has_row``): ``detach`` takes it out of its box, then its widgets are closed. Returns
        whether it is folded (now or before)."""
        if key in self.keys:
            return True
        if not isinstance(card, ApprovalCard) or card.decision is None or not has_row:
            return False
        self.keys.add(key)
        detach(card)
        close_tree(card)
        return True

    def lines(self, cards: dict[Any, GateCard]) -> list[str]:
        """The text lines of the cards that are not folded."""
        return [card.text() for key, card in cards.items() if key not in self.keys]


def card_for(gate: Gate, *, problem: str | None = None) -> GateCard:
    """The card for ``gate``'s kind (approval, in doubt, or a generic JSON resume card)."""
    if gate.kind == APPROVAL_GATE:
        return ApprovalCard(gate, problem=problem)
    if gate.kind == IN_DOUBT_GATE:
        return InDoubtCard(gate, problem=problem)
    return GateCard(gate, problem=problem)


# -- tool rows ------------------------------------------------------------------------------------
