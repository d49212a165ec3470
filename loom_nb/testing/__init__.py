"""Fakes for every I/O seam: a fake clock, sequential ids, seeded randomness, an in-memory
journal, ``ScriptedModel``, a crash switch that kills the process after the Nth committed event, and
a journal whose Nth append fails."""

from __future__ import annotations

import os
import random as _random
import sys
import time
from collections.abc import Sequence

from loom_nb.journal.events import ContentBlob, Event, ExecutionRecord
from loom_nb.journal.memory_store import InMemoryJournal
from loom_nb.journal.store import JournalStore, write_error
from loom_nb.providers.scripted import ScriptedModel


class FakeClock:
    """A clock that only moves when told to; ``sleep`` advances it instantly.

    Args:
        start: The initial time (epoch seconds).
        tick: How much every ``now()`` call advances it (0: frozen).
    """

    def __init__(self, start: float = 1_767_225_600.0, tick: float = 0.0) -> None:
        self.t = start
        self.tick = tick
        self.slept: list[float] = []

    def now(self) -> float:
        """The current fake time."""
        value = self.t
        self.t += self.tick
        return value

    async def sleep(self, seconds: float) -> None:
        """Advance the clock by ``seconds`` without waiting."""
        self.slept.append(seconds)
        self.t += seconds

    def advance(self, seconds: float) -> None:
        """Move time forward."""
        self.t += seconds


class SequentialIds:
    """Ids ``<prefix>1``, ``<prefix>2``..."""

    def __init__(self, prefix: str = "exec-") -> None:
        self.prefix = prefix
        self.n = 0

    def new_id(self) -> str:
        """The next id."""
        self.n += 1
        return f"{self.prefix}{self.n}"


class SeededRandom:
    """A seeded random source for ``ctx.random()``."""

    def __init__(self, seed: int = 0) -> None:
        self._r = _random.Random(seed)

    def random(self) -> float:
        """A float in [0, 1)."""
        return self._r.random()


class JournalProxy:
    """A ``JournalStore`` that delegates to ``inner`` and counts what it commits and reads.

    Attributes:
        appends: How many appends (commits) went through.
        committed: How many events they held.
        append_seconds: Wall time spent in appends.
        reads: How many times an execution's events were read (``read``).
    """

    def __init__(self, inner: JournalStore) -> None:
        self.inner = inner
        self.location = inner.location
        self.appends = 0
        self.committed = 0
        self.append_seconds = 0.0
        self.reads = 0

    def append(self, events: Sequence[Event], contents: Sequence[ContentBlob] = ()) -> None:
        """Delegate, counting the commit and timing it."""
        began = time.perf_counter()
        self.inner.append(events, contents)
        self.append_seconds += time.perf_counter() - began
        self.appends += 1
        self.committed += len(events)

    def read(self, execution_id: str) -> list[Event]:
        """Delegate, counting the read."""
        self.reads += 1
        return self.inner.read(execution_id)

    def get_execution(self, execution_id: str) -> ExecutionRecord | None:
        """Delegate."""
        return self.inner.get_execution(execution_id)

    def list_executions(self, status: str | None = None) -> list[ExecutionRecord]:
        """Delegate."""
        return self.inner.list_executions(status)

    def get_content(self, digest: str) -> bytes | None:
        """Delegate."""
        return self.inner.get_content(digest)

    def content_info(self, digest: str) -> tuple[int, str, bool] | None:
        """Delegate."""
        return self.inner.content_info(digest)

    def close(self) -> None:
        """Delegate."""
        self.inner.close()


class CrashingJournal(JournalProxy):
    """Kills the process (``os._exit``) right after the commit that makes the total number of
    committed events reach ``crash_after``: a real crash for subprocess tests.

    Args:
        inner: The real journal.
        crash_after: Event count after which to die (None: never).
        exit_code: The exit status of the crash.
    """

    def __init__(self, inner: JournalStore, crash_after: int | None, *, exit_code: int = 86) -> None:
        super().__init__(inner)
        self.crash_after = crash_after
        self.exit_code = exit_code

    def append(self, events: Sequence[Event], contents: Sequence[ContentBlob] = ()) -> None:
        """Append, then die if the crash point is reached."""
        super().append(events, contents)
        if self.crash_after is not None and self.committed >= self.crash_after:
            sys.stdout.flush()
            os._exit(self.exit_code)


class FailingJournal(JournalProxy):
    """Fails the ``fail_at``-th append (counting every attempt, failed ones too) the way a real
    store does: ``JournalWriteError`` caused by ``error``, with nothing written.

    Args:
        inner: The real journal.
        fail_at: The 1-based append attempt to fail (None: never).
        persistent: Keep failing every later append too, until ``heal()`` (a full disk); otherwise
            only that one attempt fails (a transient fault: a busy connection).
        error: The cause to inject (an ``OSError`` "No space left on device" by default).

    Attributes:
        attempts: How many appends were attempted.
        failures: How many of them failed.
    """

    def __init__(
        self,
        inner: JournalStore,
        fail_at: int | None,
        *,
        persistent: bool = False,
        error: BaseException | None = None,
    ) -> None:
        super().__init__(inner)
        self.fail_at = fail_at
        self.persistent = persistent
        self.error = error if error is not None else OSError(28, "No space left on device (injected)")
        self.attempts = 0
        self.failures = 0

    def heal(self) -> None:
        """Stop failing (the fault cleared)."""
        self.fail_at = None

    def append(self, events: Sequence[Event], contents: Sequence[ContentBlob] = ()) -> None:
        """Append, or fail this attempt without writing anything."""
        self.attempts += 1
        at = self.fail_at
        if at is not None and (self.attempts == at or (self.persistent and self.attempts > at)):
            self.failures += 1
            raise write_error(self.location, events, self.error) from self.error
        super().append(events, contents)


__all__ = [
    "CrashingJournal",
    "FailingJournal",
    "FakeClock",
    "InMemoryJournal",
    "JournalProxy",
    "ScriptedModel",
    "SeededRandom",
    "SequentialIds",
]
