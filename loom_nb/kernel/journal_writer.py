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
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from loom_nb.journal.events import ContentBlob, Event
from loom_nb.journal.store import JournalStore


@dataclass(slots=True)
class _Pending:
    """One submitter's part of the next flush (never changed once made: not frozen only because a
    frozen dataclass's ``__init__`` stores each field with a call of ``object.__setattr__``, and
    one is made per commit)."""

    events: Sequence[Event]
    blobs: Sequence[ContentBlob]
    settled: Callable[[BaseException | None], None]


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

    def submit(
        self,
        events: Sequence[Event],
        blobs: Sequence[ContentBlob],
        settled: Callable[[BaseException | None], None],
    ) -> None:
        """Queue ``events`` and ``blobs`` (one execution's, in ``seq`` order) for the next flush;
        ``settled(None)`` is called once they are committed, ``settled(error)`` with the store's
        error when they could not be (nothing of them written). ``settled`` runs inside the flush,
        on the event loop's thread, before any task wakes up.

        Must be called from a running event loop. The caller must not submit the same execution
        again before ``settled`` ran (``ExecutionContext`` keeps one commit in flight).
        """
        self._pending.append(_Pending(events, blobs, settled))
        if not self._scheduled:
            self._scheduled = True
            loop = asyncio.get_running_loop()
            # Two turns of the loop: every task already woken this turn reaches its commit point
            # and joins the batch before it is written.
            loop.call_soon(loop.call_soon, self._flush)

    async def commit(self, events: Sequence[Event], blobs: Sequence[ContentBlob] = ()) -> None:
        """Submit and wait until committed.

        Raises:
            JournalWriteError: this execution's events could not be committed (nothing of them was).
        """
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def settled(error: BaseException | None) -> None:
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)

        self.submit(events, blobs, settled)
        await done

    def _flush(self) -> None:
        self._scheduled = False
        batch, self._pending = self._pending, []
        if not batch:
            return
        if len(batch) > 1:
            self.batches += 1
            try:
                self.journal.append([e for p in batch for e in p.events], [b for p in batch for b in p.blobs])
            except Exception:  # one execution's fault must not fail the others: each is retried alone
                pass
            except BaseException as exc:  # an interrupt: every submitter gets it, nothing is retried
                for p in batch:
                    p.settled(exc)
                return
            else:
                for p in batch:
                    p.settled(None)
                return
        for p in batch:
            self.batches += 1
            try:
                self.journal.append(p.events, p.blobs)
            except BaseException as exc:  # handed to the one submitter it belongs to (an interrupt too)
                p.settled(exc)
            else:
                p.settled(None)
