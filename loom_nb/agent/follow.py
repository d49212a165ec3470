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

from loom_nb.journal.events import TERMINAL_STATUSES, Event
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


def _catch_up(run: FollowedRun, seen: list[int]) -> None:
    """Read the run's state and hand on the events committed since ``seen[0]``."""
    if not run.moving:
        run.refresh()  # before the read: the events handed on hold all the state shows
    new = [e for e in run.runtime.journal.read(run.id) if e.seq > seen[0]]
    if new:
        run.runtime.observers.notify_events(new)


def log_unexpected(task: asyncio.Future[None]) -> None:
    """A follower's done-callback: log an error it ended with (so none is left unretrieved)."""
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        log.error("loom_nb: following a run stopped: %s: %s", type(exc).__name__, exc, exc_info=exc)
