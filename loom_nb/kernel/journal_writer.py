"""``JournalWriter``: group commit. One writer per runtime gathers the commits every execution asks
for while the event loop turns and writes them to the journal as ONE transaction.

A commit is submitted (``submit``) and awaited; the writer flushes on the event loop's next turns
(``call_soon``), so every run that reached a commit point in the meantime shares the transaction.
A lone run waits for nothing but its own commit. The flush runs on the event loop's thread, the
thread that owns the journal's connection (``loom_nb.journal.store.check_on_loop``).

When the shared transaction fails, the writer commits each execution's part on its own, so one
execution's failure (a duplicate ``seq`` written by another runtime, a payload the store refuses)
never costs another execution its events; each submitter gets its own outcome, and a failure is
the store's ``JournalWriteError``, which names the execution.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from loom_nb.journal.events import ContentBlob, Event
from loom_nb.journal.store import JournalStore


@dataclass(frozen=True, slots=True)
class _Pending:
    events: Sequence[Event]
    blobs: Sequence[ContentBlob]
    done: asyncio.Future[None]


class JournalWriter:
    """Batches the commits of every execution of one runtime into one journal transaction.

    Args:
        journal: The store written to.

    Attributes:
        batches: How many transactions the writer attempted (a failed batch's per-execution
            fallback counts one per execution).
    """

    def __init__(self, journal: JournalStore) -> None:
        self.journal = journal
        self._pending: list[_Pending] = []
        self._scheduled = False
        self.batches = 0

    def submit(self, events: Sequence[Event], blobs: Sequence[ContentBlob] = ()) -> asyncio.Future[None]:
        """Queue ``events`` and ``blobs`` (one execution's, in ``seq`` order) for the next flush and
        return the future that settles when they are committed (or with the store's error).

        Must be called from a running event loop. The caller must not submit the same execution
        again before this future settles (``ExecutionContext.commit`` holds a lock for it).
        """
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._pending.append(_Pending(events, blobs, done))
        if not self._scheduled:
            self._scheduled = True
            # Two turns of the loop: every task already woken this turn reaches its commit point
            # and joins the batch before it is written.
            loop.call_soon(loop.call_soon, self._flush)
        return done

    async def commit(self, events: Sequence[Event], blobs: Sequence[ContentBlob] = ()) -> None:
        """Submit and wait until committed.

        Raises:
            JournalWriteError: this execution's events could not be committed (nothing of them was).
        """
        await self.submit(events, blobs)

    def _flush(self) -> None:
        self._scheduled = False
        batch, self._pending = self._pending, []
        live = [p for p in batch if not p.done.cancelled()]
        if not live:
            return
        if len(live) > 1:
            events = [e for p in live for e in p.events]
            blobs = [b for p in live for b in p.blobs]
            self.batches += 1
            try:
                self.journal.append(events, blobs)
            except Exception:
                pass
            else:
                for p in live:
                    if not p.done.done():
                        p.done.set_result(None)
                return
        for p in live:
            self.batches += 1
            try:
                self.journal.append(p.events, p.blobs)
            except Exception as exc:
                if not p.done.done():
                    p.done.set_exception(exc)
            else:
                if not p.done.done():
                    p.done.set_result(None)
