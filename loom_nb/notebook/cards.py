"""Gate cards: an approval card (Approve / Refuse with a reason), an in-doubt card (happened /
run again / fail), and a generic card for other gate kinds. Each acts through the public ``Gate``
methods only, disables itself on the first click, and shows the decision once recorded.

This module holds the approval card (with its argument table), a turn's ``TurnApprovals``, the
folding of decided cards (``FoldedCards``) and ``card_for``; the base and generic card is
``notebook/gate_card.py``, the in-doubt card ``notebook/in_doubt_card.py`` (both importable from
here too).
"""

from __future__ import annotations

import html
import json
import shlex
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from loom_nb.agent.config import APPROVAL_GATE
from loom_nb.agent.gate import Gate
from loom_nb.agent.tool_calls import ran_arguments
from loom_nb.effects.mcp_elicit import MCP_ELICITATION_GATE
from loom_nb.kernel.context import IN_DOUBT_GATE
from loom_nb.notebook.click_feedback import SCOPE_CLASS, ClickFeedback
from loom_nb.notebook.confirm import NO_FEEDBACK, ConfirmBar
from loom_nb.notebook.edit_form import ArgumentForm, ordered_arguments
from loom_nb.notebook.elicitation_card import ElicitationCard
from loom_nb.notebook.formatting import (
    TextForm,
    arguments_diff,
    call_text,
    close_tree,
    gone,
    html_widget,
    take_out,
)
from loom_nb.notebook.gate_card import GateCard, card_button, card_field, card_heading, describe_resolution
from loom_nb.notebook.in_doubt_card import NO_RESULT_GIVEN, InDoubtCard, in_doubt_cause
from loom_nb.notebook.safe_text import visible, visible_json

__all__ = [
    "NO_RESULT_GIVEN",
    "ApprovalCard",
    "FoldedCards",
    "GateCard",
    "InDoubtCard",
    "TurnApprovals",
    "arguments_html",
    "card_for",
    "card_heading",
    "describe_resolution",
    "in_doubt_cause",
    "run_tool_schema",
    "tool_schema",
    "value_html",
]


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
        self.reason = card_field(widgets.Text, "Reason", "optional; the model is told on refusal", "loom-reason")
        self.approve = card_button("Approve", "loom-approve", "success", "check")
        self.refuse = card_button("Refuse", "loom-refuse", "danger", "times")
        self.edit = card_button("Edit", "loom-edit", "", "pencil")
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
        self.approve_all = card_button("Approve all", "loom-approve-all", "success", "check")
        self.refuse_all = card_button("Refuse all", "loom-refuse-all", "danger", "times")
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
        """Add a card of the same turn (after the others: the cards shown stay as they are)."""
        self.cards.append(card)
        self.children = (*widgets.VBox.children.get(self), card)
        self.refresh()

    def remove(self, card: ApprovalCard) -> None:
        """Take a card out (a decided card folded into its tool row: ``take_out``, so the cards
        after it stay as they are in the page)."""
        if card in self.cards:
            self.cards.remove(card)
            take_out(self, card)
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


class FoldedCards:
    """The decided approval cards a view has folded into their tool rows: the one place that says
    when a card folds and what folding does, for the run view and the sub-agents' child panels.

    A card folds once its approval is decided and the view shows the call's tool row: the row
    then says the decision (``done, approved``; ``· approved at 14:25:03 (reason)``), which it
    reads from the gate's state, not from the card. The folded card is taken out of its box
    (``formatting.take_out``: hidden while cards after it still wait, so theirs stay as they are in
    the page) and closed with its layout and style models once it left (``close_tree``), so neither
    the kernel nor the notebook's saved widget state keeps it; the view keeps the card object (its
    decision stays readable) and leaves it out of its text form.

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
        (``has_row``): ``detach`` takes it out of its box (``take_out``, which closes it once it
        left; a card never placed is closed here). Returns whether it is folded (now or before)."""
        if key in self.keys:
            return True
        if not isinstance(card, ApprovalCard) or card.decision is None or not has_row:
            return False
        self.keys.add(key)
        detach(card)
        if not gone(card):  # never placed in a box (``take_out`` closes what leaves one)
            close_tree(card)
        return True

    def lines(self, cards: dict[Any, GateCard]) -> list[str]:
        """The text lines of the cards that are not folded."""
        return [card.text() for key, card in cards.items() if key not in self.keys]


def card_for(gate: Gate, *, problem: str | None = None) -> GateCard:
    """The card for ``gate``'s kind (approval, in doubt, an MCP server's question, or a generic JSON
    resume card)."""
    if gate.kind == APPROVAL_GATE:
        return ApprovalCard(gate, problem=problem)
    if gate.kind == IN_DOUBT_GATE:
        return InDoubtCard(gate, problem=problem)
    if gate.kind == MCP_ELICITATION_GATE:
        return ElicitationCard(gate, problem=problem)
    return GateCard(gate, problem=problem)


# -- tool rows ------------------------------------------------------------------------------------
