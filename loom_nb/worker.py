"""``Worker``: runs the executions submitted to a shared PostgreSQL journal (``loom-nb worker``).

The queue is the executions table: ``Engine.submit`` (``agent.submit``, ``agent.map(on="workers")``)
records an execution ``queued``; a worker takes queued ones with ``PostgresJournal.claim_queued``
(``FOR UPDATE SKIP LOCKED``, and the lease in the same transaction), so two workers never take the
same one, and drives each through ``Engine.recover(execution_ids=[id])``. It also picks up running
executions whose lease expired (a worker that died: SIGKILL, a lost machine), which ``recover``
continues from their last committed event (no completed call is made again; a non-idempotent call
cut in flight goes in doubt), and runs on executions a gate's answer resumed without a driver
(answered from a notebook: ``Run.resume`` on a submitted run records the answer only).

It sleeps on the journal's ``LISTEN`` channel (every append NOTIFYs it), so a submit or an answer
wakes it at once; ``poll_seconds`` is only the fallback for a lost notification and for leases that
expire while nothing is appended. When the server ends the LISTEN connection (a restart, a dropped
network, ``pg_terminate_backend``) it connects and LISTENs again (after 50 ms, doubling up to 5 s
between tries), then looks at the queue once for what was appended meanwhile.

A run it drives that another process cancelled (``Run.cancel()`` from a notebook: the cancel, with
the step cut in flight put in doubt when not idempotent, is recorded there) is stopped here as soon
as that commit's NOTIFY arrives: its task is cancelled (a tool call in flight is abandoned, its
answer never recorded) and its lease released, rather than running on until its next commit is
refused by the ``(execution_id, seq)`` key.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from contextlib import suppress
from typing import Any

from loom_nb.errors import UsageError
from loom_nb.kernel.async_bridge import run_sync
from loom_nb.runtime import Runtime

log = logging.getLogger("loom_nb")
#: Most seconds between two looks for executions of flows a worker does not have.
_OTHER_FLOWS_LAST = 60.0
#: Seconds before the first try to LISTEN again after the connection dropped, and the most between
#: tries (doubling; never more than ``poll_seconds``).
_RELISTEN_FIRST = 0.05
_RELISTEN_LAST = 5.0


class Worker:
    """Runs queued executions of a shared journal, at most ``concurrency`` at once.

    Args:
        runtime: A runtime on a ``PostgresJournal`` (the flows and agents to run registered, or
            importable: an ``Agent`` registers its flow when constructed).
        concurrency: How many executions it drives at once.
        poll_seconds: Longest sleep between looks at the queue when no notification comes.

    Raises:
        UsageError: the runtime's journal is not a shared (PostgreSQL) journal.
    """

    def __init__(self, runtime: Runtime, *, concurrency: int = 16, poll_seconds: float = 1.0) -> None:
        if not hasattr(runtime.journal, "claim_queued"):
            raise UsageError(
                f"a worker needs a shared PostgreSQL journal (postgresql://...), not {runtime.journal.location}: "
                "open the runtime with Runtime.open('postgresql://user@host/db')"
            )
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise UsageError(f"concurrency must be a whole number of at least 1, not {concurrency!r}")
        self.runtime = runtime
        self.concurrency = concurrency
        self.poll_seconds = poll_seconds
        self._tasks: dict[str, asyncio.Task[Any]] = {}
        #: Executions named by a NOTIFY since the last look (their commits: maybe a cancel elsewhere).
        self._notified: set[str] = set()
        #: Executions whose task this worker stopped because another process cancelled the run.
        self._stopped: set[str] = set()
        #: How many executions this worker drove to an end, suspension or stop.
        self.finished = 0
        #: Flows it does not have whose waiting executions it logged (once each), and when it looks again.
        self._flows_noted: set[str] = set()
        self._next_flow_check = 0.0
        self._flow_check_every = 0.5

    def _take(self) -> None:
        """Start driving what the queue and the dead workers left, up to the free slots."""
        journal: Any = self.runtime.journal
        rt = self.runtime
        free = self.concurrency - len(self._tasks)
        if free <= 0:
            return
        # Only the flows this process has: a run of another flow stays queued for a worker that has
        # it (taking it would fail its recovery and free it again, over and over).
        flows = rt.flows.names()
        ids = journal.claim_queued(rt.lease_owner, rt.lease_seconds, free, flows)
        if len(ids) < free:
            ids += [eid for eid in journal.expired_running(free - len(ids), flows) if eid not in self._tasks]
        self._note_other_flows(journal, flows)
        for eid in ids:
            if eid not in self._tasks and not rt.is_active(eid):
                self._tasks[eid] = asyncio.get_running_loop().create_task(self._drive(eid), name=f"loom-worker-{eid}")

    def _note_other_flows(self, journal: Any, flows: list[str]) -> None:
        """Log once per flow that executions wait for a flow this worker does not have (looked at
        after 1 s, then at doubling intervals up to ``_OTHER_FLOWS_LAST`` seconds)."""
        now = asyncio.get_running_loop().time()
        if now < self._next_flow_check:
            return
        self._flow_check_every = min(self._flow_check_every * 2, _OTHER_FLOWS_LAST)
        self._next_flow_check = now + self._flow_check_every
        for flow, waiting in journal.waiting_flows(flows).items():
            if flow not in self._flows_noted:
                self._flows_noted.add(flow)
                log.warning(
                    "loom_nb worker: %d execution(s) of flow %r wait for a worker that has it; this one does not "
                    "(it has %s): start a worker with the module that defines it (loom-nb worker --import MODULE)",
                    waiting,
                    flow,
                    ", ".join(map(repr, flows)) or "no flows",
                )

    def _stop_cancelled_elsewhere(self) -> None:
        """Stop driving the runs another process cancelled since the last look (their NOTIFY came)."""
        notified, self._notified = self._notified, set()
        for eid in notified & self._tasks.keys():
            record = self.runtime.journal.get_execution(eid)
            if record is not None and record.status == "cancelled" and eid not in self._stopped:
                log.info("loom_nb worker: execution %s was cancelled by another process; stopping it here", eid)
                self._stopped.add(eid)
                self._tasks[eid].cancel(f"execution {eid} was cancelled by another process")

    async def _drive(self, execution_id: str) -> None:
        try:
            await self.runtime.recover(execution_ids=[execution_id])
        except (Exception, asyncio.CancelledError) as exc:
            if execution_id in self._stopped:
                # Cancelled elsewhere: what this worker still had to commit is refused (the cancel
                # took those seqs), which is expected.
                log.info("loom_nb worker: execution %s stopped (cancelled elsewhere: %s)", execution_id, exc)
            elif isinstance(exc, asyncio.CancelledError):
                raise
            else:
                log.exception("loom_nb worker: execution %s stopped", execution_id)
        finally:
            self._tasks.pop(execution_id, None)
            self._stopped.discard(execution_id)
            self.finished += 1

    async def run(self, *, until_idle: bool = False, stop: asyncio.Event | None = None) -> int:
        """Work until ``stop`` is set (or, with ``until_idle``, until the queue is empty and nothing
        runs). Returns how many executions it drove."""
        wake = asyncio.Event()
        journal: Any = self.runtime.journal
        listening = [await journal.async_listener()]  # the LISTEN connection now (replaced when it drops)

        async def listen() -> None:
            delay = _RELISTEN_FIRST
            while True:
                try:
                    async for note in listening[0].notifies():
                        self._notified.add(note.payload)
                        wake.set()
                        delay = _RELISTEN_FIRST
                except Exception as exc:  # the server ended the connection (restart, terminate, network)
                    log.warning("loom_nb worker: LISTEN connection lost (%s); listening again", exc)
                with suppress(Exception):
                    await listening[0].close()
                while True:  # poll meanwhile (the main loop's timeout), and LISTEN again as soon as it can
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, self.poll_seconds, _RELISTEN_LAST)
                    try:
                        listening[0] = await journal.async_listener()
                        break
                    except Exception as exc:
                        log.warning("loom_nb worker: cannot LISTEN again yet (%s)", exc)
                wake.set()  # what was appended while nobody listened notified no one: look at the queue

        listener = asyncio.get_running_loop().create_task(listen(), name="loom-worker-listen")
        try:
            while stop is None or not stop.is_set():
                wake.clear()
                self._stop_cancelled_elsewhere()
                self._take()
                if until_idle and not self._tasks:
                    return self.finished
                waits: set[asyncio.Future[Any]] = {asyncio.ensure_future(wake.wait()), *self._tasks.values()}
                if stop is not None:
                    waits.add(asyncio.ensure_future(stop.wait()))
                await asyncio.wait(waits, timeout=self.poll_seconds, return_when=asyncio.FIRST_COMPLETED)
                for w in waits:
                    if w not in self._tasks.values() and not w.done():
                        w.cancel()
            return self.finished
        finally:
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)
            with suppress(Exception):
                await listening[0].close()
            for task in list(self._tasks.values()):
                task.cancel()
            if self._tasks:
                await asyncio.gather(*self._tasks.values(), return_exceptions=True)


def run_worker(
    journal: str,
    modules: list[str],
    *,
    concurrency: int = 16,
    lease_seconds: float | None = None,
    until_idle: bool = False,
) -> int:
    """``loom-nb worker``: import ``modules`` (they define the agents and flows), open the journal,
    and work (forever, or ``until_idle``). Returns how many executions it drove."""
    for name in modules:
        importlib.import_module(name)
    runtime = Runtime.open(journal)
    if lease_seconds is not None:
        runtime.lease_seconds = lease_seconds
    try:
        return run_sync(
            Worker(runtime, concurrency=concurrency).run(until_idle=until_idle),
            sync_name="run_worker",
            await_hint="await Worker(runtime).run()",
        )
    finally:
        runtime.close()
