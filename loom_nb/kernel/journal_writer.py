"""``JournalWriter``: group commit. One writer per runtime gathers the commits every execution asks
for while the event loop turns and writes them to the journal as ONE transaction.

A commit is submitted (``submit``) and awaited; the writer flushes on the event loop's next turns
(``call_soon``), so every run that reached a commit point in the meantime shares the transaction.
A lone run waits for nothing but its own commit, written on the event loop's thread (the thread
that owns the journal's connection: ``loom_nb.journal.store.check_on_loop``). A transaction shared
by several executions is written on the writer's own thread when the store offers one
(``ThreadedAppend``: DuckDB, on a second connection), so the loop computes the runs' next steps
while it commits (DuckDB's commit is CPU work, done beside the loop on the second core); the
transactions are written one at a time, in the order they were formed, and each submitter is told
its outcome on the loop's thread.

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
from loom_nb.journal.store import JournalStore, ThreadedAppend
from loom_nb.kernel.async_bridge import SerialThread

#: What a shared transaction gave each of its submitters (None: committed), and how many
#: transactions it took.
_Outcomes = tuple[list[BaseException | None], int]


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
        #: The writer thread and its append (made at the first shared transaction), when the store
        #: offers one; transactions handed to it and not yet reported back.
        self._thread = SerialThread("loom-journal-writer")
        self._append_off_loop: Callable[[Sequence[Event], Sequence[ContentBlob]], None] | None = None
        self._in_thread = 0

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

    def close(self) -> None:
        """Wait for the transactions handed to the writer thread, then stop it (idempotent). The
        runtime calls it before it closes the journal."""
        self._thread.close()

    def _flush(self) -> None:
        self._scheduled = False
        batch, self._pending = self._pending, []
        if not batch:
            return
        if (len(batch) > 1 or self._in_thread) and self._offload(batch):
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

    def _offload(self, batch: list[_Pending]) -> bool:
        """Hand ``batch`` to the writer thread (after every transaction handed before it); False
        when the store offers no thread. A lone commit goes there too while others are in flight,
        so the order in which transactions were formed is the order they are written."""
        if self._append_off_loop is None:
            if not isinstance(self.journal, ThreadedAppend):
                return False
            self._append_off_loop = self.journal.writer_thread_appender()
        append = self._append_off_loop
        self._in_thread += 1
        written = self._thread.submit(lambda: _write_batch(append, batch))

        def landed(done: asyncio.Future[_Outcomes]) -> None:
            self._in_thread -= 1
            error = done.exception()
            if error is not None:  # not a store error (those are outcomes): every submitter gets it
                for p in batch:
                    p.settled(error)
                return
            outcomes, transactions = done.result()
            self.batches += transactions
            for p, outcome in zip(batch, outcomes, strict=True):
                p.settled(outcome)

        written.add_done_callback(landed)
        return True


def _write_batch(append: Callable[[Sequence[Event], Sequence[ContentBlob]], None], batch: list[_Pending]) -> _Outcomes:
    """On the writer thread: ``batch`` as one transaction; when it fails, each submitter's part on
    its own (one execution's fault must not fail the others)."""
    if len(batch) > 1:
        try:
            append([e for p in batch for e in p.events], [b for p in batch for b in p.blobs])
        except Exception:
            pass
        else:
            return [None] * len(batch), 1
    outcomes: list[BaseException | None] = []
    for p in batch:
        try:
            append(p.events, p.blobs)
        except Exception as exc:
            outcomes.append(exc)
        else:
            outcomes.append(None)
    return outcomes, len(batch) + (1 if len(batch) > 1 else 0)
