"""The journal writer's thread (``JournalWriter`` with a ``ThreadedAppend`` store: DuckDB): a
transaction shared by several executions is written beside the event loop, one at a time and in
the order the transactions were formed; a lone commit stays on the loop's thread; one execution's
failure costs no other its events; closing the runtime writes what the thread holds first."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import loom_nb as loom
from loom_nb.errors import JournalWriteError
from loom_nb.journal import DuckDBJournal, Event, EventKind
from loom_nb.journal.store import ThreadedAppend
from loom_nb.kernel import FlowRegistry, JournalWriter

ONE_STORE = "the writer thread is DuckDB's (PostgreSQL and the in-memory store commit on the loop)"


def started(eid: str) -> Event:
    return Event(eid, 1, EventKind.EXECUTION_STARTED, None, 1.0, {"flow": "f"})


def completed(eid: str, seq: int = 2) -> Event:
    return Event(eid, seq, EventKind.EXECUTION_COMPLETED, None, 2.0, {"output": eid})


class Threads:
    """Records the thread of every append made through ``writer_thread_appender`` and on the loop."""

    def __init__(self, journal: DuckDBJournal, *, hold: bool = False) -> None:
        self.seen: list[tuple[str, list[str]]] = []
        #: With ``hold``, the thread's first append waits until the test sets it.
        self.gate = threading.Event()
        if not hold:
            self.gate.set()
        inner = journal.writer_thread_appender

        def appender():  # type: ignore[no-untyped-def]
            append = inner()

            def recorded(events, contents):  # type: ignore[no-untyped-def]
                assert self.gate.wait(10)
                self.seen.append((threading.current_thread().name, sorted({e.execution_id for e in events})))
                append(events, contents)

            return recorded

        journal.writer_thread_appender = appender  # type: ignore[method-assign]


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[DuckDBJournal]:
    store = DuckDBJournal(tmp_path / "j.duckdb")
    yield store
    store.close()


async def test_a_shared_transaction_is_written_on_the_writer_thread_and_a_lone_one_on_the_loop(
    journal: DuckDBJournal,
) -> None:
    assert isinstance(journal, ThreadedAppend)
    threads = Threads(journal)
    writer = JournalWriter(journal)
    await asyncio.gather(*(writer.commit([started(f"e{i}")]) for i in range(5)))
    assert threads.seen == [("loom-journal-writer_0", [f"e{i}" for i in range(5)])]
    assert writer.batches == 1
    await writer.commit([completed("e0")])  # alone, nothing in flight: on the loop, not through the thread
    assert len(threads.seen) == 1
    assert [journal.get_execution(f"e{i}").status for i in range(5)] == ["completed"] + ["running"] * 4  # type: ignore[union-attr]
    writer.close()


async def test_transactions_are_written_in_the_order_they_were_formed(journal: DuckDBJournal) -> None:
    """A second shared transaction, and a lone commit, formed while the first waits on the thread
    are written after it: each completion finds its execution's row (an UPDATE before the INSERT
    would leave it ``running``)."""
    threads = Threads(journal, hold=True)
    writer = JournalWriter(journal)
    first = [asyncio.ensure_future(writer.commit([started(f"e{i}")])) for i in range(3)]
    while writer._in_thread == 0:  # the first transaction is handed to the thread, where it waits
        await asyncio.sleep(0)
    second = [asyncio.ensure_future(writer.commit([completed(f"e{i}")])) for i in range(2)]
    for _ in range(5):
        await asyncio.sleep(0)
    lone = asyncio.ensure_future(writer.commit([completed("e2")]))
    for _ in range(5):
        await asyncio.sleep(0)
    assert writer._in_thread == 3 and not lone.done()
    threads.gate.set()
    await asyncio.gather(*first, *second, lone)
    assert [journal.get_execution(f"e{i}").status for i in range(3)] == ["completed"] * 3  # type: ignore[union-attr]
    assert [ids for _, ids in threads.seen] == [["e0", "e1", "e2"], ["e0", "e1"], ["e2"]]
    writer.close()


async def test_one_executions_failure_on_the_thread_never_costs_another_its_events(journal: DuckDBJournal) -> None:
    journal.append([started("bad")])  # a second execution_started for "bad" breaks its key
    threads = Threads(journal)
    writer = JournalWriter(journal)
    outcomes = await asyncio.gather(
        writer.commit([started("ok-1")]),
        writer.commit([started("bad")]),
        writer.commit([started("ok-2")]),
        return_exceptions=True,
    )
    assert outcomes[0] is None and outcomes[2] is None
    error = outcomes[1]
    assert isinstance(error, JournalWriteError) and error.execution_id == "bad" and "'bad'" in str(error)
    assert [name for name, _ in threads.seen] == ["loom-journal-writer_0"] * 4  # shared, then each alone
    assert [ids for _, ids in threads.seen] == [["bad", "ok-1", "ok-2"], ["ok-1"], ["bad"], ["ok-2"]]
    assert writer.batches == 4
    assert len(journal.read("ok-1")) == 1 and len(journal.read("ok-2")) == 1 and len(journal.read("bad")) == 1
    writer.close()


def test_closing_the_runtime_writes_what_the_thread_holds_first(tmp_path: Path) -> None:
    """Many runs end together; the runtime closes as soon as they do: every event is in the file."""

    @loom.tool(idempotent=True)
    async def work(n: int) -> int:
        """Double it."""
        return 2 * n

    def respond(request: loom.ModelRequest) -> loom.ModelResponse:
        if len(request.messages) < 4:
            return loom.ModelResponse.tool_calls([("work", {"n": len(request.messages)})])
        return loom.ModelResponse.text("done")

    path = tmp_path / "runs.duckdb"
    rt = loom.Runtime(DuckDBJournal(path), flows=FlowRegistry())
    agent = loom.Agent(model=loom.ScriptedModel(respond), tools=[work], name="many")
    agent.register(rt)

    async def many() -> list[str]:
        done = await asyncio.gather(*(rt.start(agent.flow_name, "go", execution_id=f"r{i}") for i in range(16)))
        return [d.status for d in done]

    assert asyncio.run(many()) == ["completed"] * 16
    counts = {f"r{i}": len(rt.journal.read(f"r{i}")) for i in range(16)}
    rt.close()
    reopened = DuckDBJournal(path)
    assert {f"r{i}": len(reopened.read(f"r{i}")) for i in range(16)} == counts
    assert all(reopened.get_execution(f"r{i}").status == "completed" for i in range(16))  # type: ignore[union-attr]
    reopened.close()
