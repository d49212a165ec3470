"""A follower catches up on what is new, not on the whole run: at each commit it reads the events
after the last one it handed on (``TailReader.read_after``, on every store) and reads the run's
state again only when they may have changed it (``follow.STATE_KINDS``); the events it hands on
hold all the state shows (``agent/follow.py``)."""

from __future__ import annotations

from typing import Any

import pytest

import loom_nb as loom
from loom_nb.agent.follow import STATE_KINDS, _catch_up
from loom_nb.journal import Event
from loom_nb.journal.store import TailReader


@loom.tool(needs_approval=True)
def send(to: str) -> str:
    """Send a note."""
    return f"sent to {to}"


def parked_run() -> loom.Run:
    model = loom.ScriptedModel(
        [loom.ModelResponse.tool_calls([("send", {"to": "ana"})]), loom.ModelResponse.text("ok")]
    )
    run = loom.Agent(model=model, tools=[send], name="notes").start("Tell Ana", runtime=loom.Runtime.open())
    assert run.status == "suspended"
    return run


def counted(monkeypatch: pytest.MonkeyPatch, obj: Any, name: str) -> list[int]:
    calls: list[int] = []
    original = getattr(obj, name)

    def counting(*args: Any) -> Any:
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(obj, name, counting)
    return calls


def test_every_store_reads_the_tail_of_a_run() -> None:
    run = parked_run()
    journal = run.runtime.journal
    events = journal.read(run.id)
    assert isinstance(journal, TailReader)
    assert journal.read_after(run.id, events[2].seq) == events[3:]
    assert journal.read_after(run.id, events[-1].seq) == []
    run.runtime.close()


def test_a_catch_up_reads_only_new_events_and_the_state_only_after_a_state_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = parked_run()
    rt = run.runtime
    events = rt.journal.read(run.id)
    handed: list[Event] = []
    rt.observe(handed.append, execution_id=run.id)
    reads, tails = counted(monkeypatch, rt.journal, "read"), counted(monkeypatch, rt.journal, "read_after")
    refreshes = counted(monkeypatch, run, "refresh")

    _catch_up(run, [0])  # everything is new, the suspension among it: the state is read again
    assert [e.seq for e in handed] == [e.seq for e in events]
    assert len(refreshes) == 1 and len(tails) == 2  # the tail, then what committed while the state was read

    warning = Event(run.id, events[-1].seq + 1, "warning", None, events[-1].at, {"message": "slow"})
    assert warning.kind not in STATE_KINDS
    rt.journal.append([warning])
    for seen in (handed, refreshes, tails, reads):
        seen.clear()
    _catch_up(run, [events[-1].seq])  # a commit that cannot change the state: only the tail is read
    assert [e.seq for e in handed] == [warning.seq]
    assert (len(tails), len(reads), len(refreshes)) == (1, 0, 0)
    rt.close()
