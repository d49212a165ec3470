"""What a run view does in the page beyond its widgets (an anywidget, ``widgets/view_page.js``).

A ``ViewPage`` sits in a run view (the element of class ``loom-run``). In the page it:

- makes every element of class ``FOLLOW_CLASS`` inside that view (a capped box: the finished
  turns, the current turn's streamed text) follow its tail: it scrolls to its end whenever its
  content grows, unless the reader scrolled it away from the end; scrolling back to the end makes
  it follow again;
- marks the live regions a screen reader announces: the run's status, each card's status line,
  the click feedback and the stopped line are ``role=status`` (``aria-live=polite``), an error
  ``role=alert``;
- gives a card its keyboard path: Tab walks its inputs (each labelled) and buttons, Enter or Space
  presses a button, Escape closes a confirmation's question (``ConfirmBar``) or an open Edit form;
  a question takes the focus on its cancelling button, and the button that asked takes it back;
- shows Show all only while a capped box overflows (and Cap height once the cap is lifted).

It has no state in the kernel: every run view shows the one shared widget (``formatting.shared_model``).
"""

from __future__ import annotations

from typing import Any

import anywidget

from loom_nb.notebook.timeline import asset_dir

#: The CSS class of a box that follows its tail.
FOLLOW_CLASS = "loom-follow"

_ASSETS = asset_dir()


class ViewPage(anywidget.AnyWidget):
    """The page-side behaviour of the run view around it: boxes that follow their tail, live
    regions, keys (see the module docstring)."""

    _esm = _ASSETS / "view_page.js"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.add_class("loom-view-page-widget")
