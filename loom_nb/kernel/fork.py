"""Forks: a new execution served another's recorded prefix up to a step, then run live from there
(``Engine.fork``)."""

from __future__ import annotations

from loom_nb.errors import UsageError
from loom_nb.journal.event_format import with_format
from loom_nb.journal.events import Event, EventKind
from loom_nb.kernel.history import History

#: The events a step, gate, decision or value of the record begins with (where a fork may cut).
_FIRSTS = (EventKind.STEP_STARTED, EventKind.GATE_OPENED, EventKind.DECISION_RECORDED, EventKind.VALUE_RECORDED)
#: The source's lifecycle events: the fork records its own.
_LIFECYCLE = frozenset(
    {
        EventKind.EXECUTION_STARTED,
        EventKind.EXECUTION_SUSPENDED,
        EventKind.EXECUTION_RESUMED,
        EventKind.EXECUTION_COMPLETED,
        EventKind.EXECUTION_FAILED,
        EventKind.EXECUTION_CANCELLED,
    }
)


def fork_cut(h: History, at_step: str) -> int:
    """The index of the event of ``h`` where a fork at ``at_step`` cuts the record.

    Raises:
        UsageError: ``at_step`` is not a step, gate, decision or value of the execution.
    """
    cut = next((i for i, e in enumerate(h.events) if e.step_id == at_step and e.kind in _FIRSTS), None)
    if cut is None:
        known = sorted({e.step_id for e in h.events if e.step_id and e.kind in _FIRSTS})
        raise UsageError(
            f"execution {h.execution_id!r} has no step {at_step!r} to fork at (its steps: {', '.join(known[:30])})"
        )
    return cut


def forked_events(h: History, cut: int, at_step: str, new_id: str, now: float) -> list[Event]:
    """The first events of the fork ``new_id`` of ``h`` cut at ``cut`` (``fork_cut``): its
    ``execution_started`` with the lineage (``forked_from``, ``at_step``), then the recorded prefix."""
    started = {
        "flow": h.flow,
        "input": h.input,
        "principal": h.principal,
        "forked_from": h.execution_id,
        "at_step": at_step,
    }
    events = [Event(new_id, 1, EventKind.EXECUTION_STARTED, None, now, with_format(started, h.format))]
    for e in h.events[:cut]:
        if e.kind not in _LIFECYCLE:
            events.append(Event(new_id, len(events) + 1, e.kind, e.step_id, e.at, e.data))
    return events
