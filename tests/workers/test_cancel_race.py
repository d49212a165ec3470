"""A cancel recorded from another process while the driver commits at the same moment (PostgreSQL).

The notebook's cancel reads the run, then appends ``execution_cancelled``; a worker driving the run
may commit in between, taking the seqs the cancel meant to use. The race is forced: the notebook's
journal answers reads with the run as it was before the worker's commit until its first write. The
cancel's append is refused by the ``(execution_id, seq)`` key, it reads the run again and records
itself after the worker's commit (the call in flight in doubt); the worker's next commit is refused
and its run stops. When the worker's commit ended the run, the cancel says so and records nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from loom_nb.errors import JournalWriteError, UsageError
from loom_nb.journal.events import Event
from loom_nb.journal.postgres_store import PostgresJournal
from loom_nb.journal.store import write_error
from loom_nb.kernel import Engine, ExecutionContext, FlowRegistry
from loom_nb.testing import FakeClock, SequentialIds
from tests import stores

ONE_STORE = "the race is between processes on the shared PostgreSQL journal"


@pytest.fixture
def url(_postgres_server: Any) -> Iterator[str]:
    yield stores.new_schema("i13b-cancel-race")
    stores.drop_schemas()


def _engine(url: str, charge: Any) -> Engine:
    flows = FlowRegistry()

    async def pays(ctx: ExecutionContext, inp: Any) -> Any:
        await ctx.gate("ok", "Approval")
        return await ctx.execute("charge", {"cents": 500})

    async def waits(ctx: ExecutionContext, inp: Any) -> Any:
        return await ctx.gate("ok", "Approval")

    flows.register(pays, name="pays")
    flows.register(waits, name="waits")
    rt = Engine(PostgresJournal(url), clock=FakeClock(tick=1.0), ids=SequentialIds(), flows=flows)
    rt.effects.register("charge", charge, idempotent=False)
    return rt


def _stale_until_written(journal: PostgresJournal, execution_id: str) -> list[int]:
    """Make ``journal`` read ``execution_id`` as it is now until its first append (the notebook read
    the run just before the worker committed); returns the list of that journal's append sizes."""
    before = journal.read(execution_id)
    appends: list[int] = []
    real_read, real_append = journal.read, journal.append

    def read(eid: str) -> list[Event]:
        return list(before) if eid == execution_id and not appends else real_read(eid)

    def append(events: Sequence[Event], contents: Sequence[Any] = ()) -> None:
        appends.append(len(events))
        real_append(events, contents)

    journal.read = read  # type: ignore[method-assign]
    journal.append = append  # type: ignore[method-assign]
    return appends


async def test_a_cancel_that_meets_the_workers_commit_records_itself_after_it(url: str) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def charge(value: Any) -> Any:
        started.set()
        await release.wait()
        return {"charged": value["cents"]}

    notebook, worker = _engine(url, charge), _engine(url, charge)
    try:
        assert (await notebook.start("pays", execution_id="pay-1")).status == "suspended"
        appends = _stale_until_written(notebook.journal, "pay-1")  # type: ignore[arg-type]
        driving = asyncio.create_task(worker.resume("pay-1", "ok", {"approved": True}))
        await asyncio.wait_for(started.wait(), 10)  # the worker committed the resume and the call started

        result = await notebook.cancel("pay-1", "the customer called")

        assert result.status == "cancelled"
        assert len(appends) == 2  # refused once (the worker had taken the seq), then recorded
        events = worker.journal.read("pay-1")
        seqs = [e.seq for e in events]
        assert seqs == list(range(1, len(events) + 1))
        kinds = [str(e.kind) for e in events]
        assert kinds[-3:] == ["step_started", "step_in_doubt", "execution_cancelled"]
        assert events[-1].data == {"reason": "the customer called"}
        release.set()  # the worker's call returns; its commit is refused (the cancel took that seq)
        with pytest.raises(JournalWriteError, match="'pay-1'"):
            await asyncio.wait_for(driving, 10)
        assert worker.journal.get_execution("pay-1").status == "cancelled"  # type: ignore[union-attr]
        assert [str(e.kind) for e in worker.journal.read("pay-1")] == kinds
    finally:
        release.set()
        notebook.journal.close()
        worker.journal.close()


async def test_a_cancel_that_meets_the_runs_last_commit_says_it_finished_first(url: str) -> None:
    notebook, worker = _engine(url, dict), _engine(url, dict)
    try:
        assert (await notebook.start("waits", execution_id="w-1")).status == "suspended"
        appends = _stale_until_written(notebook.journal, "w-1")  # type: ignore[arg-type]
        assert (await worker.resume("w-1", "ok", {"approved": True})).status == "completed"

        with pytest.raises(UsageError, match=r"'w-1' completed \(its driver committed that first\).*nothing to cancel"):
            await notebook.cancel("w-1", "too late")

        assert appends == [1]  # the one refused attempt (execution_cancelled); nothing recorded after
        assert worker.journal.get_execution("w-1").status == "completed"  # type: ignore[union-attr]
        assert str(worker.journal.read("w-1")[-1].kind) == "execution_completed"
    finally:
        notebook.journal.close()
        worker.journal.close()


async def test_a_cancel_whose_append_fails_for_another_reason_raises_that_failure(url: str) -> None:
    notebook = _engine(url, dict)
    try:
        assert (await notebook.start("waits", execution_id="w-2")).status == "suspended"
        tries: list[int] = []

        def failing(events: Sequence[Event], contents: Sequence[Any] = ()) -> None:
            tries.append(len(events))
            raise write_error(notebook.journal.location, events, OSError("the server went away"))

        notebook.journal.append = failing  # type: ignore[method-assign]
        with pytest.raises(JournalWriteError, match=r"'w-2'.*the server went away"):
            await notebook.cancel("w-2", "not needed")
        assert tries == [1]  # no retry: nothing else was committed (the last seq did not move)
        assert notebook.journal.get_execution("w-2").status == "suspended"  # type: ignore[union-attr]
    finally:
        notebook.journal.close()
