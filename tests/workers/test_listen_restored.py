"""A worker whose LISTEN connection the server ends (``pg_terminate_backend``, as a restart or a
dropped network would) listens again: a submit still wakes it at once, not at its next poll."""

from __future__ import annotations

import asyncio
import time

import psycopg

from loom_nb.runtime import Runtime
from loom_nb.worker import Worker
from tests import stores
from tests.workers.worker_agents import clerk

ONE_STORE = "workers need the shared PostgreSQL journal"
#: Longer than the test waits for the run: a pickup by the poll, not by a NOTIFY, fails it.
POLL_SECONDS = 60.0


async def listening_backends(channel: str, *, other_than: int | None = None, timeout: float = 10.0) -> list[int]:
    """The server processes LISTENing on ``channel`` (waits for one that is not ``other_than``)."""
    deadline = time.monotonic() + timeout
    while True:
        with psycopg.connect(stores.POSTGRES, autocommit=True) as admin:
            rows = admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE query ILIKE 'LISTEN%%' AND query LIKE %s",
                [f"%{channel}%"],
            ).fetchall()
        pids = [int(r[0]) for r in rows if int(r[0]) != other_than]
        if pids:
            return pids
        assert time.monotonic() < deadline, f"nobody LISTENs on {channel} again"
        await asyncio.sleep(0.05)


async def wait_completed(rt: Runtime, eid: str, timeout: float) -> float:
    """Seconds until ``eid`` is completed in the journal (fails past ``timeout``)."""
    start = time.perf_counter()
    while (record := rt.journal.get_execution(eid)) is None or record.status != "completed":
        assert time.perf_counter() - start < timeout, f"{eid} is {record and record.status} after {timeout} s"
        await asyncio.sleep(0.01)
    return time.perf_counter() - start


async def test_a_worker_listens_again_after_the_server_ends_its_listen_connection(_postgres_server: str) -> None:
    rt = Runtime.open(stores.new_schema("relisten"))
    stop = asyncio.Event()
    worker = asyncio.create_task(Worker(rt, concurrency=2, poll_seconds=POLL_SECONDS).run(stop=stop))
    try:
        clerk.submit("a", "job-a", runtime=rt, view=False)
        before = await wait_completed(rt, "job-a", timeout=10)
        (first,) = await listening_backends(rt.journal.channel)
        with psycopg.connect(stores.POSTGRES, autocommit=True) as admin:
            assert admin.execute("SELECT pg_terminate_backend(%s)", [first]).fetchone() == (True,)
        await listening_backends(rt.journal.channel, other_than=first)

        clerk.submit("b", "job-b", runtime=rt, view=False)
        after = await wait_completed(rt, "job-b", timeout=10)
        print(f"pickup to completion: {before * 1000:.0f} ms before the drop, {after * 1000:.0f} ms after it")
        assert not worker.done()
    finally:
        stop.set()
        await asyncio.wait_for(worker, timeout=10)
        rt.close()
