"""Following a run another process drives, from the shared journal's ``LISTEN`` channel.

``Run.follow`` starts ``follow_journal`` as a task: it sleeps on a ``LISTEN`` connection and, at
each commit of the execution, hands the new events to the runtime's observers (the live view) and
reads the run's state again. A connection that drops (a restarted server, a terminated backend, a
network cut) is opened again, with a growing pause between attempts (``RECONNECT_FIRST`` up to
``RECONNECT_MOST`` seconds), and the journal is read again at once, so a commit made while nobody
listened is not missed: ``await run`` returns once the journal says the run settled. One warning is
logged per outage. The task ends once the run is settled; an error it did not expect is logged,
never left as "Task exception was never retrieved".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Protocol

from loom_nb.journal.events import TERMINAL_STATUSES, Event, EventKind
from loom_nb.journal.store import TailReader
from loom_nb.runtime import Runtime

log = logging.getLogger("loom_nb")

#: Seconds before the first attempt to open a dropped ``LISTEN`` connection again.
RECONNECT_FIRST = 0.1
#: Longest pause between two attempts (the pause doubles from ``RECONNECT_FIRST``).
RECONNECT_MOST = 5.0


class FollowedRun(Protocol):
    """What following needs of a run (``Run`` is one; this module never imports it: ``Run.follow``
    imports this one)."""

    @property
    def id(self) -> str:
        """The execution followed."""
        ...

    @property
    def runtime(self) -> Runtime:
        """The runtime whose observers hear the new events."""
        ...

    @property
    def status(self) -> str:
        """The run's status as last read."""
        ...

    @property
    def moving(self) -> bool:
        """True while an answer given here is being driven on."""
        ...

    def refresh(self) -> None:
        """Read the run's state from the journal again."""
        ...


async def follow_journal(run: FollowedRun, journal: Any) -> None:
    """Follow ``run`` from ``journal`` (a shared journal with ``async_listener``) until it settles."""
    conn = await _connect(run, journal, announced=False)
    last = run.runtime.journal.read(run.id)
    seen = [last[-1].seq if last else 0]

    def handed_on(event: Event) -> None:  # this process's own commits (an answer) are handed on already
        seen[0] = max(seen[0], event.seq)

    stop_tracking = run.runtime.observe(handed_on, execution_id=run.id)
    try:
        run.refresh()  # what committed before LISTEN began
        while run.status not in TERMINAL_STATUSES or run.moving:
            try:
                async for note in conn.notifies():
                    if note.payload == run.id:
                        break
                _catch_up(run, seen)
            except Exception as exc:  # the connection (or a read) failed: listen again, read again
                log.warning("loom_nb: following run %s: the journal connection failed (%s); reconnecting", run.id, exc)
                with contextlib.suppress(Exception):
                    await conn.close()
                conn = await _connect(run, journal, announced=True)
                _catch_up(run, seen)
    finally:
        stop_tracking()
        with contextlib.suppress(Exception):
            await conn.close()


async def _connect(run: FollowedRun, journal: Any, *, announced: bool) -> Any:
    """A new ``LISTEN`` connection, trying again with a growing pause until one opens."""
    delay = RECONNECT_FIRST
    while True:
        try:
            return await journal.async_listener()
        except Exception as exc:
            if not announced:
                log.warning("loom_nb: following run %s: cannot listen on the journal (%s); retrying", run.id, exc)
                announced = True
            await asyncio.sleep(delay)
            delay = min(delay * 2, RECONNECT_MOST)


#: The event kinds after which a follower reads the run's state again (its status or open gates
#: may have changed); after any other (a stream chunk, a step) only the new events are handed on.
STATE_KINDS = frozenset(k.value for k in EventKind if k.value.startswith(("execution_", "gate_")))


def _catch_up(run: FollowedRun, seen: list[int]) -> None:
    """Hand on the events committed since ``seen[0]``, reading only those (``TailReader``), and the
    run's state again when they may have changed it (``STATE_KINDS``): a long run's follower pays
    for what is new at each commit, not for the whole run."""
    journal = run.runtime.journal
    new = events_after(journal, run.id, seen[0])
    if not run.moving and (not new or any(e.kind in STATE_KINDS for e in new)):
        run.refresh()
        # what committed meanwhile too, so the events handed on hold all the state shows
        new += events_after(journal, run.id, new[-1].seq if new else seen[0])
    if new:
        run.runtime.observers.notify_events(new)


def events_after(journal: Any, execution_id: str, seq: int) -> list[Event]:
    """The execution's events after ``seq``: the tail alone where the store reads one."""
    if isinstance(journal, TailReader):
        return journal.read_after(execution_id, seq)
    return [e for e in journal.read(execution_id) if e.seq > seq]


def log_unexpected(task: asyncio.Future[None]) -> None:
    """A follower's done-callback: log an error it ended with (so none is left unretrieved)."""
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        log.error("loom_nb: following a run stopped: %s: %s", type(exc).__name__, exc, exc_info=exc)
