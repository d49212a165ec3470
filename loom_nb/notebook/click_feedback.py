"""Immediate feedback on a click (an anywidget, ``widgets/click_feedback.js``).

A ``ClickFeedback`` sits inside a gate card (or the Approve all bar), whose element has the CSS
class ``loom-feedback-scope``. In the page, a click on a button of that scope disables the scope's
buttons and shows "sent" before the kernel answers; when the kernel has not acknowledged the click
within ``busy_after`` seconds (another cell is running), it says the kernel is busy and that the
click will run when it is free. The kernel acknowledges with ``ack()`` as its handler starts.

A card whose kernel restarted (its widget models have no live comm any more) says instead that it
can no longer act and that ``%loom pending`` shows a live card of its gate, with its buttons and
inputs disabled: as soon as the page hears of the restart, when it is drawn from a dead model, and
on a click, which then goes nowhere. The page finds the widget's own model through ``own_id``.
"""

from __future__ import annotations

import uuid
from typing import Any

import anywidget
import traitlets

from loom_nb.notebook.timeline import asset_dir

#: The CSS class of the element whose buttons a ``ClickFeedback`` watches.
SCOPE_CLASS = "loom-feedback-scope"

_ASSETS = asset_dir()


class ClickFeedback(anywidget.AnyWidget):
    """The "sent" / "kernel busy" line of one card (see the module docstring).

    Attributes:
        acked: How many clicks the kernel acknowledged (each change clears the line in the page).
        busy_after: Seconds without an acknowledgement before the line says the kernel is busy.
        own_id: This widget's model id, so the page can ask whether its comm is still live.
    """

    _esm = _ASSETS / "click_feedback.js"
    acked = traitlets.Int(0).tag(sync=True)
    busy_after = traitlets.Float(0.6).tag(sync=True)
    own_id = traitlets.Unicode("").tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        # the widget names its comm (as ipykernel would: a random hex id), so its first state
        # carries its own id already
        model_id = kwargs.pop("model_id", None) or uuid.uuid4().hex
        super().__init__(model_id=model_id, own_id=model_id, **kwargs)
        self.add_class("loom-click-feedback-widget")

    def ack(self) -> None:
        """Tell the page the kernel took the click (clears "sent" / "kernel busy")."""
        self.acked += 1
