"""The ``Observers`` seam: subscribe / unsubscribe, filtering by execution, and failing observers."""

from __future__ import annotations

import logging

import pytest

from loom_nb.journal.events import Event, EventKind
from loom_nb.kernel.observers import Observers


def _event(execution_id: str, seq: int = 1) -> Event:
    return Event(execution_id, seq, EventKind.WARNING, None, 0.0, {"seq": seq})


def test_nobody_watching_is_falsy_and_notifying_is_a_no_op() -> None:
    observers = Observers()
    assert not observers
    assert not observers.active
    observers.notify_events([_event("e1")])
    observers.notify_delta("e1", "#1", "hi")


def test_subscribers_get_events_and_deltas_until_they_unsubscribe() -> None:
    observers = Observers()
    events: list[Event] = []
    deltas: list[tuple[str, str, str]] = []
    stop = observers.subscribe(events.append, on_delta=lambda *d: deltas.append(d))
    assert observers and observers.active
    observers.notify_events([_event("e1"), _event("e2")])
    observers.notify_delta("e1", "#1", "hel")
    stop()
    stop()  # a second call does nothing
    observers.notify_events([_event("e3")])
    observers.notify_delta("e1", "#1", "lo")
    assert [e.execution_id for e in events] == ["e1", "e2"]
    assert deltas == [("e1", "#1", "hel")]
    assert not observers


def test_a_subscription_for_one_execution_sees_only_that_execution() -> None:
    observers = Observers()
    mine: list[str] = []
    everything: list[str] = []
    observers.subscribe(lambda e: mine.append(e.execution_id), execution_id="e2")
    observers.subscribe(lambda e: everything.append(e.execution_id))
    observers.subscribe(on_delta=lambda eid, sid, text: mine.append(f"{eid}/{sid}:{text}"), execution_id="e2")
    observers.notify_events([_event("e1"), _event("e2")])
    observers.notify_delta("e1", "#1", "x")
    observers.notify_delta("e2", "#2", "y")
    assert mine == ["e2", "e2/#2:y"]
    assert everything == ["e1", "e2"]


def test_an_observer_that_raises_is_logged_and_the_others_still_run(caplog: pytest.LogCaptureFixture) -> None:
    observers = Observers()
    seen: list[str] = []

    def broken(*_: object) -> None:
        raise RuntimeError("boom")

    observers.subscribe(broken, on_delta=broken)
    observers.subscribe(lambda e: seen.append(e.execution_id), on_delta=lambda eid, sid, text: seen.append(text))
    with caplog.at_level(logging.ERROR, logger="loom_nb"):
        observers.notify_events([_event("e1")])
        observers.notify_delta("e1", "#1", "delta")
    assert seen == ["e1", "delta"]
    assert [r.getMessage() for r in caplog.records] == [
        "a loom_nb event observer failed",
        "a loom_nb delta observer failed",
    ]
