"""``LiveAttempt``: the state of one step run live that its delta sink and its retry hook share."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from loom_nb.kernel.observers import Observers
from loom_nb.kernel.staging import STREAM_FLUSH_EVERY

#: Deltas a ``defer_deltas`` step keeps waiting before it feeds them on: a sink makes at most one
#: chunk per delta, so the held text of a long stream still reaches the journal every
#: ``STREAM_FLUSH_EVERY`` chunks, at most this many deltas later (and ``within`` seconds later:
#: ``LiveAttempt.due``).
DELTAS_WAITING = STREAM_FLUSH_EVERY


class LiveAttempt:
    """The state of one step run live that its delta sink and its retry hook
    (``StepExecution._on_retry``) share: the attempt being made and the deltas waiting for their
    text to be needed.

    One object with slots and bound methods instead of closures over ``_run_live``'s locals: a
    closure's every captured local is a cell the garbage collector tracks, made at each step."""

    __slots__ = (
        "current",
        "effect_id",
        "error",
        "execution_id",
        "fenced",
        "first",
        "observers",
        "release",
        "sid",
        "sink",
        "started",
        "timer",
        "waiting",
        "within",
    )

    def __init__(
        self,
        execution_id: str,
        sid: str,
        effect_id: str,
        started: dict[str, Any],
        first: bool,
        attempt: int,
        observers: Observers,
    ) -> None:
        self.execution_id = execution_id
        self.sid = sid
        self.effect_id = effect_id
        self.started = started
        self.first = first
        self.current = attempt
        self.observers = observers
        self.sink: Callable[[str], None] | None = None
        #: The deltas held back from ``sink`` (a ``defer_deltas`` step only; else None).
        self.waiting: list[str] | None = None
        #: Each attempt's effect runs only after the lease is confirmed (not idempotent: fenced).
        self.fenced = False
        #: ``defer_deltas``: seconds after a delta before the text it belongs to is committed
        #: (``StreamCommits.within``), and what stages and commits the step's held chunks then.
        self.within = 0.0
        self.release: Callable[[str], None] | None = None
        #: The timer armed at the first delta not yet committed (``due``), while one is.
        self.timer: asyncio.TimerHandle | None = None
        #: What the sink raised when ``due`` fed it (raised in the effect at its next delta, or
        #: as the step's failure when the effect returns).
        self.error: BaseException | None = None

    def feed_waiting(self) -> None:
        """Pass the waiting deltas on to the sink, in order (a step without any: nothing)."""
        waiting = self.waiting
        if waiting:
            texts = waiting.copy()
            waiting.clear()
            sink = self.sink
            assert sink is not None
            for text in texts:
                sink(text)

    def emit_to_observers(self, text: str) -> None:
        """A delta of a step without ``on_delta``: to the execution's observers only."""
        if self.observers.deltas:  # a plain attribute: this runs for every streamed piece
            self.observers.notify_delta(self.execution_id, self.sid, text)

    def emit_to_sink(self, text: str) -> None:
        """A delta to the observers and at once to ``on_delta``."""
        if self.observers.deltas:
            self.observers.notify_delta(self.execution_id, self.sid, text)
        self.sink(text)  # type: ignore[misc]

    def emit_when_needed(self, text: str) -> None:
        """A delta to the observers, and to ``on_delta`` only once someone observes the execution
        or ``DELTAS_WAITING`` deltas wait (then the waiting ones first, in order). The first delta
        since the last commit of the step's text arms ``due``."""
        waiting = self.waiting
        assert waiting is not None
        if self.timer is None:
            if self.error is not None:  # the sink refused a delta fed by ``due``: the stream stops here
                raise self.error
            self.timer = asyncio.get_running_loop().call_later(self.within, self.due)
        observers = self.observers
        if not observers.active and len(waiting) < DELTAS_WAITING:
            waiting.append(text)  # nobody watches (so nobody watches deltas): it waits
            return
        if observers.deltas:
            observers.notify_delta(self.execution_id, self.sid, text)
        self.feed_waiting()  # in order, before this one
        self.sink(text)  # type: ignore[misc]

    def due(self) -> None:
        """``within`` seconds after the first delta not yet committed: the waiting deltas go to the
        sink (which cuts what it can into chunks) and the step's held chunks are committed, so a
        process killed mid-stream loses at most the chunk not yet finished and the last
        ``within`` seconds. A delta the sink refuses (``AnswerTooLargeError``) is kept in ``error``."""
        self.timer = None
        try:
            self.feed_waiting()
        except Exception as exc:
            self.error = exc
        assert self.release is not None
        self.release(self.sid)

    def stop(self) -> None:
        """The attempt ended: ``due`` will not run."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
