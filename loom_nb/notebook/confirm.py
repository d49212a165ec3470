"""A confirmation step for a click that cannot be undone (Stop; Approve all / Refuse all of several
gates): the first click asks, a second click on the confirming button acts, Cancel puts it back.

``ConfirmBar`` is hidden until ``ask``. Its buttons have the classes ``loom-confirm-yes`` and
``loom-confirm-no``; the question has ``loom-confirm-question``. The button that opens it carries
``NO_FEEDBACK`` so the page's click feedback (``click_feedback.js``) does not treat the first click
as sent.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from loom_nb.notebook.formatting import html_widget

#: The CSS class of a button that only opens a form or a question: the page's click feedback
#: neither says "sent" nor disables the card for it.
NO_FEEDBACK = "loom-no-feedback"


class ConfirmBar(widgets.HBox):  # type: ignore[misc]
    """A question with a confirming and a cancelling button, hidden until asked.

    Attributes:
        question: The question (class ``loom-confirm-question``).
        yes: The confirming button (class ``loom-confirm-yes``).
        no: The cancelling button (class ``loom-confirm-no``).
        also: A second acting button (class ``loom-confirm-also``), shown only when ``ask`` gives one.
        asking: Whether the question is shown.
    """

    def __init__(self) -> None:
        self.question = html_widget("loom-confirm-question")
        self.yes = widgets.Button(description="Yes", button_style="danger")
        self.yes.add_class("loom-confirm-yes")
        self.no = widgets.Button(description="Cancel")
        self.no.add_class("loom-confirm-no")
        self.no.add_class(NO_FEEDBACK)
        self.also = widgets.Button(description="", button_style="warning")
        self.also.add_class("loom-confirm-also")
        self.also.layout.display = "none"
        self.asking = False
        self._on_also: Callable[[], Any] | None = None
        self._on_yes: Callable[[], Any] | None = None
        self._on_no: Callable[[], Any] | None = None
        self.yes.on_click(lambda _: self.confirm())
        self.no.on_click(lambda _: self.cancel())
        self.also.on_click(lambda _: self.confirm_also())
        super().__init__(children=[self.question, self.yes, self.also, self.no])
        self.add_class("loom-confirm")
        self.layout.display = "none"
        self.layout.flex_flow = "row wrap"
        self.layout.align_items = "center"

    def ask(
        self,
        question: str,
        yes: str,
        on_yes: Callable[[], Any],
        *,
        style: str = "danger",
        no: str = "Cancel",
        on_no: Callable[[], Any] | None = None,
        also: tuple[str, Callable[[], Any]] | None = None,
    ) -> None:
        """Show ``question`` (plain text) with a ``yes`` button that calls ``on_yes`` and a ``no``
        button that hides the bar again (and calls ``on_no``); with ``also`` (a label and an
        action), a second acting button between them."""
        self.question.value = f"<b>{html.escape(question)}</b>"
        self.yes.description, self.yes.tooltip, self.yes.button_style = yes, yes, style
        self.no.description, self.no.tooltip = no, no
        self.yes.disabled = self.no.disabled = False
        self._on_yes, self._on_no = on_yes, on_no
        self._on_also = also[1] if also is not None else None
        self.also.description = self.also.tooltip = also[0] if also is not None else ""
        self.also.disabled = False
        self.also.layout.display = "" if also is not None else "none"
        self.asking = True
        self.layout.display = ""

    def confirm(self) -> None:
        """The confirming click: hide the bar, then act (once)."""
        action = self._on_yes if self.asking else None
        self._hide()
        if action is not None:
            action()

    def confirm_also(self) -> None:
        """The second acting click: hide the bar, then act (once)."""
        action = self._on_also if self.asking else None
        self._hide()
        if action is not None:
            action()

    def cancel(self) -> None:
        """The cancelling click (or Escape): hide the bar; nothing is done."""
        action = self._on_no if self.asking else None
        self._hide()
        if action is not None:
            action()

    def _hide(self) -> None:
        self.asking = False
        self._on_yes = self._on_no = self._on_also = None
        self.layout.display = "none"
