"""``Observers``: who watches an engine's committed events, streamed deltas and progress reports.

The one seam between the kernel and anything that shows a run (the live view, the timeline, a
test): the engine and the execution context call ``notify_events`` / ``notify_delta`` /
``notify_progress``; watchers ``subscribe`` and get back an unsubscribe. An observer that raises is
logged and never breaks the run. The subscriptions are a tuple replaced on (un)subscribe, so the
per-event and per-delta paths iterate it as is (no copy), and the plain attributes ``active`` ("is
anybody watching?") and ``deltas`` ("is anybody watching deltas?") let callers skip building the
events to notify, or a streamed delta skip the call, at the cost of one attribute read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from loom_nb.journal.events import Event

log = logging.getLogger("loom_nb")

#: ``on_event(event)``: called for each committed event (stream chunks at once).
EventObserver = Callable[[Event], None]
#: ``on_delta(execution_id, step_id, text)``: called for each streamed text delta.
DeltaObserver = Callable[[str, str, str], None]


@dataclass(frozen=True)
class Progress:
    """How far a long call has got, as its effect reported it (``EffectContext.report_progress``;
    an MCP server's progress notifications). Never journaled.

    Attributes:
        progress: The amount done so far.
        total: The whole amount, when known.
        message: What the effect says it is doing, if anything.
    """

    progress: float
    total: float | None = None
    message: str | None = None


#: ``on_progress(execution_id, step_id, progress)``: called for each progress report.
ProgressObserver = Callable[[str, str, Progress], None]

_Subscription = tuple[str | None, EventObserver | None, DeltaObserver | None, ProgressObserver | None]


class Observers:
    """The subscriptions of one engine: event and delta observers, optionally for one execution."""

    __slots__ = ("_subscriptions", "active", "deltas", "progress")

    def __init__(self) -> None:
        self._subscriptions: tuple[_Subscription, ...] = ()
        #: True when anybody is subscribed (callers skip building notifications otherwise). A plain
        #: attribute, kept by ``subscribe`` and its unsubscribe: read on every streamed delta.
        self.active = False
        #: True when a delta observer is subscribed (for any execution): a streamed delta skips
        #: ``notify_delta`` otherwise.
        self.deltas = False
        #: True when a progress observer is subscribed.
        self.progress = False

    def _set(self, subscriptions: tuple[_Subscription, ...]) -> None:
        self._subscriptions = subscriptions
        self.active = bool(subscriptions)
        self.deltas = any(s[2] is not None for s in subscriptions)
        self.progress = any(s[3] is not None for s in subscriptions)

    def subscribe(
        self,
        on_event: EventObserver | None = None,
        *,
        on_delta: DeltaObserver | None = None,
        execution_id: str | None = None,
        on_progress: ProgressObserver | None = None,
    ) -> Callable[[], None]:
        """Watch events, deltas and/or progress reports (of ``execution_id`` only, when given).

        Returns:
            A function that ends this subscription (calling it again does nothing).
        """
        entry: _Subscription = (execution_id, on_event, on_delta, on_progress)
        self._set((*self._subscriptions, entry))

        def unsubscribe() -> None:
            self._set(tuple(s for s in self._subscriptions if s is not entry))

        return unsubscribe

    def __bool__(self) -> bool:
        return self.active

    def notify_events(self, events: Sequence[Event]) -> None:
        """Hand each event to every event observer watching its execution."""
        if not self._subscriptions:
            return
        for eid, on_event, _, _ in self._subscriptions:
            if on_event is None:
                continue
            for event in events:
                if eid is None or event.execution_id == eid:
                    try:
                        on_event(event)
                    except Exception:
                        log.exception("a loom_nb event observer failed")

    def notify_delta(self, execution_id: str, step_id: str, text: str) -> None:
        """Hand one streamed text delta of ``step_id`` to every delta observer watching ``execution_id``."""
        for eid, _, on_delta, _ in self._subscriptions:
            if on_delta is not None and (eid is None or eid == execution_id):
                try:
                    on_delta(execution_id, step_id, text)
                except Exception:
                    log.exception("a loom_nb delta observer failed")

    def notify_progress(self, execution_id: str, step_id: str, progress: Progress) -> None:
        """Hand one progress report of ``step_id`` to every progress observer watching ``execution_id``."""
        if not self.progress:
            return
        for eid, _, _, on_progress in self._subscriptions:
            if on_progress is not None and (eid is None or eid == execution_id):
                try:
                    on_progress(execution_id, step_id, progress)
                except Exception:
                    log.exception("a loom_nb progress observer failed")

    def reporter(self, execution_id: str, step_id: str) -> Callable[[float, float | None, str | None], None]:
        """``EffectContext.report_progress`` for one step's call."""

        def report(progress: float, total: float | None = None, message: str | None = None) -> None:
            if self.progress:
                self.notify_progress(execution_id, step_id, Progress(progress, total, message))

        return report
