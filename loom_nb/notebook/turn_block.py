"""One model turn of the live view (``TurnBlock``): its heading, its text (Markdown), its reasoning
(collapsed, ``thinking_html``), the spinner while the model is called, then its tool rows and gate
cards (approval cards grouped in a ``TurnApprovals``).
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as widgets

from loom_nb.journal import step_ids
from loom_nb.notebook.cards import ApprovalCard, GateCard, TurnApprovals
from loom_nb.notebook.child_panel import ChildPanel
from loom_nb.notebook.formatting import html_widget, shared_box, take_out
from loom_nb.notebook.rows import AnswerRow, ToolRow
from loom_nb.notebook.safe_text import escape_bidi, markdown_html
from loom_nb.notebook.view_page import FOLLOW_CLASS


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
            take_out(self.cards, approvals)
            return
        take_out(self.cards, card)
