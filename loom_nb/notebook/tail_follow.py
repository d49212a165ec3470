"""Boxes that follow their tail (an anywidget, ``widgets/tail_follow.js``).

A ``TailFollow`` sits in a run view (the element of class ``loom-run``). In the page, every element
of class ``FOLLOW_CLASS`` inside that view (a capped box: the finished turns, a turn's streamed
text) scrolls to its end whenever its content grows, unless the reader scrolled it away from the
end; scrolling back to the end makes it follow again. It has no state in the kernel: every run view
shows the one shared widget (``formatting.shared_model``).
"""

from __future__ import annotations

from typing import Any

import anywidget

from loom_nb.notebook.timeline import asset_dir

#: The CSS class of a box that follows its tail.
FOLLOW_CLASS = "loom-follow"

_ASSETS = asset_dir()


class TailFollow(anywidget.AnyWidget):
    """Makes the ``FOLLOW_CLASS`` boxes of the run view around it follow their tail (see the module
    docstring)."""

    _esm = _ASSETS / "tail_follow.js"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.add_class("loom-tail-follow-widget")
