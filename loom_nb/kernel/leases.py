"""``Leases``: who drives an execution on a shared journal (``LeasingStore``).

A process drives an execution only while it holds the execution's lease: it claims it before
driving (``claim``), renews it in the background (``hold``: a heartbeat every third of
``seconds``), gives it up when done (``let_go``), refuses to commit once it lost it (``check``), and
confirms it at the database before a non-idempotent effect runs (``confirm``: fencing). On a
journal without leases every claim succeeds at once and nothing else happens.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from typing import Any, Protocol

from loom_nb.errors import LeaseLostError
from loom_nb.journal.store import JournalStore, LeasingStore
from loom_nb.kernel.store_reads import StoreCapabilities

log = logging.getLogger("loom_nb")


def dead_here(owner: str) -> bool:
    """True when ``owner`` (``host:pid:engine``) names a process of this host that no longer runs."""
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


class JournalHolder(Protocol):
    """What ``Leases`` reads of the engine: the journal it writes to now."""

    @property
    def journal(self) -> JournalStore:
        """The engine's journal."""
        ...


class Leases:
    """The leases one engine holds on a shared journal, and the heartbeats that renew them.

    Args:
        holder: Whose journal the leases are on (read at each use).
        capabilities: Whether that journal offers leases (``LeasingStore``), asked once per journal.
        owner: Who this engine is in the ``leases`` table: host, process id and engine.

    Attributes:
        owner: As given.
        seconds: How long a lease lasts without a heartbeat.
    """

    def __init__(self, holder: JournalHolder, capabilities: StoreCapabilities, owner: str) -> None:
        self._holder = holder
        self._capabilities = capabilities
        self.owner = owner
        self.seconds = 30.0
        self._heartbeats: dict[str, asyncio.Task[None]] = {}
        self._lost: dict[str, str] = {}
        #: The task driving each execution this process holds the lease of, so a heartbeat that
        #: finds the lease lost stops the work in flight (``_heartbeat``); and the executions whose
        #: driver it so cancelled (``cut_for_lost_lease`` turns that cancel into ``LeaseLostError``).
        self._drivers: dict[str, asyncio.Task[Any]] = {}
        self._cut: set[str] = set()

    def store(self) -> LeasingStore | None:
        """The journal as a ``LeasingStore``, or None when it keeps no leases."""
        journal = self._holder.journal
        return journal if self._capabilities.offers(journal, LeasingStore) else None  # type: ignore[return-value]

    def claim(self, execution_id: str) -> bool:
        """Take the execution's lease (True at once on a journal without leases). A lease held by a
        process of this host that has died is taken over without waiting for it to expire."""
        leases = self.store()
        if leases is None:
            return True
        if leases.claim_lease(execution_id, self.owner, self.seconds):
            return True
        holder = leases.lease_owner(execution_id)
        if holder is not None and dead_here(holder):
            return leases.take_over_lease(execution_id, self.owner, holder, self.seconds)
        return holder is None and leases.claim_lease(execution_id, self.owner, self.seconds)

    def hold(self, execution_id: str) -> None:
        """Renew the lease in the background while this process drives the execution."""
        leases = self.store()
        if leases is None or execution_id in self._heartbeats:
            return
        self._lost.pop(execution_id, None)
        driver = asyncio.current_task()
        if driver is not None:
            self._drivers[execution_id] = driver
        self._heartbeats[execution_id] = asyncio.get_running_loop().create_task(
            self._heartbeat(leases, execution_id), name=f"loom-lease-{execution_id}"
        )

    async def _heartbeat(self, leases: LeasingStore, execution_id: str) -> None:
        while True:
            await asyncio.sleep(self.seconds / 3)
            try:
                held = leases.renew_lease(execution_id, self.owner, self.seconds)
            except Exception as exc:  # a blip of the server: try again at the next beat
                log.warning("could not renew the lease of execution %s: %s", execution_id, exc)
                continue
            if not held:
                self._lose(leases, execution_id)
                return

    def _lose(self, leases: LeasingStore, execution_id: str) -> None:
        """Mark the execution's lease lost (its next commit is refused) and cancel the task driving
        it here: a call in flight (a tool awaiting its answer, a model streaming) stops instead of
        finishing for an owner that is no longer this process."""
        self._lost[execution_id] = leases.lease_owner(execution_id) or ""
        driver = self._drivers.pop(execution_id, None)
        if driver is not None and not driver.done() and driver is not asyncio.current_task():
            self._cut.add(execution_id)
            driver.cancel(f"the lease of execution {execution_id!r} was lost")

    def cut_for_lost_lease(self, execution_id: str) -> bool:
        """True (once) when the heartbeat cancelled the execution's driver because the lease was lost:
        that cancel is a lost lease, not a cancel someone asked for."""
        if execution_id not in self._cut:
            return False
        self._cut.discard(execution_id)
        return True

    def confirm(self, execution_id: str) -> None:
        """Check at the database, now, that this process still holds the execution's lease (renewing
        it): see ``Engine.confirm_lease``.

        Raises:
            LeaseLostError: another process took the execution over; the effect does not run.
        """
        leases = self.store()
        if leases is None or execution_id not in self._heartbeats:
            return  # no shared journal, or not driven under a lease here (a pure replay, a test double)
        self.check(execution_id)
        if not leases.renew_lease(execution_id, self.owner, self.seconds):
            self._lose(leases, execution_id)
            self.check(execution_id)

    def let_go(self, execution_id: str) -> None:
        """Stop the heartbeat and give the lease up (unless it was lost to another owner)."""
        task = self._heartbeats.pop(execution_id, None)
        if task is not None:
            task.cancel()
        self._drivers.pop(execution_id, None)
        leases = self.store()
        if leases is not None and self._lost.pop(execution_id, None) is None:
            try:
                leases.release_lease(execution_id, self.owner)
            except Exception as exc:  # it expires on its own
                log.warning("could not release the lease of execution %s: %s", execution_id, exc)

    def check(self, execution_id: str) -> None:
        """Refuse a commit of an execution whose lease this process lost (called before each commit).

        Raises:
            LeaseLostError: another process took the execution over; this run stops here.
        """
        if execution_id in self._lost:
            holder = self._lost[execution_id]
            location = self._holder.journal.location
            error = LeaseLostError(
                f"this process ({self.owner}) lost the lease of execution {execution_id!r} on the journal "
                f"{location} (no heartbeat for {self.seconds:g} s; now held by "
                f"{holder or 'nobody'}): it stopped before writing more; the owner of the lease goes on with it. "
                "If this process was merely slow, raise runtime.lease_seconds."
            )
            error.location, error.execution_id, error.owner = location, execution_id, holder
            raise error
